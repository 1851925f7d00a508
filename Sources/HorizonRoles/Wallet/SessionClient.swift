import Foundation
import HorizonCore
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import Logging
import Synchronization

/// The wallet's payment states, as in the reference SDK, plus `paymentPending`: confirmed, link
/// lost, outcome not known yet. The wallet never reports failure while a charge is possible.
public enum PaymentClientState: Sendable, Equatable, CustomStringConvertible {
    case idle
    case connecting
    case fetchingOffer
    /// The verified offer is available in `offer`; the person decides.
    case offerReceived
    /// `connectToPaymentSession()` done: ready for `setOrderConfirmedByUser`.
    case hostConnected
    case acquiringPaymentExecution
    case paymentPending
    case completed
    case completedWithError

    public var description: String {
        switch self {
        case .idle: "idle"
        case .connecting: "connecting"
        case .fetchingOffer: "fetching the offer"
        case .offerReceived: "offer received"
        case .hostConnected: "connected to the terminal"
        case .acquiringPaymentExecution: "executing the payment"
        case .paymentPending: "payment pending"
        case .completed: "completed"
        case .completedWithError: "completed with error"
        }
    }

    public var isFinished: Bool { self == .completed || self == .completedWithError }
}

/// A terminal's offer after verification: the merchant and the till come from the terminal's
/// credential, signed by a trust anchor, never from the advertisement.
public struct PaymentOffer: Sendable, Equatable {
    public let sessionID: SessionID
    public let terminalKeyID: TerminalKeyID
    public let merchantID: String
    public let merchantName: String
    /// Which till this is ("Till 2, Market St"), from the credential.
    public let terminalLabel: String
    /// The trust anchor that vouched for the terminal (shown when the wallet trusts several).
    public let vouchedBy: String
    /// The code the terminal shows too; a relay or a look-alike shows another.
    public let confirmationCode: ConfirmationCode
    /// SHA-256 of the signed offer as it arrived: a confirmation binds exactly this offer.
    public let digest: DigestBytes
    public let amount: Money
    public let registerUser: String
    /// What a redemption is for (the reward, the benefit, the coupon); empty for payments.
    public let item: String
    /// Bonus points a bonus redemption costs; zero otherwise.
    public let quantity: Int64
    public let merchantPrograms: MerchantPrograms
    public let expiresAt: UnixTime
}

/// A verified receipt.
public struct PaymentReceipt: Sendable, Equatable {
    public let paymentID: PaymentID
    public let sessionID: SessionID
    public let transactionType: TransactionType
    /// A redemption's coupon code, reward or benefit; empty for payments.
    public let item: String
    /// Bonus points a redemption spent; zero for payments.
    public let quantity: Int64
    public let merchantName: String
    public let amount: Money
    public let tip: Money
    public let reference: UInt64
    public let settledAt: UnixTime
    public let bonusPointsEarned: Int64
    public let bonusPointsBalance: Int64

    public var total: Money { (try? amount.adding(tip)) ?? amount }
}

/// The bonus membership after a payment (`bonusProgramMembership` in the reference).
public struct BonusProgramMembership: Sendable, Equatable {
    public let merchantName: String
    public let points: Int64
    public let pointsEarnedWithLastPayment: Int64
}

/// Why a payment did not complete.
public enum PaymentClientError: Error, Sendable, Equatable, CustomStringConvertible {
    case notReady(String)
    /// The radio could not reach the terminal; the cause says why (adapter off, timed out, …).
    case connectionFailed(RadioError)
    /// The secure channel could not even start (no trust anchor, bad configuration).
    case secureChannel(SecureChannelError)
    /// The terminal failed authentication: not trusted, wrong key, expired credential.
    case terminalNotTrusted(String)
    case invalidOffer(String)
    case sessionUnavailable(String)
    case connectionLost
    case declinedByUser
    case cancelledByTerminal
    case terminalTimedOut
    /// The terminal refused or declined the payment; nothing was charged.
    case declined(code: ErrorCode, reason: String)
    case invalidTip(String)
    /// The signed receipt does not match what was confirmed (amount, tip, session or terminal):
    /// it is not stored, and the request stays pending until a matching answer arrives.
    case receiptMismatch(String)
    /// The app stopped waiting (task cancellation) before anything was signed.
    case cancelled
    /// The app stopped waiting after the request was signed and sent: it may be executed. It is
    /// stored and asked for again (`resume`), and never reported as failed.
    case stillPending(PaymentID)

    public var description: String {
        switch self {
        case .notReady(let reason): "Not ready: \(reason)."
        case .connectionFailed(let cause): "Could not connect to the terminal: \(cause)."
        case .secureChannel(let cause): "Could not open a secure channel to the terminal: \(cause)."
        case .terminalNotTrusted(let reason):
            "This terminal could not be verified (\(reason)); nothing was shown or paid."
        case .invalidOffer(let reason): "The terminal's offer is invalid: \(reason)."
        case .sessionUnavailable(let reason): "The payment session is not available: \(reason)."
        case .connectionLost: "The connection to the terminal was lost before you confirmed; nothing was charged."
        case .declinedByUser: "You declined the payment."
        case .cancelledByTerminal: "The payment was cancelled at the register."
        case .terminalTimedOut: "The terminal stopped waiting for your decision."
        case .declined(_, let reason): "The payment was declined: \(reason). Nothing was charged."
        case .invalidTip(let reason): "The tip is invalid: \(reason)."
        case .receiptMismatch(let reason): "The terminal's receipt does not match the confirmation: \(reason)."
        case .cancelled: "Stopped before anything was signed; nothing was charged."
        case .stillPending(let id):
            "Request \(id) was sent and its outcome is not known yet; it is kept and asked for again."
        }
    }
}

/// A finished payment as the wallet announces it.
public struct WalletFinishedPayment: Sendable, Equatable {
    public let receipt: PaymentReceipt?
    public let error: PaymentClientError?
}

extension Notification.Name {
    /// Posted by a `PaymentClient` when a payment finishes; `userInfo["finishedPayment"]` is the
    /// `WalletFinishedPayment`. The reference SDK's `PaymentClientFinishedAPaymentNotification`.
    public static let paymentClientFinishedAPayment = Notification.Name("PaymentClientFinishedAPaymentNotification")
}

public struct PaymentClientConfiguration: Sendable {
    public var connectTimeout: Duration
    /// How long to wait for the receipt before treating the link as lost (payment pending).
    public var receiptTimeout: Duration
    /// How long to wait for the terminal's offer after saying hello before giving the link up
    /// (nothing was signed yet, so the session may simply be tried again).
    public var offerTimeout: Duration
    /// How long a signed confirmation stays valid.
    public var confirmationValidity: Duration
    /// First delay between attempts to reach the terminal for a pending payment; it doubles up
    /// to `maximumReconnectDelay`.
    public var reconnectDelay: Duration
    public var maximumReconnectDelay: Duration
    public var secureLink: SecureLinkConfiguration
    public var linkLimits: LinkLimits
    public var tracker: FusionTrackerConfiguration

    public init(
        connectTimeout: Duration = .seconds(5), receiptTimeout: Duration = .seconds(10),
        offerTimeout: Duration = .seconds(10), confirmationValidity: Duration = .seconds(120),
        reconnectDelay: Duration = .milliseconds(500), maximumReconnectDelay: Duration = .seconds(5),
        secureLink: SecureLinkConfiguration = SecureLinkConfiguration(),
        linkLimits: LinkLimits = LinkLimits(), tracker: FusionTrackerConfiguration = FusionTrackerConfiguration()
    ) {
        self.connectTimeout = connectTimeout
        self.receiptTimeout = receiptTimeout
        self.offerTimeout = offerTimeout
        self.confirmationValidity = confirmationValidity
        self.reconnectDelay = reconnectDelay
        self.maximumReconnectDelay = maximumReconnectDelay
        self.secureLink = secureLink
        self.linkLimits = linkLimits
        self.tracker = tracker
    }
}

/// The wallet's session machinery, shared by `PaymentClient` and `RedemptionClient`: follows
/// terminals of one transaction type through its `fusionTracker`, fetches and verifies the
/// chosen terminal's offer when the app starts deciding, signs and sends the person's request
/// (stored first), and reports the verified receipt — or keeps asking while the answer is unknown.
final class SessionClient: Sendable {
    let transactionType: TransactionType
    public let fusionTracker: FusionTracker
    public let identity: WalletIdentity
    public let trustAnchors: [TrustAnchor]
    public let configuration: PaymentClientConfiguration
    public let pendingStore: any PendingPaymentStore
    let radio: any CentralRadio
    let logger: Logger

    let observable = ObservableState<PaymentClientState>(.idle)
    private let announce: @Sendable (WalletFinishedPayment) -> Void

    private struct Attempt {
        let tracking: PeripheralTracking
        var generation = 0
        var link: SecureLink?
        var credential: TerminalCredential?
        var anchor: TrustAnchor?
        var transcriptHash: [UInt8] = []
        var offer: Offer?
        /// Addresses that failed the handshake while a request was pending: a clone of the
        /// terminal's advertisement. The next retry tries the terminal's other addresses first.
        var rejectedAddresses: Set<PeerAddress> = []
        var pending: PendingPayment?
        var wantsHost = false
        var receiptTimer: ScheduledAction?
        var reconnectDelay: Duration
    }

    private struct State {
        var attempt: Attempt?
        var offer: PaymentOffer?
        var receipt: PaymentReceipt?
        var error: PaymentClientError?
        var membership: BonusProgramMembership?
        var onHostConnected: (@Sendable () -> Void)?
    }

    private let guarded = Mutex(State())

    init(
        transactionType: TransactionType, radio: any CentralRadio, identity: WalletIdentity,
        trustAnchors: [TrustAnchor], configuration: PaymentClientConfiguration, pendingStore: any PendingPaymentStore,
        scanner: SightingHub?, logger: Logger, announce: @escaping @Sendable (WalletFinishedPayment) -> Void
    ) {
        self.logger = logger
        self.transactionType = transactionType
        self.announce = announce
        self.radio = radio
        self.identity = identity
        self.trustAnchors = trustAnchors
        self.configuration = configuration
        self.pendingStore = pendingStore
        fusionTracker = FusionTracker(
            scanner: scanner ?? SightingHub(radio: radio), transactionTypes: [transactionType],
            configuration: configuration.tracker)
        fusionTracker.manualConnectionDecider.observeState { [weak self] state in self?.deciderChanged(state) }
    }

    var scheduler: any Scheduler { radio.scheduler }
    var decider: ManualConnectionDecider { fusionTracker.manualConnectionDecider }

    // MARK: Observation

    public var state: PaymentClientState { observable.value }
    public func states() -> AsyncStream<PaymentClientState> { observable.stream() }
    public func observeState(_ observer: @escaping @Sendable (PaymentClientState) -> Void) {
        observable.observe(observer)
    }

    public var offer: PaymentOffer? { guarded.withLock { $0.offer } }
    public var receipt: PaymentReceipt? { guarded.withLock { $0.receipt } }
    public var error: PaymentClientError? { guarded.withLock { $0.error } }
    public var humanizedError: String? { error?.description }
    public var bonusProgramMembership: BonusProgramMembership? { guarded.withLock { $0.membership } }
    /// The payment confirmed and not yet answered, if any.
    public var pendingPayment: PendingPayment? { guarded.withLock { $0.attempt?.pending } }

    /// Called on the radio's scheduler when the terminal is connected and ready for the
    /// confirmation (the reference's `onHostConnectedCallback`).
    public var onHostConnected: (@Sendable () -> Void)? {
        get { guarded.withLock { $0.onHostConnected } }
        set { guarded.withLock { $0.onHostConnected = newValue } }
    }

    // MARK: Commands

    /// Starts scanning and tracking terminals.
    public func start() throws(RadioError) { try fusionTracker.start() }

    public func stop() { fusionTracker.stop() }

    /// After the decider accepted: make sure the terminal is connected, then call
    /// `onHostConnected`. Returns false if there is no accepted offer.
    @discardableResult
    func connectToSession() -> Bool {
        // A finished attempt (declined, or ended by a second offer) is over: its offer is not
        // confirmed through a link that may not have noticed yet that it was closed.
        guard !observable.value.isFinished else { return false }
        let ready: Bool? = guarded.withLock { state in
            guard var attempt = state.attempt, attempt.pending == nil, attempt.offer != nil else { return nil }
            attempt.wantsHost = true
            state.attempt = attempt
            return attempt.link?.isEstablished == true
        }
        guard let ready else { return false }
        if ready {
            becomeHostConnected()
        } else {
            observable.set(.connecting)
            connect()
        }
        return true
    }

    /// What a facade needs to build its signed request.
    struct RequestContext {
        let offer: Offer
        let offerDigest: DigestBytes
        let terminalKeyDigest: DigestBytes
        let walletKey: PublicKeyBytes
        let requestID: PaymentID
        let walletNonce: Nonce
        let expiresAt: UnixTime
    }

    /// The person declines the offer: the terminal is told, nothing is executed.
    func decline() {
        declineCurrentOffer(reason: .userDeclined)
        finish(error: .declinedByUser)
    }

    /// Signs the request `build` makes from the offer, stores it, then sends it. False (with
    /// `error`) if no terminal is connected or the request is invalid. With `shown`, the offer the
    /// person saw must be the one the request binds (it always is: an attempt has one offer).
    func sendRequest(
        confirming shown: PaymentOffer? = nil, _ build: (RequestContext) throws(PaymentClientError) -> SessionMessage
    ) -> Bool {
        guard observable.value == .hostConnected || observable.value == .offerReceived else { return false }
        var random = SystemRandomNumberGenerator()
        let prepared: Result<(PendingPayment, SecureLink), PaymentClientError> = guarded.withLock { state in
            guard var attempt = state.attempt, let offer = attempt.offer, let link = attempt.link,
                let credential = attempt.credential
            else { return .failure(.notReady("no terminal connected")) }
            let digest = offerDigest(offer)
            if let shown, shown.digest != digest {
                return .failure(.invalidOffer("it is not the offer that was shown; nothing was signed"))
            }
            let keyID = attempt.tracking.peripheralMetaData.terminalKeyID
            do throws(PaymentClientError) {
                let unsigned = try build(
                    RequestContext(
                        offer: offer, offerDigest: digest, terminalKeyDigest: credential.keyDigestBytes,
                        walletKey: identity.publicKey, requestID: PaymentID.random(using: &random),
                        walletNonce: Nonce.random(using: &random),
                        expiresAt: scheduler.wallClock + configuration.confirmationValidity.nanoseconds / 1_000_000_000)
                )
                guard
                    let pending = PendingPayment(
                        request: try sign(unsigned), terminalKeyID: keyID,
                        terminalAddress: attempt.tracking.peripheralMetaData.address,
                        merchantName: credential.merchantName.sanitizedForDisplay, createdAt: scheduler.wallClock)
                else { return .failure(.notReady("not a request a terminal executes")) }
                attempt.pending = pending
                state.attempt = attempt
                return .success((pending, link))
            } catch {
                return .failure(error)
            }
        }
        let pending: PendingPayment
        let link: SecureLink
        switch prepared {
        case .failure(let error):
            guarded.withLock { $0.error = error }
            return false
        case .success(let value): (pending, link) = value
        }
        // Stored before it is sent: from here on the wallet can always ask for this request.
        do {
            try pendingStore.save(pending)
        } catch {
            guarded.withLock {
                $0.attempt?.pending = nil
                $0.error = .notReady("could not store the request before sending it: \(error)")
            }
            return false
        }
        logger.with(session: pending.sessionID).with(payment: pending.paymentID).info("request signed, stored and sent")
        observable.set(.acquiringPaymentExecution)
        try? link.send(pending.request.encoded())
        armReceiptTimer()
        return true
    }

    private func sign(_ message: SessionMessage) throws(PaymentClientError) -> SessionMessage {
        do {
            switch message {
            case .confirm(let confirm):
                return .confirm(
                    confirm.withSignature(try signatureBytes(for: confirm.signedBytes, with: identity.signingKey)))
            case .redeem(let redeem):
                return .redeem(
                    redeem.withSignature(try signatureBytes(for: redeem.signedBytes, with: identity.signingKey)))
            default:
                throw PaymentClientError.notReady("not a request a terminal executes")
            }
        } catch let error as PaymentClientError {
            throw error
        } catch {
            throw .notReady("could not sign the request")
        }
    }

    /// Asks the terminal again for a payment confirmed earlier (by this or an earlier run of the
    /// wallet) whose answer never arrived: the same signed confirmation, the same payment id.
    /// The client goes to `paymentPending` and ends `completed` or `completedWithError` once the
    /// terminal answers. Returns false if another payment is in progress.
    @discardableResult
    public func resume(_ pending: PendingPayment) -> Bool {
        let tracking = PeripheralTracking(
            peripheralMetaData: PeripheralMetaData(
                address: pending.terminalAddress, transactionType: transactionType, sessionID: pending.sessionID,
                terminalKeyID: pending.terminalKeyID),
            smoothedRSSI: nil, lastRSSI: nil, sightings: 0, firstSeen: scheduler.now, lastSeen: scheduler.now)
        let started = guarded.withLock { state -> Bool in
            guard state.attempt == nil else { return false }
            var attempt = Attempt(tracking: tracking, reconnectDelay: configuration.reconnectDelay)
            attempt.pending = pending
            state.attempt = attempt
            state.offer = nil
            state.receipt = nil
            state.error = nil
            return true
        }
        guard started else { return false }
        observable.set(.paymentPending)
        retarget()
        connect()
        return true
    }

    /// Clears the finished payment so the next one can start (call the decider's `restart()` too).
    public func restart() {
        let attempt = guarded.withLock { state -> Attempt? in
            guard state.attempt?.pending == nil else { return nil }
            defer {
                state.attempt = nil
                state.offer = nil
                state.receipt = nil
                state.error = nil
            }
            return state.attempt
        }
        attempt?.link?.close()
        attempt?.receiptTimer?.cancel()
        if guarded.withLock({ $0.attempt == nil }) { observable.set(.idle) }
    }

    // MARK: Decider

    private func deciderChanged(_ state: ManualConnectionDeciderState) {
        switch state {
        case .deciding:
            guard let candidate = decider.candidate else { return }
            let started = guarded.withLock { guarded -> Bool in
                guard guarded.attempt == nil else { return false }
                guarded.attempt = Attempt(tracking: candidate, reconnectDelay: configuration.reconnectDelay)
                guarded.offer = nil
                guarded.receipt = nil
                guarded.error = nil
                return true
            }
            guard started else { return }
            logger.with(session: candidate.peripheralMetaData.sessionID).info(
                "taking the candidate", metadata: ["terminal": "\(candidate.peripheralMetaData.address)"])
            observable.set(.connecting)
            connect()
        case .rejected:
            let hasPending = guarded.withLock { $0.attempt?.pending != nil }
            guard !hasPending else { return }
            declineCurrentOffer(reason: .userDeclined)
            let attempt = guarded.withLock { state -> Attempt? in
                defer { state.attempt = nil }
                return state.attempt
            }
            attempt?.receiptTimer?.cancel()
            observable.set(.idle)
        default:
            break
        }
    }

    private func declineCurrentOffer(reason: CancelReason) {
        let target = guarded.withLock { state -> (SecureLink, SessionID)? in
            guard let attempt = state.attempt, attempt.pending == nil, let link = attempt.link else { return nil }
            return (link, attempt.tracking.peripheralMetaData.sessionID)
        }
        guard let (link, sessionID) = target else { return }
        try? link.send(SessionMessage.cancel(Cancel(sessionID: sessionID, reason: reason)).encoded())
        link.close()
    }

    // MARK: Connection

    private func connect() {
        guard
            let (address, generation) = guarded.withLock({ state -> (PeerAddress, Int)? in
                guard var attempt = state.attempt else { return nil }
                attempt.generation += 1
                attempt.link = nil
                state.attempt = attempt
                return (
                    attempt.pending?.terminalAddress ?? attempt.tracking.peripheralMetaData.address, attempt.generation
                )
            })
        else { return }
        radio.connect(to: address, timeout: configuration.connectTimeout) { [weak self] result in
            self?.connected(result, generation: generation)
        }
    }

    private func isCurrent(_ generation: Int) -> Bool { guarded.withLock { $0.attempt?.generation == generation } }

    private func connected(_ result: Result<any ByteLink, RadioError>, generation: Int) {
        guard isCurrent(generation) else {
            if case .success(let link) = result { link.close() }
            return
        }
        let link: any ByteLink
        switch result {
        case .failure(let error):
            linkFailed(generation: generation, reason: .connectionFailed(error))
            return
        case .success(let value): link = value
        }
        guard let attempt = guarded.withLock({ $0.attempt }),
            let messageLink = try? MessageLink(link: link, scheduler: scheduler, limits: configuration.linkLimits)
        else {
            link.close()
            return
        }
        let metaData = attempt.tracking.peripheralMetaData
        let sessionID = attempt.pending?.sessionID ?? metaData.sessionID
        do {
            let secure = try SecureLink.initiate(
                over: messageLink, trustAnchors: trustAnchors, expectedTerminalKeyID: metaData.terminalKeyID.bytes,
                context: TerminalRadioService.context(for: sessionID), configuration: configuration.secureLink,
                handler: SecureLinkHandler(
                    onEstablished: { [weak self] info in self?.established(info, generation: generation) },
                    onMessage: { [weak self] bytes in self?.received(bytes, generation: generation) },
                    onEnd: { [weak self] end in self?.ended(end, generation: generation) }))
            guarded.withLock { state in
                if state.attempt?.generation == generation { state.attempt?.link = secure }
            }
        } catch {
            link.close()
            linkFailed(generation: generation, reason: .secureChannel(error))
        }
    }

    private func established(_ info: SecureLinkEstablished, generation: Int) {
        // A key for this connection alone: the Hello proves the wallet holds it (for the terminal's
        // rate limits) without anything that identifies the wallet across sessions.
        let (sessionKey, sessionKeyBytes) = WalletIdentity.sessionKey()
        let outgoing: (SecureLink, [SessionMessage])? = guarded.withLock { state in
            guard var attempt = state.attempt, attempt.generation == generation, let link = attempt.link else {
                return nil
            }
            attempt.credential = info.terminalCredential
            attempt.anchor = info.vouchingAnchor
            attempt.transcriptHash = info.transcriptHash
            state.attempt = attempt
            let sessionID = attempt.pending?.sessionID ?? attempt.tracking.peripheralMetaData.sessionID
            let hello = Hello(sessionID: sessionID, transactionType: transactionType, sessionKey: sessionKeyBytes)
            guard
                let proof = try? signatureBytes(
                    for: hello.proofBytes(transcriptHash: info.transcriptHash), with: sessionKey)
            else { return nil }
            var messages: [SessionMessage] = [.hello(hello.withProof(proof))]
            // Asking again for a pending payment: the same signed confirmation, same payment id.
            if let pending = attempt.pending { messages.append(pending.request) }
            return (link, messages)
        }
        guard let (link, messages) = outgoing else { return }
        if observable.value == .connecting { observable.set(.fetchingOffer) }
        for message in messages { try? link.send(message.encoded()) }
        if messages.count > 1 { armReceiptTimer() } else { armOfferTimer(for: link) }
    }

    private func received(_ bytes: [UInt8], generation: Int) {
        guard isCurrent(generation) else { return }
        let message: SessionMessage
        do {
            message = try SessionMessage.decode(bytes)
        } catch {
            return
        }
        switch message {
        case .offer(let offer): receiveOffer(offer)
        case .receipt(let receipt): receiveReceipt(receipt)
        case .error(let error): receiveError(error)
        case .cancel(let cancel): receiveCancel(cancel)
        default: break
        }
    }

    /// One offer per attempt: the first verified one is what the person is shown and what a
    /// confirmation binds. The same offer again is ignored; a different one (a terminal re-pricing
    /// behind the person's back) ends the attempt before anything is signed.
    private func receiveOffer(_ offer: Offer) {
        let outcome: Result<Bool, PaymentClientError>?? = guarded.withLock { state in
            guard var attempt = state.attempt, attempt.pending == nil, let credential = attempt.credential else {
                return nil
            }
            if let shown = attempt.offer {
                return shown == offer
                    ? .some(nil) : .failure(.invalidOffer("the terminal sent a second, different offer"))
            }
            let metaData = attempt.tracking.peripheralMetaData
            guard offer.sessionID == metaData.sessionID, offer.transactionType == transactionType else {
                return .failure(.invalidOffer("it is for another session"))
            }
            guard verify(offer.signature, over: offer.signedBytes, publicKey: credential.terminalKey) else {
                return .failure(.invalidOffer("its signature does not verify"))
            }
            guard offer.expiresAt >= scheduler.wallClock else { return .failure(.invalidOffer("it has expired")) }
            guard transactionType.isRedemption || offer.amount.minorUnits > 0 else {
                return .failure(.invalidOffer("the amount is zero"))
            }
            attempt.offer = offer
            state.attempt = attempt
            state.offer = PaymentOffer(
                sessionID: offer.sessionID, terminalKeyID: metaData.terminalKeyID, merchantID: credential.merchantID,
                merchantName: credential.merchantName.sanitizedForDisplay,
                terminalLabel: credential.terminalLabel.sanitizedForDisplay,
                vouchedBy: attempt.anchor?.name ?? "",
                confirmationCode: ConfirmationCode(transcriptHash: attempt.transcriptHash),
                digest: offerDigest(offer), amount: offer.amount, registerUser: offer.registerUser.sanitizedForDisplay,
                item: offer.item.sanitizedForDisplay, quantity: offer.quantity,
                merchantPrograms: offer.merchantPrograms, expiresAt: offer.expiresAt)
            return .success(attempt.wantsHost)
        }
        switch outcome {
        case nil, .some(nil): return
        case .some(.failure(let error))?:
            closeLink()
            finish(error: error)
        case .some(.success(let wantsHost))?:
            if wantsHost { becomeHostConnected() } else { observable.set(.offerReceived) }
        }
    }

    private func becomeHostConnected() {
        observable.set(.hostConnected)
        if let callback = onHostConnected { scheduler.execute(callback) }
    }

    /// A receipt counts only if the terminal the request bound signed it and it matches the
    /// request: same id, session, type, amount and tip. Anything else is not stored (the request
    /// stays pending and is asked for again).
    private func receiveReceipt(_ receipt: Receipt) {
        let checked: Result<PaymentReceipt?, PaymentClientError>? = guarded.withLock { state in
            guard let attempt = state.attempt, let pending = attempt.pending, receipt.paymentID == pending.paymentID,
                let credential = attempt.credential,
                verify(receipt.signature, over: receipt.signedBytes, publicKey: credential.terminalKey)
            else { return nil }
            if let mismatch = Self.mismatch(of: receipt, with: pending, signedBy: credential) {
                return .failure(.receiptMismatch(mismatch))
            }
            guard case .approved = receipt.outcome else { return .success(nil) }
            return .success(
                PaymentReceipt(
                    paymentID: receipt.paymentID, sessionID: receipt.sessionID,
                    transactionType: receipt.transactionType,
                    item: pending.redeem?.item ?? "", quantity: pending.redeem?.quantity ?? 0,
                    merchantName: credential.merchantName.sanitizedForDisplay,
                    amount: receipt.amount, tip: receipt.tip, reference: receipt.transactionReference,
                    settledAt: receipt.settledAt, bonusPointsEarned: receipt.bonusPointsEarned,
                    bonusPointsBalance: receipt.bonusPointsBalance))
        }
        switch checked {
        case nil: return
        case .failure(let error)?:
            guarded.withLock { $0.error = error }
            closeLink()
        case .success(nil)?:
            guard case .declined(let code) = receipt.outcome else { return }
            if resolvePending() { acknowledge(receipt.paymentID) }
            closeLink()
            finish(error: .declined(code: code, reason: code.description))
        case .success(let verified?)?:
            if resolvePending(receipt: verified) { acknowledge(receipt.paymentID) }
            guarded.withLock { state in
                state.receipt = verified
                state.membership = BonusProgramMembership(
                    merchantName: verified.merchantName, points: verified.bonusPointsBalance,
                    pointsEarnedWithLastPayment: verified.bonusPointsEarned)
            }
            closeLink()
            finish(receipt: verified)
        }
    }

    /// Why `receipt` does not answer `pending` as signed, or nil if it does.
    static func mismatch(of receipt: Receipt, with pending: PendingPayment, signedBy credential: TerminalCredential)
        -> String?
    {
        guard receipt.sessionID == pending.sessionID else { return "another session" }
        switch pending.request {
        case .confirm(let confirm):
            guard credential.keyDigestBytes == confirm.terminalKeyDigest else { return "signed by another terminal" }
            guard receipt.transactionType == .payment else { return "not a payment receipt" }
            guard receipt.amount == confirm.amount else {
                return "amount \(receipt.amount), confirmed \(confirm.amount)"
            }
            guard receipt.tip == confirm.tip else { return "tip \(receipt.tip), confirmed \(confirm.tip)" }
        case .redeem(let redeem):
            guard credential.keyDigestBytes == redeem.terminalKeyDigest else { return "signed by another terminal" }
            guard receipt.transactionType == redeem.transactionType else { return "another kind of redemption" }
        default: return "not a request"
        }
        return nil
    }

    private func receiveError(_ message: ErrorMessage) {
        let pendingID = guarded.withLock { $0.attempt?.pending?.paymentID }
        if let pendingID {
            // Only an answer naming our payment settles it: the terminal sends an error instead
            // of a receipt only when it did not, and never will, execute that payment id.
            guard message.paymentID == pendingID else { return }
            resolvePending()
            closeLink()
            finish(error: .declined(code: message.code, reason: message.message.sanitizedForDisplay))
            return
        }
        closeLink()
        // The terminal's words, made safe to print: apps show this text as it is.
        let text = message.message.isEmpty ? message.code.description : message.message.sanitizedForDisplay
        finish(error: .sessionUnavailable(text))
    }

    private func receiveCancel(_ cancel: Cancel) {
        // With a confirmation in flight only the answer to it counts (see receiveError).
        guard guarded.withLock({ $0.attempt?.pending == nil }) else { return }
        closeLink()
        finish(error: cancel.reason == .timedOut ? .terminalTimedOut : .cancelledByTerminal)
    }

    private func ended(_ end: SecureLinkEnd, generation: Int) {
        guard isCurrent(generation), !observable.value.isFinished else { return }
        if case .rejected(let reason) = end {
            // A terminal that cannot prove who it is: never offer this address's session again.
            // Only this address: a nearer clone of a real advertisement must not hide the real
            // terminal, which advertises the same session from its own address.
            let (pending, key, address) = guarded.withLock { state in
                (state.attempt?.pending != nil, state.attempt?.tracking.key, state.attempt?.pending?.terminalAddress)
            }
            logger.notice(
                "the terminal failed authentication", metadata: ["reason": "\(reason)", "pending": "\(pending)"])
            if !pending {
                if let key { decider.ignore(key) }
                finish(error: .terminalNotTrusted(reason.description))
                return
            }
            if let address { guarded.withLock { _ = $0.attempt?.rejectedAddresses.insert(address) } }
        }
        linkFailed(generation: generation, reason: .connectionLost)
    }

    private func linkFailed(generation: Int, reason: PaymentClientError) {
        guard isCurrent(generation) else { return }
        let pending = guarded.withLock { state -> Bool in
            state.attempt?.link = nil
            state.attempt?.receiptTimer?.cancel()
            return state.attempt?.pending != nil
        }
        if pending {
            observable.set(.paymentPending)
            scheduleReconnect()
        } else {
            finish(error: reason == .connectionLost ? .connectionLost : reason)
        }
    }

    /// Tries again to reach the terminal for a pending payment, backing off.
    private func scheduleReconnect() {
        let delay = guarded.withLock { state -> Duration? in
            guard var attempt = state.attempt, attempt.pending != nil else { return nil }
            let delay = attempt.reconnectDelay
            attempt.reconnectDelay = min(delay * 2, configuration.maximumReconnectDelay)
            state.attempt = attempt
            return delay
        }
        guard let delay else { return }
        logger.with(payment: pendingPayment?.paymentID).notice(
            "link lost with a request pending; asking again", metadata: ["after": "\(delay)"])
        scheduler.schedule(after: delay) { [weak self] in
            guard let self, self.observable.value == .paymentPending else { return }
            self.retarget()
            self.connect()
        }
    }

    /// A pending payment may be answered through the terminal's current session, wherever it
    /// advertises now: the latest address advertising its key id that has not failed the
    /// handshake (once every one has, they all get another turn).
    private func retarget() {
        guarded.withLock { state in
            guard var attempt = state.attempt, let pending = attempt.pending else { return }
            var latest = fusionTracker.latestTracking(
                terminalKeyID: pending.terminalKeyID, excluding: attempt.rejectedAddresses)
            if latest == nil, !attempt.rejectedAddresses.isEmpty {
                attempt.rejectedAddresses = []
                latest = fusionTracker.latestTracking(terminalKeyID: pending.terminalKeyID)
            }
            guard let latest else {
                state.attempt = attempt
                return
            }
            attempt.pending = pending.retargeted(to: latest.peripheralMetaData.address)
            state.attempt = attempt
        }
    }

    /// Bounds the wait for the offer: a Hello or an Offer lost on the way would otherwise leave
    /// the wallet fetching forever, on a link that stays up with nobody speaking.
    /// The link itself identifies the wait: generations restart with every attempt.
    private func armOfferTimer(for link: SecureLink) {
        scheduler.schedule(after: configuration.offerTimeout) { [weak self, weak link] in
            guard let self, let link, self.observable.value == .fetchingOffer,
                self.guarded.withLock({ $0.attempt?.link === link })
            else { return }
            link.close()
        }
    }

    private func armReceiptTimer() {
        let timer = scheduler.schedule(after: configuration.receiptTimeout) { [weak self] in
            guard let self,
                self.observable.value == .acquiringPaymentExecution || self.observable.value == .paymentPending
            else { return }
            self.closeLink()
        }
        guarded.withLock { state in
            state.attempt?.receiptTimer?.cancel()
            state.attempt?.receiptTimer = timer
        }
    }

    /// Ends the pending request with its final answer (an approved one's receipt is recorded with
    /// its removal, see `PendingPaymentStore.resolve`); true once that is stored.
    @discardableResult
    private func resolvePending(receipt: PaymentReceipt? = nil) -> Bool {
        let paymentID = guarded.withLock { state -> PaymentID? in
            state.attempt?.receiptTimer?.cancel()
            defer { state.attempt?.pending = nil }
            return state.attempt?.pending?.paymentID
        }
        guard let paymentID else { return false }
        do {
            try pendingStore.resolve(paymentID, receipt: receipt)
            return true
        } catch {
            // Still pending on disk: the next run asks again, and only then acknowledges.
            return false
        }
    }

    private func closeLink() { guarded.withLock { $0.attempt?.link }?.close() }

    /// Tells the terminal the answer is stored, so its journal can mark the request acknowledged.
    private func acknowledge(_ paymentID: PaymentID) {
        let link = guarded.withLock { $0.attempt?.link }
        try? link?.send(SessionMessage.receiptAcknowledgement(ReceiptAcknowledgement(paymentID: paymentID)).encoded())
    }

    private func finish(receipt: PaymentReceipt? = nil, error: PaymentClientError? = nil) {
        let sessionID = guarded.withLock { state -> SessionID? in
            state.error = error
            state.attempt?.generation += 1  // ignore whatever the old link still says
            return state.attempt?.tracking.peripheralMetaData.sessionID
        }
        // A session is used once. Only a link lost before confirming leaves it worth another try,
        // or a handshake refused at one address (its tracking is ignored instead: the session
        // may be a clone's, and the real terminal advertises it too).
        switch error {
        case .connectionLost?, .connectionFailed?, .secureChannel?, .terminalNotTrusted?: break
        default: if let sessionID { decider.ignore(session: sessionID) }
        }
        logger.with(session: sessionID).info(
            "attempt finished",
            metadata: [
                "outcome": "\(error.map { "\($0)" } ?? "completed")",
                "receipt": "\(receipt?.paymentID.description ?? "none")",
            ])
        observable.set(error == nil ? .completed : .completedWithError)
        announce(WalletFinishedPayment(receipt: receipt, error: error))
    }
}
