import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores

/// One customer with a wallet: the device, the identity and the wallet's store persist; the
/// wallet program (a `PaymentAndRedemptionClientCoordinator` answered by the library's
/// `WalletAutopilot` with the customer's habits) runs, crashes and is started again over the same
/// store, asking first for whatever it left pending, as `horizon-wallet` does.
///
/// The customer walks up to a terminal, takes the nearest candidate of any kind, looks at the
/// offer, mostly accepts (with a tip, naming a coupon it holds), sometimes declines or ignores it,
/// may hesitate or decline at the last tap, may wander out of range mid-transaction, and leaves
/// when done. Only touched on the simulation's thread.
final class WalletActor: @unchecked Sendable {
    /// One transaction the wallet is in, from its first step to its end.
    struct Attempt {
        let resumed: Bool
        var requestID: PaymentID?
    }

    let index: Int
    let device: SimulatedDevice
    let identity: WalletIdentity
    let storePath: String
    let coupons: [String]
    unowned let run: FaultSimulation
    private var random: SeededRandom

    private(set) var process: SimulatedProcess?
    private var generation = 0
    private var store: WalletStore?
    private var coordinator: PaymentAndRedemptionClientCoordinator?
    private var autopilot: WalletAutopilot?
    /// Attempts in progress, by the client's transaction type.
    private(set) var attempts: [TransactionType: Attempt] = [:]
    /// The terminal the customer is at or heading for, nil when away.
    private(set) var visiting: Int?
    private var visitSerial = 0
    /// Whether the customer wants to start a transaction now.
    private var shopping = false

    init(
        index: Int, device: SimulatedDevice, identity: WalletIdentity, storePath: String, coupons: [String],
        run: FaultSimulation
    ) {
        self.index = index
        self.device = device
        self.identity = identity
        self.storePath = storePath
        self.coupons = coupons
        self.run = run
        random = SeededRandom(seed: run.configuration.seed, label: "wallet-\(index)")
    }

    var name: String { "wallet-\(index)" }
    var isRunning: Bool { process?.isAlive == true }
    var isBusy: Bool { !attempts.isEmpty }

    // MARK: Program lifetime

    func boot() throws {
        generation += 1
        let process = SimulatedProcess(name: name, generation: generation)
        process.setDurableStepHandler { [weak self] step in
            guard let self else { return }
            self.run.maybeCrash(after: step, in: process) { self.crash(because: "after \(step)") }
        }
        let radio = ProcessRadio(device: device, process: process)
        let store = try WalletStore(path: storePath)
        let index = index
        let book = run.book
        let pendingStore = JournaledPendingStore(store: SQLitePendingPaymentStore(store: store), process: process) {
            book.recordSigned($0, by: index)
        }
        let coordinator = PaymentAndRedemptionClientCoordinator(
            radio: radio, identity: identity, trustAnchors: run.anchors, pendingStore: pendingStore)
        self.process = process
        self.store = store
        self.coordinator = coordinator
        attempts = [:]
        for client in clients(of: coordinator) { follow(client, process: process) }
        autopilot = WalletAutopilot(
            coordinator: coordinator,
            hooks: WalletAutopilot.Hooks(declining: { [weak self] _ in self?.run.tally.declines += 1 }),
            takesCandidate: { [weak self] _ in
                guard process.isAlive, let self else { return false }
                return self.shopping && self.attempts.isEmpty
            },
            answer: { [weak self] _, type in
                guard process.isAlive, let self else { return .ignore }
                return self.answer(for: type)
            })
        try coordinator.start()
        // First ask again for whatever an earlier run left pending (horizon-wallet does the same).
        for pending in try pendingStore.all() {
            let type = pending.redeem?.transactionType ?? .payment
            guard let client = client(for: type), attempts[type] == nil, client.resume(pending) else { continue }
            run.tally.resumedRequests += 1
            attempts[type] = Attempt(resumed: true, requestID: pending.paymentID)
        }
        if let pending = attempts.values.compactMap(\.requestID).first,
            let terminal = run.terminalIndex(forRequest: pending)
        {
            visit(terminal, shopping: false)
        } else if !run.draining {
            scheduleNextVisit()
        }
        run.scheduleRandomCrash(of: process, meanInterval: run.rates.walletCrashInterval) { [weak self] in
            self?.crash(because: "at a random moment")
        }
    }

    func crash(because reason: String) {
        guard let process, process.isAlive else { return }
        run.tally.crashes["wallet \(reason)", default: 0] += 1
        for _ in attempts.values { run.tally.walletOutcomes["interrupted by a crash", default: 0] += 1 }
        process.crash()
        self.process = nil
        store = nil
        coordinator = nil
        autopilot = nil
        attempts = [:]
        shopping = false
        run.simulation.schedule(after: run.rates.restartDelay(using: &random)) { [weak self] in
            guard let self, self.process == nil else { return }
            do {
                try self.boot()
            } catch {
                self.run.book.violation("\(self.name) could not restart: \(error)")
            }
        }
    }

    func shutDown() {
        guard let process, process.isAlive else { return }
        process.crash()
        coordinator?.stop()
        self.process = nil
        store = nil
        coordinator = nil
        autopilot = nil
        attempts = [:]
    }

    private func clients(of coordinator: PaymentAndRedemptionClientCoordinator) -> [TransactionClient] {
        [
            coordinator.paymentClient, coordinator.bonusRedemptionClient, coordinator.goldRedemptionClient,
            coordinator.couponRedemptionClient,
        ]
    }

    private func client(for type: TransactionType) -> TransactionClient? {
        guard let coordinator else { return nil }
        return type == .payment ? coordinator.paymentClient : coordinator.redemptionClient(for: type)
    }

    // MARK: The customer's habits

    /// Counts what each client goes through (the autopilot answers for them).
    private func follow(_ client: TransactionClient, process: SimulatedProcess) {
        let type = client.transactionType
        client.observeState { [weak self, weak client] state in
            guard process.isAlive, let self, let client else { return }
            self.clientChanged(client, type: type, state: state)
        }
    }

    /// The customer's answer to an offer: mostly yes, with the last tap decided once the terminal
    /// is connected; a decline is counted by the autopilot's hook.
    private func answer(for type: TransactionType) -> WalletAutopilot.Answer {
        let roll = random.nextUnit()
        if roll < run.rates.declineAtOffer { return .decline }
        if roll < run.rates.declineAtOffer + run.rates.ignoreOffer {
            run.tally.ignoredOffers += 1  // the terminal's decision timeout ends it
            return .ignore
        }
        return .decideWhenConnected { [weak self] _ in self?.lastTap(for: type) ?? .decline(after: .zero) }
    }

    private func clientChanged(_ client: TransactionClient, type: TransactionType, state: PaymentClientState) {
        switch state {
        case .connecting where attempts[type] == nil:
            shopping = false
            run.tally.walletAttempts += 1
            attempts[type] = Attempt(resumed: false, requestID: nil)
            maybeWanderOff()
        case .acquiringPaymentExecution:
            attempts[type]?.requestID = client.pendingRequest?.paymentID
        case .paymentPending:
            if let id = client.pendingRequest?.paymentID { attempts[type]?.requestID = id }
        case .completed, .completedWithError:
            finish(client, type: type, state: state)
        case .idle:
            // Declining through the decider ends an attempt in idle (nothing was sent).
            if attempts[type] != nil { finish(client, type: type, state: state) }
        default:
            break
        }
    }

    /// The last tap, once the terminal is connected. Some people hesitate before it (faults may
    /// strike meanwhile), some say no after all; a coupon is sometimes one the wallet does not hold.
    private func lastTap(for type: TransactionType) -> WalletAutopilot.LastTap {
        let hesitation: Duration =
            random.chance(run.rates.hesitate) ? .milliseconds(Int64(random.nextUnit() * 3_000)) : .zero
        let declines = random.chance(run.rates.declineAtConfirm)
        let tip = Int64(random.nextUnit() * 300)
        let coupon: String
        if random.chance(0.15) {
            coupon = "NO-SUCH-COUPON"
        } else {
            coupon = coupons[Int(random.next() % UInt64(coupons.count))]
        }
        if declines { return .decline(after: hesitation) }
        return type == .payment
            ? .pay(tip: euros(tip), after: hesitation) : .redeem(coupon: coupon, after: hesitation)
    }

    private func finish(_ client: TransactionClient, type: TransactionType, state: PaymentClientState) {
        let attempt = attempts.removeValue(forKey: type)
        let requestID = attempt?.requestID
        if state == .completed, let receipt = client.receipt {
            run.tally.walletOutcomes["completed", default: 0] += 1
            run.book.recordCompleted(wallet: index, receipt: receipt, requestID: requestID)
            // The app keeps the receipt, as horizon-wallet does; a crash may come right after.
            do {
                try process?.durable(.walletStoredReceipt) { try store?.saveReceipt(StoredReceipt(receipt)) }
            } catch {
                if process?.isAlive == true { run.book.violation("\(name) could not store a receipt: \(error)") }
            }
        } else {
            let error = state == .idle ? "declined the offer" : client.error.map { "\($0)" } ?? "no error"
            run.tally.walletOutcomes[Self.outcomeName(client.error, state: state), default: 0] += 1
            if let requestID { run.book.recordFailure(wallet: index, requestID: requestID, error: error) }
        }
        guard client.pendingRequest == nil else {
            run.book.violation("\(name): \(type) client finished with a request still pending")
            return
        }
        // Clear this client only: another may be asking for a pending request meanwhile.
        let process = process
        process?.schedule(on: device.clock, after: .milliseconds(100)) { [weak self, weak client] in
            guard let self, let client else { return }
            client.restart()
            client.manualConnectionDecider.restart()
            if self.attempts.isEmpty { self.leave() }
        }
    }

    static func outcomeName(_ error: PaymentClientError?, state: PaymentClientState) -> String {
        guard state != .idle else { return "declined the offer" }
        switch error {
        case nil: return "no error"
        case .declined(let code, _)?: return "declined: \(code)"
        case .sessionUnavailable?: return "session unavailable"
        case .connectionLost?: return "connection lost before confirming"
        case .connectionFailed?: return "connection failed"
        case .secureChannel?: return "secure channel failed"
        case .cancelled?: return "cancelled by the app"
        case .stillPending?: return "still pending"
        case .terminalNotTrusted?: return "terminal not trusted"
        case .invalidOffer?: return "invalid offer"
        case .declinedByUser?: return "declined by the user"
        case .cancelledByTerminal?: return "cancelled by the terminal"
        case .terminalTimedOut?: return "terminal timed out"
        case .notReady?: return "not ready"
        case .invalidTip?: return "invalid tip"
        case .receiptMismatch?: return "receipt mismatch"
        }
    }

    // MARK: Walking about

    /// Where the customer stands at terminal `index`, or between two terminals (no clear
    /// candidate there), or far away (out of radio range of everyone).
    private func spot(at terminal: Int) -> Position {
        if !run.draining, random.chance(0.03), terminal + 1 < run.terminals.count {
            return Position(x: FaultSimulation.spacing * (Double(terminal) + 0.5), y: 0.1)
        }
        return Position(
            x: FaultSimulation.spacing * Double(terminal) + 0.25 + random.nextUnit() * 0.3,
            y: random.nextUnit() * 0.4 - 0.2)
    }

    var awayPosition: Position { Position(x: FaultSimulation.spacing * Double(index), y: 90) }

    private func scheduleNextVisit() {
        guard let process, !run.draining else { return }
        let delay = Duration.milliseconds(Int64(500 + random.nextUnit() * 6_000))
        process.schedule(on: device.clock, after: delay) { [weak self] in
            guard let self, !self.run.draining, self.attempts.isEmpty else { return }
            self.visit(Int(self.random.next() % UInt64(self.run.terminals.count)), shopping: true)
        }
    }

    /// Walks to a terminal; a shopper takes the nearest candidate there, or gives up after a while.
    func visit(_ terminal: Int, shopping: Bool) {
        guard let process else { return }
        visitSerial += 1
        let serial = visitSerial
        visiting = terminal
        self.shopping = shopping
        device.move(to: spot(at: terminal))
        if shopping { autopilot?.takeCandidateIfAvailable() }
        process.schedule(on: device.clock, after: .seconds(25)) { [weak self] in
            guard let self, self.visitSerial == serial, self.attempts.isEmpty, self.shopping else { return }
            self.leave()
        }
    }

    func leave() {
        shopping = false
        visiting = nil
        visitSerial += 1
        device.move(to: awayPosition)
        scheduleNextVisit()
    }

    /// Now and then the customer steps out of radio range mid-transaction and comes back.
    private func maybeWanderOff() {
        guard let process, !run.draining, random.chance(run.rates.wanderOff), let terminal = visiting else { return }
        let away = Duration.milliseconds(Int64(random.nextUnit() * 2_500))
        let back = Duration.milliseconds(Int64(1_000 + random.nextUnit() * 8_000))
        process.schedule(on: device.clock, after: away) { [weak self] in
            guard let self, !self.attempts.isEmpty else { return }
            self.run.tally.movesAway += 1
            self.device.move(to: self.awayPosition)
            process.schedule(on: self.device.clock, after: back) { [weak self] in
                guard let self, !self.attempts.isEmpty || self.hasPending else { return }
                self.visit(terminal, shopping: false)
            }
        }
    }

    // MARK: Winding down

    var hasPending: Bool {
        guard let coordinator else { return false }
        return clients(of: coordinator).contains { $0.pendingRequest != nil }
    }

    /// Stops shopping; with a request pending, goes to (or stays at) its terminal until answered.
    func windDown() {
        shopping = false
        guard isRunning else { return }
        if let pending = attempts.values.compactMap(\.requestID).first, hasPending,
            let terminal = run.terminalIndex(forRequest: pending)
        {
            if visiting != terminal { visit(terminal, shopping: false) }
        } else if attempts.isEmpty, visiting != nil {
            leave()
        }
    }

    /// Requests still in the wallet's store, read from its file.
    func storedPending() throws -> [StoredPendingPayment] { try WalletStore(path: storePath).pending() }

    var unfinishedAttempt: String? {
        guard let coordinator else { return nil }
        for client in clients(of: coordinator) {
            let state = client.state
            if state != .idle, !state.isFinished { return "\(name): \(client.transactionType) client left in \(state)" }
        }
        return nil
    }
}

extension StoredReceipt {
    /// A receipt as the wallet app keeps it (the same fields `horizon-wallet` stores).
    init(_ receipt: PaymentReceipt) {
        self.init(
            paymentID: receipt.paymentID.description, sessionID: receipt.sessionID.description,
            merchantName: receipt.merchantName, amountMinorUnits: receipt.amount.minorUnits,
            tipMinorUnits: receipt.tip.minorUnits, currency: receipt.amount.currency.code, reference: receipt.reference,
            settledAt: receipt.settledAt, bonusPointsEarned: receipt.bonusPointsEarned,
            bonusPointsBalance: receipt.bonusPointsBalance)
    }
}
