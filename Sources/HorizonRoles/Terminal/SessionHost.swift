import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores
import Logging
import Synchronization

/// What the cashier asks for, as the signed offer states it.
struct OfferTerms: Sendable, Equatable {
    let amount: Money
    let registerUser: String
    let item: String
    let quantity: Int64
    /// The payment id the wallet must confirm under (a payment intent's); nil: the wallet's choice.
    var paymentID: PaymentID? = nil
    /// The merchant's order reference for the sale: journaled and settled with the payment, not
    /// part of the signed offer (as intents, whose reference the server keeps).
    var orderReference = ""
}

/// The session a host runs now (see `SessionHostStateMachine` for its rules).
struct HostedSession: Sendable, Equatable {
    let id: SessionID
    let terms: OfferTerms
    let offer: Offer
    /// What a request must bind: the offer exactly as it went out.
    let offerDigest: DigestBytes
    /// Connections that proved a session key and were sent the offer, by connection id.
    var wallets: [Int: OfferedWallet] = [:]
    /// The connection whose request is being executed: from then on the session is taken.
    var executing: Int?
    /// The `offered` step is journaled once per session, whatever the number of wallets.
    var offerJournaled = false
    /// The last arming of a decision timer: each offer arms its wallet's own, so every wallet
    /// gets the full decision time from its own offer, and a timer that runs out ends only its
    /// wallet's attempt (nobody can run the customer's clock down). A timer of an older arming
    /// does nothing.
    var decisionGeneration = 0
    /// The arming of each deciding wallet's timer, by connection id.
    var decisions: [Int: Int] = [:]
    /// Connections whose decision time ran out, so a late request is told so.
    var timedOut: Set<Int> = []
    /// Advertising and the timer were stopped: the session takes nothing new.
    var isReleased = false
}

/// A wallet in a session: its connection, and the session key its Hello proved (what its
/// session rate is counted by).
struct OfferedWallet: Sendable, Equatable {
    let wallet: SessionWallet
    let sessionKey: PublicKeyBytes
}

/// What the register hears about wallets in its session: each shows the confirmation code the
/// wallet shows, so the cashier and the customer can compare them.
public enum WalletNotice: Sendable, Equatable {
    /// A wallet proved its session key and was sent the offer.
    case offered(ConfirmationCode)
    /// A wallet declined. The session stays open: any wallet can decline for itself only.
    case declined(ConfirmationCode)
    /// A wallet did not decide within its decision time; its attempt is over, the session
    /// stays open (anyone can say hello and wait).
    case decisionTimedOut(ConfirmationCode)
    /// A wallet's request was declined (by the server: unknown wallet, insufficient funds, …) or
    /// refused with nothing executed. That wallet's attempt is over; the session stays open, since
    /// anyone in range can send a confirmation the server declines.
    case requestDeclined(ConfirmationCode, code: ErrorCode, reason: String)
}

/// What checking a wallet's request (a payment's Confirm, a redemption's Redeem) found.
enum RequestCheck: Sendable {
    /// Not a request this kind of session takes.
    case unexpected
    /// Refused before anything was executed; the session goes on.
    case refused(ErrorMessage)
    /// Signed by the session's wallet and true to its offer: to be executed.
    case accepted(JournalRequest)
}

/// The part that differs between a payment and the redemptions: checking the wallet's signed
/// request against the session (pure: the state machine does it), and executing it through its
/// processor (exactly once per id, by the processor's contract; the journal steps around it are
/// the service's). `execute` may be slow (a remote processor): the driver awaits it off the
/// scheduler.
protocol SessionExecutor: Sendable {
    var transactionType: TransactionType { get }
    func check(_ message: SessionMessage, session: HostedSession, now: UnixTime) -> RequestCheck
    func execute(_ request: JournalRequest, at now: UnixTime) async throws(ProcessorError) -> SettlementResult
}

/// A finished session as a host reports it to its facade.
struct FinishedSession: Sendable, Equatable {
    let session: HostedSession
    let result: SettlementResult?
    let error: HostError?
    /// Set when the payment was accepted offline; `result` is nil then.
    var acceptedOffline: OfflinePaymentRecord? = nil
}

/// The session machinery shared by `PaymentHost` and `RedemptionHost`: the driver of a
/// `SessionHostStateMachine`. It feeds the machine one event at a time (the register's commands,
/// the wallets' messages, timers, the processor's answer) and carries out the actions it returns:
/// signing and advertising the offer, journaling, sending, closing, timers, and executing a
/// request, whose processor it awaits off the scheduler (`Scheduler.runExternal`) so the radio
/// keeps serving other wallets and sessions meanwhile.
///
/// Everything that changes the machine runs on the radio's scheduler, the role's one serial
/// context: events from the radio and timers arrive there, the reference API's commands enter it
/// with `Scheduler.performSynchronously` (at once when called from it), and the async API with
/// `Scheduler.perform`. So a command's check and its actions (signing, advertising, publishing
/// the state) are never interleaved with another's. The lock only lets other threads read.
final class SessionHost: TerminalSessionHandler, Sendable {
    let service: TerminalRadioService
    let executor: any SessionExecutor
    let userDecisionTimeout: Duration
    let lingerAfterReceipt: Duration
    let merchantPrograms: MerchantPrograms
    /// Offline acceptance, for payments; nil keeps an unreachable server's payment
    /// pending.
    let offline: OfflineAcceptanceConfiguration?
    let observable = ObservableState<HostState>(.idle)
    /// The latest wallet notice (nil before the first), for the register's display.
    let walletNotices = ObservableState<WalletNotice?>(nil)
    private let onFinish: @Sendable (FinishedSession) -> Void
    private let machine: Mutex<SessionHostStateMachine>
    /// Payments whose server was unreachable and whose wallet was asked for its daily token, by
    /// id: who may answer, and what happens without an answer. Touched on the scheduler only.
    private let tokenWaits = Mutex<[PaymentID: TokenWait]>([:])
    /// The live objects the machine's actions name by value: each session's advertising and the
    /// wallets' decision timers. Touched on the scheduler only.
    private let resources = Mutex(Resources())

    private struct Resources: Sendable {
        var advertising: [SessionID: any AdvertisingSet] = [:]
        var decisionTimers: [DecisionTimer: ScheduledAction] = [:]
    }

    /// One arming of a wallet's decision timer.
    private struct DecisionTimer: Hashable, Sendable {
        let session: SessionID
        let wallet: Int
        let generation: Int
    }

    private struct TokenWait: Sendable {
        let walletID: Int
        let sessionID: SessionID
        let request: SettlementRequest
        /// The outcome as it stands without offline acceptance (pending, server unreachable).
        let fallback: JournaledOutcome
        var timer: ScheduledAction?
    }

    init(
        service: TerminalRadioService, executor: any SessionExecutor, userDecisionTimeout: Duration,
        lingerAfterReceipt: Duration, merchantPrograms: MerchantPrograms,
        offline: OfflineAcceptanceConfiguration? = nil, onFinish: @escaping @Sendable (FinishedSession) -> Void
    ) {
        self.offline = offline
        self.service = service
        self.executor = executor
        self.userDecisionTimeout = userDecisionTimeout
        self.lingerAfterReceipt = lingerAfterReceipt
        self.merchantPrograms = merchantPrograms
        self.onFinish = onFinish
        machine = Mutex(SessionHostStateMachine(executor: executor, userDecisionTimeout: userDecisionTimeout))
    }

    /// The state as published (observers have heard of it).
    var state: HostState { observable.value }
    var session: HostedSession? { machine.withLock { $0.session } }
    var result: SettlementResult? { machine.withLock { $0.result } }
    var acceptedOffline: OfflinePaymentRecord? { machine.withLock { $0.acceptedOffline } }
    var error: HostError? { machine.withLock { $0.error } }
    var isCancelled: Bool { machine.withLock { $0.isCancelled } }

    /// Applies one event to the machine and carries out its actions, outside the lock (they call
    /// out: observers, the radio, the journal, and may feed the machine again).
    private func handle(_ event: (inout SessionHostStateMachine) -> sending [SessionHostAction]) {
        perform(machine.withLock(event))
    }

    // MARK: Commands

    /// Opens a session unless one is running or `validate` (the facade's own rules for the
    /// terms) objects; on refusal `error` says why. The one entry point both hosts use.
    ///
    /// The radio registers the advertisement without holding the scheduler (`runRadioCall`: on
    /// BlueZ a D-Bus call that bluetoothd answers after reading our objects); the state becomes
    /// `waitingForWallet` once it is up. False when the session could not open before this
    /// returns (a refusal, an unusable adapter, or a radio that answered at once); a radio that
    /// fails later ends the attempt as `completedWithError` with the radio's error.
    func start(_ terms: OfferTerms, validate: () -> HostError?) -> Bool {
        service.scheduler.performSynchronously {
            let refusal = validate()
            guard machine.withLock({ $0.start(refusal: refusal) }) == .open,
                let number = machine.withLock({ $0.opening })
            else { return false }
            let availability = service.radio.availability
            guard availability == .poweredOn else {
                machine.withLock { $0.openFailed(.radio(.adapterUnavailable(availability)), opening: number) }
                return false
            }
            let session: HostedSession
            let advertisement: HorizonAdvertisement
            switch signedOffer(terms) {
            case .success(let signed): (session, advertisement) = signed
            case .failure(let failure):
                machine.withLock { $0.openFailed(failure, opening: number) }
                return false
            }
            let returned = StartReturned()
            service.scheduler.runRadioCall { [service] () async -> Result<any AdvertisingSet, RadioError> in
                do throws(RadioError) {
                    return .success(try await service.advertise(advertisement))
                } catch {
                    return .failure(error)
                }
            } then: { [weak self] result in
                self?.advertised(result, session: session, opening: number, afterStart: returned.value)
            }
            returned.value = true
            return machine.withLock { $0.failedOpening != number }
        }
    }

    /// Whether `start` has returned, for an advertisement that comes up (or fails) later.
    private final class StartReturned: Sendable {
        private let flag = Mutex(false)
        var value: Bool {
            get { flag.withLock { $0 } }
            set { flag.withLock { $0 = newValue } }
        }
    }

    /// The radio's answer for opening `number`: the session opens, or the opening fails.
    private func advertised(
        _ result: Result<any AdvertisingSet, RadioError>, session: HostedSession, opening number: Int, afterStart: Bool
    ) {
        switch result {
        case .success(let advertising):
            guard let actions = machine.withLock({ $0.advertised(session, opening: number) }) else {
                // Stopped or cancelled while the radio registered it.
                advertising.stop()
                return
            }
            resources.withLock { $0.advertising[session.id] = advertising }
            perform(actions)
        case .failure(let error):
            perform(machine.withLock { $0.openFailed(.radio(error), opening: number, announce: afterStart) })
        }
    }

    /// Signs the offer for `terms`: a new session, and the advertisement that announces it.
    private func signedOffer(_ terms: OfferTerms) -> Result<(HostedSession, HorizonAdvertisement), HostError> {
        var random = SystemRandomNumberGenerator()
        let sessionID = SessionID.random(using: &random)
        guard let keyID = service.terminalKeyID else {
            return .failure(.processorFailure("terminal key id unavailable"))
        }
        let offer: Offer
        do {
            let unsigned = try Offer(
                sessionID: sessionID, transactionType: executor.transactionType, amount: terms.amount,
                registerUser: terms.registerUser, item: terms.item, quantity: terms.quantity,
                merchantPrograms: merchantPrograms, offerNonce: Nonce.random(using: &random),
                expiresAt: service.scheduler.wallClock + userDecisionTimeout.nanoseconds / 1_000_000_000 + 60,
                paymentID: terms.paymentID)
            offer = unsigned.withSignature(
                try signatureBytes(for: unsigned.signedBytes, with: service.identity.signingKey))
        } catch let error as WireError {
            return .failure(.invalidRedemption(error.description))
        } catch {
            return .failure(.processorFailure("could not sign the offer"))
        }
        let advertisement = HorizonAdvertisement(
            transactionType: executor.transactionType, sessionID: sessionID, terminalKeyID: keyID)
        return .success(
            (HostedSession(id: sessionID, terms: terms, offer: offer, offerDigest: offerDigest(offer)), advertisement))
    }

    /// Ends the session and returns to idle. False if idle already.
    func stop() -> Bool {
        service.scheduler.performSynchronously {
            guard let actions = machine.withLock({ $0.stop() }) else { return false }
            perform(actions)
            return true
        }
    }

    /// Cancels a running session at the register; the wallet is told, nothing is executed. Does
    /// nothing once a request is executing: its outcome ends the session.
    func cancel() { service.scheduler.performSynchronously { handle { $0.cancel() } } }

    // MARK: Wallet messages

    func connection(_ connection: TerminalConnection, received message: SessionMessage) {
        switch message {
        case .hello(let hello): handle { $0.hello(hello, from: connection.sessionWallet) }
        case .cancel(let cancel): handle { $0.walletCancelled(cancel, by: connection.sessionWallet) }
        case .offlineToken(let presentation): tokenPresented(presentation, on: connection)
        default:
            let now = service.scheduler.wallClock
            handle { $0.request(message, from: connection.sessionWallet, now: now) }
        }
    }

    static func requestID(of message: SessionMessage) -> PaymentID? {
        SessionHostStateMachine.requestID(of: message)
    }

    func connectionEnded(_ connection: TerminalConnection) { handle { $0.connectionEnded(connection.sessionWallet) } }

    func isAwaitingWallet(on connection: TerminalConnection) -> Bool {
        machine.withLock { $0.isAwaitingWallet(connection.id) }
    }

    // MARK: Actions

    private func perform(_ actions: [SessionHostAction]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: SessionHostAction) {
        switch action {
        case .register(let sessionID): service.register(sessionID, handler: self)
        case .setState(let state): observable.set(state)
        case .notice(let notice): walletNotices.set(notice)
        case .send(let message, let walletID): service.connection(walletID)?.send(message)
        case .close(let walletID): service.connection(walletID)?.close()
        case .closeLater(let walletID):
            // Leaves the wallet time to read the last message and close; closes it after that.
            let connection = service.connection(walletID)
            service.scheduler.schedule(after: lingerAfterReceipt) { connection?.close() }
        case .proved(let id, let walletID): service.connection(walletID)?.proved(id)
        case .journalOffer(let offer, let walletKey, let wallet):
            do {
                try service.journal.write(
                    .offered(sessionID: offer.sessionID, transactionType: offer.transactionType, walletKey: walletKey),
                    at: service.scheduler.wallClock)
            } catch {
                handle { $0.offerNotJournaled(for: wallet, session: offer.sessionID, reason: "\(error)") }
                return
            }
            handle { $0.offerJournaled(for: wallet, session: offer.sessionID) }
        case .armDecisionTimer(let sessionID, let walletID, let delay, let generation):
            let key = DecisionTimer(session: sessionID, wallet: walletID, generation: generation)
            let timer = service.scheduler.schedule(after: delay) { [weak self] in
                guard let self else { return }
                _ = resources.withLock { $0.decisionTimers.removeValue(forKey: key) }
                handle { $0.decisionTimedOut(session: sessionID, wallet: walletID, generation: generation) }
            }
            resources.withLock { $0.decisionTimers[key] = timer }
        case .cancelDecisionTimer(let sessionID, let walletID, let generation):
            let key = DecisionTimer(session: sessionID, wallet: walletID, generation: generation)
            resources.withLock { $0.decisionTimers.removeValue(forKey: key) }?.cancel()
        case .execute(let request, let wallet, let sessionID, let now):
            execute(request, by: wallet, session: sessionID, at: now)
        case .sessionExecuted(let sessionID, let walletKey): service.sessionExecuted(sessionID, by: walletKey)
        case .release(let sessionID):
            let (advertising, timers) = resources.withLock { resources in
                let timers = resources.decisionTimers.filter { $0.key.session == sessionID }
                for key in timers.keys { resources.decisionTimers[key] = nil }
                return (resources.advertising.removeValue(forKey: sessionID), timers.values)
            }
            advertising?.stop()
            for timer in timers { timer.cancel() }
            service.unregister(sessionID)
        case .finished(let finished): onFinish(finished)
        case .log(let level, let message, let session, let payment, let metadata):
            // Checked first: the ids' hex text costs more than the line when nothing logs.
            guard service.logger.logLevel <= level else { return }
            service.logger.with(session: session).with(payment: payment).log(
                level: level, message, metadata: metadata)
        }
    }

    /// Journals the request (confirmed, submitted) here on the scheduler, awaits the processor off
    /// it, and journals the answer back on it before the machine hears the outcome and the answer
    /// leaves. Meanwhile a retry or a status query for the id finds it confirmed ("still
    /// settling"), and the session (acquiringPaymentExecution) can be neither cancelled nor timed
    /// out.
    private func execute(
        _ request: JournalRequest, by wallet: SessionWallet, session sessionID: SessionID, at now: UnixTime
    ) {
        let submissionFailure = service.journalSubmission(request, at: now)
        let service = service
        let executor = executor
        service.scheduler.runExternal {
            await service.askProcessor(request, submissionFailure: submissionFailure) {
                (request) async throws(ProcessorError) -> SettlementResult in
                try await executor.execute(request, at: now)
            }
        } then: { [self] answer in
            // Unreachable, not declined: only then may the payment be accepted offline.
            if offline != nil, case .payment(let payment) = request,
                case .ended(let fallback) = answer, case .undecided(_, _, serverUnreachable: true) = fallback
            {
                askForToken(payment, from: wallet, session: sessionID, fallback: fallback)
                return
            }
            let outcome = service.journalAnswer(answer, for: request.id, at: now)
            handle { $0.executed(outcome, session: sessionID) }
        }
    }

    // MARK: Offline acceptance

    /// The server did not answer: asks the confirming wallet for its daily token and waits for it
    /// (at most `tokenWait`). The session stays executing meanwhile, so it can be neither
    /// cancelled nor timed out. Only now does the token travel: an online payment carries none.
    private func askForToken(
        _ payment: SettlementRequest, from wallet: SessionWallet, session sessionID: SessionID,
        fallback: JournaledOutcome
    ) {
        guard let offline else { return }
        let id = payment.paymentID
        tokenWaits.withLock {
            $0[id] = TokenWait(walletID: wallet.id, sessionID: sessionID, request: payment, fallback: fallback)
        }
        service.connection(wallet.id)?.send(
            .offlineTokenRequest(OfflineTokenRequest(sessionID: sessionID, paymentID: id)))
        let timer = service.scheduler.schedule(after: offline.tokenWait) { [weak self] in
            self?.tokenWaitEnded(id, token: nil)
        }
        tokenWaits.withLock { $0[id]?.timer = timer }
    }

    /// A wallet presents a token: it counts only for a payment waiting for one, from the
    /// connection whose Confirm it is (the key that signed it is the key the token must name).
    private func tokenPresented(_ presentation: OfflineTokenPresentation, on connection: TerminalConnection) {
        let expected = tokenWaits.withLock { waits in
            waits[presentation.paymentID].map { $0.walletID == connection.id && $0.sessionID == presentation.sessionID }
        }
        guard expected == true else {
            service.logger.with(payment: presentation.paymentID).notice(
                "ignored a daily token nobody asked for on this connection")
            return
        }
        tokenWaitEnded(presentation.paymentID, token: presentation.token)
    }

    /// The wallet answered (with its token, or empty for none) or the wait ran out (`token` nil):
    /// the payment is accepted offline or stays pending, with why.
    private func tokenWaitEnded(_ id: PaymentID, token: [UInt8]?) {
        guard let offline, let wait = tokenWaits.withLock({ $0.removeValue(forKey: id) }) else { return }
        wait.timer?.cancel()
        let now = service.scheduler.wallClock
        let outcome: JournaledOutcome
        switch acceptOffline(wait.request, token: token, offline: offline, at: now) {
        case .success(let accepted): outcome = accepted
        case .failure(let refusal):
            guard case .undecided(_, let unreachable, _) = wait.fallback else {
                outcome = wait.fallback
                break
            }
            // Still no payment id: the wallet keeps the payment pending and asks again.
            let message = ErrorMessage(
                code: .internalError,
                message:
                    "the server is unreachable and the payment was not accepted offline (\(refusal.reason)); it stays pending"
            )
            // The register hears both: the server did not answer, and why offline did not help.
            outcome = .undecided(
                message, reason: "\(unreachable); not accepted offline: \(refusal.reason)", serverUnreachable: true)
        }
        handle { $0.executed(outcome, session: wait.sessionID) }
    }

    private struct OfflineRefusal: Error {
        let reason: String
    }

    /// Decides, and on acceptance journals the offline payment with its signed "accepted
    /// offline" receipt in one synced commit, before the receipt leaves.
    private func acceptOffline(
        _ request: SettlementRequest, token: [UInt8]?, offline: OfflineAcceptanceConfiguration, at now: UnixTime
    ) -> Result<JournaledOutcome, OfflineRefusal> {
        guard let token else {
            return .failure(
                OfflineRefusal(reason: "\(OfflineAcceptance.noTokenPrefix): the wallet did not present one in time"))
        }
        let stored: [StoredOfflinePayment]
        do {
            stored = try offline.store.offlinePayments()
        } catch {
            return .failure(OfflineRefusal(reason: "the offline payments cannot be read: \(error)"))
        }
        let record: OfflinePaymentRecord
        switch OfflineAcceptance.decide(
            request, tokenBytes: token, trustAnchors: offline.trustAnchors, limits: offline.limits, stored: stored,
            now: now)
        {
        case .refuse(let reason): return .failure(OfflineRefusal(reason: reason))
        case .accept(let accepted): record = accepted
        }
        guard
            let unsigned = try? Receipt(
                sessionID: request.sessionID, transactionType: .payment, paymentID: request.paymentID,
                outcome: .acceptedOffline, amount: request.amount, tip: request.tip, transactionReference: 0,
                settledAt: now, bonusPointsEarned: 0, bonusPointsBalance: 0),
            let signature = try? signatureBytes(for: unsigned.signedBytes, with: service.identity.signingKey)
        else {
            return .failure(OfflineRefusal(reason: "the accepted-offline receipt could not be signed"))
        }
        let answer = SessionMessage.receipt(unsigned.withSignature(signature))
        do {
            try offline.store.storeOffline(record, answer: answer, at: now)
        } catch {
            return .failure(OfflineRefusal(reason: "the offline payment could not be journaled: \(error)"))
        }
        return .success(.acceptedOffline(record, answer: answer))
    }
}
