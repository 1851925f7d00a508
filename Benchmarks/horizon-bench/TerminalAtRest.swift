import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The terminal program at rest: `horizon-terminal serve` on the simulated radio, measured from
/// outside as an operator would — start-up time, resident memory idle and while advertising,
/// CPU while idle.
struct TerminalAtRestResult: Codable {
    /// "measured", or why not (e.g. the program was not built).
    let status: String
    let binary: String
    let binaryBytes: Int?
    let runs: Int
    /// From spawning `serve` to its "terminal service ready" line (keys, ledger and radio open,
    /// conflict observer scanning, control socket listening).
    let startupToReadyMilliseconds: Summary?
    /// From sending `pay 12.50` on the control socket to the "state waiting for a wallet" line
    /// (offer signed, advertising started on the radio).
    let payRequestToAdvertisingMilliseconds: Summary?
    /// The two above added: start-up time to advertising.
    let startupToAdvertisingMilliseconds: Summary?
    /// VmRSS after start-up, once idle for the settle time.
    let residentAfterStartupKiB: Summary?
    /// VmRSS while advertising a payment, after the settle time.
    let residentWhileAdvertisingKiB: Summary?
    /// VmHWM: the most the process was ever resident.
    let peakResidentKiB: Summary?
    /// CPU the idle service used over the settle time, in percent of one core.
    let idleCPUPercent: Summary?
    /// The simulated radio server (a separate process, standing in for bluetoothd): VmRSS at the end.
    let radioServerResidentKiB: Double?
    let settleSeconds: Double

    static func notMeasured(_ reason: String, binary: String) -> TerminalAtRestResult {
        TerminalAtRestResult(
            status: "not measured: \(reason)", binary: binary, binaryBytes: nil, runs: 0,
            startupToReadyMilliseconds: nil,
            payRequestToAdvertisingMilliseconds: nil, startupToAdvertisingMilliseconds: nil,
            residentAfterStartupKiB: nil, residentWhileAdvertisingKiB: nil, peakResidentKiB: nil, idleCPUPercent: nil,
            radioServerResidentKiB: nil, settleSeconds: 0)
    }
}

enum TerminalAtRest {
    /// The terminal program: `--terminal-binary`, else `horizon-terminal` next to this program
    /// (both are built into the same `.build/<config>` folder).
    static func locateBinary(_ explicit: String?) -> String {
        if let explicit { return explicit }
        let me =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("horizon-terminal").path
    }

    static func measure(binary: String, runs: Int, settle: Duration, workDirectory: URL) throws -> TerminalAtRestResult
    {
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            return .notMeasured(
                "\(binary) is not built (swift build -c release --product horizon-terminal)", binary: binary)
        }
        let directory = workDirectory.appendingPathComponent("terminal-at-rest")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let dataDir = directory.appendingPathComponent("data").path
        // Unix socket paths are limited to 108 bytes: keep them short, in /tmp.
        let socketDir = try makeShortTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: socketDir) }
        let radioSocket = socketDir + "/radio.sock"
        let controlSocket = socketDir + "/control.sock"
        let log = directory.appendingPathComponent("terminal.log").path

        let initialize = try Child(binary, ["init", "--data-dir", dataDir, "--force"], stderrPath: log)
        guard initialize.waitForExit(timeout: .seconds(30)) == 0 else {
            throw BenchmarkError("horizon-terminal init failed; see \(log)")
        }
        // Our own radio server, so the terminal's start-up does not include starting one (on a
        // real box, bluetoothd is already running).
        let radio = try Child(binary, ["radio", "--socket", radioSocket], stderrPath: log)
        defer { radio.stop() }
        guard UnixLineClient.waitUntilListening(radioSocket, timeout: .seconds(10)) else {
            throw BenchmarkError("the simulated radio server did not start; see \(log)")
        }

        var ready: [Double] = []
        var advertising: [Double] = []
        var total: [Double] = []
        var restingRSS: [Double] = []
        var advertisingRSS: [Double] = []
        var peakRSS: [Double] = []
        var idleCPU: [Double] = []
        for run in 0..<runs {
            Progress.note("terminal at rest: run \(run + 1) of \(runs)")
            try? FileManager.default.removeItem(atPath: controlSocket)
            let started = Clocks.wall()
            let serve = try Child(
                binary,
                ["serve", "--data-dir", dataDir, "--radio-socket", radioSocket, "--control-socket", controlSocket],
                stderrPath: log, captureStdout: true)
            defer { serve.stop() }
            guard serve.readLine(until: { $0.contains("terminal service ready") }, timeout: .seconds(30)) != nil else {
                throw BenchmarkError("horizon-terminal serve did not report ready; see \(log)")
            }
            let readyAt = Clocks.wall()
            let cpuBefore = ProcessStatus.cpuTicks(serve.pid)
            sleep(settle)
            let cpuAfter = ProcessStatus.cpuTicks(serve.pid)
            let resting = ProcessStatus.kibibytes("VmRSS", of: serve.pid)

            let client = try UnixLineClient(path: controlSocket)
            let requested = Clocks.wall()
            client.send("pay 12.50")
            guard client.readLine(until: { $0.hasPrefix("state waiting for a wallet") }, timeout: .seconds(10)) != nil
            else { throw BenchmarkError("the terminal did not start advertising; see \(log)") }
            let advertisingAt = Clocks.wall()
            sleep(settle)
            let whileAdvertising = ProcessStatus.kibibytes("VmRSS", of: serve.pid)
            let peak = ProcessStatus.kibibytes("VmHWM", of: serve.pid)
            if let canceller = try? UnixLineClient(path: controlSocket) {
                canceller.send("cancel")
                _ = canceller.readLine(until: { _ in true }, timeout: .seconds(5))
            }
            _ = client.readLine(until: { $0.hasPrefix("failed") || $0.hasPrefix("paid") }, timeout: .seconds(5))

            ready.append(Double(readyAt - started) / 1_000_000)
            advertising.append(Double(advertisingAt - requested) / 1_000_000)
            total.append(Double(readyAt - started + advertisingAt - requested) / 1_000_000)
            if let resting { restingRSS.append(Double(resting)) }
            if let whileAdvertising { advertisingRSS.append(Double(whileAdvertising)) }
            if let peak { peakRSS.append(Double(peak)) }
            if let cpuBefore, let cpuAfter {
                let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
                idleCPU.append(Double(cpuAfter - cpuBefore) / ticks / settle.inSeconds * 100)
            }
        }
        let radioRSS = ProcessStatus.kibibytes("VmRSS", of: radio.pid).map(Double.init)
        let size = (try? FileManager.default.attributesOfItem(atPath: binary)[.size] as? Int) ?? nil
        return TerminalAtRestResult(
            status: "measured", binary: binary, binaryBytes: size, runs: runs,
            startupToReadyMilliseconds: Summary(ready), payRequestToAdvertisingMilliseconds: Summary(advertising),
            startupToAdvertisingMilliseconds: Summary(total), residentAfterStartupKiB: Summary(restingRSS),
            residentWhileAdvertisingKiB: Summary(advertisingRSS), peakResidentKiB: Summary(peakRSS),
            idleCPUPercent: Summary(idleCPU), radioServerResidentKiB: radioRSS, settleSeconds: settle.inSeconds)
    }

    private static func sleep(_ duration: Duration) {
        usleep(useconds_t(duration.nanosecondsValue / 1000))
    }

    private static func makeShortTemporaryDirectory() throws -> String {
        var template = Array("/tmp/hzb-XXXXXX".utf8CString)
        guard let path = template.withUnsafeMutableBufferPointer({ $0.baseAddress.flatMap { mkdtemp($0) } }) else {
            throw BenchmarkError("cannot create a temporary directory in /tmp")
        }
        return String(cString: path)
    }
}

extension Duration {
    var nanosecondsValue: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    var inSeconds: Double { Double(nanosecondsValue) / 1_000_000_000 }
}

/// What /proc says about a process.
enum ProcessStatus {
    /// A `/proc/PID/status` field in kB (VmRSS, VmHWM), or nil if the process is gone.
    static func kibibytes(_ field: String, of pid: pid_t) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
            return Int(digits)
        }
        return nil
    }

    /// User plus system CPU of a process, in clock ticks (`/proc/PID/stat` fields 14 and 15).
    static func cpuTicks(_ pid: pid_t) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = text.lastIndex(of: ")")
        else { return nil }
        // After the command name in parentheses: state is field 3, utime 14, stime 15.
        let fields = text[text.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }

    /// This process's own VmRSS.
    static var ownResidentKiB: Int? { kibibytes("VmRSS", of: getpid()) }
}

/// A child process with its standard output readable line by line (with deadlines).
final class Child {
    let process = Process()
    private let reader: LineReader?

    init(_ binary: String, _ arguments: [String], stderrPath: String, captureStdout: Bool = false) throws {
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        if !FileManager.default.fileExists(atPath: stderrPath) {
            _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        }
        let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        errors.seekToEndOfFile()
        process.standardError = errors
        if captureStdout {
            let pipe = Pipe()
            process.standardOutput = pipe
            reader = LineReader(descriptor: pipe.fileHandleForReading.fileDescriptor, keeping: pipe)
        } else {
            process.standardOutput = errors
            reader = nil
        }
        try process.run()
    }

    var pid: pid_t { process.processIdentifier }

    func readLine(until matches: (String) -> Bool, timeout: Duration) -> String? {
        reader?.readLine(until: matches, timeout: timeout)
    }

    /// Waits for the exit status; nil if the process is still running after `timeout`.
    func waitForExit(timeout: Duration) -> Int32? {
        let deadline = Clocks.wall() + timeout.nanosecondsValue
        while process.isRunning {
            if Clocks.wall() > deadline { return nil }
            usleep(5_000)
        }
        return process.terminationStatus
    }

    /// SIGTERM (the programs shut down cleanly on it), then SIGKILL if it lingers.
    func stop() {
        guard process.isRunning else { return }
        kill(pid, SIGTERM)
        if waitForExit(timeout: .seconds(5)) == nil {
            kill(pid, SIGKILL)
            _ = waitForExit(timeout: .seconds(5))
        }
    }
}

/// Lines from a file descriptor, waiting at most until a deadline.
final class LineReader {
    let descriptor: Int32
    private let owner: AnyObject?
    private var buffer: [UInt8] = []

    init(descriptor: Int32, keeping owner: AnyObject? = nil) {
        self.descriptor = descriptor
        self.owner = owner
    }

    /// The first line for which `matches` is true, or nil at end of stream or the deadline.
    func readLine(until matches: (String) -> Bool, timeout: Duration) -> String? {
        let deadline = Clocks.wall() + timeout.nanosecondsValue
        while true {
            while let newline = buffer.firstIndex(of: 10) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                if matches(line) { return line }
            }
            let remaining = (deadline - Clocks.wall()) / 1_000_000
            guard remaining > 0 else { return nil }
            var request = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&request, 1, Int32(min(remaining, 1_000)))
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }
}

/// A client of the terminal's control socket (one request per connection, answered in lines).
final class UnixLineClient {
    let descriptor: Int32
    private let reader: LineReader

    init(path: String) throws {
        descriptor = try Self.connect(path)
        reader = LineReader(descriptor: descriptor)
    }

    deinit { close(descriptor) }

    func send(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func readLine(until matches: (String) -> Bool, timeout: Duration) -> String? {
        reader.readLine(until: matches, timeout: timeout)
    }

    static func waitUntilListening(_ path: String, timeout: Duration) -> Bool {
        let deadline = Clocks.wall() + timeout.nanosecondsValue
        while Clocks.wall() < deadline {
            if let descriptor = try? connect(path) {
                close(descriptor)
                return true
            }
            usleep(10_000)
        }
        return false
    }

    private static func connect(_ path: String) throws -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw BenchmarkError("socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw BenchmarkError("cannot create a socket") }
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard status == 0 else {
            close(descriptor)
            throw BenchmarkError("nothing listens at \(path)")
        }
        return descriptor
    }
}
