// The seeded fault simulation.
//
// One run is one shop on one `RadioSimulation` (a virtual clock, so minutes of shop time cost
// milliseconds): two or three terminals sharing the merchant's SQLite ledger, three to six
// customers whose wallets keep their own SQLite stores, everything derived from the run's seed.
// Terminals open payment and redemption sessions one after another; customers walk up, take the
// nearest candidate, mostly accept, and walk away. Meanwhile the run injects, at seeded random:
//
// - link faults on every frame: cuts, drops, duplicates, reorders (the simulated radio's own
//   fault injection), plus slow and lossy links and small MTUs per device;
// - device movement: a customer steps out of radio range mid-transaction and comes back, or
//   stands between two terminals where neither is a clear candidate;
// - clock skew: each device's wall clock is off by up to ±60 s and jumps now and then, rarely by
//   weeks for a while (credentials, offers, confirmations and receipts all carry wall-clock time);
// - crashes: a terminal's or a wallet's program dies at a random moment or right after one of
//   its durable writes (`DurableStep`: the ledger's commit, the wallet storing or resolving a
//   request or storing a receipt) and is started again over the same files (ProcessSeam.swift);
// - people: declining, ignoring an offer, hesitating before confirming, naming a coupon they do
//   not have; cashiers cancelling;
// - a rogue central (RogueCentralActor.swift): it completes the handshake with a terminal that
//   just opened a session, says Hello with a fresh session key, declines at once half of the time
//   or sends a Confirm signed by that key (which no wallet registered), and holds the link a
//   while, sometimes past its decision time.
//
// Then it stops the faults, lets every pending request be answered and every session end, and
// checks the invariants from the files, not from the objects (Invariants.swift): no double charge,
// no lost confirmed payment, balances (money, points, coupons, gold benefits) conserved, every
// session ended in a final state, no wallet showed failure for a request that was executed, and
// the rogue ended or timed out no session and left no ledger row.
//
// Commands:
//   swift test --filter HorizonFaultTests                 the fixed CI seed set (10 seeds, 10,000+ transactions)
//   Tools/fault-sim.sh [RUNS] [TRANSACTIONS] [FIRST-SEED] a longer run: RUNS seeds (default 100) from FIRST-SEED
//   HORIZON_FAULT_SEED=1234 swift test --filter replaysOneSeed   replays one seed (a failure prints it)
// A failing run prints its seed, and the seed replays the same run: every choice of the shop, the
// people and the fault injector comes from it, and although keys, nonces and session ids come from
// the system's secure generator (as the design requires), their sizes never vary, so neither do
// the frames and the faults that hit them.

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

/// What one run is asked to do.
struct FaultRunConfiguration: Sendable {
    var seed: UInt64
    /// Wallet attempts (sessions a wallet starts on) before the run winds down.
    var transactions: Int
    /// Multiplies every fault rate; 0 is a calm run.
    var faultScale = 1.0
    /// Records the radio's trace and adds the stuck devices' last events to the violations
    /// (HORIZON_FAULT_TRACE=1 with a replayed seed; slower).
    var recordsTrace = false
}

/// How often things go wrong, drawn once per run from its seed.
struct FaultRates: Sendable {
    var link: FaultProbabilities
    var crashAfterDurableStep: Double
    var terminalCrashInterval: Duration
    var walletCrashInterval: Duration
    var wanderOff: Double
    var declineAtOffer: Double
    var ignoreOffer: Double
    var declineAtConfirm: Double
    var hesitate: Double
    var cashierCancel: Double
    var skewChangeInterval: Duration
    var largeSkew: Double

    init(scale: Double, random: inout SeededRandom) {
        // Each run leans a little differently: between half and one and a half times the base rates.
        func rate(_ base: Double) -> Double { base * scale * (0.5 + random.nextUnit()) }
        link = FaultProbabilities(cut: rate(0.0015), drop: rate(0.0015), duplicate: rate(0.0015), reorder: rate(0.0015))
        crashAfterDurableStep = rate(0.03)
        let crashScale = max(scale, 0.000_001)
        terminalCrashInterval = .seconds(Int64(240 / crashScale))
        walletCrashInterval = .seconds(Int64(240 / crashScale))
        wanderOff = rate(0.03)
        declineAtOffer = 0.03
        ignoreOffer = 0.01
        declineAtConfirm = 0.02
        hesitate = 0.1
        cashierCancel = 0.02
        skewChangeInterval = .seconds(Int64(60 / crashScale))
        largeSkew = 0.05 * min(scale, 1)
    }

    /// How long a crashed program stays down.
    func restartDelay(using random: inout SeededRandom) -> Duration {
        .milliseconds(Int64(300 + random.nextUnit() * 4_000))
    }
}

/// One seeded run: builds the shop, runs it with faults, winds it down, checks the files.
/// Only touched on the simulation's thread (`RadioSimulation.run` fires every event on the
/// caller's thread).
final class FaultSimulation: @unchecked Sendable {
    static let spacing = 8.0
    static let wallClock: UnixTime = 1_800_000_000
    static let ledgerConfiguration = InProcessLedgerConfiguration(
        enrollment: .refuseUnknown, bonusPointsPerMajorUnit: 1)

    let configuration: FaultRunConfiguration
    let simulation: RadioSimulation
    let directory: URL
    let anchorKey = P256.Signing.PrivateKey()
    let rates: FaultRates
    let book = Book()
    var tally = FaultTally()
    /// Invariant violations the simulation knows the code still has (see `FaultRunner.Outcome`).
    var knownIssues: [String] = []
    private(set) var terminals: [TerminalActor] = []
    private(set) var wallets: [WalletActor] = []
    private(set) var rogue: RogueCentralActor?
    /// What the ledger held for each wallet before the run.
    private(set) var openingAccounts: [Int: (balance: Int64, points: Int64)] = [:]
    private(set) var draining = false
    private var random: SeededRandom
    private var terminalByKeyID: [TerminalKeyID: Int] = [:]

    init(_ configuration: FaultRunConfiguration, directory: URL) {
        self.configuration = configuration
        self.directory = directory
        simulation = RadioSimulation(
            seed: configuration.seed, wallClockAtStart: Self.wallClock, recordsTrace: configuration.recordsTrace)
        random = SeededRandom(seed: configuration.seed, label: "faults")
        rates = FaultRates(scale: configuration.faultScale, random: &random)
    }

    var anchors: [TrustAnchor] { [TrustAnchor(publicKey: anchorKey.publicKey)] }
    var ledgerPath: String { directory.appendingPathComponent("ledger.sqlite").path }

    // MARK: Setting up the shop

    private func setUp() throws {
        var plan = SeededRandom(seed: configuration.seed, label: "plan")
        let terminalCount = 2 + Int(plan.next() % 2)
        let walletCount = 3 + Int(plan.next() % 4)
        let mtus = [23, 64, 185, 247]
        func linkParameters() -> LinkParameters {
            LinkParameters(
                attMTU: mtus[Int(plan.next() % UInt64(mtus.count))],
                connectionInterval: .microseconds(Int64(7_500 + plan.nextUnit() * 42_500)),
                lossRate: configuration.faultScale > 0 ? plan.nextUnit() * 0.15 : 0)
        }
        func skew() -> Duration { configuration.faultScale > 0 ? Self.smallSkew(&plan) : .zero }
        let ledger = try BlockingLedger(path: ledgerPath, configuration: Self.ledgerConfiguration)
        for index in 0..<terminalCount {
            let device = try simulation.addDevice(
                name: "terminal-\(index)",
                configuration: DeviceConfiguration(
                    position: Position(x: Self.spacing * Double(index), y: 0), link: linkParameters(),
                    wallClockSkew: skew()))
            let key = P256.Signing.PrivateKey()
            let identity = try TerminalIdentity(
                signingKey: key,
                credential: .issue(
                    by: anchorKey, merchantID: "m-fault", merchantName: "Fault Café", terminalKey: key.publicKey,
                    notBefore: Self.wallClock - 86_400 * 30, expiresAt: Self.wallClock + 86_400 * 30))
            terminalByKeyID[try TerminalKeyID(bytes: identity.keyID)] = index
            terminals.append(
                TerminalActor(index: index, device: device, identity: identity, ledgerPath: ledgerPath, run: self))
        }
        for index in 0..<walletCount {
            let identity = WalletIdentity()
            let device = try simulation.addDevice(
                name: "wallet-\(index)",
                configuration: DeviceConfiguration(
                    position: Position(x: Self.spacing * Double(index), y: 90), link: linkParameters(),
                    wallClockSkew: skew()))
            // Most customers are rich; one in six runs out of money now and then.
            let balance: Int64 = plan.chance(1.0 / 6) ? 80_00 : 1_000_000_00
            let points = Int64(plan.next() % 400)
            try ledger.setBalance(balance, for: identity.publicKey, at: Self.wallClock)
            try ledger.addBonusPoints(points, for: identity.publicKey, at: Self.wallClock)
            if plan.chance(0.5) {
                try ledger.grantGoldMembership(
                    to: identity.publicKey, tier: "Gold", validFrom: Self.wallClock - 1_000,
                    validUntil: Self.wallClock + 86_400 * 10, benefitPeriod: 300)
            }
            var coupons: [String] = []
            for (number, lifetime) in [100, 1_000, 100_000].enumerated() {
                let code = "W\(index)-C\(number)"
                try ledger.issueCoupon(
                    code: code, to: identity.publicKey, description: "5 EUR off", value: euros(500),
                    expiresAt: Self.wallClock + Int64(lifetime), at: Self.wallClock)
                coupons.append(code)
            }
            openingAccounts[index] = (balance, points)
            wallets.append(
                WalletActor(
                    index: index, device: device, identity: identity,
                    storePath: directory.appendingPathComponent("wallet-\(index).sqlite").path, coupons: coupons,
                    run: self))
        }
        // Added last, so every other device keeps its address.
        let rogueDevice = try simulation.addDevice(
            name: "rogue",
            configuration: DeviceConfiguration(
                position: Position(x: Self.spacing * Double(terminalCount - 1) / 2, y: -1.5), link: linkParameters()))
        rogue = RogueCentralActor(device: rogueDevice, run: self)
        tally.runs = 1
        tally.terminals = terminalCount
        tally.wallets = walletCount
    }

    func terminalIndex(forRequest id: PaymentID) -> Int? {
        book.signed[id].flatMap { terminalByKeyID[$0.terminalKeyID] }
    }

    // MARK: Faults

    /// The crash policy at each durable write: with the run's probability, the process dies
    /// right after it (never while winding down).
    func maybeCrash(after step: DurableStep, in process: SimulatedProcess, crash: () -> Void) {
        guard !draining, process.isAlive, random.chance(rates.crashAfterDurableStep) else { return }
        crash()
    }

    /// Crashes `process` at an exponentially distributed moment (a memoryless failure rate).
    func scheduleRandomCrash(
        of process: SimulatedProcess, meanInterval: Duration, crash: @escaping @Sendable () -> Void
    ) {
        guard configuration.faultScale > 0 else { return }
        let delay = -log(max(random.nextUnit(), 1e-12)) * Double(meanInterval.nanoseconds)
        simulation.schedule(after: .nanoseconds(Int64(min(delay, 1e15)))) { [weak self] in
            guard let self, !self.draining, process.isAlive else { return }
            crash()
        }
    }

    /// Moves devices' wall clocks now and then: a few seconds, or (rarely) by weeks, beyond the
    /// credential's validity, as a device with a dead clock battery would.
    private func scheduleSkewChange() {
        guard configuration.faultScale > 0 else { return }
        let delay = -log(max(random.nextUnit(), 1e-12)) * Double(rates.skewChangeInterval.nanoseconds)
        simulation.schedule(after: .nanoseconds(Int64(min(delay, 1e15)))) { [weak self] in
            guard let self, !self.draining else { return }
            let devices = self.terminals.map(\.device) + self.wallets.map(\.device)
            let device = devices[Int(self.random.next() % UInt64(devices.count))]
            self.tally.skewChanges += 1
            if self.random.chance(self.rates.largeSkew) {
                // Weeks off, until the clock is set right again a little later.
                self.tally.largeSkews += 1
                device.clock.setSkew(.seconds(86_400 * 45 * (self.random.chance(0.5) ? 1 : -1)))
                let fixed = Duration.seconds(Int64(20 + self.random.nextUnit() * 40))
                self.simulation.schedule(after: fixed) { device.clock.setSkew(.seconds(5)) }
            } else {
                device.clock.setSkew(Self.smallSkew(&self.random))
            }
            self.scheduleSkewChange()
        }
    }

    /// A wall clock off by up to a minute either way: offers (valid two minutes) and
    /// confirmations (two minutes) still pass between most pairs of devices, not all.
    static func smallSkew(_ random: inout SeededRandom) -> Duration {
        .seconds(Int64(random.nextUnit() * 120) - 60)
    }

    // MARK: Running

    /// Runs the shop until the configured number of wallet attempts, winds down, and returns the
    /// invariant violations (empty when all held).
    func run() throws -> [String] {
        try setUp()
        if configuration.faultScale > 0 { simulation.setRandomFaults(rates.link) }
        for terminal in terminals { try terminal.boot() }
        for wallet in wallets { try wallet.boot() }
        scheduleSkewChange()
        // A generous ceiling of virtual time: a calm transaction takes about a second.
        let limit = simulation.now + .seconds(Int64(configuration.transactions) * 20 + 600)
        while tally.walletAttempts < configuration.transactions, simulation.now < limit {
            simulation.run(for: .seconds(5))
        }
        if tally.walletAttempts < configuration.transactions {
            book.violation("only \(tally.walletAttempts) of \(configuration.transactions) attempts in the time allowed")
        }
        windDown()
        tally.virtualSeconds = Double(simulation.now.nanoseconds) / 1e9
        for fault in simulation.appliedFaults { tally.linkFaults["\(fault.fault)", default: 0] += 1 }
        var violations = book.violations
        violations += try Invariants(run: self).check()
        for terminal in terminals { terminal.shutDown() }
        for wallet in wallets { wallet.shutDown() }
        return violations
    }

    /// Stops the faults, brings every program back, lets pending requests be answered and every
    /// session end. Records a violation for anything left unfinished.
    private func windDown() {
        draining = true
        simulation.setRandomFaults(.none)
        // Restart whatever is down now, rather than after its restart delay.
        for terminal in terminals where terminal.process == nil {
            do { try terminal.boot() } catch { book.violation("\(terminal.name) could not restart: \(error)") }
        }
        for wallet in wallets where wallet.process == nil {
            do { try wallet.boot() } catch { book.violation("\(wallet.name) could not restart: \(error)") }
        }
        for terminal in terminals { terminal.keepOpening() }
        // Every request a wallet still waits for gets its answer from a terminal that keeps
        // opening sessions (a pending request is asked for through whichever session is open).
        let answered = simulation.run(
            until: {
                for wallet in self.wallets { wallet.windDown() }
                return self.wallets.allSatisfy { !$0.isBusy && !$0.hasPending }
            }, timeout: .seconds(900))
        if !answered {
            for wallet in wallets where wallet.isBusy || wallet.hasPending {
                book.violation(
                    "\(wallet.name) still busy after winding down: \(wallet.unfinishedAttempt ?? "pending request")")
                if configuration.recordsTrace {
                    let lines = simulation.trace.filter {
                        !$0.contains(" sighting ")
                            && ($0.contains(wallet.name) || $0.contains(wallet.device.address.rawValue))
                    }
                    book.violation("its last radio events:\n" + lines.suffix(40).joined(separator: "\n"))
                }
            }
        }
        for terminal in terminals { terminal.windDown() }
        let quiet = simulation.run(
            until: {
                for terminal in self.terminals { terminal.windDown() }
                return self.terminals.allSatisfy(\.isQuiet) && self.wallets.allSatisfy { !$0.isBusy }
            }, timeout: .seconds(120))
        if !quiet {
            for terminal in terminals { if let text = terminal.unfinishedSession { book.violation(text) } }
            for wallet in wallets { if let text = wallet.unfinishedAttempt { book.violation(text) } }
        }
        // Let the last links close and the last timers fire.
        simulation.run(for: .seconds(10))
    }
}
