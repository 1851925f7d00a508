import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores

/// A payment or redemption host behind one interface, as the register drives both alike.
enum RegisterHost {
    case payment(PaymentHost)
    case redemption(RedemptionHost)

    var state: HostState {
        switch self {
        case .payment(let host): host.state
        case .redemption(let host): host.state
        }
    }

    var error: HostError? {
        switch self {
        case .payment(let host): host.error
        case .redemption(let host): host.error
        }
    }

    var sessionID: SessionID? {
        switch self {
        case .payment(let host): host.sessionID
        case .redemption(let host): host.sessionID
        }
    }

    func observeState(_ observer: @escaping @Sendable (HostState) -> Void) {
        switch self {
        case .payment(let host): host.observeState(observer)
        case .redemption(let host): host.observeState(observer)
        }
    }

    func observeWallets(_ observer: @escaping @Sendable (WalletNotice) -> Void) {
        switch self {
        case .payment(let host): host.observeWallets(observer)
        case .redemption(let host): host.observeWallets(observer)
        }
    }

    @discardableResult
    func stop() -> Bool {
        switch self {
        case .payment(let host): host.stop()
        case .redemption(let host): host.stop()
        }
    }

    func cancel() {
        switch self {
        case .payment(let host): host.cancel()
        case .redemption(let host): host.cancel()
        }
    }
}

/// One terminal box: its device and files persist; its program (the terminal process with the
/// register's script) runs, crashes and is started again over the same files.
///
/// The cashier opens one session at a time (a payment most often, else one of the three
/// redemptions), gives up on a session no wallet takes, sometimes cancels one, and opens the next
/// after each ends. Only touched on the simulation's thread.
final class TerminalActor: @unchecked Sendable {
    let index: Int
    let device: SimulatedDevice
    let identity: TerminalIdentity
    let ledgerPath: String
    /// The terminal's own journal (the ledger is shared, as a processor would be).
    let journalPath: String
    unowned let run: FaultSimulation
    private var random: SeededRandom

    /// The running program, nil while crashed.
    private(set) var process: SimulatedProcess?
    private var generation = 0
    private var hosts: [TransactionType: RegisterHost] = [:]
    private var service: TerminalRadioService?
    /// The session the cashier opened and has not seen end.
    private(set) var current: (type: TransactionType, host: RegisterHost, serial: Int)?
    /// The id of the current session (what its advertisement carries).
    private(set) var currentSessionID: SessionID?
    private var serial = 0
    /// False once the run winds down: no new sessions.
    var opensSessions = true

    /// How long the register waits for a decision once a wallet was shown the offer.
    static let decisionTimeout = Duration.seconds(10)

    init(index: Int, device: SimulatedDevice, identity: TerminalIdentity, ledgerPath: String, run: FaultSimulation) {
        self.index = index
        self.device = device
        self.identity = identity
        self.ledgerPath = ledgerPath
        self.journalPath =
            URL(fileURLWithPath: ledgerPath).deletingLastPathComponent()
            .appendingPathComponent("journal-\(index).sqlite").path
        self.run = run
        random = SeededRandom(seed: run.configuration.seed, label: "terminal-\(index)")
    }

    var name: String { "terminal-\(index)" }
    var isRunning: Bool { process?.isAlive == true }
    /// Idle: running (or crashed) with no session open.
    var isQuiet: Bool { current == nil }

    // MARK: Program lifetime

    /// Starts the terminal program over the device and the ledger file.
    func boot() throws {
        generation += 1
        let process = SimulatedProcess(name: name, generation: generation)
        process.setDurableStepHandler { [weak self] step in
            guard let self else { return }
            self.run.maybeCrash(after: step, in: process) { self.crash(because: "after \(step)") }
        }
        let radio = ProcessRadio(device: device, process: process)
        let ledger = JournaledLedger(
            ledger: try BlockingLedger(path: ledgerPath, configuration: FaultSimulation.ledgerConfiguration),
            process: process)
        let journal = ProcessJournal(journal: try SQLiteTerminalJournal(path: journalPath), process: process)
        let service = TerminalRadioService(radio: radio, identity: identity, processor: ledger, journal: journal)
        // What the last run left confirmed but unanswered is settled before any session opens.
        // The simulated process starts synchronously: it waits here for the async recovery.
        let recovery = try ExternalWork.wait { () async -> Result<JournalRecoveryReport, JournalError> in
            do throws(JournalError) {
                return .success(try await service.recoverJournal(redemptions: ledger))
            } catch {
                return .failure(error)
            }
        }.get()
        run.tally.recoveredRequests += recovery.settled.count + recovery.refused.count
        guard process.isAlive else { return }
        let configuration = PaymentHostConfiguration(
            userDecisionTimeout: Self.decisionTimeout,
            merchantPrograms: MerchantPrograms(hasBonusProgram: true, hasGoldProgram: true, hasCouponProgram: true))
        var hosts: [TransactionType: RegisterHost] = [
            .payment: .payment(PaymentHost(service: service, processor: ledger, configuration: configuration))
        ]
        for type in TransactionType.allCases where type.isRedemption {
            guard
                let host = RedemptionHost.redemptionHost(
                    transactionType: type, service: service, processor: ledger, configuration: configuration)
            else { continue }
            hosts[type] = .redemption(host)
        }
        for (type, host) in hosts {
            host.observeState { [weak self] state in
                guard process.isAlive else { return }
                self?.hostChanged(type, state)
            }
            // Which wallets were shown the offer, and when: the rogue's invariant needs it.
            host.observeWallets { [weak self] notice in
                guard process.isAlive, let self, self.current?.type == type, let sessionID = self.currentSessionID,
                    let serial = self.current?.serial
                else { return }
                switch notice {
                case .offered(let code): self.run.rogue?.offered(at: self.index, sessionID: sessionID, code: code)
                case .requestDeclined, .decisionTimedOut:
                    // The cashier sees the wallet's attempt end; with nobody else at the offer,
                    // the sale is given up soon, as a cashier would, instead of after 20 s.
                    self.giveUpIfWaiting(serial, after: .seconds(2))
                case .declined: break
                }
            }
        }
        self.process = process
        self.service = service
        self.hosts = hosts
        current = nil
        currentSessionID = nil
        scheduleNextSession()
        run.scheduleRandomCrash(of: process, meanInterval: run.rates.terminalCrashInterval) { [weak self] in
            self?.crash(because: "at a random moment")
        }
    }

    /// The program dies where it stands; the box restarts it after a moment.
    func crash(because reason: String) {
        guard let process, process.isAlive else { return }
        run.tally.crashes["terminal \(reason)", default: 0] += 1
        if current != nil { run.tally.terminalOutcomes["ended by a crash", default: 0] += 1 }
        process.crash()
        let deadHosts = Array(hosts.values)
        self.process = nil
        service = nil
        hosts = [:]
        current = nil
        currentSessionID = nil
        // The dead hosts stay registered with their dead service (a reference cycle); stopping
        // them later, off the crashing call stack, frees them and their ledger connection. Their
        // radio is already gated, so this has no effect outside the process.
        run.simulation.schedule(after: .zero) {
            for host in deadHosts { host.stop() }
        }
        run.simulation.schedule(after: run.rates.restartDelay(using: &random)) { [weak self] in
            guard let self, self.process == nil else { return }
            do {
                try self.boot()
            } catch {
                self.run.book.violation("\(self.name) could not restart: \(error)")
            }
        }
    }

    /// Ends the program for good at the end of the run (releasing its files).
    func shutDown() {
        guard let process, process.isAlive else { return }
        process.crash()
        for host in hosts.values { host.stop() }
        self.process = nil
        service = nil
        hosts = [:]
        current = nil
        currentSessionID = nil
    }

    // MARK: The cashier

    private func scheduleNextSession() {
        guard let process else { return }
        let delay = Duration.milliseconds(Int64(200 + random.nextUnit() * 1_300))
        process.schedule(on: device.clock, after: delay) { [weak self] in self?.openSession() }
    }

    func openSession() {
        guard let process, process.isAlive, current == nil, opensSessions else { return }
        let roll = random.nextUnit()
        let type: TransactionType =
            roll < 0.7 ? .payment : roll < 0.8 ? .bonusRedemption : roll < 0.9 ? .goldRedemption : .couponRedemption
        guard let host = hosts[type] else { return }
        let started: Bool
        switch host {
        case .payment(let payment):
            let cents = Int64(100 + random.nextUnit() * 2_900)
            started = payment.start(
                amount: euros(cents), registerUser: RegisterUser(name: "Cashier \(index)"))
        case .redemption(let redemption):
            let offer: RedemptionOffer
            switch type {
            case .bonusRedemption:
                offer = RedemptionOffer(
                    item: "Free coffee", points: Int64(10 + random.nextUnit() * 70), value: euros(320))
            case .goldRedemption: offer = RedemptionOffer(item: "Free dessert", value: euros(600))
            default: offer = RedemptionOffer(item: "any coupon", value: euros(0))
            }
            started = redemption.start(offer)
        }
        guard started else {
            run.tally.terminalOutcomes["could not start: \(host.error.map { "\($0)" } ?? "?")", default: 0] += 1
            scheduleNextSession()
            return
        }
        serial += 1
        let session = serial
        current = (type, host, session)
        currentSessionID = host.sessionID
        if let sessionID = host.sessionID { run.rogue?.sessionOpened(by: self, sessionID: sessionID, type: type) }
        run.tally.terminalSessions += 1
        // A session nobody takes is given up after a while, as a cashier would.
        giveUp(session, after: .seconds(20))
        if random.chance(run.rates.cashierCancel) {
            run.tally.cashierCancels += 1
            let delay = Duration.milliseconds(Int64(300 + random.nextUnit() * 4_000))
            process.schedule(on: device.clock, after: delay) { [weak self] in
                guard let self, let current = self.current, current.serial == session else { return }
                current.host.cancel()
            }
        }
    }

    /// Cancels the session if it is waiting for a wallet `delay` from now; if a wallet is looking
    /// at the offer then, looks again later (a wallet's decline, decision time or refused request
    /// ends only its own attempt, so a session can wait again after a wallet came).
    private func giveUp(_ session: Int, after delay: Duration) {
        process?.schedule(on: device.clock, after: delay) { [weak self] in
            guard let self, let current = self.current, current.serial == session, !current.host.state.isFinished
            else { return }
            if current.host.state == .waitingForWallet {
                current.host.cancel()
            } else {
                self.giveUp(session, after: .seconds(10))
            }
        }
    }

    /// Cancels the session if it is waiting for a wallet `delay` from now (once).
    private func giveUpIfWaiting(_ session: Int, after delay: Duration) {
        process?.schedule(on: device.clock, after: delay) { [weak self] in
            guard let self, let current = self.current, current.serial == session,
                current.host.state == .waitingForWallet
            else { return }
            current.host.cancel()
        }
    }

    private func hostChanged(_ type: TransactionType, _ state: HostState) {
        guard let current, current.type == type, state.isFinished else { return }
        let outcome: String
        if state == .completed {
            outcome = "completed"
        } else {
            switch current.host.error {
            case .cancelled?: outcome = "cancelled"
            case .decisionTimedOut?: outcome = "decision timed out"
            case .declined(let code, _)?: outcome = "declined: \(code)"
            case .processorFailure?: outcome = "processor failure"
            case let other?: outcome = "error: \(other)"
            case nil: outcome = "completed with error, no error"
            }
        }
        run.tally.terminalOutcomes[outcome, default: 0] += 1
        if let sessionID = currentSessionID { run.rogue?.ended(at: index, sessionID: sessionID, outcome: outcome) }
        let session = current.serial
        process?.schedule(on: device.clock, after: .milliseconds(200)) { [weak self] in
            guard let self, let current = self.current, current.serial == session else { return }
            current.host.stop()
            self.current = nil
            self.currentSessionID = nil
            self.scheduleNextSession()
        }
    }

    /// Stops opening sessions and cancels one nobody took; a session with a wallet runs out.
    func windDown() {
        opensSessions = false
        guard let current else { return }
        if current.host.state == .waitingForWallet { current.host.cancel() }
    }

    /// Opens sessions again (while wallets still need to reach this terminal).
    func keepOpening() {
        opensSessions = true
        if isRunning, current == nil { scheduleNextSession() }
    }

    /// A host state that is neither idle nor finished, for the end-of-run check.
    var unfinishedSession: String? {
        guard let current, !current.host.state.isFinished, current.host.state != .idle else { return nil }
        return "\(name): \(current.type) session left in \(current.host.state)"
    }
}

extension SimulatedProcess {
    /// Runs `action` after `delay` on the device's clock, if the process still lives then.
    func schedule(on clock: DeviceClock, after delay: Duration, _ action: @escaping @Sendable () -> Void) {
        clock.schedule(after: delay) { [self] in
            if isAlive { action() }
        }
    }
}
