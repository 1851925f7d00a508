import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonTestSupport
import HorizonUnixSocket
import Testing

/// The simulated radio's server as the programs start it: clients are
/// served by tasks and dispatch sources, not a thread each; its clock sleeps until the next
/// event instead of polling; the launcher waits for the server's word that it is ready.
@Suite("The simulated radio server as a process", .offTheCooperativePool)
struct RadioServerProcessTests {
    @Test func fiftyClientsAreServedWithoutAThreadEach() throws {
        let server = try LaunchedServer()
        defer { server.stop() }
        let before = server.threadCount
        var clients: [RawRadioClient] = []
        defer { for client in clients { client.close() } }
        for index in 0..<50 { clients.append(try RawRadioClient(path: server.path, name: "device \(index)")) }
        // Every one of them is served at once: each asks something and gets its answer.
        for (index, client) in clients.enumerated() { try client.startScanning(request: UInt32(index + 1)) }
        let during = server.threadCount
        #expect(during - before < 10, "threads: \(before) before, \(during) with 50 clients")
    }

    @Test func anIdleServerSleeps() throws {
        let server = try LaunchedServer()
        defer { server.stop() }
        // A device that sits there (neither advertising nor scanning) gives the room nothing to do.
        let client = try RawRadioClient(path: server.path, name: "quiet")
        defer { client.close() }
        Thread.sleep(forTimeInterval: 0.3)
        let start = server.usage
        Thread.sleep(forTimeInterval: 1)
        let end = server.usage
        let cpu = Double(end.cpuNanoseconds - start.cpuNanoseconds) / 1_000_000
        #expect(cpu < 5, "the idle server used \(cpu) ms of CPU in 1 s")
        #expect(end.wakeups - start.wakeups < 50, "the idle server woke \(end.wakeups - start.wakeups) times in 1 s")
    }

    @Test func theLauncherReturnsOnceTheServerAnswers() throws {
        let server = try LaunchedServer()
        defer { server.stop() }
        // No retries: the server said it was ready, so the first connection is welcomed and its
        // first request answered.
        let client = try #require(
            try? RawRadioClient(path: server.path, name: "first"),
            "the first device after the launcher was not welcomed")
        defer { client.close() }
        #expect(throws: Never.self) { try client.startScanning(request: 1) }
    }

    @Test func theLauncherHearsAtOnceWhenTheServerCannotStart() throws {
        let sandbox = try Sandbox()
        // The server cannot create its lock file there, and exits.
        let path = sandbox.path("missing/radio.sock")
        let started = ContinuousClock.now
        let error = #expect(throws: CLIError.self) {
            try RadioServerLauncher.start(
                socketPath: path, executable: Programs.url("horizon-terminal").path, timeout: .seconds(60))
        }
        #expect(error?.description == "the simulated radio server exited without serving \(path)")
        #expect(ContinuousClock.now - started < .seconds(30), "the launcher waited for its deadline")
    }
}

/// `horizon-terminal radio` started by `RadioServerLauncher`, stopped with SIGTERM.
private final class LaunchedServer {
    let sandbox: Sandbox
    let path: String
    let pid: pid_t

    init() throws {
        sandbox = try Sandbox()
        path = sandbox.path("radio.sock")
        pid = try RadioServerLauncher.start(
            socketPath: path, executable: Programs.url("horizon-terminal").path, timeout: .seconds(60))
    }

    var threadCount: Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? 0 }

    /// CPU time and sleeps (voluntary context switches) of all the server's threads so far.
    var usage: (cpuNanoseconds: Int, wakeups: Int) {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var cpu = 0
        var wakeups = 0
        for task in tasks {
            let directory = "/proc/\(pid)/task/\(task)/"
            if let schedstat = try? String(contentsOfFile: directory + "schedstat", encoding: .utf8) {
                cpu += Int(schedstat.split(separator: " ").first ?? "") ?? 0
            }
            let status = (try? String(contentsOfFile: directory + "status", encoding: .utf8)) ?? ""
            for line in status.split(separator: "\n") where line.hasPrefix("voluntary_ctxt_switches:") {
                wakeups += Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
            }
        }
        return (cpu, wakeups)
    }

    /// SIGTERM: the server shuts down gracefully and is reaped here (it is this process's child).
    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}

/// A device in the room spoken to frame by frame (see `RadioWire`), with no thread of its own.
private final class RawRadioClient {
    let descriptor: Int32

    /// Connects and says hello; throws unless the server welcomes it.
    init(path: String, name: String) throws {
        descriptor = try UnixSocket.connect(to: path)
        var hello: [UInt8] = [0x01, 0, UInt8(name.utf8.count)] + Array(name.utf8)
        hello += [UInt8](repeating: 0, count: 16)  // position 0,0
        hello += [0, 247, 1]  // ATT MTU, reports RSSI
        hello += [UInt8](repeating: 0, count: 8)  // transmit power offset 0
        guard UnixSocket.writeFrame(hello, to: descriptor),
            UnixSocket.readFrame(from: descriptor, maximumSize: 1024)?.first == 0x81
        else {
            UnixSocket.close(descriptor)
            throw SandboxError("\(name) was not welcomed")
        }
    }

    /// Starts scanning and waits for the answer (sightings of others may come first).
    func startScanning(request: UInt32) throws {
        let id = withUnsafeBytes(of: request.bigEndian) { Array($0) }
        guard UnixSocket.writeFrame([0x04] + id, to: descriptor) else { throw SandboxError("the server is gone") }
        while let frame = UnixSocket.readFrame(from: descriptor, maximumSize: 64 * 1024) {
            if frame.first == 0x82, Array(frame.dropFirst().prefix(4)) == id { return }
        }
        throw SandboxError("no answer to request \(request)")
    }

    func close() { UnixSocket.close(descriptor) }
}
