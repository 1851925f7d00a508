import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import Logging

/// A wallet's timers, each named by what it guards so that one firing late (after the attempt
/// moved on) is recognised and ignored.
enum SessionClientTimer: Equatable, Sendable {
    /// The wait for the offer on the link of this generation.
    case offer(generation: Int)
    /// The wait for the answer to the request sent; `token` tells the current one from replaced ones.
    case receipt(token: Int)
    /// The next attempt to reach the terminal holding a pending request; the driver looks up where
    /// this terminal advertises when it fires.
    case reconnect(terminalKeyID: TerminalKeyID)
}

/// What the wallet's state machine asks its driver to do, in order.
enum SessionClientAction: Equatable, Sendable {
    /// Publish the client's state (observers, streams).
    case setState(PaymentClientState)
    /// Connect to the terminal; the result comes back as `connected` or `connectFailed`.
    case connect(to: PeerAddress, generation: Int)
    /// Run the secure handshake over the connection just made, for this session and terminal.
    case startHandshake(generation: Int, sessionID: SessionID, terminalKeyID: TerminalKeyID)
    /// Close the connection just made: the attempt it was for has moved on.
    case discardConnection
    /// Send a message on the secure link of this generation (if it is still open).
    case send(SessionMessage, generation: Int)
    /// Tell the terminal the answer to this request is stored (so its journal can mark it).
    case acknowledge(PaymentID, generation: Int)
    /// Close the secure link of this generation.
    case close(generation: Int)
    case armTimer(SessionClientTimer, after: Duration)
    case cancelReceiptTimer
    /// The terminal cannot reach its server and asks for the daily token for the
    /// payment pending on the link of this generation: send it (or an empty presentation).
    case presentOfflineToken(sessionID: SessionID, paymentID: PaymentID, total: Money, generation: Int)
    /// Store the signed request before it is sent; the answer comes back as `requestSaved` or
    /// `requestNotSaved`.
    case save(PendingPayment)
    /// End the pending request in the store with its final answer; the result comes back as
    /// `resolved`.
    case resolve(PaymentID, receipt: PaymentReceipt?)
    /// The terminal is connected and the offer is there: call the app's `onHostConnected`.
    case hostConnected
    /// Never offer this session again.
    case ignoreSession(SessionID)
    /// Never offer this address's session again (it failed authentication).
    case ignoreTracking(TrackingKey)
    /// Announce the finished attempt.
    case finish(WalletFinishedPayment)
    case log(Logger.Level, String, session: SessionID?, payment: PaymentID?, metadata: [String: String])
}

/// The wallet's protocol logic as a value: one attempt at a time (a candidate's session, or a
/// pending request resumed), fed events — the app's commands and the results of I/O — and
/// answering each with the actions its driver (`SessionClient`) carries out. No I/O, no locks, no
/// clocks: time and randomness arrive with the events, so every rule is testable without a radio.
///
/// The published state (`state`) is the attempt's phase; the link's own phase (connecting,
/// handshaking, established) is `attempt.link`. Links are named by a generation that grows with
/// every connection and every finished attempt, so whatever an old link or a late timer still
/// reports is recognised as stale and ignored.
///
/// Signatures of offers and receipts are verified here: a verification is a pure computation and
/// it is what decides between two transitions (show the offer or end the attempt; settle the
/// request or keep it pending), so it belongs with the rules it decides. Signing (which draws
/// randomness) stays with the driver and the facades: the machine receives signed messages.
struct SessionClientStateMachine: Sendable {
    struct Configuration: Sendable {
        var transactionType: TransactionType
        var offerTimeout: Duration
        var receiptTimeout: Duration
        var reconnectDelay: Duration
        var maximumReconnectDelay: Duration
        var confirmationValidity: Duration

        init(transactionType: TransactionType, _ configuration: PaymentClientConfiguration) {
            self.transactionType = transactionType
            offerTimeout = configuration.offerTimeout
            receiptTimeout = configuration.receiptTimeout
            reconnectDelay = configuration.reconnectDelay
            maximumReconnectDelay = configuration.maximumReconnectDelay
            confirmationValidity = configuration.confirmationValidity
        }
    }

    enum LinkPhase: Equatable, Sendable {
        /// The radio is connecting; no secure link exists yet.
        case connecting
        case handshaking
        case established
    }

    /// The attempt's current link.
    struct Link: Equatable, Sendable {
        let generation: Int
        var phase: LinkPhase
    }

    /// A pending request's final answer, while the store records it.
    struct Resolution: Equatable, Sendable {
        let paymentID: PaymentID
        let receipt: PaymentReceipt?
        let error: PaymentClientError?
        /// Whether the terminal is told once the answer is stored (an error message needs no
        /// acknowledgement: the terminal never executed that request).
        let acknowledges: Bool
    }

    /// Where an attempt's signed request stands: one request per attempt, so a request is either
    /// waiting for its answer (with the wait's timer while it runs) or having its answer stored,
    /// never both.
    enum RequestPhase: Equatable, Sendable {
        /// Nothing signed (or it could not be stored).
        case none
        /// Stored before it is sent, and asked for until it is answered.
        case pending(PendingPayment, receiptTimer: Int?)
        /// Answered: the store records the answer.
        case resolving(Resolution)
    }

    struct Attempt: Sendable {
        let tracking: PeripheralTracking
        var link: Link?
        /// The terminal's credential, with its key's digest worked out once (requests, the
        /// checks before sending and the receipt's check all compare it).
        var credential: TerminalCredential? { didSet { terminalKeyDigest = credential?.keyDigestBytes } }
        private(set) var terminalKeyDigest: DigestBytes?
        var anchor: TrustAnchor?
        var transcriptHash: [UInt8] = []
        /// The code this connection's shared secret gives; the terminal shows the same.
        var confirmationCode: ConfirmationCode?
        /// The offer shown, with its digest (the offer encoded again and hashed) worked out once.
        var offer: Offer? { didSet { offerDigest = offer.map(HorizonRoles.offerDigest) } }
        private(set) var offerDigest: DigestBytes?
        /// Addresses that failed the handshake while a request was pending: a clone of the
        /// terminal's advertisement. The next retry tries the terminal's other addresses first.
        var rejectedAddresses: Set<PeerAddress> = []
        /// The attempt's signed request, if any, and where it stands.
        var request = RequestPhase.none
        var wantsHost = false
        var reconnectDelay: Duration

        /// The signed request waiting for its answer, if one is.
        var pending: PendingPayment? { if case .pending(let pending, _) = request { pending } else { nil } }
        /// The token of the wait for the pending request's answer, while it runs.
        var receiptTimer: Int? { if case .pending(_, let timer) = request { timer } else { nil } }
        /// The pending request's final answer, while the store records it.
        var resolving: Resolution? { if case .resolving(let resolution) = request { resolution } else { nil } }

        /// The generation of the secure link, if one exists (not while the radio connects).
        var secureLinkGeneration: Int? {
            guard let link, link.phase != .connecting else { return nil }
            return link.generation
        }
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

    /// What the handshake told the wallet about the terminal.
    struct Established: Sendable {
        let credential: TerminalCredential?
        let anchor: TrustAnchor?
        let transcriptHash: [UInt8]
        let confirmationCode: ConfirmationCode
    }

    let configuration: Configuration
    private(set) var state: PaymentClientState = .idle
    private(set) var attempt: Attempt?
    private(set) var offer: PaymentOffer?
    private(set) var receipt: PaymentReceipt?
    private(set) var error: PaymentClientError?
    private(set) var membership: BonusProgramMembership?
    /// Grows with every connection and every finished attempt (across attempts, so a link of an
    /// earlier attempt can never pass for the current one).
    private(set) var generation = 0
    private var nextTimerToken = 0

    init(configuration: Configuration) { self.configuration = configuration }

    var transactionType: TransactionType { configuration.transactionType }
    var pending: PendingPayment? { attempt?.pending }

    private func isCurrent(_ generation: Int) -> Bool { attempt != nil && self.generation == generation }

    private mutating func set(_ state: PaymentClientState) -> SessionClientAction {
        self.state = state
        return .setState(state)
    }

    // MARK: The app's commands

    /// The decider gave the app `candidate` (`startDeciding`): connect and fetch its offer.
    mutating func startDeciding(_ candidate: PeripheralTracking) -> [SessionClientAction] {
        guard attempt == nil else { return [] }
        attempt = Attempt(tracking: candidate, reconnectDelay: configuration.reconnectDelay)
        offer = nil
        receipt = nil
        error = nil
        let metaData = candidate.peripheralMetaData
        return [
            .log(
                .info, "taking the candidate", session: metaData.sessionID, payment: nil,
                metadata: ["terminal": "\(metaData.address)"]),
            set(.connecting),
        ] + connect()
    }

    /// The decider recorded a no (`decideAgainstCandidate`): the terminal is told, the attempt is
    /// dropped. Nothing changes while a request is pending.
    mutating func deciderRejected() -> [SessionClientAction] {
        guard attempt?.pending == nil else { return [] }
        var actions = declineCurrentOffer(reason: .userDeclined)
        if attempt?.receiptTimer != nil { actions.append(.cancelReceiptTimer) }
        attempt = nil
        actions.append(set(.idle))
        return actions
    }

    /// After the decider accepted: connected already, the host is connected; otherwise connect.
    /// Nil (refused) if the attempt is over, has no offer, or its request is pending.
    mutating func connectToSession() -> [SessionClientAction]? {
        // A finished attempt (declined, or ended by a second offer) is over: its offer is not
        // confirmed through a link that may not have noticed yet that it was closed.
        guard !state.isFinished, var attempt, attempt.pending == nil, attempt.offer != nil else { return nil }
        attempt.wantsHost = true
        self.attempt = attempt
        if attempt.link?.phase == .established { return becomeHostConnected() }
        return [set(.connecting)] + connect()
    }

    /// The person declines the offer: the terminal is told, nothing is executed.
    mutating func decline() -> [SessionClientAction] {
        declineCurrentOffer(reason: .userDeclined) + finish(error: .declinedByUser)
    }

    /// What a request for the current offer binds, with the ids, nonce and expiry the driver drew.
    /// Nil when there is nothing to confirm now (no error recorded: the app asked too early or
    /// too late); a failure is recorded as `error` by `requestRefused`.
    func requestContext(
        shown: DigestBytes?, walletKey: PublicKeyBytes, requestID: PaymentID, walletNonce: Nonce, now: UnixTime
    ) -> Result<RequestContext, PaymentClientError>? {
        guard state == .hostConnected || state == .offerReceived else { return nil }
        guard let attempt, let offer = attempt.offer, let digest = attempt.offerDigest,
            attempt.secureLinkGeneration != nil, let terminalKeyDigest = attempt.terminalKeyDigest
        else { return .failure(.notReady("no terminal connected")) }
        if let shown, shown != digest {
            return .failure(.invalidOffer("it is not the offer that was shown; nothing was signed"))
        }
        return .success(
            RequestContext(
                offer: offer, offerDigest: digest, terminalKeyDigest: terminalKeyDigest, walletKey: walletKey,
                // A payment intent's offer names the id to pay under (its idempotency key end to end).
                requestID: offer.transactionType == .payment ? offer.paymentID ?? requestID : requestID,
                walletNonce: walletNonce,
                expiresAt: now + configuration.confirmationValidity.nanoseconds / 1_000_000_000))
    }

    /// The request could not be built: nothing was signed or sent.
    mutating func requestRefused(_ error: PaymentClientError) { self.error = error }

    /// The person confirmed with `request` (signed, built from `requestContext`): it is kept
    /// pending and stored before it is sent. Checked again here, so a request reaches the link
    /// only if it binds this attempt's offer and terminal and nothing else is pending.
    mutating func confirm(_ request: SessionMessage, now: UnixTime) -> [SessionClientAction] {
        guard state == .hostConnected || state == .offerReceived else { return [] }
        guard var attempt, attempt.pending == nil, attempt.offer != nil, attempt.secureLinkGeneration != nil,
            let credential = attempt.credential
        else {
            error = .notReady("no terminal connected")
            return []
        }
        let binds: (offer: DigestBytes, terminal: DigestBytes)? =
            switch request {
            case .confirm(let confirm): (confirm.offerDigest, confirm.terminalKeyDigest)
            case .redeem(let redeem): (redeem.offerDigest, redeem.terminalKeyDigest)
            default: nil
            }
        let metaData = attempt.tracking.peripheralMetaData
        guard let binds,
            let pending = PendingPayment(
                request: request, terminalKeyID: metaData.terminalKeyID, terminalAddress: metaData.address,
                merchantName: credential.merchantName.sanitizedForDisplay, createdAt: now)
        else {
            error = .notReady("not a request a terminal executes")
            return []
        }
        guard binds.offer == attempt.offerDigest, binds.terminal == attempt.terminalKeyDigest else {
            error = .invalidOffer("it is not the offer that was shown; nothing was signed")
            return []
        }
        attempt.request = .pending(pending, receiptTimer: nil)
        self.attempt = attempt
        return [.save(pending)]
    }

    /// The request is stored: from here on the wallet can always ask for it. Send it.
    mutating func requestSaved(_ paymentID: PaymentID) -> [SessionClientAction] {
        guard let attempt, let pending = attempt.pending, pending.paymentID == paymentID,
            let generation = attempt.secureLinkGeneration
        else { return [] }
        return [
            .log(
                .info, "request signed, stored and sent", session: pending.sessionID, payment: paymentID, metadata: [:]),
            set(.acquiringPaymentExecution),
            .send(pending.request, generation: generation),
        ] + armReceiptTimer()
    }

    /// The request could not be stored: it is not sent (the wallet could not ask for it again).
    mutating func requestNotSaved(_ paymentID: PaymentID, reason: String) {
        guard attempt?.pending?.paymentID == paymentID else { return }
        attempt?.request = .none
        error = .notReady("could not store the request before sending it: \(reason)")
    }

    /// Asks the terminal again for `pending` (this run's or an earlier one's), found at
    /// `tracking`, or at the latest address among `sightings` of its terminal. Nil (refused) if
    /// another attempt is under way.
    mutating func resume(
        _ pending: PendingPayment, tracking: PeripheralTracking, sightings: [PeripheralTracking]
    ) -> [SessionClientAction]? {
        guard attempt == nil else { return nil }
        var attempt = Attempt(tracking: tracking, reconnectDelay: configuration.reconnectDelay)
        attempt.request = .pending(pending, receiptTimer: nil)
        self.attempt = attempt
        offer = nil
        receipt = nil
        error = nil
        let published = set(.paymentPending)
        retarget(sightings)
        return [published] + connect()
    }

    /// Clears the finished attempt so the next can start. Nothing changes while a request is
    /// pending.
    mutating func restart() -> [SessionClientAction] {
        guard let old = attempt else { return [set(.idle)] }
        guard old.pending == nil else { return [] }
        attempt = nil
        offer = nil
        receipt = nil
        error = nil
        // One allocation for the handful of actions an event gives, not one per doubling.
        var actions: [SessionClientAction] = []
        actions.reserveCapacity(8)
        if let generation = old.secureLinkGeneration { actions.append(.close(generation: generation)) }
        if old.receiptTimer != nil { actions.append(.cancelReceiptTimer) }
        actions.append(set(.idle))
        return actions
    }

    // MARK: The radio's answers

    /// The radio connected for `generation`: start the handshake, or drop a connection the
    /// attempt no longer wants.
    mutating func connected(generation: Int) -> [SessionClientAction] {
        guard isCurrent(generation), var attempt else { return [.discardConnection] }
        attempt.link = Link(generation: generation, phase: .handshaking)
        self.attempt = attempt
        let metaData = attempt.tracking.peripheralMetaData
        return [
            .startHandshake(
                generation: generation, sessionID: attempt.pending?.sessionID ?? metaData.sessionID,
                terminalKeyID: metaData.terminalKeyID)
        ]
    }

    mutating func connectFailed(_ error: RadioError, generation: Int) -> [SessionClientAction] {
        linkFailed(generation: generation, reason: .connectionFailed(error))
    }

    /// The secure channel could not even start (no trust anchor, bad configuration).
    mutating func handshakeFailedToStart(_ error: SecureChannelError, generation: Int) -> [SessionClientAction] {
        linkFailed(generation: generation, reason: .secureChannel(error))
    }

    /// The terminal proved who it is. `hello` is the driver's Hello for this link, signed with a
    /// key for this connection alone (nil if it could not be signed: nothing is sent then).
    mutating func established(_ info: Established, hello: Hello?, generation: Int) -> [SessionClientAction] {
        guard isCurrent(generation), var attempt, attempt.link?.generation == generation else { return [] }
        attempt.link?.phase = .established
        attempt.credential = info.credential
        attempt.anchor = info.anchor
        attempt.transcriptHash = info.transcriptHash
        attempt.confirmationCode = info.confirmationCode
        self.attempt = attempt
        guard let hello else { return [] }
        var actions: [SessionClientAction] = []
        actions.reserveCapacity(8)
        if state == .connecting { actions.append(set(.fetchingOffer)) }
        actions.append(.send(.hello(hello), generation: generation))
        // Asking again for a pending payment: the same signed confirmation, same payment id.
        if let pending = attempt.pending {
            actions.append(.send(pending.request, generation: generation))
            actions += armReceiptTimer()
        } else {
            // Bounds the wait for the offer: a Hello or an Offer lost on the way would otherwise
            // leave the wallet fetching forever, on a link that stays up with nobody speaking.
            actions.append(.armTimer(.offer(generation: generation), after: configuration.offerTimeout))
        }
        return actions
    }

    /// A message from the terminal on the link of `generation`, decoded; `now` is the wallet's
    /// wall clock (an offer's expiry is checked against it).
    mutating func received(_ message: SessionMessage, generation: Int, now: UnixTime) -> [SessionClientAction] {
        guard isCurrent(generation) else { return [] }
        switch message {
        case .offer(let offer): return receiveOffer(offer, now: now)
        case .receipt(let receipt): return receiveReceipt(receipt)
        case .error(let error): return receiveError(error)
        case .cancel(let cancel): return receiveCancel(cancel)
        case .offlineTokenRequest(let request): return receiveOfflineTokenRequest(request, generation: generation)
        default: return []
        }
    }

    /// The terminal asks for the daily token for our pending payment: only for the
    /// confirmed payment of this attempt, on its link. The wait for the receipt starts afresh:
    /// the terminal decides once the token is there.
    private mutating func receiveOfflineTokenRequest(_ request: OfflineTokenRequest, generation: Int)
        -> [SessionClientAction]
    {
        guard let pending = attempt?.pending, pending.paymentID == request.paymentID,
            pending.sessionID == request.sessionID, case .confirm(let confirm) = pending.request
        else { return [] }
        var actions: [SessionClientAction] = [
            .log(
                .notice, "the terminal is offline and asks for the daily token", session: request.sessionID,
                payment: request.paymentID, metadata: [:]),
            .presentOfflineToken(
                sessionID: request.sessionID, paymentID: request.paymentID,
                total: (try? confirm.amount.adding(confirm.tip)) ?? confirm.amount, generation: generation),
        ]
        if attempt?.receiptTimer != nil { actions.append(.cancelReceiptTimer) }
        return actions + armReceiptTimer()
    }

    /// The link of `generation` ended.
    mutating func linkEnded(_ end: SecureLinkEnd, generation: Int) -> [SessionClientAction] {
        guard isCurrent(generation), !state.isFinished, let attempt else { return [] }
        var actions: [SessionClientAction] = []
        actions.reserveCapacity(8)
        if case .rejected(let reason) = end {
            // A terminal that cannot prove who it is: never offer this address's session again.
            // Only this address: a nearer clone of a real advertisement must not hide the real
            // terminal, which advertises the same session from its own address.
            let pending = attempt.pending
            actions.append(
                .log(
                    .notice, "the terminal failed authentication", session: nil, payment: nil,
                    metadata: ["reason": "\(reason)", "pending": "\(pending != nil)"]))
            guard let pending else {
                actions.append(.ignoreTracking(attempt.tracking.key))
                return actions + finish(error: .terminalNotTrusted(reason.description))
            }
            self.attempt?.rejectedAddresses.insert(pending.terminalAddress)
        }
        return actions + linkFailed(generation: generation, reason: .connectionLost)
    }

    /// The store answered `resolve`: finish with the answer (telling the terminal it is stored
    /// only if it is; otherwise the next run asks again, and only then acknowledges).
    mutating func resolved(_ paymentID: PaymentID, stored: Bool) -> [SessionClientAction] {
        guard let resolution = attempt?.resolving, resolution.paymentID == paymentID else { return [] }
        attempt?.request = .none
        var actions: [SessionClientAction] = []
        actions.reserveCapacity(8)
        if stored, resolution.acknowledges, let generation = attempt?.secureLinkGeneration {
            actions.append(.acknowledge(paymentID, generation: generation))
        }
        if let verified = resolution.receipt {
            receipt = verified
            membership = BonusProgramMembership(
                merchantName: verified.merchantName, points: verified.bonusPointsBalance,
                pointsEarnedWithLastPayment: verified.bonusPointsEarned)
        }
        return actions + closeCurrentLink() + finish(receipt: resolution.receipt, error: resolution.error)
    }

    // MARK: Timers

    mutating func offerTimerFired(generation: Int) -> [SessionClientAction] {
        guard state == .fetchingOffer, attempt?.secureLinkGeneration == generation else { return [] }
        return [.close(generation: generation)]
    }

    /// No answer in time: treat the link as lost (the request stays pending and is asked for).
    mutating func receiptTimerFired(token: Int) -> [SessionClientAction] {
        guard attempt?.receiptTimer == token,
            state == .acquiringPaymentExecution || state == .paymentPending
        else { return [] }
        return closeCurrentLink()
    }

    /// Time to try the terminal again for the pending request, at the latest of `sightings`
    /// (where its terminal advertises now).
    mutating func reconnectTimerFired(sightings: [PeripheralTracking]) -> [SessionClientAction] {
        guard state == .paymentPending else { return [] }
        retarget(sightings)
        return connect()
    }

    // MARK: Steps

    private mutating func connect() -> [SessionClientAction] {
        guard var attempt else { return [] }
        generation += 1
        attempt.link = Link(generation: generation, phase: .connecting)
        self.attempt = attempt
        return [
            .connect(
                to: attempt.pending?.terminalAddress ?? attempt.tracking.peripheralMetaData.address,
                generation: generation)
        ]
    }

    private mutating func becomeHostConnected() -> [SessionClientAction] {
        [set(.hostConnected), .hostConnected]
    }

    private func declineCurrentOffer(reason: CancelReason) -> [SessionClientAction] {
        guard let attempt, attempt.pending == nil, let generation = attempt.secureLinkGeneration else { return [] }
        let sessionID = attempt.tracking.peripheralMetaData.sessionID
        return [
            .send(.cancel(Cancel(sessionID: sessionID, reason: reason)), generation: generation),
            .close(generation: generation),
        ]
    }

    private func closeCurrentLink() -> [SessionClientAction] {
        guard let generation = attempt?.secureLinkGeneration else { return [] }
        return [.close(generation: generation)]
    }

    private mutating func armReceiptTimer() -> [SessionClientAction] {
        nextTimerToken += 1
        if let pending = attempt?.pending { attempt?.request = .pending(pending, receiptTimer: nextTimerToken) }
        return [.armTimer(.receipt(token: nextTimerToken), after: configuration.receiptTimeout)]
    }

    /// One offer per attempt: the first verified one is what the person is shown and what a
    /// confirmation binds. The same offer again is ignored; a different one (a terminal re-pricing
    /// behind the person's back) ends the attempt before anything is signed.
    private mutating func receiveOffer(_ offer: Offer, now: UnixTime) -> [SessionClientAction] {
        guard var attempt, attempt.pending == nil, let credential = attempt.credential else { return [] }
        if let shown = attempt.offer {
            return shown == offer ? [] : endBeforeSigning(.invalidOffer(Self.repricedReason(shown, offer)))
        }
        let metaData = attempt.tracking.peripheralMetaData
        if let problem = Self.problem(with: offer, for: metaData.sessionID, transactionType, credential, now: now) {
            return endBeforeSigning(.invalidOffer(problem))
        }
        attempt.offer = offer
        self.attempt = attempt
        self.offer = PaymentOffer(
            sessionID: offer.sessionID, terminalKeyID: metaData.terminalKeyID, merchantID: credential.merchantID,
            merchantName: credential.merchantName.sanitizedForDisplay,
            terminalLabel: credential.terminalLabel.sanitizedForDisplay, vouchedBy: attempt.anchor?.name ?? "",
            confirmationCode: attempt.confirmationCode ?? ConfirmationCode(derivedBytes: []),
            digest: attempt.offerDigest ?? offerDigest(offer), amount: offer.amount,
            registerUser: offer.registerUser.sanitizedForDisplay,
            item: offer.item.sanitizedForDisplay, quantity: offer.quantity,
            merchantPrograms: offer.merchantPrograms, expiresAt: offer.expiresAt)
        return attempt.wantsHost ? becomeHostConnected() : [set(.offerReceived)]
    }

    /// Why `offer` cannot be shown for this session, or nil if it can (a pure check).
    static func problem(
        with offer: Offer, for sessionID: SessionID, _ transactionType: TransactionType,
        _ credential: TerminalCredential, now: UnixTime
    ) -> String? {
        guard offer.sessionID == sessionID, offer.transactionType == transactionType else {
            return "it is for another session"
        }
        guard verify(offer.signature, over: offer.signedBytes, publicKey: credential.terminalKey) else {
            return "its signature does not verify"
        }
        guard offer.expiresAt >= now else { return "it has expired" }
        guard transactionType.isRedemption || offer.amount.minorUnits > 0 else { return "the amount is zero" }
        return nil
    }

    /// What the person is told when the terminal changes its offer after showing it: what changed,
    /// that nothing was signed, and what to do.
    static func repricedReason(_ shown: Offer, _ second: Offer) -> String {
        let change =
            shown.amount != second.amount
            ? "the amount changed from \(shown.amount) to \(second.amount)" : "its terms changed"
        return
            "the terminal changed its offer after showing it (\(change)); nothing was signed or charged. Ask at the register and pay again if the new offer is right"
    }

    private mutating func endBeforeSigning(_ error: PaymentClientError) -> [SessionClientAction] {
        closeCurrentLink() + finish(error: error)
    }

    /// A receipt counts only if the terminal the request bound signed it and it matches the
    /// request: same id, session, type, amount and tip. Anything else is not stored (the request
    /// stays pending and is asked for again).
    private mutating func receiveReceipt(_ receipt: Receipt) -> [SessionClientAction] {
        guard let attempt, let pending = attempt.pending, receipt.paymentID == pending.paymentID,
            let credential = attempt.credential,
            verify(receipt.signature, over: receipt.signedBytes, publicKey: credential.terminalKey)
        else { return [] }
        if let mismatch = Self.mismatch(of: receipt, with: pending, signedBy: attempt.terminalKeyDigest) {
            error = .receiptMismatch(mismatch)
            return closeCurrentLink()
        }
        switch receipt.outcome {
        case .approved, .acceptedOffline:
            // Accepted offline is a distinct outcome: the terminal took the payment against the
            // daily token and the server settles it later; only a payment can be.
            let offline = receipt.outcome == .acceptedOffline
            guard !offline || receipt.transactionType == .payment else {
                error = .receiptMismatch("a redemption cannot be accepted offline")
                return closeCurrentLink()
            }
            let verified = PaymentReceipt(
                paymentID: receipt.paymentID, sessionID: receipt.sessionID, transactionType: receipt.transactionType,
                item: pending.redeem?.item ?? "", quantity: pending.redeem?.quantity ?? 0,
                merchantName: credential.merchantName.sanitizedForDisplay,
                amount: receipt.amount, tip: receipt.tip, reference: receipt.transactionReference,
                settledAt: receipt.settledAt, bonusPointsEarned: receipt.bonusPointsEarned,
                bonusPointsBalance: receipt.bonusPointsBalance, acceptedOffline: offline)
            return resolvePending(receipt: verified, error: nil, acknowledges: true)
        case .declined(let code):
            return resolvePending(
                receipt: nil, error: .declined(code: code, reason: Self.declineReason(code, of: pending)),
                acknowledges: true)
        }
    }

    /// A signed decline carries only its code: the reason in words, with the amount it was for
    /// when the wallet's balance did not cover it.
    static func declineReason(_ code: ErrorCode, of pending: PendingPayment) -> String {
        if code == .insufficientFunds, case .confirm(let confirm) = pending.request {
            return "the wallet's balance does not cover \((try? confirm.amount.adding(confirm.tip)) ?? confirm.amount)"
        }
        return code.explanation
    }

    /// Why `receipt` does not answer `pending` as signed, or nil if it does.
    static func mismatch(of receipt: Receipt, with pending: PendingPayment, signedBy terminalKeyDigest: DigestBytes?)
        -> String?
    {
        guard receipt.sessionID == pending.sessionID else { return "another session" }
        switch pending.request {
        case .confirm(let confirm):
            guard terminalKeyDigest == confirm.terminalKeyDigest else { return "signed by another terminal" }
            guard receipt.transactionType == .payment else { return "not a payment receipt" }
            guard receipt.amount == confirm.amount else {
                return "amount \(receipt.amount), confirmed \(confirm.amount)"
            }
            guard receipt.tip == confirm.tip else { return "tip \(receipt.tip), confirmed \(confirm.tip)" }
        case .redeem(let redeem):
            guard terminalKeyDigest == redeem.terminalKeyDigest else { return "signed by another terminal" }
            guard receipt.transactionType == redeem.transactionType else { return "another kind of redemption" }
        default: return "not a request"
        }
        return nil
    }

    private mutating func receiveError(_ message: ErrorMessage) -> [SessionClientAction] {
        if let pending = attempt?.pending {
            // Only an answer naming our payment settles it: the terminal sends an error instead
            // of a receipt only when it did not, and never will, execute that payment id.
            guard message.paymentID == pending.paymentID else { return [] }
            return resolvePending(
                receipt: nil, error: .declined(code: message.code, reason: message.message.sanitizedForDisplay),
                acknowledges: false)
        }
        // The terminal's words, made safe to print: apps show this text as it is.
        let text = message.message.isEmpty ? message.code.description : message.message.sanitizedForDisplay
        return closeCurrentLink() + finish(error: .sessionUnavailable(text))
    }

    private mutating func receiveCancel(_ cancel: Cancel) -> [SessionClientAction] {
        // With a confirmation in flight only the answer to it counts (see receiveError).
        guard attempt?.pending == nil else { return [] }
        return closeCurrentLink() + finish(error: cancel.reason == .timedOut ? .terminalTimedOut : .cancelledByTerminal)
    }

    /// Ends the pending request with its final answer: the store records it (an approved one's
    /// receipt with its removal, see `PendingPaymentStore.resolve`), then `resolved` finishes.
    private mutating func resolvePending(receipt: PaymentReceipt?, error: PaymentClientError?, acknowledges: Bool)
        -> [SessionClientAction]
    {
        guard var attempt, let pending = attempt.pending else { return [] }
        var actions: [SessionClientAction] = []
        actions.reserveCapacity(8)
        if attempt.receiptTimer != nil { actions.append(.cancelReceiptTimer) }
        attempt.request = .resolving(
            Resolution(paymentID: pending.paymentID, receipt: receipt, error: error, acknowledges: acknowledges))
        self.attempt = attempt
        actions.append(.resolve(pending.paymentID, receipt: receipt))
        return actions
    }

    private mutating func linkFailed(generation: Int, reason: PaymentClientError) -> [SessionClientAction] {
        guard isCurrent(generation), var attempt else { return [] }
        attempt.link = nil
        var actions: [SessionClientAction] = []
        actions.reserveCapacity(8)
        if attempt.receiptTimer != nil { actions.append(.cancelReceiptTimer) }
        if let pending = attempt.pending { attempt.request = .pending(pending, receiptTimer: nil) }
        self.attempt = attempt
        guard attempt.pending != nil else { return actions + finish(error: reason) }
        actions.append(set(.paymentPending))
        return actions + scheduleReconnect()
    }

    /// Tries again to reach the terminal for a pending payment, backing off.
    private mutating func scheduleReconnect() -> [SessionClientAction] {
        guard var attempt, let pending = attempt.pending else { return [] }
        let delay = attempt.reconnectDelay
        attempt.reconnectDelay = min(delay * 2, configuration.maximumReconnectDelay)
        self.attempt = attempt
        return [
            .log(
                .notice, "link lost with a request pending; asking again", session: nil, payment: pending.paymentID,
                metadata: ["after": "\(delay)"]),
            .armTimer(.reconnect(terminalKeyID: pending.terminalKeyID), after: delay),
        ]
    }

    /// A pending payment may be answered through the terminal's current session, wherever it
    /// advertises now: the latest address advertising its key id that has not failed the
    /// handshake (once every one has, they all get another turn).
    private mutating func retarget(_ sightings: [PeripheralTracking]) {
        guard var attempt, let pending = attempt.pending else { return }
        let terminal = sightings.filter { $0.peripheralMetaData.terminalKeyID == pending.terminalKeyID }
        func latest(excluding excluded: Set<PeerAddress>) -> PeripheralTracking? {
            terminal.filter { !excluded.contains($0.peripheralMetaData.address) }.max { $0.lastSeen < $1.lastSeen }
        }
        var found = latest(excluding: attempt.rejectedAddresses)
        if found == nil, !attempt.rejectedAddresses.isEmpty {
            attempt.rejectedAddresses = []
            found = latest(excluding: [])
        }
        if let found {
            attempt.request = .pending(
                pending.retargeted(to: found.peripheralMetaData.address), receiptTimer: attempt.receiptTimer)
        }
        self.attempt = attempt
    }

    private mutating func finish(receipt: PaymentReceipt? = nil, error: PaymentClientError? = nil)
        -> [SessionClientAction]
    {
        self.error = error
        let sessionID = attempt?.tracking.peripheralMetaData.sessionID
        // Whatever the old link still says is ignored from now on.
        if attempt != nil { generation += 1 }
        var actions: [SessionClientAction] = []
        actions.reserveCapacity(8)
        // A session is used once. Only a link lost before confirming leaves it worth another try,
        // or a handshake refused at one address (its tracking is ignored instead: the session
        // may be a clone's, and the real terminal advertises it too).
        switch error {
        case .connectionLost?, .connectionFailed?, .secureChannel?, .terminalNotTrusted?: break
        default: if let sessionID { actions.append(.ignoreSession(sessionID)) }
        }
        actions.append(
            .log(
                .info, "attempt finished", session: sessionID, payment: nil,
                metadata: [
                    "outcome": "\(error.map { "\($0)" } ?? "completed")",
                    "receipt": "\(receipt?.paymentID.description ?? "none")",
                ]))
        actions.append(set(error == nil ? .completed : .completedWithError))
        actions.append(.finish(WalletFinishedPayment(receipt: receipt, error: error)))
        return actions
    }
}
