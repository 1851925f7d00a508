import Foundation
import HorizonCore
import HorizonSimulatedRadio

/// Settings every measurement shares.
struct BenchSettings {
    let iterations: Int
    let quick: Bool
    let seed: UInt64
    let spacing: Double
    let directory: URL
    let walletStore: WalletStoreKind
    /// Who settles in payment-cpu's in-process shop (`--processor`).
    var processor: ProcessorKind = .ledger
    /// payment-cpu settles through this server (`--through-server`) instead of the in-process ledger.
    var remote: RemoteSettlement? = nil

    func shopOptions(seed offset: UInt64, pairs: Int, link: LinkParameters, remote: RemoteSettlement? = nil)
        -> ShopOptions
    {
        ShopOptions(
            seed: seed &+ offset, pairCount: pairs, link: link, spacing: spacing, directory: directory,
            walletStore: walletStore, remote: remote, processor: processor)
    }

    /// Payments run and thrown away before measuring: first-contact enrolment, first use of
    /// every code path, page faults.
    var warmUp: Int { quick ? 1 : 5 }
}

/// Per-frame header bytes a real BLE radio adds to an ATT payload, assuming data length
/// extension so one ATT packet is one link-layer PDU: ATT opcode and handle (3), L2CAP (4),
/// link-layer header (2), preamble (1), access address (4), CRC (3).
let airOverheadPerFrame = 17

// MARK: - CPU of one payment against its cryptography

struct PaymentCPUResult: Codable {
    let iterations: Int
    let warmUpPayments: Int
    let walletStore: String
    let link: LinkDescription
    /// Process CPU of one complete payment, terminal and wallet: from `PaymentHost.start` through
    /// discovery, decision, handshake, offer, confirmation, settlement and receipt to the
    /// terminal closing the link and both sides reset for the next payment.
    let paymentCPUMicroseconds: Summary
    /// Process CPU of the same payment's cryptography alone (`CryptoBaseline`).
    let cryptoCPUMicroseconds: Summary
    /// median(payment) / median(crypto): the budget's number (at most 3).
    let ratioOfMedians: Double
    /// payment / crypto of each iteration (they run back to back).
    let ratioPerIteration: Summary
    /// `getrusage` over all measured payments, per payment: how much was in the kernel (SQLite's
    /// syncs, mostly). The kernel samples this split; the total above is exact.
    let userMicrosecondsPerPayment: Double
    let systemMicrosecondsPerPayment: Double
    let cryptoOperations: [String: Int]
    let recordPlaintextBytes: [String: Int]
    let traffic: TrafficResult
    /// Synced commits per payment on each side's SQLite files: what the durability rules cost.
    let syncedCommitsPerPayment: SyncedCommitsResult
    /// Where the terminal settled: its in-process ledger, or a server's URL (`--through-server`).
    var settlement = "in-process ledger (SQLite)"
}

struct LinkDescription: Codable {
    let attMTU: Int
    let connectionIntervalMilliseconds: Double
    let latencyMilliseconds: Double
    let packetsPerEvent: Int

    init(_ link: LinkParameters) {
        attMTU = link.attMTU
        connectionIntervalMilliseconds = link.connectionInterval.milliseconds
        latencyMilliseconds = link.latency.milliseconds
        packetsPerEvent = link.packetsPerEvent
    }
}

/// Synced commits per payment, per file (`SyncedCommits`, counted by SQLite's WAL hook): the
/// terminal's journal, the wallet's store, and the terminal's in-process ledger. A side without
/// such a file here (a wallet store in memory, a ledger in a server or none) is left out.
struct SyncedCommitsResult: Codable {
    let terminalJournal: Summary
    let wallet: Summary?
    let ledger: Summary?

    init(_ records: [PaymentRecord]) {
        terminalJournal = Summary(records.map(\.syncedCommits.terminalJournal))
        let wallet = records.compactMap(\.syncedCommits.wallet)
        self.wallet = wallet.isEmpty ? nil : Summary(wallet)
        let ledger = records.compactMap(\.syncedCommits.ledger)
        self.ledger = ledger.isEmpty ? nil : Summary(ledger)
    }
}

/// Round trips and bytes per payment, from the simulated radio's link counters.
struct TrafficResult: Codable {
    /// Wallet → terminal → wallet exchanges from the wallet's acceptance to the receipt.
    let roundTripsFromAcceptance: Summary
    /// The same over the whole link: handshake, offer, confirmation.
    let roundTripsWholeLink: Summary
    let framesPerPayment: Summary
    /// ATT payload bytes, both directions.
    let bytesPerPayment: Summary
    let walletToTerminalBytes: Summary
    let terminalToWalletBytes: Summary
    /// Payload plus `airOverheadPerFrame` per frame.
    let bytesWithHeadersPerPayment: Summary

    init(_ records: [PaymentRecord]) {
        roundTripsFromAcceptance = Summary(records.map(\.roundTripsFromAcceptance))
        roundTripsWholeLink = Summary(records.map(\.roundTripsWholeLink))
        framesPerPayment = Summary(records.map(\.frames))
        bytesPerPayment = Summary(records.map(\.bytes))
        walletToTerminalBytes = Summary(records.map(\.walletBytes))
        terminalToWalletBytes = Summary(records.map(\.terminalBytes))
        bytesWithHeadersPerPayment = Summary(records.map { $0.bytes + $0.frames * airOverheadPerFrame })
    }
}

enum PaymentCPU {
    /// The radio of the budget's CPU line: zero latency; the default 30 ms interval and MTU 247.
    static let link = LinkParameters(attMTU: 247, connectionInterval: .milliseconds(30), latency: .zero)

    static func measure(_ settings: BenchSettings) throws -> PaymentCPUResult {
        let shop = try Shop(settings.shopOptions(seed: 0, pairs: 1, link: link, remote: settings.remote))
        // Through a server the terminal also signs each settlement request.
        let crypto = try CryptoBaseline(signsSettlementRequest: settings.remote != nil)
        for _ in 0..<settings.warmUp {
            try shop.payOnce()
            try crypto.runOnce()
        }
        var payment: [Double] = []
        var cryptography: [Double] = []
        var ratios: [Double] = []
        var records: [PaymentRecord] = []
        let usageBefore = Clocks.usage()
        var cryptoUsage: (user: Int64, system: Int64) = (0, 0)
        for iteration in 0..<settings.iterations {
            if iteration % max(1, settings.iterations / 5) == 0 {
                Progress.note("payment CPU: \(iteration) of \(settings.iterations)")
            }
            // The payment and its cryptography back to back, so both see the same machine state.
            let start = Clocks.processCPU()
            records += try shop.payOnce()
            let paid = Clocks.processCPU()
            let usageMiddle = Clocks.usage()
            try crypto.runOnce()
            let done = Clocks.processCPU()
            let usageAfter = Clocks.usage()
            cryptoUsage.user += usageAfter.user - usageMiddle.user
            cryptoUsage.system += usageAfter.system - usageMiddle.system
            payment.append(Double(paid - start) / 1000)
            cryptography.append(Double(done - paid) / 1000)
            ratios.append(Double(paid - start) / Double(max(done - paid, 1)))
        }
        let usageAfter = Clocks.usage()
        let count = Double(settings.iterations)
        let paymentSummary = Summary(payment)
        let cryptoSummary = Summary(cryptography)
        var result = PaymentCPUResult(
            iterations: settings.iterations, warmUpPayments: settings.warmUp,
            walletStore: settings.walletStore.rawValue,
            link: LinkDescription(link), paymentCPUMicroseconds: paymentSummary, cryptoCPUMicroseconds: cryptoSummary,
            ratioOfMedians: paymentSummary.median / cryptoSummary.median, ratioPerIteration: Summary(ratios),
            userMicrosecondsPerPayment: Double(usageAfter.user - usageBefore.user - cryptoUsage.user) / count,
            systemMicrosecondsPerPayment: Double(usageAfter.system - usageBefore.system - cryptoUsage.system) / count,
            cryptoOperations: CryptoBaseline.inventory(signsSettlementRequest: settings.remote != nil),
            recordPlaintextBytes: crypto.recordPlaintextSizes,
            traffic: TrafficResult(records), syncedCommitsPerPayment: SyncedCommitsResult(records))
        if let remote = settings.remote { result.settlement = "horizon-server at \(remote.url.absoluteString)" }
        if settings.processor == .instant { result.settlement = "instant approval, no ledger (--processor instant)" }
        return result
    }
}

// MARK: - Acceptance to receipt at 30 ms

struct LatencyResult: Codable {
    let link: LinkDescription
    let payments: Int
    /// Virtual time on the simulated radio from the wallet's acceptance (`decideForCandidate`)
    /// to the verified receipt: the budget's number (under 500 ms).
    let acceptanceToReceiptMilliseconds: Summary
    /// Real time the process computed (and synced) between acceptance and receipt; the
    /// simulation's clock stands still meanwhile, so a real pair adds about this much.
    let computeBetweenAcceptanceAndReceiptMilliseconds: Summary
    /// Both added, per payment: what a real pair on such a radio would see.
    let estimatedRealAcceptanceToReceiptMilliseconds: Summary
    /// Virtual time from the link coming up (the wallet fetches the offer first) to the receipt.
    let linkUpToReceiptMilliseconds: Summary
    /// Virtual time from the terminal starting the session (advertising, discovery, the
    /// tracker's three sightings) to the receipt.
    let startToReceiptMilliseconds: Summary
    let traffic: TrafficResult
}

enum Latency {
    static let mtus = [23, 185, 247]

    static func measure(_ settings: BenchSettings) throws -> [LatencyResult] {
        try mtus.enumerated().map { index, mtu in
            Progress.note("acceptance to receipt: MTU \(mtu), \(settings.iterations) payments")
            let link = LinkParameters(attMTU: mtu, connectionInterval: .milliseconds(30), latency: .zero)
            let shop = try Shop(settings.shopOptions(seed: 100 + UInt64(index), pairs: 1, link: link))
            for _ in 0..<settings.warmUp { try shop.payOnce() }
            var records: [PaymentRecord] = []
            for _ in 0..<settings.iterations { records += try shop.payOnce() }
            return LatencyResult(
                link: LinkDescription(link), payments: records.count,
                acceptanceToReceiptMilliseconds: Summary(records.map(\.acceptanceToReceiptMilliseconds)),
                computeBetweenAcceptanceAndReceiptMilliseconds: Summary(
                    records.map(\.computeBetweenAcceptanceAndReceiptMilliseconds)),
                estimatedRealAcceptanceToReceiptMilliseconds: Summary(
                    records.map {
                        $0.acceptanceToReceiptMilliseconds + $0.computeBetweenAcceptanceAndReceiptMilliseconds
                    }
                ),
                linkUpToReceiptMilliseconds: Summary(records.map(\.linkUpToReceiptMilliseconds)),
                startToReceiptMilliseconds: Summary(records.map(\.startToReceiptMilliseconds)),
                traffic: TrafficResult(records))
        }
    }
}

// MARK: - Scaling and throughput

struct ScalingPoint: Codable {
    let pairs: Int
    let rounds: Int
    let payments: Int
    /// Each round: every pair pays once, all at the same time; CPU of the round / pairs.
    let cpuPerPaymentMicroseconds: Summary
    /// The same number of `CryptoBaseline` runs after each round, CPU / pairs.
    let cryptoPerPaymentMicroseconds: Summary
    let ratioOfMedians: Double
    /// Pairs / CPU seconds of a round: payments per second on one core (the simulation and
    /// every role run on the calling thread).
    let paymentsPerCPUSecond: Summary
    /// Pairs / wall seconds of a round (includes waiting for SQLite's syncs).
    let paymentsPerWallSecond: Summary
    /// Virtual time from acceptance to receipt, every payment of every round: simultaneous
    /// pairs in separate shops must not slow each other down.
    let acceptanceToReceiptMilliseconds: Summary
    let traffic: TrafficResult
    /// This process's resident memory after the point's rounds (all pairs alive).
    let benchResidentKiB: Int?
}

enum Scaling {
    static func rounds(pairs: Int, settings: BenchSettings) -> Int {
        max(settings.quick ? 2 : 5, (settings.iterations + pairs - 1) / pairs)
    }

    static func measure(_ settings: BenchSettings, pairCounts: [Int]) throws -> [ScalingPoint] {
        let crypto = try CryptoBaseline()
        return try pairCounts.enumerated().map { index, pairs in
            let rounds = rounds(pairs: pairs, settings: settings)
            Progress.note("scaling: \(pairs) simultaneous pair(s), \(rounds) rounds (setting up)")
            let shop = try Shop(settings.shopOptions(seed: 200 + UInt64(index), pairs: pairs, link: PaymentCPU.link))
            try shop.payOnce()  // warm-up round: enrolment, first use of every path
            var cpu: [Double] = []
            var cryptoCPU: [Double] = []
            var perCPUSecond: [Double] = []
            var perWallSecond: [Double] = []
            var records: [PaymentRecord] = []
            for round in 0..<rounds {
                if pairs >= 10 || round % max(1, rounds / 5) == 0 {
                    Progress.note("scaling: \(pairs) pair(s), round \(round + 1) of \(rounds)")
                }
                let wallStart = Clocks.wall()
                let start = Clocks.processCPU()
                records += try shop.payOnce()
                let paid = Clocks.processCPU()
                let wallEnd = Clocks.wall()
                for _ in 0..<pairs { try crypto.runOnce() }
                let done = Clocks.processCPU()
                cpu.append(Double(paid - start) / 1000 / Double(pairs))
                cryptoCPU.append(Double(done - paid) / 1000 / Double(pairs))
                perCPUSecond.append(Double(pairs) / (Double(paid - start) / 1_000_000_000))
                perWallSecond.append(Double(pairs) / (Double(wallEnd - wallStart) / 1_000_000_000))
            }
            let cpuSummary = Summary(cpu)
            let cryptoSummary = Summary(cryptoCPU)
            return ScalingPoint(
                pairs: pairs, rounds: rounds, payments: records.count, cpuPerPaymentMicroseconds: cpuSummary,
                cryptoPerPaymentMicroseconds: cryptoSummary, ratioOfMedians: cpuSummary.median / cryptoSummary.median,
                paymentsPerCPUSecond: Summary(perCPUSecond), paymentsPerWallSecond: Summary(perWallSecond),
                acceptanceToReceiptMilliseconds: Summary(records.map(\.acceptanceToReceiptMilliseconds)),
                traffic: TrafficResult(records), benchResidentKiB: ProcessStatus.ownResidentKiB)
        }
    }
}
