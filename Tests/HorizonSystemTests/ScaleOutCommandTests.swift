import Foundation
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonTestSupport
import Testing

/// The scale-out proof's smoke run: `Tools/scale-out.sh` itself (real
/// `horizon-server` processes, `horizon-bench scale-out` driving them) with a few payments and
/// one server SIGKILLed and restarted a quarter of the way in, so the command cannot rot. On the test run's PostgreSQL (a schema of its own) when
/// HORIZON_TEST_POSTGRES_URL is set, else on one SQLite file shared by the processes.
// Off the cooperative pool: the test waits for the script's process, blocking its thread.
@Suite(.offTheCooperativePool) struct ScaleOutCommandTests {
    @Test func theScaleOutCommandProvesExactlyOnceWithRealServerProcesses() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("scale-cmd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let resultFile = directory.appendingPathComponent("result.json").path
        let arguments = [
            "--bin", try ScriptRun.binDirectory(), "--payments", "60", "--terminals", "4", "--servers", "2",
            "--kill-restart", "--output", resultFile,
        ]
        let run: ScriptRun
        if let url = TestStores.postgresURL {
            // A schema of its own: the script's checks read the whole ledger, other tests' included.
            let location = try PostgresLocation(url: url)
            let schema = "scale_out_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let admin = PostgresLedgerStore(unchecked: location, connections: 1)
            try await admin.transaction { db in try await db.query("CREATE SCHEMA \(schema)") }
            let separator = url.contains("?") ? "&" : "?"
            let outcome = Result { try ScriptRun(arguments + ["--database", url + separator + "schema=" + schema]) }
            _ = try? await admin.transaction { db in try await db.query("DROP SCHEMA \(schema) CASCADE") }
            await admin.close()
            run = try outcome.get()
        } else {
            run = try ScriptRun(arguments + ["--database", "sqlite"])
        }
        #expect(run.status == 0, "Tools/scale-out.sh failed:\n\(run.output)")
        #expect(run.output.contains("scale-out: every check passed"), "\(run.output)")
        #expect(run.output.contains("PASS  every id executed exactly once"))
        #expect(run.output.contains("SIGKILLed server 2") && run.output.contains("restarted server 2"))
        let data = try Data(contentsOf: URL(fileURLWithPath: resultFile))
        let result = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(result["payments"] as? Int == 60)
        #expect(result["executions"] as? Int == 60)
        #expect(result["conflictingAnswers"] as? Int == 0)
        // Every id went to both servers and was retried late: more submissions than payments.
        #expect((result["duplicatesSent"] as? Int ?? 0) >= 60 * 2)
        let checks = try #require(result["checks"] as? [[String: Any]])
        #expect(!checks.isEmpty && checks.allSatisfy { $0["passed"] as? Bool == true })
    }

    /// Failover without loss: `Tools/scale-out.sh --failover` on a throw-away primary and
    /// synchronous standby of its own; two server processes given both hosts in one URL; the
    /// primary SIGKILLed a quarter of the way in and the standby promoted a second later. Every
    /// payment a terminal had an approval for is in the ledger once, every one left unanswered
    /// settles once when retried with its id, and the audit holds. Prints the counts.
    @Test(
        .enabled(
            if: TestStores.postgresConfigured,
            "needs PostgreSQL (Tools/test.sh installs it and sets HORIZON_TEST_POSTGRES_URL)"))
    func aKilledPrimaryLosesNoApprovedPaymentOnceTheStandbyIsPromoted() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("failover-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let resultFile = directory.appendingPathComponent("result.json").path
        // A bound, not the expected time (about a minute on a loaded two-core machine, most of it
        // the two clusters' start and the synchronous commits).
        let run = try ScriptRun(
            [
                "--bin", try ScriptRun.binDirectory(), "--payments", "80", "--terminals", "6", "--servers", "2",
                "--failover", "--output", resultFile,
            ], timeout: 240)
        #expect(run.status == 0, "Tools/scale-out.sh --failover failed:\n\(run.output)")
        #expect(run.output.contains("SIGKILLed the PostgreSQL primary") && run.output.contains("promoted the standby"))
        for line in run.output.split(separator: "\n") where line.contains("failover ") || line.contains("PASS") {
            print("failover: \(line.trimmingCharacters(in: .whitespaces))")
        }
        let data = try Data(contentsOf: URL(fileURLWithPath: resultFile))
        let result = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let failover = try #require(result["failover"] as? [String: Any], "\(run.output)")
        #expect(failover["approvedBeforeKill"] as? Int ?? 0 > 0)
        #expect(failover["unanswered"] as? Int ?? 0 > 0)
        #expect(failover["retriedSettled"] as? Int == failover["unanswered"] as? Int)
        #expect(failover["inLedger"] as? Int == 80)
        #expect(failover["duplicates"] as? Int == 0)
        #expect(failover["auditOK"] as? Bool == true)
        let checks = try #require(result["checks"] as? [[String: Any]])
        #expect(!checks.isEmpty && checks.allSatisfy { $0["passed"] as? Bool == true }, "\(run.output)")
    }

    /// Upgrades without stopping the tills: `Tools/scale-out.sh --rolling-upgrade` puts two
    /// server processes behind HAProxy and, a quarter of the way in, drains, stops (SIGTERM),
    /// restarts and readmits each in turn while the terminals keep paying through the proxy.
    /// Not one submission may fail (each is sent once, no retry by the terminal), every payment
    /// runs exactly once, and the audit holds.
    @Test func aRollingUpgradeBehindHAProxyCostsTheTerminalsNoFailedRequest() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rolling-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let resultFile = directory.appendingPathComponent("result.json").path
        let arguments = [
            // Eight terminals paying every 20 ms keep requests in flight whenever a server stops
            // (with SIGKILL instead, no drain and no retry-on, this run sees failed requests).
            "--bin", try ScriptRun.binDirectory(), "--payments", "1200", "--terminals", "8", "--servers", "2",
            "--rolling-upgrade", "--output", resultFile,
        ]
        let run: ScriptRun
        if let url = TestStores.postgresURL {
            let location = try PostgresLocation(url: url)
            let schema = "rolling_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let admin = PostgresLedgerStore(unchecked: location, connections: 1)
            try await admin.transaction { db in try await db.query("CREATE SCHEMA \(schema)") }
            let separator = url.contains("?") ? "&" : "?"
            let outcome = Result {
                try ScriptRun(arguments + ["--database", url + separator + "schema=" + schema], timeout: 240)
            }
            _ = try? await admin.transaction { db in try await db.query("DROP SCHEMA \(schema) CASCADE") }
            await admin.close()
            run = try outcome.get()
        } else {
            run = try ScriptRun(arguments + ["--database", "sqlite"], timeout: 240)
        }
        #expect(run.status == 0, "Tools/scale-out.sh --rolling-upgrade failed:\n\(run.output)")
        for index in 1...2 {
            #expect(run.output.contains("drained and stopped server \(index)"), "\(run.output)")
            #expect(run.output.contains("upgraded server \(index) serves again"), "\(run.output)")
        }
        let data = try Data(contentsOf: URL(fileURLWithPath: resultFile))
        let result = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(result["executions"] as? Int == 1200)
        #expect((result["failuresByKind"] as? [String: Int] ?? ["unreadable": 1]).isEmpty, "\(run.output)")
        let checks = try #require(result["checks"] as? [[String: Any]])
        #expect(checks.contains { $0["name"] as? String == "no submission failed" && $0["passed"] as? Bool == true })
        #expect(!checks.isEmpty && checks.allSatisfy { $0["passed"] as? Bool == true }, "\(run.output)")
    }
}

/// A script of the repository (`Tools/scale-out.sh` unless named) run to completion, standard
/// output and error together.
struct ScriptRun {
    let status: Int32
    let output: String

    init(_ arguments: [String], script: String = "Tools/scale-out.sh", timeout: TimeInterval = 120) throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [root.appendingPathComponent(script).path] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.runCheckingDescriptors()
        // Read on a dispatch thread while it runs (a full pipe would stop the script; a task
        // would hold one of the cooperative pool's two threads for the whole run).
        let collected = OutputBox()
        let reading = DispatchGroup()
        reading.enter()
        DispatchQueue.global().async {
            collected.data = pipe.fileHandleForReading.readDataToEndOfFile()
            reading.leave()
        }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        // SIGTERM runs the script's clean-up (its servers stopped, its directory removed).
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        reading.wait()
        status = process.terminationStatus
        output = String(decoding: collected.data, as: UTF8.self)
    }

    /// The directory of the built horizon-server and horizon-bench (next to the test bundle).
    static func binDirectory() throws -> String {
        var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent("horizon-bench").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return directory.path }
            directory.deleteLastPathComponent()
        }
        throw RigError("horizon-bench is not built next to the tests (swift build --build-tests builds it)")
    }
}

/// The script's output, written by the reading thread before `reading.leave()` and read after `wait()`.
private final class OutputBox: @unchecked Sendable {
    var data = Data()
}
