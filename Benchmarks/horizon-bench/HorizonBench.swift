import ArgumentParser
import Foundation
import HorizonBlueZ

/// The measurements `--only` can pick.
enum MeasurementName: String, CaseIterable, ExpressibleByArgument, Sendable {
    case paymentCPU = "payment-cpu"
    case latency
    case scaling
    case terminalAtRest = "terminal-at-rest"
    case bluez
}

extension WalletStoreKind: ExpressibleByArgument {}
extension ProcessorKind: ExpressibleByArgument {}
/// `--bluez-notify socket|signals`.
extension BlueZNotificationPath: ExpressibleByArgument {}

/// `horizon-bench`: the performance budget (`BENCHMARKS.md`), measured.
struct HorizonBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "horizon-bench",
        abstract: "Measure Horizon against its performance budget; write a JSON result and print a table.",
        discussion: """
            Measurements (all but bluez on the simulated radio; see Benchmarks/README.md):
              payment-cpu        CPU of one payment, both sides, against its cryptography alone; round trips; bytes
              latency            acceptance to receipt with a 30 ms connection interval at MTU 23, 185 and 247
              scaling            1, 10, 100 simultaneous pairs: CPU per payment, payments per second on one core
              terminal-at-rest   horizon-terminal serve: start-up time to advertising, resident memory, idle CPU
              bluez              on a real bluetoothd with two adapters (only when asked: --only bluez; Benchmarks/bluez-vm.sh
                                 runs it in the Tools/bluez-vm VM): raw write→notification round trip, payments from
                                 acceptance to receipt, connect time, the tap and its parts (budget: tap < 350 ms)
            Build with -c release (Benchmarks/run.sh does); debug numbers mean nothing.
            `horizon-bench scale-out` drives real server processes instead (Tools/scale-out.sh runs it);
            `horizon-bench server-crypto` times the server's cryptography for one payment alone.
            """,
        subcommands: [ScaleOut.self, IntentLatency.self, ServerCrypto.self])

    @Option(help: "Where to write the JSON result.")
    var output = "Benchmarks/results/latest.json"

    @Flag(help: "A smoke test: few iterations, numbers not worth publishing.")
    var quick = false

    @Option(help: "Payments per median (default 200; 10 with --quick).")
    var iterations: Int?

    @Option(
        help:
            "Run only this measurement; repeat for several (\(MeasurementName.allCases.map(\.rawValue).joined(separator: ", ")))."
    )
    var only: [MeasurementName] = []

    @Option(help: "Simultaneous pair counts for the scaling curve, comma-separated.")
    var pairs = "1,10,100"

    @Option(help: "Runs of the terminal program for terminal-at-rest (default 5; 2 with --quick).")
    var terminalRuns: Int?

    @Option(help: "The horizon-terminal program (default: the one next to this program).")
    var terminalBinary: String?

    @Option(
        help:
            "Where the benchmark's SQLite ledgers and wallet stores go (default: a new temporary directory). SQLite syncs every payment, so the file system matters."
    )
    var dataDir: String?

    @Option(help: "The wallet's pending-payment store: sqlite (as horizon-wallet) or memory.")
    var walletStore: WalletStoreKind = .sqlite

    @Option(
        help: """
            payment-cpu: who settles. ledger: the terminal's in-process ledger, as horizon-terminal serve \
            runs it; instant: an approval answered at once, without any database, to tell the ledger's \
            cost from the rest of a payment's.
            """)
    var processor: ProcessorKind = .ledger

    @Option(help: "Seed of the simulated radio.")
    var seed: UInt64 = 1

    @Option(help: "Distance between neighbouring terminal/wallet pairs in the scaling runs, metres.")
    var spacing: Double = 500

    @Option(help: "bluez: the terminal's adapter.")
    var bluezTerminalAdapter = "hci0"

    @Option(help: "bluez: the wallet's adapter (another adapter next to the terminal's).")
    var bluezWalletAdapter = "hci1"

    @Option(help: "bluez: raw round trips per series (default 200; 10 with --quick).")
    var bluezRoundTrips: Int?

    @Option(help: "bluez: payments measured (default 20; 3 with --quick).")
    var bluezPayments: Int?

    @Option(help: "bluez: bytes per raw round trip payload (at most what the link carries).")
    var bluezPayloadBytes = 20

    @Option(
        help: "bluez: raw round trips and payments alternate in this many blocks (the load of a shared host drifts).")
    var bluezBlocks = 4

    @Option(help: "bluez: a description of the machine outside the VM, for the result (bluez-vm.sh sets it).")
    var bluezHost: String?

    @Option(
        help: """
            bluez: how the wallet receives notifications: socket (AcquireNotify, the default) or \
            signals (StartNotify and Value changes through dbus-daemon), to compare the two.
            """)
    var bluezNotify: BlueZNotificationPath = .acquiredSocket

    @Option(
        help: """
            payment-cpu: settle through this running horizon-server (http://HOST:PORT) instead of the \
            in-process ledger, as an activated terminal does: the CPU measured is then the terminal's \
            and the wallet's share (the server's process is not counted). Needs \
            --through-server-database, --through-server-email and --through-server-password-file; Benchmarks/terminal-share.sh sets all up.
            """)
    var throughServer: String?

    @Option(
        help:
            "With --through-server: the server's database (sqlite:PATH or postgres://…), for the wallet's code and top-up."
    )
    var throughServerDatabase: String?

    @Option(help: "With --through-server: the merchant admin's e-mail, to activate the terminal.")
    var throughServerEmail: String?

    @Option(help: "With --through-server: a file holding the merchant admin's password (one line).")
    var throughServerPasswordFile: String?

    mutating func validate() throws {
        if let bluezRoundTrips, bluezRoundTrips < 1 { throw ValidationError("--bluez-round-trips must be at least 1") }
        if let bluezPayments, bluezPayments < 1 { throw ValidationError("--bluez-payments must be at least 1") }
        guard (1...100).contains(bluezBlocks) else { throw ValidationError("--bluez-blocks must be 1 to 100") }
        guard (2...512).contains(bluezPayloadBytes) else {
            throw ValidationError("--bluez-payload-bytes must be 2 to 512")
        }
        if let iterations, iterations < 1 { throw ValidationError("--iterations must be at least 1") }
        if let terminalRuns, terminalRuns < 1 { throw ValidationError("--terminal-runs must be at least 1") }
        guard !pairCounts.isEmpty, pairCounts.allSatisfy({ $0 >= 1 && $0 <= 1000 }) else {
            throw ValidationError("--pairs must be comma-separated counts from 1 to 1000, e.g. 1,10,100")
        }
        guard spacing.isFinite, spacing > 1 else { throw ValidationError("--spacing must be more than 1 metre") }
        if throughServer != nil {
            guard throughServerDatabase != nil, throughServerEmail != nil, throughServerPasswordFile != nil else {
                throw ValidationError(
                    "--through-server needs --through-server-database, --through-server-email and --through-server-password-file (Benchmarks/terminal-share.sh passes them)"
                )
            }
            guard only == [.paymentCPU] else { throw ValidationError("--through-server goes with --only payment-cpu") }
            guard processor == .ledger else {
                throw ValidationError("--processor instant settles in-process, not through a server")
            }
        }
    }

    var pairCounts: [Int] { pairs.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func wants(_ name: MeasurementName) -> Bool { only.isEmpty || only.contains(name) }

    func run() throws {
        let count = iterations ?? (quick ? 10 : 200)
        // A folder of our own under --data-dir (or the temporary directory), removed at the end.
        let parent = dataDir.map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory
        let directory = parent.appendingPathComponent("horizon-bench-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = BenchSettings(
            iterations: count, quick: quick, seed: seed, spacing: spacing, directory: directory,
            walletStore: walletStore, processor: processor)
        if let throughServer, let throughServerDatabase, let throughServerEmail, let throughServerPasswordFile {
            Progress.note("payment-cpu: activating a terminal and registering a wallet with \(throughServer)")
            settings.remote = try RemoteSettlement.prepare(
                server: throughServer, database: throughServerDatabase, email: throughServerEmail,
                passwordFile: throughServerPasswordFile,
                payments: count + settings.warmUp)
        }
        defer { settings.remote?.close() }

        let formatter = ISO8601DateFormatter()
        var report = BenchmarkReport(
            generatedAt: formatter.string(from: Date()), machine: .current(),
            settings: .init(
                iterations: count, quick: quick, seed: seed, only: only.map(\.rawValue),
                walletStore: walletStore.rawValue,
                dataDirectory: directory.deletingLastPathComponent().path,
                dataFileSystem: fileSystemName(of: directory.path), pairSpacingMetres: spacing,
                radio: only == [.bluez]
                    ? "BlueZ (bluetoothd over D-Bus, two adapters, one process)"
                    : only.contains(.bluez)
                        ? "simulated (HorizonSimulatedRadio, in process); the bluez section on BlueZ"
                        : "simulated (HorizonSimulatedRadio, in process)"))
        #if DEBUG
            Progress.note("warning: this is a debug build; build with -c release for numbers that mean something")
        #endif

        if wants(.paymentCPU) { report.paymentCPU = try PaymentCPU.measure(settings) }
        if wants(.latency) { report.latency = try Latency.measure(settings) }
        if wants(.scaling) { report.scaling = try Scaling.measure(settings, pairCounts: pairCounts) }
        if wants(.terminalAtRest) {
            let binary = TerminalAtRest.locateBinary(terminalBinary)
            report.terminalAtRest = try TerminalAtRest.measure(
                binary: binary, runs: terminalRuns ?? (quick ? 2 : 5), settle: quick ? .milliseconds(500) : .seconds(2),
                workDirectory: directory)
        }
        // The real-bluetoothd measurement (BlueZ.swift): only when asked for by name.
        if wants(.bluez) {
            report.bluez = BlueZ.measure(
                settings,
                options: BlueZOptions(
                    terminalAdapter: bluezTerminalAdapter, walletAdapter: bluezWalletAdapter,
                    roundTrips: bluezRoundTrips ?? (quick ? 10 : 200), payments: bluezPayments ?? (quick ? 3 : 20),
                    payloadBytes: bluezPayloadBytes, blocks: bluezBlocks, host: bluezHost,
                    notifications: bluezNotify,
                    requested: only.contains(.bluez)))
        }
        report.checkBudget()

        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // JSON has no NaN; a summary of nothing encodes its NaNs as null-like strings.
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let outputURL = URL(fileURLWithPath: output)
        try FileManager.default.createDirectory(
            at: outputURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        try encoder.encode(report).write(to: outputURL)
        print(report.table())
        Progress.note("wrote \(outputURL.path)")
        // Asked for by name and not measured: say so in the exit code too (Benchmarks/bluez-vm.sh).
        if only.contains(.bluez), let bluez = report.bluez, bluez.status != "measured" {
            Progress.note("error: \(bluez.status): \(bluez.reason)")
            throw ExitCode.failure
        }
    }
}
