import Crypto
import Dispatch
import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonSettlement
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Synchronization
import Testing

@testable import HorizonRoles

/// The terminal's session protocol as a value, driven by events alone: no radio, no clock, no
/// journal. Each test reads the actions the machine asks its driver to carry out, in order.
@Suite("Session host state machine")
struct SessionHostStateMachineTests {
    static let amount = euros(12_50)
    static let timeout = Duration.seconds(60)
    static let now: UnixTime = 1_800_000_000

    /// A machine with an open session, and the session.
    static func opened() -> (SessionHostStateMachine, HostedSession) {
        var machine = SessionHostStateMachine(executor: AcceptingExecutor(), userDecisionTimeout: timeout)
        let session = hostedSession()
        #expect(machine.start(refusal: nil) == .open)
        _ = machine.opened(session)
        return (machine, session)
    }

    /// A machine whose session offered itself to `wallets` (the first one's offer journaled).
    static func offered(to wallets: [FakeWallet]) -> (SessionHostStateMachine, HostedSession) {
        var (machine, session) = opened()
        for wallet in wallets {
            let actions = machine.hello(hello(session), from: wallet)
            if case .journalOffer? = actions.first { _ = machine.offerJournaled(for: wallet, session: session.id) }
        }
        return (machine, session)
    }

    @Test func startOpensOneSessionAtATime() {
        var machine = SessionHostStateMachine(executor: AcceptingExecutor(), userDecisionTimeout: Self.timeout)
        #expect(machine.start(refusal: .invalidAmount) == .refused)
        #expect(machine.error == .invalidAmount)
        #expect(machine.state == .idle)
        #expect(machine.start(refusal: nil) == .open)
        // Another start while the offer is being signed and advertised.
        #expect(machine.start(refusal: nil) == .refused)
        #expect(machine.error == .alreadyRunning)
        let session = Self.hostedSession()
        #expect(
            names(machine.opened(session)) == ["register", "log session opened", "state waiting for a wallet"])
        #expect(machine.state == .waitingForWallet)
        #expect(machine.error == nil)
        // Running: refused, whatever the terms, and the running session is untouched.
        #expect(machine.start(refusal: .invalidAmount) == .refused)
        #expect(machine.error == .alreadyRunning)
        #expect(machine.session?.id == session.id)
    }

    @Test func aFailedOpeningLeavesNoSession() {
        var machine = SessionHostStateMachine(executor: AcceptingExecutor(), userDecisionTimeout: Self.timeout)
        #expect(machine.start(refusal: nil) == .open)
        machine.openFailed(.radio(.adapterUnavailable(.poweredOff)))
        #expect(machine.error == .radio(.adapterUnavailable(.poweredOff)))
        #expect(machine.session == nil)
        #expect(machine.start(refusal: nil) == .open)
    }

    @Test func theOfferIsJournaledOncePerSessionAndEveryWalletGetsIt() {
        var (machine, session) = Self.opened()
        let first = FakeWallet(1)
        let second = FakeWallet(2)
        #expect(names(machine.hello(Self.hello(session), from: first)) == ["journal offer for 1"])
        #expect(
            names(machine.offerJournaled(for: first, session: session.id)) == [
                "state wallet connected", "send offer to 1", "state awaiting the customer's decision",
                "notice offered", "log offer sent", "arm decision timer",
            ])
        // A second wallet: the offer without a journal row, the state as it is, and its own full
        // decision time (the timer armed afresh).
        #expect(
            names(machine.hello(Self.hello(session), from: second)) == [
                "send offer to 2", "notice offered", "log offer sent", "arm decision timer",
            ])
        #expect(machine.state == .awaitingUserDecision)
        #expect(machine.session?.wallets.keys.sorted() == [1, 2])
    }

    @Test func anOfferThatCouldNotBeJournaledIsNotSentAndTheNextHelloTriesAgain() {
        var (machine, session) = Self.opened()
        let wallet = FakeWallet(1)
        _ = machine.hello(Self.hello(session), from: wallet)
        let refused = machine.offerNotJournaled(for: wallet, session: session.id, reason: "disk full")
        #expect(names(refused) == ["log the offer could not be journaled; not sent", "send error internalError to 1"])
        #expect(machine.session?.wallets.isEmpty == true)
        #expect(machine.state == .waitingForWallet)
        #expect(names(machine.hello(Self.hello(session), from: FakeWallet(2))) == ["journal offer for 2"])
    }

    @Test func helloIsRefusedForAnotherTypeOrAnotherSession() {
        var (machine, session) = Self.opened()
        let wallet = FakeWallet(1)
        let redemption = Hello(sessionID: session.id, transactionType: .bonusRedemption, sessionKey: Self.walletKey)
        #expect(
            names(machine.hello(redemption, from: wallet)) == ["send error protocolViolation to 1", "close 1 later"])
        let elsewhere = Hello(
            sessionID: SessionID(rawValue: 99) ?? session.id, transactionType: .payment, sessionKey: Self.walletKey)
        #expect(names(machine.hello(elsewhere, from: wallet)) == ["send error sessionNotFound to 1", "close 1 later"])
        #expect(machine.session?.wallets.isEmpty == true)
    }

    @Test func theFirstValidRequestTakesTheSessionAndASecondIsRefused() throws {
        let first = FakeWallet(1)
        let second = FakeWallet(2)
        var (machine, session) = Self.offered(to: [first, second])
        let taking = machine.request(try Self.confirm(session, id: 1), from: first, now: Self.now)
        #expect(
            names(taking) == [
                "proved by 1", "log executing the request", "state executing", "execute for 1",
            ])
        #expect(machine.state == .acquiringPaymentExecution)
        #expect(machine.session?.executing == 1)
        let late = machine.request(try Self.confirm(session, id: 2), from: second, now: Self.now)
        #expect(names(late) == ["send error sessionTaken to 2"])
        #expect(sentErrors(late).first?.paymentID == (try Self.paymentID(2)))
        // A Hello still gets the offer (the executing request may yet be declined), and its
        // own decision time; the approval then tells it the session is over.
        #expect(
            names(machine.hello(Self.hello(session), from: FakeWallet(3))) == [
                "send offer to 3", "notice offered", "log offer sent", "arm decision timer",
            ])
        #expect(machine.state == .acquiringPaymentExecution)
        let done = machine.executed(try Self.approved(session, id: 1), session: session.id)
        #expect(names(done).contains("send cancel to 3") && names(done).contains("send cancel to 2"))
        #expect(machine.state == .completed)
    }

    /// A stranger's request executing (a key nobody registered, declined in a moment) does not
    /// hide the sale: the customer arriving meanwhile is offered it, and pays after the decline.
    @Test func aCustomerArrivingWhileAStrangersRequestExecutesFindsTheSale() throws {
        let stranger = FakeWallet(1)
        let customer = FakeWallet(2)
        var (machine, session) = Self.offered(to: [stranger])
        _ = machine.request(try Self.confirm(session, id: 1), from: stranger, now: Self.now)
        #expect(machine.state == .acquiringPaymentExecution)
        let arriving = machine.hello(Self.hello(session), from: customer)
        #expect(names(arriving).first == "send offer to 2")
        let declined = try Self.settled(
            session, id: 1, outcome: .declined(code: .unknownWallet, reason: "not registered"))
        _ = machine.executed(declined, session: session.id)
        #expect(machine.state == .awaitingUserDecision)
        #expect(machine.session?.wallets.keys.sorted() == [2])
        _ = machine.request(try Self.confirm(session, id: 2), from: customer, now: Self.now)
        _ = machine.executed(try Self.approved(session, id: 2), session: session.id)
        #expect(machine.state == .completed)
        #expect(machine.result?.paymentID == (try Self.paymentID(2)))
    }

    @Test func aRequestIsRefusedWithoutHelloOrWhenItDoesNotCheckOut() throws {
        let wallet = FakeWallet(1)
        var (machine, session) = Self.offered(to: [wallet])
        let stranger = machine.request(try Self.confirm(session, id: 1), from: FakeWallet(9), now: Self.now)
        #expect(names(stranger) == ["send error protocolViolation to 9"])
        let wrong = machine.request(try Self.confirm(session, id: 2, amount: euros(1)), from: wallet, now: Self.now)
        #expect(names(wrong) == ["log request refused", "send error invalidAmount to 1"])
        #expect(machine.state == .awaitingUserDecision)
    }

    @Test func aWalletDeclinesForItselfOnly() {
        let first = FakeWallet(1)
        let second = FakeWallet(2)
        var (machine, session) = Self.offered(to: [first, second])
        let cancel = Cancel(sessionID: session.id, reason: .userDeclined)
        #expect(
            names(machine.walletCancelled(cancel, by: second)) == [
                "close 2 later", "log a wallet declined", "notice declined",
            ])
        #expect(machine.state == .awaitingUserDecision)
        // A decline from a connection not in the session does nothing.
        #expect(machine.walletCancelled(cancel, by: second).isEmpty)
        #expect(
            names(machine.walletCancelled(cancel, by: first)) == [
                "close 1 later", "log a wallet declined", "notice declined", "state waiting for a wallet",
            ])
        #expect(machine.state == .waitingForWallet)
        #expect(machine.error == nil)
    }

    @Test func aWalletsDecisionTimeEndsOnlyItsOwnAttempt() throws {
        let wallet = FakeWallet(1)
        var (machine, session) = Self.offered(to: [wallet])
        let timer = ScheduledAction()
        #expect(machine.decisionTimerArmed(timer, session: session.id, wallet: 1, generation: 1).isEmpty)
        let ended = machine.decisionTimedOut(session: session.id, wallet: 1, generation: 1)
        #expect(
            names(ended) == [
                "send cancel to 1", "close 1 later", "log a wallet did not decide in time; the session stays open",
                "notice decision timed out", "state waiting for a wallet",
            ])
        // The sale waits for a wallet, as before anyone came: the wallet may have been anyone's.
        #expect(machine.error == nil)
        #expect(machine.state == .waitingForWallet)
        // Its late request is told its time ran out, and nothing executes.
        let late = machine.request(try Self.confirm(session, id: 1), from: wallet, now: Self.now)
        #expect(names(late) == ["send error timedOut to 1"])
        // Executing: the executing wallet's timer does nothing.
        var (executing, other) = Self.offered(to: [wallet])
        _ = executing.request(try Self.confirm(other, id: 1), from: wallet, now: Self.now)
        #expect(executing.decisionTimedOut(session: other.id, wallet: 1, generation: 1).isEmpty)
        #expect(executing.state == .acquiringPaymentExecution)
    }

    @Test func aTimerArmedAfterTheSessionEndedIsCancelled() {
        var (machine, session) = Self.offered(to: [FakeWallet(1)])
        _ = machine.cancel()
        #expect(
            names(machine.decisionTimerArmed(ScheduledAction(), session: session.id, wallet: 1, generation: 1)) == [
                "cancel timer"
            ])
    }

    @Test func theLastWalletLeavingStopsItsDecisionTime() {
        let rogue = FakeWallet(1)
        var (machine, session) = Self.offered(to: [rogue])
        let timer = ScheduledAction()
        #expect(machine.decisionTimerArmed(timer, session: session.id, wallet: 1, generation: 1).isEmpty)
        let cancel = Cancel(sessionID: session.id, reason: .userDeclined)
        #expect(
            names(machine.walletCancelled(cancel, by: rogue)).suffix(2) == [
                "cancel timer", "state waiting for a wallet",
            ])
        #expect(machine.state == .waitingForWallet)
        // Its timer firing anyway ends nothing: the sale waits for a wallet, as before anyone came.
        #expect(machine.decisionTimedOut(session: session.id, wallet: 1, generation: 1).isEmpty)
        #expect(machine.state == .waitingForWallet)
        // The same for a wallet whose connection just ends.
        let walker = FakeWallet(2)
        var (other, otherSession) = Self.offered(to: [walker])
        #expect(
            other.decisionTimerArmed(ScheduledAction(), session: otherSession.id, wallet: 2, generation: 1).isEmpty)
        #expect(names(other.connectionEnded(walker)) == ["cancel timer", "state waiting for a wallet"])
        #expect(other.decisionTimedOut(session: otherSession.id, wallet: 2, generation: 1).isEmpty)
        #expect(other.error == nil)
    }

    /// A squatter's Hello, held open, runs only its own clock: the customer who comes later has
    /// the full decision time from its own offer, and the squatter's running out ends nothing
    /// but the squatter's attempt.
    @Test func eachWalletHasItsOwnDecisionTimeAndASquattersEndsOnlyItsOwn() {
        let squatter = FakeWallet(1)
        let customer = FakeWallet(2)
        var (machine, session) = Self.offered(to: [squatter])
        #expect(machine.decisionTimerArmed(ScheduledAction(), session: session.id, wallet: 1, generation: 1).isEmpty)
        // The customer's offer, later: its own timer; the squatter's is not touched.
        let actions = machine.hello(Self.hello(session), from: customer)
        #expect(!names(actions).contains("cancel timer"))
        #expect(names(actions).contains("arm decision timer"))
        #expect(machine.decisionTimerArmed(ScheduledAction(), session: session.id, wallet: 2, generation: 2).isEmpty)
        // The squatter's time runs out: its attempt ends, the customer still decides.
        let squatterOut = machine.decisionTimedOut(session: session.id, wallet: 1, generation: 1)
        #expect(names(squatterOut).contains("send cancel to 1"))
        #expect(!names(squatterOut).contains("send cancel to 2"))
        #expect(machine.state == .awaitingUserDecision)
        #expect(machine.session?.wallets.keys.sorted() == [2])
        // A wallet's hello again re-arms its own timer; the older arming does nothing.
        let again = machine.hello(Self.hello(session), from: customer)
        #expect(names(again).contains("cancel timer"))
        #expect(machine.decisionTimedOut(session: session.id, wallet: 2, generation: 2).isEmpty)
        #expect(machine.state == .awaitingUserDecision)
        #expect(!machine.decisionTimedOut(session: session.id, wallet: 2, generation: 3).isEmpty)
        #expect(machine.state == .waitingForWallet)
        #expect(machine.error == nil)
    }

    @Test func cancelTellsTheWalletsAndIsIgnoredWhileARequestExecutes() throws {
        let wallet = FakeWallet(1)
        let onlooker = FakeWallet(2)
        var (machine, session) = Self.offered(to: [wallet, onlooker])
        var cancelling = machine
        let cancelled = cancelling.cancel()
        #expect(names(cancelled).filter { $0.hasPrefix("send") }.sorted() == ["send cancel to 1", "send cancel to 2"])
        #expect(cancelling.isCancelled)
        #expect(cancelling.error == .cancelled)
        #expect(cancelling.state == .completedWithError)
        #expect(cancelling.cancel().isEmpty)

        // Once a request took the session it may be executing: a cancel must not end the session
        // (it would report "not charged"); the outcome does.
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet, now: Self.now)
        #expect(machine.cancel().isEmpty)
        #expect(!machine.isCancelled)
        #expect(machine.state == .acquiringPaymentExecution)
        let done = machine.executed(try Self.approved(session, id: 1), session: session.id)
        #expect(names(done).contains("send cancel to 2"))
        #expect(machine.state == .completed)
        #expect(machine.error == nil)
    }

    @Test func anApprovalIsAnsweredAndCompletesTheSession() throws {
        let wallet = FakeWallet(1)
        var (machine, session) = Self.offered(to: [wallet])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet, now: Self.now)
        let outcome = try Self.approved(session, id: 1)
        let actions = machine.executed(outcome, session: session.id)
        #expect(
            names(actions) == [
                "log settled", "session executed by 1", "send receipt to 1", "close 1 later", "release",
                "log session ended", "state completed", "finished completed",
            ])
        guard case .executed(let settled, _) = outcome else { return }
        #expect(machine.result == settled)
        #expect(finishedSessions(actions).first?.result == settled)
        // Only once: a second report of the same outcome does nothing.
        #expect(machine.executed(outcome, session: session.id).isEmpty)
    }

    /// A stranger's confirmation, signed by a key nobody registered, is declined by the server:
    /// that ends the stranger's attempt only; the customer still deciding pays afterwards.
    @Test func aDeclineEndsOnlyThatWalletsAttempt() throws {
        let stranger = FakeWallet(1)
        let customer = FakeWallet(2)
        var (machine, session) = Self.offered(to: [stranger, customer])
        _ = machine.request(try Self.confirm(session, id: 1), from: stranger, now: Self.now)
        let outcome = try Self.settled(
            session, id: 1, outcome: .declined(code: .unknownWallet, reason: "not registered"))
        let actions = machine.executed(outcome, session: session.id)
        #expect(
            names(actions) == [
                "log settled", "session executed by 1", "send receipt to 1", "close 1 later",
                "log that wallet's attempt is over; the session stays open", "notice request declined",
                "state awaiting the customer's decision",
            ])
        #expect(finishedSessions(actions).isEmpty)
        #expect(machine.error == nil)
        #expect(machine.state == .awaitingUserDecision)
        #expect(machine.session?.executing == nil)
        #expect(machine.session?.wallets.keys.sorted() == [2])
        // The stranger cannot try again on this connection; the customer pays.
        #expect(
            names(machine.request(try Self.confirm(session, id: 3), from: stranger, now: Self.now)) == [
                "send error protocolViolation to 1"
            ])
        _ = machine.request(try Self.confirm(session, id: 2), from: customer, now: Self.now)
        #expect(machine.state == .acquiringPaymentExecution)
        _ = machine.executed(try Self.approved(session, id: 2), session: session.id)
        #expect(machine.state == .completed)
        #expect(machine.result?.paymentID == (try Self.paymentID(2)))

        // Alone, the declined wallet leaves the session waiting for a wallet, as before it came.
        let alone = FakeWallet(3)
        var (single, singleSession) = Self.offered(to: [alone])
        _ = single.request(try Self.confirm(singleSession, id: 1), from: alone, now: Self.now)
        let declined = single.executed(
            try Self.settled(singleSession, id: 1, outcome: .declined(code: .insufficientFunds, reason: "not enough")),
            session: singleSession.id)
        #expect(names(declined).last == "state waiting for a wallet")
        #expect(single.state == .waitingForWallet)
        #expect(single.error == nil)
    }

    @Test func theSettledLineShowsTheOutcomeAsInterpolationWould() {
        // Written out by hand (interpolating the enum reflects on it, for every payment, whether
        // or not anything logs); the text stays what interpolation gave.
        let outcomes: [SettlementOutcome] = [
            .approved(reference: 7, bonusPointsEarned: 1, bonusPointsBalance: -2),
            .declined(code: .insufficientFunds, reason: "not \"enough\"\n"),
        ]
        for outcome in outcomes {
            #expect(outcome.logText == "\(outcome)")
        }
    }

    @Test func aRefusalByTheProcessorEndsOnlyThatWalletsAttempt() throws {
        let wallet = FakeWallet(1)
        var (machine, session) = Self.offered(to: [wallet])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet, now: Self.now)
        let refusal = ErrorMessage(
            code: .duplicatePaymentConflict, message: "conflict", paymentID: try Self.paymentID(1))
        let actions = machine.executed(.refused(refusal, reason: "conflict"), session: session.id)
        #expect(
            names(actions).prefix(3) == [
                "log refused by the processor; nothing was executed", "send error duplicatePaymentConflict to 1",
                "close 1 later",
            ])
        #expect(!names(actions).contains("session executed by 1"))
        #expect(!names(actions).contains("release"))
        #expect(machine.error == nil)
        #expect(machine.state == .waitingForWallet)
        #expect(machine.result == nil)
    }

    @Test func anUndecidedOutcomeIsNeverReportedAsNotCharged() throws {
        let wallet = FakeWallet(1)
        var (machine, session) = Self.offered(to: [wallet])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet, now: Self.now)
        let open = ErrorMessage(code: .internalError, message: "ask again later")
        let actions = machine.executed(.undecided(open, reason: "journal full"), session: session.id)
        #expect(sentErrors(actions).first?.paymentID == nil)
        #expect(machine.error == .outcomeUnknown("journal full"))
        #expect(machine.state == .completedWithError)
    }

    @Test func anUnreachableServerIsSaidSoAndTheRequestStaysOpen() throws {
        let wallet = FakeWallet(1)
        var (machine, session) = Self.offered(to: [wallet])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet, now: Self.now)
        let open = ErrorMessage(code: .internalError, message: "ask again later")
        let actions = machine.executed(
            .undecided(open, reason: "the server cannot be reached", serverUnreachable: true), session: session.id)
        // The wallet keeps it pending (no id in the error); the cashier hears "pending", not
        // "could not be recorded", and nothing says it was not charged.
        #expect(sentErrors(actions).first?.paymentID == nil)
        #expect(machine.error == .serverUnreachable("the server cannot be reached"))
        #expect(
            machine.error?.humanized(noun: "payment").hasPrefix("The payment is pending: the server cannot be reached.")
                == true)
        #expect(names(actions).first == "log the server did not answer; pending, settled at the next recovery")
        #expect(machine.state == .completedWithError)
    }

    @Test func stopReturnsToIdleAndLetsTheAnsweredWalletLinger() throws {
        let wallet = FakeWallet(1)
        let onlooker = FakeWallet(2)
        var (machine, session) = Self.offered(to: [wallet, onlooker])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet, now: Self.now)
        _ = machine.executed(try Self.approved(session, id: 1), session: session.id)
        let stopping = machine.stop()
        let stopped = try #require(stopping)
        // The wallets in any order (a dictionary's).
        #expect(names(stopped).first == "release")
        #expect(names(stopped).dropFirst().dropLast().sorted() == ["close 1 later", "close 2"])
        #expect(names(stopped).last == "state idle")
        #expect(machine.state == .idle)
        #expect(machine.session == nil)
        #expect(machine.stop() == nil)
        #expect(machine.start(refusal: nil) == .open)
    }

    @Test func anOutcomeAfterAStopStillReachesTheWalletAndTheFacade() throws {
        let wallet = FakeWallet(1)
        var (machine, session) = Self.offered(to: [wallet])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet, now: Self.now)
        _ = machine.stop()
        let actions = machine.executed(try Self.approved(session, id: 1), session: session.id)
        #expect(names(actions).contains("send receipt to 1"))
        #expect(names(actions).last == "finished completed")
        #expect(machine.state == .idle)
    }

    @Test func aConnectionThatEndsLeavesTheSessionUnlessItsRequestExecutes() throws {
        let wallet = FakeWallet(1)
        var (machine, session) = Self.offered(to: [wallet])
        #expect(machine.isAwaitingWallet(1))
        #expect(names(machine.connectionEnded(wallet)) == ["state waiting for a wallet"])
        #expect(!machine.isAwaitingWallet(1))
        let again = FakeWallet(2)
        _ = machine.hello(Self.hello(session), from: again)
        _ = machine.request(try Self.confirm(session, id: 1), from: again, now: Self.now)
        #expect(machine.connectionEnded(again).isEmpty)
        #expect(machine.isAwaitingWallet(2))
    }

    // MARK: Fixtures

    static let walletKey: PublicKeyBytes =
        (try? PublicKeyBytes(bytes: [0x04] + [UInt8](repeating: 7, count: 64)))
        ?? WalletIdentity().publicKey

    static func hostedSession() -> HostedSession {
        var rng = SystemRandomNumberGenerator()
        let id = SessionID(rawValue: 42) ?? SessionID.random(using: &rng)
        let terms = OfferTerms(amount: amount, registerUser: "Ana", item: "", quantity: 0)
        let offer = try? Offer(
            sessionID: id, transactionType: .payment, amount: amount, registerUser: "Ana",
            merchantPrograms: MerchantPrograms(), offerNonce: Nonce.random(using: &rng), expiresAt: now + 120)
        guard let offer, let digest = try? DigestBytes(bytes: [UInt8](repeating: 1, count: 32)) else {
            preconditionFailure("the fixtures are valid")
        }
        return HostedSession(id: id, terms: terms, offer: offer, offerDigest: digest, advertising: nil)
    }

    static func hello(_ session: HostedSession) -> Hello {
        Hello(sessionID: session.id, transactionType: .payment, sessionKey: walletKey)
    }

    static func paymentID(_ n: UInt8) throws -> PaymentID { try PaymentID(bytes: [UInt8](repeating: n, count: 16)) }

    static func confirm(_ session: HostedSession, id: UInt8, amount: Money = amount) throws -> SessionMessage {
        var rng = SystemRandomNumberGenerator()
        return .confirm(
            try Confirm(
                sessionID: session.id, terminalKeyDigest: session.offerDigest, walletKey: walletKey,
                offerDigest: session.offerDigest, amount: amount, tip: euros(0), paymentID: try paymentID(id),
                walletNonce: Nonce.random(using: &rng), expiresAt: now + 60))
    }

    static func approved(_ session: HostedSession, id: UInt8) throws -> JournaledOutcome {
        try settled(session, id: id, outcome: .approved(reference: 7, bonusPointsEarned: 1, bonusPointsBalance: 1))
    }

    static func settled(_ session: HostedSession, id: UInt8, outcome: SettlementOutcome) throws -> JournaledOutcome {
        let result = SettlementResult(
            paymentID: try paymentID(id), sessionID: session.id, amount: amount, tip: euros(0), outcome: outcome,
            settledAt: now)
        let receiptOutcome: ReceiptOutcome
        switch outcome {
        case .approved: receiptOutcome = .approved
        case .declined(let code, _): receiptOutcome = .declined(code)
        }
        let receipt = try Receipt(
            sessionID: session.id, transactionType: .payment, paymentID: result.paymentID, outcome: receiptOutcome,
            amount: amount, tip: euros(0), transactionReference: 7, settledAt: now, bonusPointsEarned: 0,
            bonusPointsBalance: 0)
        return .executed(result, answer: .receipt(receipt))
    }
}

private func names(_ actions: [SessionHostAction]) -> [String] { actions.map(\.description) }

private func sentErrors(_ actions: [SessionHostAction]) -> [ErrorMessage] {
    actions.compactMap { if case .send(.error(let error), _) = $0 { error } else { nil } }
}

private func finishedSessions(_ actions: [SessionHostAction]) -> [FinishedSession] {
    actions.compactMap { if case .finished(let finished) = $0 { finished } else { nil } }
}

/// A connection as the machine sees it; the machine never calls its I/O (the driver does).
final class FakeWallet: SessionWallet {
    let id: Int
    let confirmationCode: ConfirmationCode
    /// The key its Hello proved, for the relay's budgets (none by default).
    let sessionKey: PublicKeyBytes?

    init(_ id: Int, sessionKey: PublicKeyBytes? = nil) {
        self.id = id
        self.sessionKey = sessionKey
        confirmationCode = ConfirmationCode(derivedBytes: [0, 0, 0, UInt8(truncatingIfNeeded: id)])
    }

    func send(_ message: SessionMessage) {}
    func close() {}
    func proved(_ id: PaymentID) {}
}

/// Accepts a Confirm for the offered amount, refuses any other amount; never executes (the
/// machine does not).
struct AcceptingExecutor: SessionExecutor {
    var transactionType: TransactionType { .payment }

    func check(_ message: SessionMessage, session: HostedSession, now: UnixTime) -> RequestCheck {
        guard case .confirm(let confirm) = message else { return .unexpected }
        guard confirm.amount == session.terms.amount else {
            return .refused(ErrorMessage(code: .invalidAmount, message: "not the offer", paymentID: confirm.paymentID))
        }
        guard let keyID = try? TerminalKeyID(bytes: [UInt8](repeating: 3, count: 8)) else { return .unexpected }
        return .accepted(
            .payment(
                SettlementRequest(
                    paymentID: confirm.paymentID, sessionID: session.id, walletKey: confirm.walletKey,
                    terminalKeyID: keyID, amount: confirm.amount, tip: confirm.tip,
                    registerUser: session.terms.registerUser, contentDigest: [])))
    }

    func execute(_ request: JournalRequest, at now: UnixTime) async throws(ProcessorError) -> SettlementResult {
        throw .storage("the state machine never executes")
    }
}
