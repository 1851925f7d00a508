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
import Logging
import Synchronization
import Testing

@testable import HorizonRoles

/// The terminal's session protocol as a value, driven by events alone: no radio, no clock, no
/// journal. Each test compares the actions the machine asks its driver to carry out, in order, with
/// `==` (log lines apart, which `logs` reads).
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

    /// A machine whose session offered itself to `wallets` (the first one's offer journaled);
    /// wallet n's decision timer is the n-th arming.
    static func offered(to wallets: [SessionWallet]) -> (SessionHostStateMachine, HostedSession) {
        var (machine, session) = opened()
        for wallet in wallets {
            let actions = machine.hello(hello(session), from: wallet)
            if case .journalOffer? = actions.first { _ = machine.offerJournaled(for: wallet, session: session.id) }
        }
        return (machine, session)
    }

    /// The actions an offer to `wallet` gives once the session awaits a decision.
    static func offerActions(_ session: HostedSession, to wallet: SessionWallet, generation: Int)
        -> [SessionHostAction]
    {
        [
            .send(.offer(session.offer), to: wallet.id), .notice(.offered(wallet.confirmationCode)),
            .armDecisionTimer(session.id, wallet: wallet.id, after: timeout, generation: generation),
        ]
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
        let opened = machine.opened(session)
        #expect(opened.withoutLogs == [.register(session.id), .setState(.waitingForWallet)])
        #expect(opened.logs == ["session opened"])
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

    @Test func anOpeningStoppedBeforeItsAdvertisementIsUpDoesNotOpen() throws {
        var machine = SessionHostStateMachine(executor: AcceptingExecutor(), userDecisionTimeout: Self.timeout)
        #expect(machine.start(refusal: nil) == .open)
        let abandoned = try #require(machine.opening)
        // Stopping counts as stopping something (the opening), though no state changes.
        #expect(machine.stop() == [])
        #expect(machine.advertised(Self.hostedSession(), opening: abandoned) == nil)
        #expect(machine.session == nil)
        #expect(machine.state == .idle)
        // A failure that comes late for it changes nothing either.
        #expect(machine.openFailed(.radio(.linkClosed), opening: abandoned, announce: true) == [])
        #expect(machine.error == nil)
        // Nor does a late answer open a newer opening's session.
        #expect(machine.start(refusal: nil) == .open)
        #expect(machine.advertised(Self.hostedSession(), opening: abandoned) == nil)
        let session = Self.hostedSession()
        let current = try #require(machine.opening)
        #expect(
            machine.advertised(session, opening: current)?.withoutLogs == [
                .register(session.id), .setState(.waitingForWallet),
            ])
    }

    @Test func anOpeningCancelledBeforeItsAdvertisementIsUpEndsCancelled() throws {
        var machine = SessionHostStateMachine(executor: AcceptingExecutor(), userDecisionTimeout: Self.timeout)
        #expect(machine.start(refusal: nil) == .open)
        let cancelled = try #require(machine.opening)
        #expect(machine.cancel() == [.setState(.completedWithError)])
        #expect(machine.isCancelled)
        #expect(machine.error == .cancelled)
        #expect(machine.advertised(Self.hostedSession(), opening: cancelled) == nil)
        #expect(machine.state == .completedWithError)
        #expect(machine.stop() == [.setState(.idle)])
    }

    @Test func aRadioFailureAfterStartReturnedEndsTheAttempt() throws {
        var machine = SessionHostStateMachine(executor: AcceptingExecutor(), userDecisionTimeout: Self.timeout)
        #expect(machine.start(refusal: nil) == .open)
        let opening = try #require(machine.opening)
        let failure = HostError.radio(.backend(name: "org.bluez.Error.Failed", message: "no reply"))
        #expect(machine.openFailed(failure, opening: opening, announce: true) == [.setState(.completedWithError)])
        #expect(machine.error == failure)
        #expect(machine.failedOpening == opening)
        #expect(machine.session == nil)
        #expect(machine.start(refusal: nil) == .open)
    }

    @Test func theOfferIsJournaledOncePerSessionAndEveryWalletGetsIt() {
        var (machine, session) = Self.opened()
        let first = wallet(1)
        let second = wallet(2)
        #expect(
            machine.hello(Self.hello(session), from: first) == [
                .journalOffer(session.offer, walletKey: Self.walletKey, for: first)
            ])
        let sent = machine.offerJournaled(for: first, session: session.id)
        #expect(
            sent.withoutLogs == [
                .setState(.walletConnected), .send(.offer(session.offer), to: 1), .setState(.awaitingUserDecision),
                .notice(.offered(first.confirmationCode)),
                .armDecisionTimer(session.id, wallet: 1, after: Self.timeout, generation: 1),
            ])
        #expect(sent.logs == ["offer sent"])
        // A second wallet: the offer without a journal row, the state as it is, and its own full
        // decision time (the timer armed afresh).
        #expect(
            machine.hello(Self.hello(session), from: second).withoutLogs
                == Self.offerActions(session, to: second, generation: 2))
        #expect(machine.state == .awaitingUserDecision)
        #expect(machine.session?.wallets.keys.sorted() == [1, 2])
        #expect(machine.session?.wallets[2] == OfferedWallet(wallet: second, sessionKey: Self.walletKey))
    }

    @Test func anOfferThatCouldNotBeJournaledIsNotSentAndTheNextHelloTriesAgain() {
        var (machine, session) = Self.opened()
        _ = machine.hello(Self.hello(session), from: wallet(1))
        let refused = machine.offerNotJournaled(for: wallet(1), session: session.id, reason: "disk full")
        #expect(
            refused.withoutLogs == [
                .send(
                    .error(ErrorMessage(code: .internalError, message: "the terminal cannot record the session now")),
                    to: 1)
            ])
        #expect(refused.logs == ["the offer could not be journaled; not sent"])
        #expect(machine.session?.wallets.isEmpty == true)
        #expect(machine.state == .waitingForWallet)
        #expect(
            machine.hello(Self.hello(session), from: wallet(2)) == [
                .journalOffer(session.offer, walletKey: Self.walletKey, for: wallet(2))
            ])
    }

    @Test func helloIsRefusedForAnotherTypeOrAnotherSession() {
        var (machine, session) = Self.opened()
        let redemption = Hello(sessionID: session.id, transactionType: .bonusRedemption, sessionKey: Self.walletKey)
        #expect(
            machine.hello(redemption, from: wallet(1)) == [
                .send(
                    .error(
                        ErrorMessage(code: .protocolViolation, message: "this session is a \(TransactionType.payment)")),
                    to: 1),
                .closeLater(1),
            ])
        let elsewhere = Hello(
            sessionID: SessionID(rawValue: 99) ?? session.id, transactionType: .payment, sessionKey: Self.walletKey)
        #expect(
            machine.hello(elsewhere, from: wallet(1)) == [
                .send(.error(ErrorMessage(code: .sessionNotFound, message: "this session is over")), to: 1),
                .closeLater(1),
            ])
        #expect(machine.session?.wallets.isEmpty == true)
    }

    @Test func theFirstValidRequestTakesTheSessionAndASecondIsRefused() throws {
        let first = wallet(1)
        let second = wallet(2)
        var (machine, session) = Self.offered(to: [first, second])
        let confirm = try Self.confirm(session, id: 1)
        let taking = machine.request(confirm, from: first, now: Self.now)
        #expect(
            taking.withoutLogs == [
                .cancelDecisionTimer(session.id, wallet: 1, generation: 1), .proved(try Self.paymentID(1), by: 1),
                .setState(.acquiringPaymentExecution),
                .execute(try Self.accepted(confirm, in: session), by: first, session: session.id, at: Self.now),
            ])
        #expect(taking.logs == ["executing the request"])
        #expect(machine.state == .acquiringPaymentExecution)
        #expect(machine.session?.executing == 1)
        #expect(
            machine.request(try Self.confirm(session, id: 2), from: second, now: Self.now) == [
                .send(
                    .error(
                        ErrorMessage(
                            code: .sessionTaken, message: "another request is already being executed in this session",
                            paymentID: try Self.paymentID(2))), to: 2)
            ])
        // A Hello still gets the offer (the executing request may yet be declined), and its
        // own decision time; the approval then tells it the session is over.
        #expect(
            machine.hello(Self.hello(session), from: wallet(3)).withoutLogs
                == Self.offerActions(session, to: wallet(3), generation: 3))
        #expect(machine.state == .acquiringPaymentExecution)
        let done = machine.executed(try Self.approved(session, id: 1), session: session.id)
        let over = SessionMessage.cancel(
            Cancel(sessionID: session.id, reason: .terminalCancelled, message: "the session is over"))
        #expect(done.contains(.send(over, to: 2)) && done.contains(.send(over, to: 3)))
        #expect(!done.contains(.send(over, to: 1)))
        #expect(machine.state == .completed)
    }

    /// A stranger's request executing (a key nobody registered, declined in a moment) does not
    /// hide the sale: the customer arriving meanwhile is offered it, and pays after the decline.
    @Test func aCustomerArrivingWhileAStrangersRequestExecutesFindsTheSale() throws {
        let stranger = wallet(1)
        let customer = wallet(2)
        var (machine, session) = Self.offered(to: [stranger])
        _ = machine.request(try Self.confirm(session, id: 1), from: stranger, now: Self.now)
        #expect(machine.state == .acquiringPaymentExecution)
        let arriving = machine.hello(Self.hello(session), from: customer)
        #expect(arriving.first == .send(.offer(session.offer), to: 2))
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
        var (machine, session) = Self.offered(to: [wallet(1)])
        #expect(
            machine.request(try Self.confirm(session, id: 1), from: wallet(9), now: Self.now) == [
                .send(
                    .error(
                        ErrorMessage(
                            code: .protocolViolation, message: "say hello first; nothing was executed",
                            paymentID: try Self.paymentID(1))), to: 9)
            ])
        let wrong = machine.request(try Self.confirm(session, id: 2, amount: euros(1)), from: wallet(1), now: Self.now)
        #expect(
            wrong.withoutLogs == [
                .send(
                    .error(
                        ErrorMessage(code: .invalidAmount, message: "not the offer", paymentID: try Self.paymentID(2))),
                    to: 1)
            ])
        #expect(wrong.logs == ["request refused"])
        #expect(machine.state == .awaitingUserDecision)
    }

    @Test func aWalletDeclinesForItselfOnly() {
        let first = wallet(1)
        let second = wallet(2)
        var (machine, session) = Self.offered(to: [first, second])
        let cancel = Cancel(sessionID: session.id, reason: .userDeclined)
        let declined = machine.walletCancelled(cancel, by: second)
        #expect(
            declined.withoutLogs == [
                .closeLater(2), .notice(.declined(second.confirmationCode)),
                .cancelDecisionTimer(session.id, wallet: 2, generation: 2),
            ])
        #expect(declined.logs == ["a wallet declined"])
        #expect(machine.state == .awaitingUserDecision)
        // A decline from a connection not in the session does nothing.
        #expect(machine.walletCancelled(cancel, by: second).isEmpty)
        #expect(
            machine.walletCancelled(cancel, by: first).withoutLogs == [
                .closeLater(1), .notice(.declined(first.confirmationCode)),
                .cancelDecisionTimer(session.id, wallet: 1, generation: 1), .setState(.waitingForWallet),
            ])
        #expect(machine.state == .waitingForWallet)
        #expect(machine.error == nil)
    }

    @Test func aWalletsDecisionTimeEndsOnlyItsOwnAttempt() throws {
        let first = wallet(1)
        var (machine, session) = Self.offered(to: [first])
        let ended = machine.decisionTimedOut(session: session.id, wallet: 1, generation: 1)
        #expect(
            ended.withoutLogs == [
                .send(.cancel(Cancel(sessionID: session.id, reason: .timedOut, message: "no decision in time")), to: 1),
                .closeLater(1), .notice(.decisionTimedOut(first.confirmationCode)), .setState(.waitingForWallet),
            ])
        #expect(ended.logs == ["a wallet did not decide in time; the session stays open"])
        // The sale waits for a wallet, as before anyone came: the wallet may have been anyone's.
        #expect(machine.error == nil)
        #expect(machine.state == .waitingForWallet)
        // Its late request is told its time ran out, and nothing executes.
        #expect(
            machine.request(try Self.confirm(session, id: 1), from: first, now: Self.now) == [
                .send(
                    .error(
                        ErrorMessage(
                            code: .timedOut, message: "your decision time ran out; nothing was executed",
                            paymentID: try Self.paymentID(1))), to: 1)
            ])
        // Executing: the executing wallet's timer does nothing.
        var (executing, other) = Self.offered(to: [first])
        _ = executing.request(try Self.confirm(other, id: 1), from: first, now: Self.now)
        #expect(executing.decisionTimedOut(session: other.id, wallet: 1, generation: 1).isEmpty)
        #expect(executing.state == .acquiringPaymentExecution)
    }

    @Test func theSessionsEndReleasesItsTimersAndALateOneDoesNothing() {
        var (machine, session) = Self.offered(to: [wallet(1)])
        #expect(machine.cancel().contains(.release(session.id)))
        #expect(machine.decisionTimedOut(session: session.id, wallet: 1, generation: 1).isEmpty)
        #expect(machine.state == .completedWithError)
    }

    @Test func theLastWalletLeavingStopsItsDecisionTime() {
        let rogue = wallet(1)
        var (machine, session) = Self.offered(to: [rogue])
        let cancel = Cancel(sessionID: session.id, reason: .userDeclined)
        #expect(
            machine.walletCancelled(cancel, by: rogue).suffix(2) == [
                .cancelDecisionTimer(session.id, wallet: 1, generation: 1), .setState(.waitingForWallet),
            ])
        #expect(machine.state == .waitingForWallet)
        // Its timer firing anyway ends nothing: the sale waits for a wallet, as before anyone came.
        #expect(machine.decisionTimedOut(session: session.id, wallet: 1, generation: 1).isEmpty)
        #expect(machine.state == .waitingForWallet)
        // The same for a wallet whose connection just ends.
        let walker = wallet(2)
        var (other, otherSession) = Self.offered(to: [walker])
        #expect(
            other.connectionEnded(walker) == [
                .cancelDecisionTimer(otherSession.id, wallet: 2, generation: 1), .setState(.waitingForWallet),
            ])
        #expect(other.decisionTimedOut(session: otherSession.id, wallet: 2, generation: 1).isEmpty)
        #expect(other.error == nil)
    }

    /// A squatter's Hello, held open, runs only its own clock: the customer who comes later has
    /// the full decision time from its own offer, and the squatter's running out ends nothing
    /// but the squatter's attempt.
    @Test func eachWalletHasItsOwnDecisionTimeAndASquattersEndsOnlyItsOwn() {
        let squatter = wallet(1)
        let customer = wallet(2)
        var (machine, session) = Self.offered(to: [squatter])
        // The customer's offer, later: its own timer; the squatter's is not touched.
        #expect(
            machine.hello(Self.hello(session), from: customer).withoutLogs
                == Self.offerActions(session, to: customer, generation: 2))
        // The squatter's time runs out: its attempt ends, the customer still decides.
        let squatterOut = machine.decisionTimedOut(session: session.id, wallet: 1, generation: 1)
        let timedOut = SessionMessage.cancel(
            Cancel(sessionID: session.id, reason: .timedOut, message: "no decision in time"))
        #expect(squatterOut.contains(.send(timedOut, to: 1)))
        #expect(!squatterOut.contains(.send(timedOut, to: 2)))
        #expect(machine.state == .awaitingUserDecision)
        #expect(machine.session?.wallets.keys.sorted() == [2])
        // A wallet's hello again re-arms its own timer; the older arming does nothing.
        #expect(
            machine.hello(Self.hello(session), from: customer).withoutLogs == [
                .send(.offer(session.offer), to: 2), .notice(.offered(customer.confirmationCode)),
                .cancelDecisionTimer(session.id, wallet: 2, generation: 2),
                .armDecisionTimer(session.id, wallet: 2, after: Self.timeout, generation: 3),
            ])
        #expect(machine.decisionTimedOut(session: session.id, wallet: 2, generation: 2).isEmpty)
        #expect(machine.state == .awaitingUserDecision)
        #expect(!machine.decisionTimedOut(session: session.id, wallet: 2, generation: 3).isEmpty)
        #expect(machine.state == .waitingForWallet)
        #expect(machine.error == nil)
    }

    @Test func cancelTellsTheWalletsAndIsIgnoredWhileARequestExecutes() throws {
        var (machine, session) = Self.offered(to: [wallet(1), wallet(2)])
        var cancelling = machine
        let cancelled = cancelling.cancel()
        let atTheRegister = SessionMessage.cancel(
            Cancel(sessionID: session.id, reason: .terminalCancelled, message: "cancelled at the register"))
        #expect(cancelled.first == .release(session.id))
        #expect(cancelled.contains(.send(atTheRegister, to: 1)) && cancelled.contains(.closeLater(1)))
        #expect(cancelled.contains(.send(atTheRegister, to: 2)) && cancelled.contains(.closeLater(2)))
        #expect(cancelled.withoutLogs.suffix(2).first == .setState(.completedWithError))
        #expect(cancelling.isCancelled)
        #expect(cancelling.error == .cancelled)
        #expect(cancelling.state == .completedWithError)
        #expect(cancelling.cancel().isEmpty)

        // Once a request took the session it may be executing: a cancel must not end the session
        // (it would report "not charged"); the outcome does.
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet(1), now: Self.now)
        #expect(machine.cancel().isEmpty)
        #expect(!machine.isCancelled)
        #expect(machine.state == .acquiringPaymentExecution)
        let done = machine.executed(try Self.approved(session, id: 1), session: session.id)
        #expect(
            done.contains(
                .send(
                    .cancel(Cancel(sessionID: session.id, reason: .terminalCancelled, message: "the session is over")),
                    to: 2)))
        #expect(machine.state == .completed)
        #expect(machine.error == nil)
    }

    @Test func anApprovalIsAnsweredAndCompletesTheSession() throws {
        var (machine, session) = Self.offered(to: [wallet(1)])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet(1), now: Self.now)
        let outcome = try Self.approved(session, id: 1)
        guard case .executed(let settled, let answer) = outcome else { return }
        let actions = machine.executed(outcome, session: session.id)
        #expect(
            actions.withoutLogs.dropLast() == [
                .sessionExecuted(session.id, walletKey: Self.walletKey), .send(answer, to: 1), .closeLater(1),
                .release(session.id), .setState(.completed),
            ])
        #expect(actions.logs == ["settled", "session ended"])
        #expect(machine.result == settled)
        let finished = try #require(finishedSessions(actions).first)
        #expect(finished.result == settled && finished.error == nil && finished.acceptedOffline == nil)
        #expect(finished.session.id == session.id && finished.session.isReleased)
        // Only once: a second report of the same outcome does nothing.
        #expect(machine.executed(outcome, session: session.id).isEmpty)
    }

    /// The session rate counts sessions by the key the wallet proved in its Hello, whatever key
    /// signed the request: that key's session is the one that stops counting.
    @Test func anExecutionNamesTheKeyTheHelloProved() throws {
        var (machine, session) = Self.opened()
        let helloKey = WalletIdentity().publicKey
        let actions = machine.hello(
            Hello(sessionID: session.id, transactionType: .payment, sessionKey: helloKey), from: wallet(1))
        #expect(actions == [.journalOffer(session.offer, walletKey: helloKey, for: wallet(1))])
        _ = machine.offerJournaled(for: wallet(1), session: session.id)
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet(1), now: Self.now)
        let executed = machine.executed(try Self.approved(session, id: 1), session: session.id)
        #expect(executed.contains(.sessionExecuted(session.id, walletKey: helloKey)))
        #expect(!executed.contains(.sessionExecuted(session.id, walletKey: Self.walletKey)))
    }

    /// A stranger's confirmation, signed by a key nobody registered, is declined by the server:
    /// that ends the stranger's attempt only; the customer still deciding pays afterwards.
    @Test func aDeclineEndsOnlyThatWalletsAttempt() throws {
        let stranger = wallet(1)
        let customer = wallet(2)
        var (machine, session) = Self.offered(to: [stranger, customer])
        _ = machine.request(try Self.confirm(session, id: 1), from: stranger, now: Self.now)
        let outcome = try Self.settled(
            session, id: 1, outcome: .declined(code: .unknownWallet, reason: "not registered"))
        guard case .executed(_, let answer) = outcome else { return }
        let actions = machine.executed(outcome, session: session.id)
        #expect(
            actions.withoutLogs == [
                .sessionExecuted(session.id, walletKey: Self.walletKey), .send(answer, to: 1), .closeLater(1),
                .notice(.requestDeclined(stranger.confirmationCode, code: .unknownWallet, reason: "not registered")),
                .setState(.awaitingUserDecision),
            ])
        #expect(actions.logs == ["settled", "that wallet's attempt is over; the session stays open"])
        #expect(finishedSessions(actions).isEmpty)
        #expect(machine.error == nil)
        #expect(machine.state == .awaitingUserDecision)
        #expect(machine.session?.executing == nil)
        #expect(machine.session?.wallets.keys.sorted() == [2])
        // The stranger cannot try again on this connection; the customer pays.
        #expect(
            machine.request(try Self.confirm(session, id: 3), from: stranger, now: Self.now) == [
                .send(
                    .error(
                        ErrorMessage(
                            code: .protocolViolation, message: "say hello first; nothing was executed",
                            paymentID: try Self.paymentID(3))), to: 1)
            ])
        _ = machine.request(try Self.confirm(session, id: 2), from: customer, now: Self.now)
        #expect(machine.state == .acquiringPaymentExecution)
        _ = machine.executed(try Self.approved(session, id: 2), session: session.id)
        #expect(machine.state == .completed)
        #expect(machine.result?.paymentID == (try Self.paymentID(2)))

        // Alone, the declined wallet leaves the session waiting for a wallet, as before it came.
        var (single, singleSession) = Self.offered(to: [wallet(3)])
        _ = single.request(try Self.confirm(singleSession, id: 1), from: wallet(3), now: Self.now)
        let declined = single.executed(
            try Self.settled(singleSession, id: 1, outcome: .declined(code: .insufficientFunds, reason: "not enough")),
            session: singleSession.id)
        #expect(declined.last == .setState(.waitingForWallet))
        #expect(single.state == .waitingForWallet)
        #expect(single.error == nil)
    }

    /// The session's outcome is one value: a payment accepted offline after a stranger's request
    /// was declined is the session's payment, and the declined result is not read with it.
    @Test func aPaymentAcceptedOfflineAfterADeclineIsTheSessionsOnlyOutcome() throws {
        let stranger = wallet(1)
        let customer = wallet(2)
        var (machine, session) = Self.offered(to: [stranger, customer])
        _ = machine.request(try Self.confirm(session, id: 1), from: stranger, now: Self.now)
        let declined = try Self.settled(
            session, id: 1, outcome: .declined(code: .unknownWallet, reason: "not registered"))
        _ = machine.executed(declined, session: session.id)
        guard case .executed(let declinedResult, _) = declined else { return }
        #expect(machine.execution == .settled(declinedResult))

        _ = machine.request(try Self.confirm(session, id: 2), from: customer, now: Self.now)
        let keyID = try TerminalKeyID(bytes: [UInt8](repeating: 3, count: 8))
        let record = OfflinePaymentRecord(
            paymentID: try Self.paymentID(2), sessionID: session.id, walletKey: Self.walletKey, terminalKeyID: keyID,
            amount: Self.amount, tip: euros(0), registerUser: "Ana", signedConfirmation: [1], dailyToken: [2],
            tokenID: [3], acceptedAt: Self.now)
        let answer = SessionMessage.error(ErrorMessage(code: .internalError, message: "a stand-in answer"))
        let actions = machine.executed(.acceptedOffline(record, answer: answer), session: session.id)
        #expect(machine.state == .completed)
        #expect(machine.execution == .acceptedOffline(record))
        #expect(machine.result == nil)
        #expect(machine.acceptedOffline == record)
        let finished = try #require(finishedSessions(actions).first)
        #expect(finished.result == nil && finished.acceptedOffline == record && finished.error == nil)
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
        var (machine, session) = Self.offered(to: [wallet(1)])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet(1), now: Self.now)
        let refusal = ErrorMessage(
            code: .duplicatePaymentConflict, message: "conflict", paymentID: try Self.paymentID(1))
        let actions = machine.executed(.refused(refusal, reason: "conflict"), session: session.id)
        #expect(
            actions.withoutLogs == [
                .send(.error(refusal), to: 1), .closeLater(1),
                .notice(
                    .requestDeclined(wallet(1).confirmationCode, code: .duplicatePaymentConflict, reason: "conflict")),
                .setState(.waitingForWallet),
            ])
        #expect(actions.logs.first == "refused by the processor; nothing was executed")
        #expect(machine.error == nil)
        #expect(machine.state == .waitingForWallet)
        #expect(machine.result == nil)
    }

    @Test func anUndecidedOutcomeIsNeverReportedAsNotCharged() throws {
        var (machine, session) = Self.offered(to: [wallet(1)])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet(1), now: Self.now)
        let open = ErrorMessage(code: .internalError, message: "ask again later")
        let actions = machine.executed(.undecided(open, reason: "journal full"), session: session.id)
        #expect(actions.withoutLogs.prefix(3) == [.send(.error(open), to: 1), .closeLater(1), .release(session.id)])
        #expect(machine.error == .outcomeUnknown("journal full"))
        #expect(machine.state == .completedWithError)
    }

    @Test func anUnreachableServerIsSaidSoAndTheRequestStaysOpen() throws {
        var (machine, session) = Self.offered(to: [wallet(1)])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet(1), now: Self.now)
        let open = ErrorMessage(code: .internalError, message: "ask again later")
        let actions = machine.executed(
            .undecided(open, reason: "the server cannot be reached", serverUnreachable: true), session: session.id)
        // The wallet keeps it pending (no id in the error); the cashier hears "pending", not
        // "could not be recorded", and nothing says it was not charged.
        #expect(actions.withoutLogs.prefix(2) == [.send(.error(open), to: 1), .closeLater(1)])
        #expect(machine.error == .serverUnreachable("the server cannot be reached"))
        #expect(
            machine.error?.humanized(noun: "payment").hasPrefix("The payment is pending: the server cannot be reached.")
                == true)
        #expect(actions.logs.first == "the server did not answer; pending, settled at the next recovery")
        #expect(machine.state == .completedWithError)
    }

    @Test func stopReturnsToIdleAndLetsTheAnsweredWalletLinger() throws {
        var (machine, session) = Self.offered(to: [wallet(1), wallet(2)])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet(1), now: Self.now)
        _ = machine.executed(try Self.approved(session, id: 1), session: session.id)
        let stopping = machine.stop()
        let stopped = try #require(stopping)
        // The wallets in any order (a dictionary's).
        #expect(stopped.count == 4)
        #expect(stopped.first == .release(session.id))
        #expect(stopped.contains(.closeLater(1)) && stopped.contains(.close(2)))
        #expect(stopped.last == .setState(.idle))
        #expect(machine.state == .idle)
        #expect(machine.session == nil)
        #expect(machine.stop() == nil)
        #expect(machine.start(refusal: nil) == .open)
    }

    @Test func anOutcomeAfterAStopStillReachesTheWalletAndTheFacade() throws {
        var (machine, session) = Self.offered(to: [wallet(1)])
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet(1), now: Self.now)
        _ = machine.stop()
        let outcome = try Self.approved(session, id: 1)
        guard case .executed(let settled, let answer) = outcome else { return }
        let actions = machine.executed(outcome, session: session.id)
        #expect(actions.contains(.send(answer, to: 1)))
        #expect(finishedSessions(actions).map(\.result) == [settled])
        #expect(actions.last.map { if case .finished = $0 { true } else { false } } == true)
        #expect(actions.logs.last == "the request's outcome came in after the session was stopped")
        #expect(machine.state == .idle)
    }

    @Test func aConnectionThatEndsLeavesTheSessionUnlessItsRequestExecutes() throws {
        var (machine, session) = Self.offered(to: [wallet(1)])
        #expect(machine.isAwaitingWallet(1))
        #expect(
            machine.connectionEnded(wallet(1)) == [
                .cancelDecisionTimer(session.id, wallet: 1, generation: 1), .setState(.waitingForWallet),
            ])
        #expect(!machine.isAwaitingWallet(1))
        _ = machine.hello(Self.hello(session), from: wallet(2))
        _ = machine.request(try Self.confirm(session, id: 1), from: wallet(2), now: Self.now)
        #expect(machine.connectionEnded(wallet(2)).isEmpty)
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
        return HostedSession(id: id, terms: terms, offer: offer, offerDigest: digest)
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

    /// The request the executor accepts for `message`.
    static func accepted(_ message: SessionMessage, in session: HostedSession) throws -> JournalRequest {
        let check = AcceptingExecutor().check(message, session: session, now: now)
        return try #require({ if case .accepted(let request) = check { request } else { nil } }())
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

/// A connection as a session's machine sees it: id n, with a code of its own.
private func wallet(_ id: Int) -> SessionWallet {
    SessionWallet(id: id, confirmationCode: ConfirmationCode(derivedBytes: [0, 0, 0, UInt8(truncatingIfNeeded: id)]))
}

extension [SessionHostAction] {
    /// The actions without the log lines (`logs` reads those).
    var withoutLogs: [SessionHostAction] { filter { if case .log = $0 { false } else { true } } }

    /// The log lines, in order.
    var logs: [Logger.Message] { compactMap { if case .log(_, let message, _, _, _) = $0 { message } else { nil } } }
}

private func finishedSessions(_ actions: [SessionHostAction]) -> [FinishedSession] {
    actions.compactMap { if case .finished(let finished) = $0 { finished } else { nil } }
}

/// A connection as the request proxy's machine sees it; the machine never calls its I/O.
final class FakeWallet: Sendable {
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
