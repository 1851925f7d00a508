import Crypto
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import Testing

@testable import HorizonRoles

/// The wallet's protocol rules without any radio: events in, actions out.
@Suite("Wallet session state machine")
struct SessionClientStateMachineTests {
    typealias Machine = SessionClientStateMachine
    typealias Action = SessionClientAction

    // MARK: The normal payment

    @Test func aPaymentGoesFromCandidateToReceiptAndAcknowledgesOnceStored() throws {
        let rig = try Rig()
        var machine = rig.machine()

        #expect(
            machine.startDeciding(rig.tracking).withoutLogs == [
                .setState(.connecting), .connect(to: rig.address, generation: 1),
            ])
        #expect(
            machine.connected(generation: 1) == [
                .startHandshake(generation: 1, sessionID: rig.sessionID, terminalKeyID: rig.terminalKeyID)
            ])
        #expect(machine.attempt?.link == Machine.Link(generation: 1, phase: .handshaking))
        #expect(
            machine.established(rig.established, hello: rig.hello, generation: 1) == [
                .setState(.fetchingOffer), .send(.hello(rig.hello), generation: 1),
                .armTimer(.offer(generation: 1), after: .seconds(10)),
            ])
        let offer = try rig.offer()
        #expect(machine.received(.offer(offer), generation: 1, now: Rig.now) == [.setState(.offerReceived)])
        let shown = try #require(machine.offer)
        #expect(shown.amount == euros(1250))
        #expect(shown.merchantName == "Café Horizon")
        #expect(shown.terminalLabel == "Till 1")
        #expect(shown.digest == offerDigest(offer))

        #expect(machine.connectToSession() == [.setState(.hostConnected), .hostConnected])
        let request = try rig.confirmation(for: machine, tip: 150, shown: shown)
        let saved = machine.confirm(request, now: Rig.now)
        guard case .save(let pending)? = saved.first, saved.count == 1 else {
            Issue.record("expected the request to be stored first, got \(saved)")
            return
        }
        #expect(pending.request == request)
        #expect(machine.state == .hostConnected)
        #expect(
            machine.requestSaved(pending.paymentID).withoutLogs == [
                .setState(.acquiringPaymentExecution), .send(request, generation: 1),
                .armTimer(.receipt(token: 1), after: .seconds(10)),
            ])

        let receipt = try rig.receipt(for: pending, amount: 1250, tip: 150)
        let answered = machine.received(.receipt(receipt), generation: 1, now: Rig.now)
        guard case .resolve(let id, let verified?)? = answered.last else {
            Issue.record("expected the store to record the receipt, got \(answered)")
            return
        }
        #expect(answered.first == .cancelReceiptTimer)
        #expect(id == pending.paymentID)
        #expect(verified.total == euros(1400))
        #expect(machine.pending == nil)
        #expect(
            machine.resolved(pending.paymentID, stored: true).withoutLogs == [
                .acknowledge(pending.paymentID, generation: 1), .close(generation: 1),
                .ignoreSession(rig.sessionID), .setState(.completed),
                .finish(WalletFinishedPayment(receipt: verified, error: nil)),
            ])
        #expect(machine.receipt == verified)
        #expect(machine.membership?.pointsEarnedWithLastPayment == verified.bonusPointsEarned)
        #expect(machine.error == nil)
    }

    @Test func anAnswerTheStoreCouldNotRecordIsNotAcknowledged() throws {
        let rig = try Rig()
        var machine = rig.machine()
        let pending = try rig.sent(&machine)
        _ = machine.received(.receipt(try rig.receipt(for: pending)), generation: 1, now: Rig.now)
        let actions = machine.resolved(pending.paymentID, stored: false)
        #expect(!actions.contains { if case .acknowledge = $0 { true } else { false } })
        #expect(machine.state == .completed)
    }

    @Test func aRequestThatCouldNotBeStoredIsNeitherSentNorPending() throws {
        let rig = try Rig()
        var machine = rig.machine()
        try rig.offered(&machine)
        let request = try rig.confirmation(for: machine)
        guard case .save(let pending)? = machine.confirm(request, now: Rig.now).first else {
            Issue.record("expected a save")
            return
        }
        machine.requestNotSaved(pending.paymentID, reason: "disk full")
        #expect(machine.pending == nil)
        #expect(machine.error == .notReady("could not store the request before sending it: disk full"))
        #expect(machine.state == .offerReceived)
        #expect(machine.requestSaved(pending.paymentID).isEmpty)
    }

    // MARK: One offer per attempt

    @Test func aSecondDifferentOfferEndsTheAttemptBeforeAnythingIsSigned() throws {
        let rig = try Rig()
        var machine = rig.machine()
        let offer = try rig.offered(&machine)
        // The same offer again changes nothing.
        #expect(machine.received(.offer(offer), generation: 1, now: Rig.now).isEmpty)
        let repriced = try rig.offer(amount: 9900)
        let actions = machine.received(.offer(repriced), generation: 1, now: Rig.now)
        #expect(
            actions.withoutLogs == [
                .close(generation: 1), .ignoreSession(rig.sessionID), .setState(.completedWithError),
                .finish(
                    WalletFinishedPayment(
                        receipt: nil,
                        error: .invalidOffer(SessionClientStateMachine.repricedReason(offer, repriced)))),
            ])
        #expect(!actions.contains { if case .save = $0 { true } else { false } })
        #expect(machine.offer?.amount == euros(1250))
        // Nothing can be confirmed any more.
        #expect(machine.connectToSession() == nil)
        #expect(
            machine.requestContext(
                shown: nil, walletKey: rig.wallet.publicKey, requestID: rig.paymentID(), walletNonce: rig.nonce(),
                now: Rig.now) == nil)
        #expect(machine.confirm(try rig.confirmation(for: offer), now: Rig.now).isEmpty)
        #expect(machine.pending == nil)
    }

    @Test func anOfferWithABadSignatureOrForAnotherSessionIsRefused() throws {
        let rig = try Rig()
        var forged = rig.machine()
        try rig.fetching(&forged)
        let actions = forged.received(
            .offer(try rig.offer(signedBy: P256.Signing.PrivateKey())), generation: 1, now: Rig.now)
        #expect(
            actions.contains(
                .finish(WalletFinishedPayment(receipt: nil, error: .invalidOffer("its signature does not verify")))))

        var expired = rig.machine()
        try rig.fetching(&expired)
        _ = expired.received(.offer(try rig.offer()), generation: 1, now: Rig.now + 3_600)
        #expect(expired.error == .invalidOffer("it has expired"))

        var elsewhere = rig.machine()
        try rig.fetching(&elsewhere)
        _ = elsewhere.received(.offer(try rig.offer(session: rig.otherSessionID)), generation: 1, now: Rig.now)
        #expect(elsewhere.error == .invalidOffer("it is for another session"))
    }

    @Test func aConfirmationMustBindTheOfferThatWasShown() throws {
        let rig = try Rig()
        var machine = rig.machine()
        let offer = try rig.offered(&machine)
        let other = try rig.offer(amount: 1)
        #expect(machine.confirm(try rig.confirmation(for: other), now: Rig.now).isEmpty)
        #expect(machine.error == .invalidOffer("it is not the offer that was shown; nothing was signed"))
        #expect(machine.pending == nil)
        let context = machine.requestContext(
            shown: offerDigest(other), walletKey: rig.wallet.publicKey, requestID: rig.paymentID(),
            walletNonce: rig.nonce(), now: Rig.now)
        #expect(context.flatMap { try? $0.get() } == nil)
        #expect(machine.confirm(try rig.confirmation(for: offer), now: Rig.now).count == 1)
    }

    // MARK: Receipts

    @Test func aMismatchedReceiptIsNotStoredAndTheRequestStaysPending() throws {
        let rig = try Rig()
        var machine = rig.machine()
        let pending = try rig.sent(&machine, tip: 100)
        let short = try rig.receipt(for: pending, amount: 1250, tip: 0)
        #expect(machine.received(.receipt(short), generation: 1, now: Rig.now) == [.close(generation: 1)])
        guard case .receiptMismatch(let reason)? = machine.error else {
            Issue.record("expected a receipt mismatch, got \(String(describing: machine.error))")
            return
        }
        #expect(reason.hasPrefix("tip "))
        #expect(machine.pending == pending)
        #expect(machine.state == .acquiringPaymentExecution)
        // A receipt the terminal did not sign is not even looked at.
        let forged = try rig.receipt(for: pending, tip: 100, signedBy: P256.Signing.PrivateKey())
        #expect(machine.received(.receipt(forged), generation: 1, now: Rig.now).isEmpty)
        // The link closes: the request is asked for again, never reported as failed.
        #expect(
            machine.linkEnded(.closed(.closedLocally), generation: 1).withoutLogs == [
                .cancelReceiptTimer, .setState(.paymentPending),
                .armTimer(.reconnect(terminalKeyID: rig.terminalKeyID), after: .milliseconds(500)),
            ])
        #expect(machine.pending == pending)
    }

    @Test func aDeclinedReceiptOrAnErrorNamingTheRequestSettlesIt() throws {
        let rig = try Rig()
        var declined = rig.machine()
        let pending = try rig.sent(&declined)
        let receipt = try rig.receipt(for: pending, outcome: .declined(.insufficientFunds))
        #expect(
            declined.received(.receipt(receipt), generation: 1, now: Rig.now) == [
                .cancelReceiptTimer, .resolve(pending.paymentID, receipt: nil),
            ])
        #expect(
            declined.resolved(pending.paymentID, stored: true).contains(.acknowledge(pending.paymentID, generation: 1)))
        // In words, with the total it was for: not the code's name.
        guard case .declined(let code, let reason)? = declined.error else {
            Issue.record("not a decline: \(String(describing: declined.error))")
            return
        }
        #expect(code == .insufficientFunds)
        #expect(reason.hasPrefix("the wallet's balance does not cover "), "\(reason)")

        var refused = rig.machine()
        let other = try rig.sent(&refused)
        // An error about another request, or a cancel, does not settle this one.
        let stranger = ErrorMessage(code: .sessionNotFound, message: "no", paymentID: rig.paymentID())
        #expect(refused.received(.error(stranger), generation: 1, now: Rig.now).isEmpty)
        #expect(
            refused.received(.cancel(Cancel(sessionID: rig.sessionID, reason: .timedOut)), generation: 1, now: Rig.now)
                .isEmpty)
        let error = ErrorMessage(code: .sessionNotFound, message: "gone", paymentID: other.paymentID)
        #expect(
            refused.received(.error(error), generation: 1, now: Rig.now) == [
                .cancelReceiptTimer, .resolve(other.paymentID, receipt: nil),
            ])
        // The terminal never executed it: nothing to acknowledge.
        let finished = refused.resolved(other.paymentID, stored: true)
        #expect(!finished.contains { if case .acknowledge = $0 { true } else { false } })
        #expect(refused.error == .declined(code: .sessionNotFound, reason: "gone"))
    }

    // MARK: Losing the link

    @Test func aLinkLostBeforeConfirmingEndsTheAttemptButNotTheSession() throws {
        let rig = try Rig()
        var machine = rig.machine()
        try rig.offered(&machine)
        #expect(
            machine.linkEnded(.closed(.connectionLost), generation: 1).withoutLogs == [
                .setState(.completedWithError), .finish(WalletFinishedPayment(receipt: nil, error: .connectionLost)),
            ])
        // Whatever the old link still says is ignored.
        #expect(machine.received(.offer(try rig.offer(amount: 1)), generation: 1, now: Rig.now).isEmpty)
        #expect(machine.linkEnded(.closed(.connectionLost), generation: 1).isEmpty)
    }

    @Test func aLinkLostAfterConfirmingKeepsThePaymentPendingAndConnectsAgain() throws {
        let rig = try Rig()
        var machine = rig.machine()
        let pending = try rig.sent(&machine)
        let lost = machine.linkEnded(.closed(.connectionLost), generation: 1)
        #expect(!lost.contains { if case .finish = $0 { true } else { false } })
        #expect(machine.state == .paymentPending)
        #expect(machine.restart().isEmpty)
        #expect(machine.state == .paymentPending)
        #expect(machine.reconnectTimerFired(sightings: [rig.tracking]) == [.connect(to: rig.address, generation: 2)])
        #expect(
            machine.connected(generation: 2) == [
                .startHandshake(generation: 2, sessionID: rig.sessionID, terminalKeyID: rig.terminalKeyID)
            ])
        // The Hello, then the same signed request again, and the wait for its answer.
        #expect(
            machine.established(rig.established, hello: rig.hello, generation: 2) == [
                .send(.hello(rig.hello), generation: 2), .send(pending.request, generation: 2),
                .armTimer(.receipt(token: 2), after: .seconds(10)),
            ])
        #expect(machine.receiptTimerFired(token: 1).isEmpty)
        #expect(machine.receiptTimerFired(token: 2) == [.close(generation: 2)])
    }

    @Test func reconnectingBacksOffDoublingUpToTheMaximum() throws {
        let rig = try Rig(reconnectDelay: .milliseconds(500), maximumReconnectDelay: .seconds(5))
        var machine = rig.machine()
        _ = try rig.sent(&machine)
        var delays: [Duration] = []
        var actions = machine.linkEnded(.closed(.connectionLost), generation: 1)
        for _ in 0..<6 {
            guard case .armTimer(.reconnect(let keyID), let delay)? = actions.last else {
                Issue.record("expected a reconnect timer, got \(actions)")
                return
            }
            #expect(keyID == rig.terminalKeyID)
            delays.append(delay)
            guard case .connect(_, let generation)? = machine.reconnectTimerFired(sightings: [rig.tracking]).first
            else {
                Issue.record("expected a connection attempt")
                return
            }
            actions = machine.connectFailed(.connectionTimedOut(rig.address), generation: generation)
        }
        #expect(
            delays == [
                .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(5), .seconds(5),
            ])
        #expect(machine.state == .paymentPending)
    }

    @Test func aPendingRequestSkipsAddressesThatFailedTheHandshakeUntilAllHave() throws {
        let rig = try Rig()
        var machine = rig.machine()
        let pending = try rig.sent(&machine)
        let clone = PeerAddress("CC:00:00:00:00:09")
        func sightings(terminalLastSeen: Int64, cloneLastSeen: Int64) -> [PeripheralTracking] {
            [
                rig.tracking(at: rig.address, lastSeen: Instant(nanoseconds: terminalLastSeen)),
                rig.tracking(at: clone, lastSeen: Instant(nanoseconds: cloneLastSeen)),
                // Another terminal's key is never a target.
                rig.tracking(
                    at: PeerAddress("DD:00:00:00:00:01"), lastSeen: Instant(nanoseconds: 99), keyID: rig.otherKeyID),
            ]
        }
        _ = machine.linkEnded(.closed(.connectionLost), generation: 1)
        // The clone was heard last: the request follows the key there.
        #expect(
            machine.reconnectTimerFired(sightings: sightings(terminalLastSeen: 1, cloneLastSeen: 2)) == [
                .connect(to: clone, generation: 2)
            ])
        #expect(machine.pending?.terminalAddress == clone)
        _ = machine.connected(generation: 2)
        let refused = machine.linkEnded(.rejected(.credentialSignatureInvalid), generation: 2)
        #expect(!refused.contains { if case .finish = $0 { true } else { false } })
        #expect(!refused.contains { if case .ignoreTracking = $0 { true } else { false } })
        #expect(machine.attempt?.rejectedAddresses == [clone])
        // Heard last again, but it failed: the real terminal's address gets the turn.
        #expect(
            machine.reconnectTimerFired(sightings: sightings(terminalLastSeen: 3, cloneLastSeen: 4)) == [
                .connect(to: rig.address, generation: 3)
            ])
        _ = machine.connected(generation: 3)
        _ = machine.linkEnded(.rejected(.handshakeTimedOut), generation: 3)
        #expect(machine.attempt?.rejectedAddresses == [clone, rig.address])
        // Every address failed: they all get another turn, the latest first.
        #expect(
            machine.reconnectTimerFired(sightings: sightings(terminalLastSeen: 5, cloneLastSeen: 6)) == [
                .connect(to: clone, generation: 4)
            ])
        #expect(machine.attempt?.rejectedAddresses == [])
        #expect(machine.pending?.paymentID == pending.paymentID)
    }

    @Test func aTerminalFailingAuthenticationBeforeConfirmingIsNotTrustedAtThatAddressOnly() throws {
        let rig = try Rig()
        var machine = rig.machine()
        _ = machine.startDeciding(rig.tracking)
        _ = machine.connected(generation: 1)
        #expect(
            machine.linkEnded(.rejected(.credentialSignatureInvalid), generation: 1).withoutLogs == [
                .ignoreTracking(rig.tracking.key), .setState(.completedWithError),
                .finish(
                    WalletFinishedPayment(
                        receipt: nil,
                        error: .terminalNotTrusted(SecureChannelError.credentialSignatureInvalid.description))),
            ])
    }

    // MARK: The person and the terminal end it

    @Test func declineTellsTheTerminalAndEndsTheSession() throws {
        let rig = try Rig()
        var machine = rig.machine()
        try rig.offered(&machine)
        #expect(
            machine.decline().withoutLogs == [
                .send(.cancel(Cancel(sessionID: rig.sessionID, reason: .userDeclined)), generation: 1),
                .close(generation: 1), .ignoreSession(rig.sessionID), .setState(.completedWithError),
                .finish(WalletFinishedPayment(receipt: nil, error: .declinedByUser)),
            ])
        #expect(machine.restart() == [.close(generation: 1), .setState(.idle)])
        #expect(machine.attempt == nil)
        #expect(machine.error == nil)
    }

    @Test func theDecidersNoTellsTheTerminalAndGoesBackToIdle() throws {
        let rig = try Rig()
        var machine = rig.machine()
        try rig.offered(&machine)
        #expect(
            machine.deciderRejected() == [
                .send(.cancel(Cancel(sessionID: rig.sessionID, reason: .userDeclined)), generation: 1),
                .close(generation: 1), .setState(.idle),
            ])
        #expect(machine.attempt == nil)
    }

    @Test func aCancelFromTheTerminalEndsTheAttempt() throws {
        let rig = try Rig()
        var cancelled = rig.machine()
        try rig.offered(&cancelled)
        #expect(
            cancelled.received(
                .cancel(Cancel(sessionID: rig.sessionID, reason: .terminalCancelled)), generation: 1, now: Rig.now
            ).withoutLogs == [
                .close(generation: 1), .ignoreSession(rig.sessionID), .setState(.completedWithError),
                .finish(WalletFinishedPayment(receipt: nil, error: .cancelledByTerminal)),
            ])

        var timedOut = rig.machine()
        try rig.offered(&timedOut)
        _ = timedOut.received(
            .cancel(Cancel(sessionID: rig.sessionID, reason: .timedOut)), generation: 1, now: Rig.now)
        #expect(timedOut.error == .terminalTimedOut)
    }

    // MARK: Timers

    @Test func noOfferInTimeClosesTheLinkAndEndsTheAttempt() throws {
        let rig = try Rig()
        var machine = rig.machine()
        try rig.fetching(&machine)
        #expect(machine.offerTimerFired(generation: 0).isEmpty)
        #expect(machine.offerTimerFired(generation: 1) == [.close(generation: 1)])
        #expect(
            machine.linkEnded(.closed(.closedLocally), generation: 1).withoutLogs == [
                .setState(.completedWithError), .finish(WalletFinishedPayment(receipt: nil, error: .connectionLost)),
            ])

        // Once the offer is there, the timer has nothing to do.
        var offered = rig.machine()
        try rig.offered(&offered)
        #expect(offered.offerTimerFired(generation: 1).isEmpty)
    }

    @Test func aConnectionForAnAttemptThatMovedOnIsDiscarded() throws {
        let rig = try Rig()
        var machine = rig.machine()
        _ = machine.startDeciding(rig.tracking)
        #expect(machine.restart() == [.setState(.idle)])
        _ = machine.startDeciding(rig.tracking)
        // The first attempt's connection (generation 1) arrives late: the second owns generation 2.
        #expect(machine.connected(generation: 1) == [.discardConnection])
        #expect(machine.connectFailed(.linkClosed, generation: 1).isEmpty)
        #expect(machine.connected(generation: 2).count == 1)
    }

    @Test func resumingAPendingRequestConnectsWhereItsTerminalAdvertisesNow() throws {
        let rig = try Rig()
        var machine = rig.machine()
        var sender = rig.machine()
        let pending = try rig.sent(&sender)
        let moved = PeerAddress("EE:00:00:00:00:02")
        let actions = machine.resume(
            pending, tracking: rig.tracking, sightings: [rig.tracking(at: moved, lastSeen: Instant(nanoseconds: 5))])
        #expect(actions == [.setState(.paymentPending), .connect(to: moved, generation: 1)])
        #expect(machine.resume(pending, tracking: rig.tracking, sightings: []) == nil)
    }
}

extension SessionClientStateMachineTests {
    /// One request per attempt: pending (first without, then with the wait for its answer), or
    /// having its answer stored, never both; a link lost stops the wait and keeps it pending.
    @Test func aRequestIsPendingOrResolvingNeverBoth() throws {
        let rig = try Rig()
        var machine = rig.machine()
        _ = machine.startDeciding(rig.tracking)
        _ = machine.connected(generation: 1)
        _ = machine.established(rig.established, hello: rig.hello, generation: 1)
        _ = machine.received(.offer(try rig.offer()), generation: 1, now: Rig.now)
        _ = machine.connectToSession()
        #expect(machine.attempt?.request == Machine.RequestPhase.none)
        let request = try rig.confirmation(for: machine, shown: try #require(machine.offer))
        guard case .save(let pending)? = machine.confirm(request, now: Rig.now).first else {
            Issue.record("expected the request to be stored first")
            return
        }
        #expect(machine.attempt?.request == .pending(pending, receiptTimer: nil))
        _ = machine.requestSaved(pending.paymentID)
        #expect(machine.attempt?.request == .pending(pending, receiptTimer: 1))

        var lost = machine
        _ = lost.linkEnded(.closed(.connectionLost), generation: 1)
        #expect(lost.attempt?.request == .pending(pending, receiptTimer: nil))

        let answered = machine.received(.receipt(try rig.receipt(for: pending)), generation: 1, now: Rig.now)
        guard case .resolve(_, let verified?)? = answered.last else {
            Issue.record("expected the store to record the receipt, got \(answered)")
            return
        }
        #expect(
            machine.attempt?.request
                == .resolving(
                    Machine.Resolution(paymentID: pending.paymentID, receipt: verified, error: nil, acknowledges: true))
        )
        #expect(machine.pending == nil)
        _ = machine.resolved(pending.paymentID, stored: true)
        #expect(machine.attempt?.request == Machine.RequestPhase.none)
    }
}

extension Array where Element == SessionClientAction {
    /// The actions that are not log lines (what a test of the rules looks at).
    var withoutLogs: [SessionClientAction] {
        filter { if case .log = $0 { false } else { true } }
    }
}

/// A terminal's credential, its session and a wallet, with the messages they exchange, built
/// and signed for real (the machine verifies signatures).
private struct Rig {
    static let now: UnixTime = 1_800_000_000

    let anchorKey = P256.Signing.PrivateKey()
    let terminalKey = P256.Signing.PrivateKey()
    let credential: TerminalCredential
    let terminalKeyID: TerminalKeyID
    let otherKeyID: TerminalKeyID
    let sessionID: SessionID
    let otherSessionID: SessionID
    let address = PeerAddress("AA:00:00:00:00:01")
    let wallet = WalletIdentity()
    let configuration: PaymentClientConfiguration

    init(reconnectDelay: Duration = .milliseconds(500), maximumReconnectDelay: Duration = .seconds(5)) throws {
        credential = try TerminalCredential.issue(
            by: anchorKey, merchantID: "m-1", merchantName: "Café Horizon", terminalLabel: "Till 1",
            terminalKey: terminalKey.publicKey, notBefore: Self.now - 86_400, expiresAt: Self.now + 86_400)
        terminalKeyID = try #require(
            try TerminalIdentity(signingKey: terminalKey, credential: credential).terminalKeyID)
        otherKeyID = try TerminalKeyID(bytes: terminalKeyID.bytes.map { $0 ^ 0xFF })
        var random = SystemRandomNumberGenerator()
        sessionID = SessionID.random(using: &random)
        var other = SessionID.random(using: &random)
        while other == sessionID { other = SessionID.random(using: &random) }
        otherSessionID = other
        configuration = PaymentClientConfiguration(
            reconnectDelay: reconnectDelay, maximumReconnectDelay: maximumReconnectDelay)
    }

    func machine() -> SessionClientStateMachine {
        SessionClientStateMachine(configuration: .init(transactionType: .payment, configuration))
    }

    var tracking: PeripheralTracking { tracking(at: address) }

    func tracking(at address: PeerAddress, lastSeen: Instant = .zero, keyID: TerminalKeyID? = nil)
        -> PeripheralTracking
    {
        PeripheralTracking(
            peripheralMetaData: PeripheralMetaData(
                address: address, transactionType: .payment, sessionID: sessionID,
                terminalKeyID: keyID ?? terminalKeyID),
            smoothedRSSI: -50, lastRSSI: -50, sightings: 1, firstSeen: .zero, lastSeen: lastSeen)
    }

    var established: SessionClientStateMachine.Established {
        SessionClientStateMachine.Established(
            credential: credential, anchor: TrustAnchor(publicKey: anchorKey.publicKey),
            transcriptHash: [UInt8](repeating: 7, count: 32),
            confirmationCode: ConfirmationCode(derivedBytes: [1, 2, 3, 4]))
    }

    var hello: Hello { Hello(sessionID: sessionID, transactionType: .payment, sessionKey: wallet.publicKey) }

    func paymentID() -> PaymentID {
        var random = SystemRandomNumberGenerator()
        return PaymentID.random(using: &random)
    }

    func nonce() -> Nonce {
        var random = SystemRandomNumberGenerator()
        return Nonce.random(using: &random)
    }

    func offer(amount cents: Int64 = 1250, session: SessionID? = nil, signedBy key: P256.Signing.PrivateKey? = nil)
        throws -> Offer
    {
        let unsigned = try Offer(
            sessionID: session ?? sessionID, transactionType: .payment, amount: euros(cents), registerUser: "Ana",
            merchantPrograms: .none, offerNonce: Nonce(bytes: [UInt8](repeating: 1, count: Nonce.byteCount)),
            expiresAt: Self.now + 300)
        return unsigned.withSignature(try signatureBytes(for: unsigned.signedBytes, with: key ?? terminalKey))
    }

    /// Drives `machine` to `fetchingOffer` on generation 1.
    func fetching(_ machine: inout SessionClientStateMachine) throws {
        _ = machine.startDeciding(tracking)
        _ = machine.connected(generation: 1)
        _ = machine.established(established, hello: hello, generation: 1)
        try #require(machine.state == .fetchingOffer)
    }

    /// Drives `machine` to `offerReceived` with the default offer.
    @discardableResult
    func offered(_ machine: inout SessionClientStateMachine) throws -> Offer {
        try fetching(&machine)
        let offer = try self.offer()
        _ = machine.received(.offer(offer), generation: 1, now: Self.now)
        try #require(machine.state == .offerReceived)
        return offer
    }

    /// Drives `machine` to `acquiringPaymentExecution`: confirmed, stored and sent.
    func sent(_ machine: inout SessionClientStateMachine, tip: Int64 = 0) throws -> PendingPayment {
        try offered(&machine)
        _ = machine.connectToSession()
        let request = try confirmation(for: machine, tip: tip)
        guard case .save(let pending)? = machine.confirm(request, now: Self.now).first else {
            throw RigError.notStored
        }
        _ = machine.requestSaved(pending.paymentID)
        try #require(machine.state == .acquiringPaymentExecution)
        return pending
    }

    enum RigError: Error { case notStored }

    /// The signed confirmation the facade would build from the machine's context.
    func confirmation(for machine: SessionClientStateMachine, tip: Int64 = 0, shown: PaymentOffer? = nil) throws
        -> SessionMessage
    {
        let context = try #require(
            machine.requestContext(
                shown: shown?.digest, walletKey: wallet.publicKey, requestID: paymentID(), walletNonce: nonce(),
                now: Self.now)
        ).get()
        return try confirmation(for: context.offer, tip: tip)
    }

    /// A signed confirmation of `offer` (whether or not it is the one the machine holds).
    func confirmation(for offer: Offer, tip: Int64 = 0) throws -> SessionMessage {
        let unsigned = try Confirm(
            sessionID: offer.sessionID, terminalKeyDigest: credential.keyDigestBytes, walletKey: wallet.publicKey,
            offerDigest: offerDigest(offer), amount: offer.amount, tip: euros(tip), paymentID: paymentID(),
            walletNonce: nonce(), expiresAt: Self.now + 120)
        return .confirm(unsigned.withSignature(try signatureBytes(for: unsigned.signedBytes, with: wallet.signingKey)))
    }

    func receipt(
        for pending: PendingPayment, outcome: ReceiptOutcome = .approved, amount: Int64 = 1250, tip: Int64 = 0,
        signedBy key: P256.Signing.PrivateKey? = nil
    ) throws -> Receipt {
        let unsigned = try Receipt(
            sessionID: pending.sessionID, transactionType: .payment, paymentID: pending.paymentID, outcome: outcome,
            amount: euros(amount), tip: euros(tip), transactionReference: 42, settledAt: Self.now,
            bonusPointsEarned: 12, bonusPointsBalance: 12)
        return unsigned.withSignature(try signatureBytes(for: unsigned.signedBytes, with: key ?? terminalKey))
    }
}
