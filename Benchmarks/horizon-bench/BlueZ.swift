import Foundation
import HorizonBlueZ
import HorizonCore
import HorizonRadio
import Logging
import Synchronization

/// The BlueZ part of the benchmarks, measured on a real `bluetoothd` with two adapters (the
/// `Tools/bluez-vm` harness: two linked virtual controllers, `Benchmarks/bluez-vm.sh`). Both
/// radios live in this process, each on its own adapter and its own D-Bus connection: the
/// terminal on one (hci0), the wallet on the other (hci1).
///
/// 1. The raw round trip (`BlueZRoundTrip`): the wallet radio connects to an advertisement of the
///    terminal radio through `CentralRadio.connect`, then sends one small payload on the link
///    (one ATT write) and the terminal's side sends it straight back (one notification), N times.
///    Once quiet (no advertising, no discovery) and once as during a payment (the terminal
///    advertising, both adapters discovering).
/// 2. Payments (`BlueZShop`): the set-up of the simulated benchmark (`Shop`) on the two BlueZ
///    radios: from the wallet's acceptance to the verified receipt, the connect, and where the
///    time goes in between.
/// 3. The budget's number: median(acceptance → receipt) / median(raw round trip), at most 3.5.
struct BlueZResult: Codable {
    let status: String
    let reason: String
    /// The headline numbers by name (milliseconds unless the name says otherwise).
    var measurements: [String: Double] = [:]
    var setup: BlueZSetup?
    /// One write answered by one notification, nothing else on the radios.
    var rawRoundTrip: BlueZRoundTripResult?
    /// The same with a payment-sized payload (the confirmation and the receipt are one frame each).
    var rawRoundTripPaymentSizedPayload: BlueZRoundTripResult?
    /// The same with the terminal advertising and both adapters discovering, as during a payment.
    var rawRoundTripWhileScanning: BlueZRoundTripResult?
    var payments: BlueZPaymentsResult?
    /// Raw round trips and payments alternate in this many blocks (each block: a fresh raw
    /// connection, its two series, then its share of the payments).
    var blocks: Int?
    /// Per block: median(acceptance → receipt) / median(quiet raw round trip) of that block.
    var ratioPerBlock: [Double]?
    /// median(acceptance → receipt) / median(quiet raw round trip): the budget's number.
    var ratioAcceptanceToReceiptOverRawRoundTrip: Double?
    /// The same against the raw round trip measured while scanning and advertising.
    var ratioOverRawRoundTripWhileScanning: Double?
    /// The median over payments of acceptance → receipt / the median raw round trip on that
    /// payment's own link right after its receipt: numerator and denominator a second apart, so
    /// the drift of a shared host's speed cancels.
    var pairedRatioMedian: Double?
    /// CPU of one payment's whole cryptography (`CryptoBaseline`) on this machine, for scale: under
    /// software emulation it is many times the host's.
    var cryptoOfOnePaymentCPUMilliseconds: Summary?
    /// Everything that went wrong without stopping the run (failed payments and their reasons).
    var problems: [String] = []

    static func notMeasured(_ reason: String) -> BlueZResult {
        BlueZResult(status: BlueZ.notMeasured, reason: reason)
    }
}

/// What the BlueZ run ran on.
struct BlueZSetup: Codable {
    let terminalAdapter: String
    let terminalAddress: String
    let walletAdapter: String
    let walletAddress: String
    /// The machine outside the VM, as `Benchmarks/bluez-vm.sh` describes it (`--bluez-host`).
    let host: String?
    /// `BLUEZ_VM=1`: inside the `Tools/bluez-vm` harness (QEMU, btvirt's virtual controllers).
    let insideBlueZVM: Bool
    /// How the wallet received notifications: "socket" (AcquireNotify) or "signals".
    var walletNotifications: String?
}

/// Options of the BlueZ measurement (`--bluez-…`).
struct BlueZOptions {
    var terminalAdapter: String
    var walletAdapter: String
    var roundTrips: Int
    var payments: Int
    var payloadBytes: Int
    /// Raw round trips and payments alternate in this many blocks.
    var blocks: Int
    var host: String?
    /// How the wallet's radio receives notifications (`--bluez-notify`).
    var notifications: BlueZNotificationPath
    /// `--only bluez` was given: a full run never touches Bluetooth adapters on its own.
    var requested: Bool
}

enum BlueZ {
    /// With `HORIZON_BLUEZ_TRACE=1` (`TRACE=1 Benchmarks/bluez-vm.sh`): each D-Bus step of the
    /// BlueZ layer on standard error, to profile where the time goes; silent otherwise.
    static func bluezLogger(_ side: String) -> Logger {
        guard ProcessInfo.processInfo.environment["HORIZON_BLUEZ_TRACE"] == "1" else { return .bluezSilent }
        var logger = Logger(label: "horizon.bluez.\(side)") { ElapsedLogHandler(label: $0) }
        logger.logLevel = .trace
        return logger
    }

    /// Each line with the milliseconds since the process started (swift-log's stream handler
    /// stamps whole seconds, too coarse to see where a 200 ms connect goes).
    struct ElapsedLogHandler: LogHandler {
        static let start = ContinuousClock.now
        let label: String
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let elapsed = ContinuousClock.now - Self.start
            let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
            FileHandle.standardError.write(Data("\(milliseconds.formatted(1)) \(label): \(event.message)\n".utf8))
        }
    }

    static let notMeasured = "bluez: not measured in this run"
    /// The budget line: the tap (advertising start → verified receipt), median, under this.
    static let tapLimitMilliseconds = 350.0

    /// `BlueZRadio.open`, waited for: the benchmark runs synchronously and may block its thread.
    static func openRadio(
        adapter: String, notifications: BlueZNotificationPath = .acquiredSocket, logger: Logger
    ) throws(RadioError) -> BlueZRadio {
        let opened = Mutex<Result<BlueZRadio, RadioError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do throws(RadioError) {
                let radio = try await BlueZRadio.open(adapter: adapter, notifications: notifications, logger: logger)
                opened.withLock { $0 = .success(radio) }
            } catch {
                opened.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        guard let result = opened.withLock({ $0 }) else { throw .invalidConfiguration("the adapter did not open") }
        return try result.get()
    }

    static func measure(_ settings: BenchSettings, options: BlueZOptions) -> BlueZResult {
        guard options.requested else {
            return .notMeasured(
                "the BlueZ measurement runs only when asked (--only bluez), next to a bluetoothd with two adapters: Benchmarks/bluez-vm.sh runs it in the Tools/bluez-vm harness; every other number in this file is from the simulated radio"
            )
        }
        let terminal: BlueZRadio
        let wallet: BlueZRadio
        do {
            Progress.note("bluez: opening \(options.terminalAdapter) (terminal) and \(options.walletAdapter) (wallet)")
            terminal = try openRadio(adapter: options.terminalAdapter, logger: Self.bluezLogger("terminal"))
            do {
                wallet = try openRadio(
                    adapter: options.walletAdapter, notifications: options.notifications,
                    logger: Self.bluezLogger("wallet"))
            } catch {
                terminal.shutdown()
                throw error
            }
        } catch {
            return .notMeasured(
                "cannot open the adapters \(options.terminalAdapter) and \(options.walletAdapter): \(error) (run Benchmarks/bluez-vm.sh)"
            )
        }
        defer {
            wallet.shutdown()
            terminal.shutdown()
        }
        var result = BlueZResult(status: "measured", reason: "")
        result.setup = BlueZSetup(
            terminalAdapter: terminal.adapter.name, terminalAddress: terminal.adapter.address,
            walletAdapter: wallet.adapter.name, walletAddress: wallet.adapter.address, host: options.host,
            insideBlueZVM: ProcessInfo.processInfo.environment["BLUEZ_VM"] == "1",
            walletNotifications: options.notifications.rawValue)

        if let crypto = try? CryptoBaseline() {
            var runs: [Double] = []
            for _ in 0..<(settings.quick ? 5 : 30) {
                let start = Clocks.processCPU()
                guard (try? crypto.runOnce()) != nil else { break }
                runs.append(Double(Clocks.processCPU() - start) / 1e6)
            }
            result.cryptoOfOnePaymentCPUMilliseconds = Summary(runs.dropFirst().map { $0 })
        }

        // Raw round trips and payments alternate in blocks, so both see the same machine: on a
        // shared host (and more so under software emulation) the load changes within a minute.
        let blocks = max(1, min(options.blocks, options.payments))
        let warmUpRoundTrips = settings.quick ? 2 : 5
        let warmUpPayments = settings.quick ? 1 : 2
        var rawBlocks: [RoundTripBlock] = []
        var records: [BlueZPaymentRecord] = []
        var perBlockRatios: [Double] = []
        let shop: BlueZShop
        do {
            shop = try BlueZShop(terminal: terminal, wallet: wallet, directory: settings.directory)
        } catch {
            return BlueZResult(
                status: "bluez: failed", reason: "setting up the terminal and the wallet: \(error)", setup: result.setup
            )
        }
        defer { shop.close() }
        let rounds = BlueZRoundTrip(
            terminal: terminal, wallet: wallet, tap: shop.terminalTap, payloadBytes: options.payloadBytes,
            largePayloadBytes: 180, warmUp: warmUpRoundTrips)
        shop.echoRoundTrips = max(3, options.roundTrips / max(1, options.payments))
        shop.echoPayloadBytes = options.payloadBytes
        var knownAddress: PeerAddress?
        var failure: String?
        for block in 0..<blocks {
            let roundTrips = share(options.roundTrips, of: blocks, part: block)
            let payments = share(options.payments, of: blocks, part: block)
            Progress.note(
                "bluez: block \(block + 1) of \(blocks): \(roundTrips) + \(roundTrips) raw round trips, then \(payments) payments"
            )
            do {
                shop.pause()
                // Let the last payment's disconnect and the stopped discoveries finish first.
                Thread.sleep(forTimeInterval: 1)
                let raw = try rounds.measureBlock(quiet: roundTrips, scanning: roundTrips, knownAddress: knownAddress)
                knownAddress = raw.address
                rawBlocks.append(raw)
                try shop.resume()
                let paid = try shop.pay(
                    count: payments, warmUp: block == 0 ? warmUpPayments : 0, limit: options.payments / 2 + 3)
                records += paid
                let rawMedian = Summary(raw.quiet.map(\.total)).median
                let paidMedian = Summary(paid.map(\.acceptanceToReceipt)).median
                perBlockRatios.append(paidMedian / rawMedian)
                Progress.note(
                    "bluez: block \(block + 1): raw round trip median \(rawMedian.formatted(1)) ms, acceptance → receipt median \(paidMedian.formatted(1)) ms, ratio \(perBlockRatios.last?.formatted(2) ?? "n/a")x"
                )
            } catch {
                failure = "block \(block + 1): \(error)"
                break
            }
        }
        result.rawRoundTrip = BlueZRoundTrip.summarise(rawBlocks, .quiet, warmUp: warmUpRoundTrips)
        result.rawRoundTripPaymentSizedPayload = BlueZRoundTrip.summarise(rawBlocks, .large, warmUp: warmUpRoundTrips)
        result.rawRoundTripWhileScanning = BlueZRoundTrip.summarise(rawBlocks, .scanning, warmUp: warmUpRoundTrips)
        if !records.isEmpty {
            result.payments = BlueZShop.summarise(
                records, warmUp: warmUpPayments, failures: shop.failures, directory: settings.directory,
                echoPayloadBytes: shop.echoPayloadBytes)
        }
        result.blocks = rawBlocks.count
        result.ratioPerBlock = perBlockRatios
        result.problems = shop.failures
        if let failure {
            result.problems.append(failure)
            result.fillMeasurements()
            return BlueZResult(
                status: "bluez: failed", reason: failure, measurements: result.measurements, setup: result.setup,
                rawRoundTrip: result.rawRoundTrip,
                rawRoundTripPaymentSizedPayload: result.rawRoundTripPaymentSizedPayload,
                rawRoundTripWhileScanning: result.rawRoundTripWhileScanning, payments: result.payments,
                blocks: result.blocks, ratioPerBlock: result.ratioPerBlock,
                ratioAcceptanceToReceiptOverRawRoundTrip: result.ratioAcceptanceToReceiptOverRawRoundTrip,
                ratioOverRawRoundTripWhileScanning: result.ratioOverRawRoundTripWhileScanning,
                pairedRatioMedian: result.pairedRatioMedian,
                cryptoOfOnePaymentCPUMilliseconds: result.cryptoOfOnePaymentCPUMilliseconds, problems: result.problems)
        }
        result.fillMeasurements()
        return result
    }

    /// Part `part` of `total` split into `parts` nearly equal shares.
    static func share(_ total: Int, of parts: Int, part: Int) -> Int {
        total / parts + (part < total % parts ? 1 : 0)
    }
}

extension BlueZResult {
    /// The ratios and the flat headline numbers, from the sections.
    mutating func fillMeasurements() {
        guard let raw = rawRoundTrip, let payments else { return }
        let acceptance = payments.acceptanceToReceiptMilliseconds.median
        ratioAcceptanceToReceiptOverRawRoundTrip = acceptance / raw.roundTripMilliseconds.median
        if let scanning = rawRoundTripWhileScanning {
            ratioOverRawRoundTripWhileScanning = acceptance / scanning.roundTripMilliseconds.median
            measurements["rawRoundTripWhileScanningMedianMilliseconds"] = scanning.roundTripMilliseconds.median
        }
        if let paired = payments.pairedRatio {
            pairedRatioMedian = paired.median
            measurements["pairedRatioMedian"] = paired.median
        }
        if let onLink = payments.rawRoundTripOnPaymentLink {
            measurements["rawRoundTripOnPaymentLinkMedianMilliseconds"] = onLink.roundTripMilliseconds.median
        }
        if let large = rawRoundTripPaymentSizedPayload {
            measurements["rawRoundTripPaymentSizedMedianMilliseconds"] = large.roundTripMilliseconds.median
        }
        measurements["rawRoundTripMedianMilliseconds"] = raw.roundTripMilliseconds.median
        measurements["rawRoundTripP90Milliseconds"] = raw.roundTripMilliseconds.p90
        measurements["rawRoundTripMinMilliseconds"] = raw.roundTripMilliseconds.min
        measurements["acceptanceToReceiptMedianMilliseconds"] = acceptance
        measurements["acceptanceToReceiptP90Milliseconds"] = payments.acceptanceToReceiptMilliseconds.p90
        measurements["connectMedianMilliseconds"] = payments.connectMilliseconds.median
        measurements["ratioAcceptanceToReceiptOverRawRoundTrip"] = ratioAcceptanceToReceiptOverRawRoundTrip
    }

    /// The table's BlueZ section.
    func tableLines() -> [String] {
        var out: [String] = []
        guard status == "measured" || rawRoundTrip != nil else {
            out.append(status)
            out.append("  (\(reason))")
            return out
        }
        let placement =
            setup.map {
                "terminal \($0.terminalAdapter) \($0.terminalAddress), wallet \($0.walletAdapter) \($0.walletAddress) (notifications over \($0.walletNotifications ?? "socket")), one process"
                    + ($0.insideBlueZVM ? ", in the Tools/bluez-vm VM (QEMU TCG, btvirt)" : "")
            } ?? ""
        out.append("BlueZ: real bluetoothd, \(placement)")
        if let host = setup?.host { out.append("host: \(host)") }
        if status != "measured" { out.append("\(status): \(reason)") }
        var rows: [[String]] = []
        if let raw = rawRoundTrip {
            rows.append(["raw round trip, quiet (write → notification)"] + Self.row(raw.roundTripMilliseconds))
            rows.append(["  write leg (wallet send → terminal handler)"] + Self.row(raw.writeLegMilliseconds))
            rows.append(
                ["  notification leg (terminal send → wallet handler)"] + Self.row(raw.notificationLegMilliseconds))
        }
        if let raw = rawRoundTripPaymentSizedPayload {
            rows.append(
                ["raw round trip, quiet, \(raw.payloadBytes)-byte payload"] + Self.row(raw.roundTripMilliseconds))
        }
        if let raw = rawRoundTripWhileScanning {
            rows.append(["raw round trip, advertising + both scanning"] + Self.row(raw.roundTripMilliseconds))
        }
        if let raw = payments?.rawRoundTripOnPaymentLink {
            rows.append(["raw round trip on each payment's link, after it"] + Self.row(raw.roundTripMilliseconds))
        }
        if let payments {
            rows.append(["acceptance → verified receipt"] + Self.row(payments.acceptanceToReceiptMilliseconds))
            rows.append(
                ["  confirmation sent (onHostConnected) → receipt"] + Self.row(payments.confirmToReceiptMilliseconds))
            rows.append(["connect (CentralRadio.connect → link up)"] + Self.row(payments.connectMilliseconds))
            rows.append(
                ["start → candidate (advertising, sightings)"] + Self.row(payments.startToCandidateMilliseconds))
            rows.append(["link up → receipt"] + Self.row(payments.linkUpToReceiptMilliseconds))
            rows.append(
                ["start → receipt (advertising, discovery, all)"] + Self.row(payments.startToReceiptMilliseconds))
        }
        out += BenchmarkReport.grid(["", "median ms", "p10", "p90", "min", "max", "n"], rows)
        if let raw = rawRoundTrip {
            out.append(
                "raw link: \(raw.payloadBytes)-byte payload, ATT MTU \(raw.walletAttMTU.map(String.init) ?? "?") (wallet) / \(raw.terminalAttMTU.map(String.init) ?? "?") (terminal), connect median \(raw.connectMilliseconds?.median.formatted(0) ?? "n/a") ms over \(raw.series) connections, \(raw.warmUpPerSeries) warm-up round trips per series not counted"
            )
        }
        if let tap = payments?.tap {
            out.append("start → receipt, where the time goes (each payment's parts, consecutive):")
            out += BenchmarkReport.grid(
                ["", "median ms", "p10", "p90"],
                [
                    ["terminal: open the session, register the advertisement"] + Self.row3(tap.advertiseMilliseconds),
                    ["→ the wallet's radio first reports it"] + Self.row3(tap.firstSightingMilliseconds),
                    ["→ the tracker's candidate (sightings, evaluation)"] + Self.row3(tap.candidateMilliseconds),
                    ["→ the connect asked for (automatic decision)"] + Self.row3(tap.decideMilliseconds),
                    ["→ link up (connect, services, subscribe, register)"] + Self.row3(tap.connectMilliseconds),
                    ["→ verified receipt (handshake, offer, confirmation)"]
                        + Self.row3(tap.linkUpToReceiptMilliseconds),
                ])
        }
        if let payments {
            let b = payments.breakdown
            out.append("acceptance → receipt, where the time goes (medians, ms):")
            out += BenchmarkReport.grid(
                ["", "median ms", "p10", "p90"],
                [
                    ["wallet: sign the confirmation, store it (synced)"] + Self.row3(b.walletBeforeSendMilliseconds),
                    ["confirmation on the air (first write → terminal has it)"] + Self.row3(b.writeLegMilliseconds),
                    ["terminal: verify, settle (synced), sign the receipt"] + Self.row3(b.terminalMilliseconds),
                    ["receipt on the air (first notification → wallet has it)"]
                        + Self.row3(b.notificationLegMilliseconds),
                    ["wallet: verify the receipt, resolve the pending entry"]
                        + Self.row3(b.walletAfterReceiveMilliseconds),
                ])
            let t = payments.trafficFromAcceptance
            out.append(
                "frames from acceptance to receipt: wallet → terminal \(t.walletFrames.median.formatted(0)) (\(t.walletBytes.median.formatted(0)) bytes), terminal → wallet \(t.terminalFrames.median.formatted(0)) (\(t.terminalBytes.median.formatted(0)) bytes), round trips \(t.roundTrips.median.formatted(0)); whole link \(payments.trafficWholeLink.walletFrames.median.formatted(0)) + \(payments.trafficWholeLink.terminalFrames.median.formatted(0)) frames, \(payments.trafficWholeLink.roundTrips.median.formatted(0)) round trips"
            )
            if let crypto = cryptoOfOnePaymentCPUMilliseconds {
                out.append(
                    "for scale: the cryptography of a whole payment (4 signatures, 5 verifications, 2 key pairs, 2 ECDH, …) takes \(crypto.median.formatted(1)) ms of CPU here (median of \(crypto.count))"
                )
            }
            out.append(
                "payments: \(payments.payments) measured after \(payments.warmUpPayments) warm-up, \(payments.failures.count) failed attempt(s); SQLite on \(payments.dataFileSystem)"
            )
        }
        if let ratio = ratioAcceptanceToReceiptOverRawRoundTrip {
            let scanning =
                ratioOverRawRoundTripWhileScanning.map { "; against the round trip while scanning \($0.formatted(2))x" }
                ?? ""
            out.append(
                "ratio acceptance → receipt / raw round trip: \(ratio.formatted(2))x (published; under emulation it is no gate)\(scanning)"
            )
        }
        if let paired = payments?.pairedRatio {
            out.append(
                "paired ratio (each payment against the raw round trips on its own link right after it): median \(paired.median.formatted(2))x, p10 \(paired.p10.formatted(2))x, p90 \(paired.p90.formatted(2))x"
            )
        }
        if let ratioPerBlock, ratioPerBlock.count > 1 {
            out.append(
                "per block (\(ratioPerBlock.count) blocks of raw round trips then payments): \(ratioPerBlock.map { $0.formatted(2) + "x" }.joined(separator: ", "))"
            )
        }
        for problem in problems.prefix(10) { out.append("problem: \(problem)") }
        return out
    }

    private static func row(_ summary: Summary) -> [String] {
        [
            summary.median.formatted(1), summary.p10.formatted(1), summary.p90.formatted(1), summary.min.formatted(1),
            summary.max.formatted(1), String(summary.count),
        ]
    }

    private static func row3(_ summary: Summary) -> [String] {
        [summary.median.formatted(1), summary.p10.formatted(1), summary.p90.formatted(1)]
    }
}

/// A value handed from a radio's queue to the benchmark's thread, which waits for it.
final class Handoff<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private let signal = DispatchSemaphore(value: 0)
    private var values: [Value] = []

    func put(_ value: Value) {
        lock.lock()
        values.append(value)
        lock.unlock()
        signal.signal()
    }

    /// The next value, or nil after `timeout`.
    func take(timeout: Duration) -> Value? {
        let deadline = DispatchTime.now() + .nanoseconds(Int(clamping: timeout.nanoseconds))
        guard signal.wait(timeout: deadline) == .success else { return nil }
        lock.lock()
        defer { lock.unlock() }
        return values.isEmpty ? nil : values.removeFirst()
    }

    /// Forgets values nobody took.
    func drain() {
        while signal.wait(timeout: .now()) == .success {}
        lock.lock()
        values.removeAll()
        lock.unlock()
    }
}

/// Waits for `condition`, polling; false when `timeout` passed first.
func waitUntil(timeout: Duration, every interval: Duration = .milliseconds(20), _ condition: () -> Bool) -> Bool {
    let deadline = Clocks.wall() + timeout.nanoseconds
    while !condition() {
        if Clocks.wall() >= deadline { return condition() }
        Thread.sleep(forTimeInterval: Double(interval.nanoseconds) / 1e9)
    }
    return true
}
