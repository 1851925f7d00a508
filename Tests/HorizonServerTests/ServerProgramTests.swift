import Foundation
import HorizonTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `horizon-server` run as a process, as an operator would.
@Suite("The horizon-server program", .serialized, .offTheCooperativePool)
struct ServerProgramTests {
    @Test func initAddListAnchorServeAndStopOnSIGTERM() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        let initialised = try ServerProcess.run(["init", "--data-dir", data, "--json"])
        #expect(initialised.status == 0, "\(initialised.errors)")
        let setup = try JSONSerialization.jsonObject(with: Data(initialised.output.utf8)) as? [String: Any]
        #expect(setup?["database"] as? String == "sqlite:horizon.sqlite")
        #expect((setup?["schemaVersion"] as? Int ?? 0) >= 3)
        for file in ["server.json", "issuer.pem", "horizon.sqlite"] {
            #expect(FileManager.default.fileExists(atPath: data + "/" + file), "\(file)")
        }
        let issuerMode = try FileManager.default.attributesOfItem(atPath: data + "/issuer.pem")[.posixPermissions]
        #expect((issuerMode as? NSNumber)?.intValue == 0o600)

        let passwordFile = sandbox.path("password")
        try "correct horse battery\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let added = try ServerProcess.run([
            "merchants", "add", "Corner Bakery", "--email", "Owner@Bakery.example", "--currency", "EUR",
            "--password-file", passwordFile, "--data-dir", data,
        ])
        #expect(added.status == 0, "\(added.errors)")
        #expect(added.output.contains("Added merchant Corner Bakery ("), "\(added.output)")
        #expect(added.output.contains("EUR, admin owner@bakery.example"), "\(added.output)")

        let listed = try ServerProcess.run(["merchants", "list", "--json", "--data-dir", data])
        #expect(listed.status == 0, "\(listed.errors)")
        let merchants = try JSONSerialization.jsonObject(with: Data(listed.output.utf8)) as? [[String: Any]]
        #expect(merchants?.count == 1)
        #expect(merchants?.first?["name"] as? String == "Corner Bakery")
        #expect(merchants?.first?["currency"] as? String == "EUR")
        #expect(merchants?.first?["adminEmail"] as? String == "owner@bakery.example")
        #expect((merchants?.first?["merchantId"] as? String)?.isEmpty == false)

        let anchorRun = try ServerProcess.run(["anchor", "--json", "--data-dir", data])
        #expect(anchorRun.status == 0, "\(anchorRun.errors)")
        let anchor = try JSONSerialization.jsonObject(with: Data(anchorRun.output.utf8)) as? [String: String]
        #expect(anchor?["fingerprint"] == setup?["anchorFingerprint"] as? String)
        #expect(anchor?["name"] == "Horizon")

        let server = try ServerProcess(["serve", "--listen", "127.0.0.1:0", "--data-dir", data])
        defer { server.kill() }
        let line = try #require(server.waitForOutput(prefix: "listening on http://127.0.0.1:", timeout: 20))
        let port = try #require(Int(line.dropFirst("listening on http://127.0.0.1:".count)), "\(line)")
        #expect(port > 0)

        let health = try await RawHTTP.get(port: port, "/health")
        #expect(health.status == 200)
        #expect(health.body.contains("\"ok\""), "\(health.body)")
        #expect(health.headers["x-request-id"]?.hasPrefix("req_") == true)
        let served = try await RawHTTP.get(port: port, "/v1/anchor")
        #expect(served.status == 200)
        let servedAnchor = try JSONSerialization.jsonObject(with: Data(served.body.utf8)) as? [String: String]
        #expect(servedAnchor == anchor)
        let ready = try await RawHTTP.get(port: port, "/ready")
        #expect(ready.status == 200, "\(ready.body)")
        // The metrics are on an address of their own (a free loopback port by default), never on
        // the public API's port.
        let metricsLine = try #require(server.waitForOutput(prefix: "metrics on http://127.0.0.1:", timeout: 20))
        let metricsPort = try #require(
            Int(metricsLine.dropFirst("metrics on http://127.0.0.1:".count).prefix { $0.isNumber }), "\(metricsLine)")
        #expect(metricsPort != port)
        let metrics = try await RawHTTP.get(port: metricsPort, "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.body.contains(#"horizon_http_requests_total{method="GET",route="/health",status="200"}"#))
        #expect(try await RawHTTP.get(port: port, "/metrics").status == 404, "the API port serves no metrics")

        let started = ContinuousClock.now
        server.signal(SIGTERM)
        let status = server.wait(timeout: 5)
        #expect(status == 0, "exit: \(String(describing: status)); stderr: \(server.errors)")
        #expect(ContinuousClock.now - started < .seconds(5))
        // One log line per request, with its request id.
        #expect(server.errors.contains("GET /health 200"), "\(server.errors)")
        #expect(server.errors.contains(health.headers["x-request-id"] ?? "-"), "\(server.errors)")
    }

    /// The gateway key is made by init (owner-readable only) and kept: the key
    /// configuration served after a restart is the one served before, so wallets' cached copies
    /// stay usable. A data directory made before the gateway existed gets its key on the
    /// first serve.
    @Test func theGatewayKeyConfigurationSurvivesARestart() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        let initialised = try ServerProcess.run(["init", "--data-dir", data])
        #expect(initialised.status == 0, "\(initialised.errors)")
        let mode = try FileManager.default.attributesOfItem(atPath: data + "/gateway-key.pem")[.posixPermissions]
        #expect((mode as? NSNumber)?.intValue == 0o600)
        // As an older data directory: no gateway key yet.
        try FileManager.default.removeItem(atPath: data + "/gateway-key.pem")
        func servedConfiguration() async throws -> [String: String] {
            let server = try ServerProcess(["serve", "--listen", "127.0.0.1:0", "--data-dir", data])
            defer { server.kill() }
            let line = try #require(server.waitForOutput(prefix: "listening on http://127.0.0.1:", timeout: 20))
            let port = try #require(Int(line.dropFirst("listening on http://127.0.0.1:".count)), "\(line)")
            let served = try await RawHTTP.get(port: port, "/v1/gateway/key-config")
            #expect(served.status == 200, "\(served.body)")
            server.signal(SIGTERM)
            _ = server.wait(timeout: 5)
            return try #require(try JSONSerialization.jsonObject(with: Data(served.body.utf8)) as? [String: String])
        }
        let first = try await servedConfiguration()
        #expect(FileManager.default.fileExists(atPath: data + "/gateway-key.pem"))
        let second = try await servedConfiguration()
        // The same key configuration (ECDSA signatures differ each time they are made).
        #expect(first["keyConfig"] != nil && first["keyConfig"] == second["keyConfig"])
        #expect(first["label"] == "horizon/ohttp-key-config/v1")
    }

    @Test func initTwiceRefusesAndKeepsTheIssuer() throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        let issuer = try Data(contentsOf: URL(fileURLWithPath: data + "/issuer.pem"))
        let again = try ServerProcess.run(["init", "--data-dir", data])
        #expect(again.status == 1)
        #expect(
            again.errors.contains("error: \(data) is initialised already (server.json exists)"), "\(again.errors)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: data + "/issuer.pem")) == issuer)
    }

    @Test func initThatFailsOnTheDatabaseCanBeRetried() throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        let failed = try ServerProcess.run(["init", "--data-dir", data, "--database", "sqlite:/proc/horizon/x.sqlite"])
        #expect(failed.status == 1)
        #expect(failed.errors.contains("error: "), "\(failed.errors)")
        #expect(failed.errors.contains("/proc/horizon/x.sqlite"), "\(failed.errors)")
        #expect(!FileManager.default.fileExists(atPath: data + "/server.json"))
        let retried = try ServerProcess.run(["init", "--data-dir", data])
        #expect(retried.status == 0, "\(retried.errors)")
    }

    @Test func aBadListenAddressIsAUsageError() throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        for listen in ["nonsense", "127.0.0.1:99999", ":8080", "127.0.0.1:-1"] {
            let initialising = try ServerProcess.run(["init", "--data-dir", data, "--listen", listen])
            #expect(initialising.status == 2, "\(listen): \(initialising.errors)")
            #expect(initialising.errors.contains("--listen"), "\(initialising.errors)")
            #expect(!FileManager.default.fileExists(atPath: data + "/issuer.pem"))
        }
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        for listen in ["nonsense", "127.0.0.1:99999", ":8080"] {
            let serving = try ServerProcess.run(["serve", "--data-dir", data, "--listen", listen])
            #expect(serving.status == 2, "\(listen): \(serving.errors)")
            #expect(
                serving.errors.contains("--listen must be HOST:PORT")
                    || serving.errors.contains("--listen needs a host"),
                "\(serving.errors)")
        }
        // A port that is taken: the work fails (exit 1) with the reason.
        let first = try ServerProcess(["serve", "--listen", "127.0.0.1:0", "--data-dir", data])
        defer { first.kill() }
        let line = try #require(first.waitForOutput(prefix: "listening on http://127.0.0.1:", timeout: 20))
        let port = String(line.dropFirst("listening on http://127.0.0.1:".count))
        let second = try ServerProcess.run(["serve", "--listen", "127.0.0.1:\(port)", "--data-dir", data], timeout: 20)
        #expect(second.status == 1, "\(second.errors)")
        #expect(second.errors.contains("error: "), "\(second.errors)")
        #expect(second.errors.lowercased().contains("address already in use"), "\(second.errors)")
    }

    @Test func serveWithoutInitSaysWhatToDo() throws {
        let sandbox = try ServerSandbox()
        let result = try ServerProcess.run(["serve", "--data-dir", sandbox.path("missing")])
        #expect(result.status == 1)
        #expect(result.errors.contains("run `horizon-server init` first"), "\(result.errors)")
    }

    @Test func everySubcommandHasHelp() throws {
        let commands: [([String], String)] = [
            ([], "The Horizon server"),
            (["init"], "Create the issuer key"),
            (["serve"], "Serve the HTTP API until SIGTERM"),
            (["migrate"], "Bring the database's schema"),
            (["merchants"], "Add and list merchants"),
            (["merchants", "add"], "Add a merchant with its admin's e-mail"),
            (["merchants", "list"], "List every merchant"),
            (["terminals"], "List and revoke activated terminals"),
            (["terminals", "list"], "List terminals"),
            (["terminals", "revoke"], "Revoke a terminal"),
            (["outbox"], "Show the messages the server sent or would have sent"),
            (["anchor"], "Print the public trust anchor"),
        ]
        for (command, abstract) in commands {
            let result = try ServerProcess.run(command + ["--help"])
            #expect(result.status == 0, "\(command): \(result.errors)")
            #expect(result.output.contains(abstract), "\(command): \(result.output)")
            #expect(
                result.output.contains("USAGE: horizon-server" + command.map { " " + $0 }.joined()),
                "\(command): \(result.output)")
        }
    }
}

/// A folder per test, removed afterwards.
final class ServerSandbox {
    let url: URL

    init() throws {
        url = URL(fileURLWithPath: "/tmp/hzs-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

/// The built `horizon-server` as a child process, its output collected as it comes.
final class ServerProcess: @unchecked Sendable {
    struct Result {
        let status: Int32
        let output: String
        let errors: String
    }

    /// The directory of the built executables (next to the test bundle).
    static var executable: URL {
        var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("horizon-server").path),
            directory.path != "/"
        {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("horizon-server")
    }

    let process = Process()
    private let outputData = Sink()
    private let errorData = Sink()
    private let outputPipe = Pipe()
    private let errorPipe = Pipe()
    private let drained = DispatchGroup()

    /// `environment` is added to this process's own (for the server's crash injection).
    init(_ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = Self.executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = outputPipe
        process.standardError = errorPipe
        try process.runCheckingDescriptors()
        for (pipe, sink) in [(outputPipe, outputData), (errorPipe, errorData)] {
            drained.enter()
            let handle = pipe.fileHandleForReading
            Thread.detachNewThread { [drained] in
                handle.readUntilEndOfFile { sink.append($0) }
                drained.leave()
            }
        }
    }

    static func run(_ arguments: [String], timeout: TimeInterval = 60) throws -> Result {
        let process = try ServerProcess(arguments)
        let status = process.wait(timeout: timeout)
        if status == nil { process.kill() }
        return Result(status: status ?? -1, output: process.output, errors: process.errors)
    }

    var output: String { outputData.text }
    var errors: String { errorData.text }

    final class Sink: Sendable {
        private let data = Mutex(Data())
        func append(_ chunk: Data) { data.withLock { $0.append(chunk) } }
        var text: String { data.withLock { String(decoding: $0, as: UTF8.self) } }
    }

    /// The first line of standard output that starts with `prefix`, waiting for it.
    func waitForOutput(prefix: String, timeout: TimeInterval) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = output.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) { return String(line) }
            if !process.isRunning { return nil }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return nil
    }

    func signal(_ signal: Int32) { Glibc.kill(process.processIdentifier, signal) }

    /// The exit status, or nil if it is still running after `timeout`.
    func wait(timeout: TimeInterval) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        guard !process.isRunning else { return nil }
        process.waitUntilExit()
        drained.wait()
        return process.terminationStatus
    }

    func kill() {
        if process.isRunning {
            signal(SIGKILL)
            process.waitUntilExit()
        }
    }
}
