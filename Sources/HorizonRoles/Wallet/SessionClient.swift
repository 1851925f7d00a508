import Foundation
import HorizonCore
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonSettlement
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
    /// The terminal could not reach its server and accepted the payment against the
    /// wallet's daily token; the server settles it when the terminal forwards it. Not "approved".
    public var acceptedOffline = false

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
        case .declined(_, let reason): "The payment was declined (\(reason)); nothing was charged."
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
    /// How long a signed confirmation stays valid. The server executes it online until 24 h after
    /// that; a terminal takes it offline only if it expires within 600 s
    /// (`DailyToken.offlineConfirmationWindow`), so keep it below that.
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
///
/// It is the driver of a `SessionClientStateMachine`, which holds every rule: it feeds the
/// machine one event at a time (the app's commands, the radio's answers, timers, the store's
/// answers) and carries out the actions it returns (connecting, the handshake, sending, closing,
/// timers, the pending store, publishing the state). Everything that changes the machine runs on
/// the radio's scheduler, the role's one serial context: events from the radio and timers arrive
/// there, the reference API's commands enter it with `Scheduler.performSynchronously` (at once
/// when called from it), and the async API with `Scheduler.perform`. So what an event checks and
/// what it does cannot be split by another event, although the actions run after the lock is
/// released (they call out: observers, the radio, the store, and may feed the machine again).
/// The lock only lets other threads read.
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

    /// The machine, and the I/O handles its actions name: the current secure link (by its
    /// generation) and the receipt timer, so a later action can reach them.
    private struct Core {
        var machine: SessionClientStateMachine
        var link: (generation: Int, link: SecureLink)?
        var receiptTimer: ScheduledAction?
    }

    private let core: Mutex<Core>
    /// The daily token a terminal without server asks for; nil never presents one.
    let offlineTokenProvider: (any OfflineTokenProvider)?
    /// The app's callback, not protocol state: kept apart from the machine.
    private let hostConnectedCallback = Mutex<(@Sendable () -> Void)?>(nil)
    /// The request proxy's way onto this client's secure channel.
    let proxyConnector: SessionProxyConnector

    init(
        transactionType: TransactionType, radio: any CentralRadio, identity: WalletIdentity,
        trustAnchors: [TrustAnchor], configuration: PaymentClientConfiguration, pendingStore: any PendingPaymentStore,
        scanner: SightingHub?, logger: Logger, offlineTokenProvider: (any OfflineTokenProvider)? = nil,
        announce: @escaping @Sendable (WalletFinishedPayment) -> Void
    ) {
        self.offlineTokenProvider = offlineTokenProvider
        self.logger = logger
        self.transactionType = transactionType
        self.announce = announce
        self.radio = radio
        self.identity = identity
        self.trustAnchors = trustAnchors
        self.configuration = configuration
        self.pendingStore = pendingStore
        core = Mutex(
            Core(
                machine: SessionClientStateMachine(
                    configuration: SessionClientStateMachine.Configuration(
                        transactionType: transactionType, configuration))))
        fusionTracker = FusionTracker(
            scanner: scanner ?? SightingHub(radio: radio), transactionTypes: [transactionType],
            configuration: configuration.tracker)
        proxyConnector = SessionProxyConnector(scheduler: radio.scheduler)
        fusionTracker.manualConnectionDecider.observeState { [weak self] state in self?.deciderChanged(state) }
        proxyConnector.attach(self)
    }

    /// Sends a proxy message on the secure link of `generation`; false if that link is gone.
    func sendProxyMessage(_ message: SessionMessage, generation: Int) -> Bool {
        guard let secure = link(generation) else { return false }
        return (try? secure.send(message.encoded())) != nil
    }

    var scheduler: any Scheduler { radio.scheduler }
    var decider: ManualConnectionDecider { fusionTracker.manualConnectionDecider }

    // MARK: Observation

    public var state: PaymentClientState { observable.value }
    public func states() -> AsyncStream<PaymentClientState> { observable.stream() }
    public func observeState(_ observer: @escaping @Sendable (PaymentClientState) -> Void) {
        observable.observe(observer)
    }

    public var offer: PaymentOffer? { core.withLock { $0.machine.offer } }
    public var receipt: PaymentReceipt? { core.withLock { $0.machine.receipt } }
    public var error: PaymentClientError? { core.withLock { $0.machine.error } }
    public var humanizedError: String? { error?.description }
    public var bonusProgramMembership: BonusProgramMembership? { core.withLock { $0.machine.membership } }
    /// The payment confirmed and not yet answered, if any.
    public var pendingPayment: PendingPayment? { core.withLock { $0.machine.pending } }

    /// Called on the radio's scheduler when the terminal is connected and ready for the
    /// confirmation (the reference's `onHostConnectedCallback`).
    public var onHostConnected: (@Sendable () -> Void)? {
        get { hostConnectedCallback.withLock { $0 } }
        set { hostConnectedCallback.withLock { $0 = newValue } }
    }

    /// Applies one event to the machine and carries out its actions, outside the lock.
    private func handle(_ event: (inout SessionClientStateMachine) -> [SessionClientAction]) {
        perform(core.withLock { event(&$0.machine) })
    }

    // MARK: Commands

    /// Starts scanning and tracking terminals (the tracker enters the scheduler itself).
    public func start() throws(RadioError) { try fusionTracker.start() }

    public func stop() { fusionTracker.stop() }

    /// After the decider accepted: make sure the terminal is connected, then call
    /// `onHostConnected`. Returns false if there is no accepted offer.
    @discardableResult
    func connectToSession() -> Bool {
        scheduler.performSynchronously {
            guard let actions = core.withLock({ $0.machine.connectToSession() }) else { return false }
            perform(actions)
            return true
        }
    }

    typealias RequestContext = SessionClientStateMachine.RequestContext

    /// The person declines the offer: the terminal is told, nothing is executed.
    func decline() { scheduler.performSynchronously { handle { $0.decline() } } }

    /// Signs the request `build` makes from the offer, stores it, then sends it. False (with
    /// `error`) if no terminal is connected or the request is invalid. With `shown`, the offer the
    /// person saw must be the one the request binds (it always is: an attempt has one offer).
    func sendRequest(
        confirming shown: PaymentOffer? = nil, _ build: (RequestContext) throws(PaymentClientError) -> SessionMessage
    ) -> Bool {
        scheduler.performSynchronously {
            // Randomness and time come from here, not from the machine.
            var random = SystemRandomNumberGenerator()
            let requestID = PaymentID.random(using: &random)
            let walletNonce = Nonce.random(using: &random)
            let now = scheduler.wallClock
            let walletKey = identity.publicKey
            guard
                let prepared = core.withLock({
                    $0.machine.requestContext(
                        shown: shown?.digest, walletKey: walletKey, requestID: requestID, walletNonce: walletNonce,
                        now: now)
                })
            else { return false }
            let request: SessionMessage
            do throws(PaymentClientError) {
                request = try sign(try build(try prepared.get()))
            } catch {
                core.withLock { $0.machine.requestRefused(error) }
                return false
            }
            // The machine checks the signed request against the attempt again and asks for it to be
            // stored; only a stored request is sent.
            var sent = false
            for action in core.withLock({ $0.machine.confirm(request, now: now) }) {
                if case .save(let pending) = action {
                    sent = save(pending)
                } else {
                    perform(action)
                }
            }
            return sent
        }
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
        scheduler.performSynchronously {
            let now = scheduler.now
            let tracking = PeripheralTracking(
                peripheralMetaData: PeripheralMetaData(
                    address: pending.terminalAddress, transactionType: transactionType, sessionID: pending.sessionID,
                    terminalKeyID: pending.terminalKeyID),
                smoothedRSSI: nil, lastRSSI: nil, sightings: 0, firstSeen: now, lastSeen: now)
            let sightings = fusionTracker.trackings(terminalKeyID: pending.terminalKeyID)
            guard
                let actions = core.withLock({
                    $0.machine.resume(pending, tracking: tracking, sightings: sightings)
                })
            else { return false }
            perform(actions)
            return true
        }
    }

    /// Clears the finished payment so the next one can start (call the decider's `restart()` too).
    public func restart() { scheduler.performSynchronously { handle { $0.restart() } } }

    // MARK: Decider

    private func deciderChanged(_ state: ManualConnectionDeciderState) {
        switch state {
        case .deciding:
            guard let candidate = decider.candidate else { return }
            handle { $0.startDeciding(candidate) }
        case .rejected:
            handle { $0.deciderRejected() }
        default:
            break
        }
    }

    // MARK: Actions

    private func perform(_ actions: [SessionClientAction]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: SessionClientAction) {
        switch action {
        case .setState(let state): observable.set(state)
        case .connect(let address, let generation):
            radio.connect(to: address, timeout: configuration.connectTimeout) { [weak self] result in
                self?.connectionResult(result, generation: generation)
            }
        case .startHandshake, .discardConnection:
            // Only the answer to `connected` asks for these; `connectionResult` holds the
            // connection they are about.
            break
        case .send(let message, let generation):
            try? link(generation)?.send(message.encoded())
        case .acknowledge(let paymentID, let generation):
            try? link(generation)?.send(
                SessionMessage.receiptAcknowledgement(ReceiptAcknowledgement(paymentID: paymentID)).encoded())
        case .close(let generation): link(generation)?.close()
        case .armTimer(let timer, let delay): arm(timer, after: delay)
        case .cancelReceiptTimer:
            core.withLock { core -> ScheduledAction? in
                defer { core.receiptTimer = nil }
                return core.receiptTimer
            }?.cancel()
        case .save(let pending): save(pending)
        case .presentOfflineToken(let sessionID, let paymentID, let total, let generation):
            // Empty when there is no valid token, or what it still allows (after this wallet's
            // offline payments at other terminals too) does not cover the payment: the terminal
            // then refuses at once instead of waiting, and the wallet never spends past its token.
            var token: [UInt8] = []
            if let provider = offlineTokenProvider, let remaining = provider.remainingAllowance,
                remaining.currency == total.currency, remaining.minorUnits >= total.minorUnits
            {
                token = provider.presentableDailyToken ?? []
            }
            guard
                let presentation = try? OfflineTokenPresentation(
                    sessionID: sessionID, paymentID: paymentID, token: token)
            else { return }
            try? link(generation)?.send(SessionMessage.offlineToken(presentation).encoded())
        case .resolve(let paymentID, let receipt):
            let stored: Bool
            do {
                try pendingStore.resolve(paymentID, receipt: receipt)
                stored = true
            } catch {
                // Still pending on disk: the next run asks again, and only then acknowledges.
                stored = false
            }
            // Counted once: when the answer is stored (a failed store leaves it pending, and the
            // run that stores it counts it).
            if stored, let receipt, receipt.acceptedOffline {
                offlineTokenProvider?.recordOfflineSpending(receipt.total)
            }
            handle { $0.resolved(paymentID, stored: stored) }
        case .hostConnected:
            if let callback = onHostConnected { scheduler.execute(callback) }
        case .ignoreSession(let sessionID): decider.ignore(session: sessionID)
        case .ignoreTracking(let key): decider.ignore(key)
        case .finish(let finished): announce(finished)
        case .log(let level, let message, let session, let payment, let metadata):
            // Checked first: the ids' hex text costs more than the line when nothing logs.
            guard logger.logLevel <= level else { return }
            logger.with(session: session).with(payment: payment).log(
                level: level, "\(message)", metadata: metadata.mapValues { .string($0) })
        }
    }

    /// The secure link of `generation`, if it is the one held.
    private func link(_ generation: Int) -> SecureLink? {
        core.withLock { core in core.link.flatMap { $0.generation == generation ? $0.link : nil } }
    }

    /// Stores the request before it leaves; true once it is stored (and so sent).
    @discardableResult
    private func save(_ pending: PendingPayment) -> Bool {
        do {
            try pendingStore.save(pending)
        } catch {
            core.withLock { $0.machine.requestNotSaved(pending.paymentID, reason: "\(error)") }
            return false
        }
        handle { $0.requestSaved(pending.paymentID) }
        return true
    }

    private func arm(_ timer: SessionClientTimer, after delay: Duration) {
        switch timer {
        case .offer(let generation):
            scheduler.schedule(after: delay) { [weak self] in
                self?.handle { $0.offerTimerFired(generation: generation) }
            }
        case .receipt(let token):
            let scheduled = scheduler.schedule(after: delay) { [weak self] in
                self?.handle { $0.receiptTimerFired(token: token) }
            }
            core.withLock { core -> ScheduledAction? in
                defer { core.receiptTimer = scheduled }
                return core.receiptTimer
            }?.cancel()
        case .reconnect(let terminalKeyID):
            scheduler.schedule(after: delay) { [weak self] in
                guard let self else { return }
                // Where the terminal advertises now: a pending request follows it there.
                let sightings = self.fusionTracker.trackings(terminalKeyID: terminalKeyID)
                self.handle { $0.reconnectTimerFired(sightings: sightings) }
            }
        }
    }

    // MARK: Connection

    private func connectionResult(_ result: Result<any ByteLink, RadioError>, generation: Int) {
        let link: any ByteLink
        switch result {
        case .failure(let error):
            handle { $0.connectFailed(error, generation: generation) }
            return
        case .success(let value): link = value
        }
        for action in core.withLock({ $0.machine.connected(generation: generation) }) {
            switch action {
            case .startHandshake(let generation, let sessionID, let terminalKeyID):
                startHandshake(over: link, generation: generation, sessionID: sessionID, terminalKeyID: terminalKeyID)
            case .discardConnection: link.close()
            default: perform(action)
            }
        }
    }

    private func startHandshake(
        over link: any ByteLink, generation: Int, sessionID: SessionID, terminalKeyID: TerminalKeyID
    ) {
        guard let messageLink = try? MessageLink(link: link, scheduler: scheduler, limits: configuration.linkLimits)
        else {
            link.close()
            return
        }
        do {
            let secure = try SecureLink.initiate(
                over: messageLink, trustAnchors: trustAnchors, expectedTerminalKeyID: terminalKeyID.bytes,
                context: TerminalRadioService.context(for: sessionID), configuration: configuration.secureLink,
                handler: SecureLinkHandler(
                    onEstablished: { [weak self] info in
                        self?.established(info, generation: generation, sessionID: sessionID)
                    },
                    onMessage: { [weak self] bytes in self?.received(bytes, generation: generation) },
                    onEnd: { [weak self] end in self?.ended(end, generation: generation) }))
            core.withLock { $0.link = (generation, secure) }
        } catch {
            link.close()
            handle { $0.handshakeFailedToStart(error, generation: generation) }
        }
    }

    private func established(_ info: SecureLinkEstablished, generation: Int, sessionID: SessionID) {
        // A key for this connection alone: the Hello proves the wallet holds it (for the terminal's
        // rate limits) without anything that identifies the wallet across sessions.
        let (sessionKey, sessionKeyBytes) = WalletIdentity.sessionKey()
        let hello = Hello(sessionID: sessionID, transactionType: transactionType, sessionKey: sessionKeyBytes)
        let signed = (try? signatureBytes(for: hello.proofBytes(transcriptHash: info.transcriptHash), with: sessionKey))
            .map { hello.withProof($0) }
        let established = SessionClientStateMachine.Established(
            credential: info.terminalCredential, anchor: info.vouchingAnchor, transcriptHash: info.transcriptHash,
            confirmationCode: info.confirmationCode)
        proxyConnector.channelEstablished(generation)
        handle { $0.established(established, hello: signed, generation: generation) }
    }

    private func received(_ bytes: [UInt8], generation: Int) {
        // Bytes that do not decode are no message of the protocol: nothing to act on.
        guard let message = try? SessionMessage.decode(bytes) else { return }
        // Proxy answers belong to the request proxy, not to the session.
        if proxyConnector.received(message, generation: generation) { return }
        let now = scheduler.wallClock
        handle { $0.received(message, generation: generation, now: now) }
    }

    private func ended(_ end: SecureLinkEnd, generation: Int) {
        core.withLock { core in
            if core.link?.generation == generation { core.link = nil }
        }
        proxyConnector.channelEnded(generation)
        handle { $0.linkEnded(end, generation: generation) }
    }
}
