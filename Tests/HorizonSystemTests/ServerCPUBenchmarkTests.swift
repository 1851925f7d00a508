import Foundation
import HorizonTestSupport
import Testing

/// The server's CPU per payment against its cryptography alone (Benchmarks/server-throughput.sh)
/// and where the rest goes (Benchmarks/server-profile.sh), on the debug programs the test run
/// built, so that neither rots between publishing runs. The numbers mean nothing here.
// Off the cooperative pool: the tests wait for the programs' processes, blocking their threads.
@Suite(.offTheCooperativePool) struct ServerCPUBenchmarkTests {
    /// `horizon-bench server-crypto`: what the server verifies and signs for one payment, timed
    /// alone, with its inventory and input sizes in the JSON.
    @Test func theServerCryptoBaselineTimesWhatTheServerVerifiesAndSigns() throws {
        let directory = try BenchmarkSmokeTests.temporaryDirectory("server-crypto")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("crypto.json").path
        let run = try BenchmarkSmokeTests.bench(["server-crypto", "--repetitions", "5", "--result-file", output])
        #expect(run.status == 0, "horizon-bench server-crypto failed:\n\(run.output)")
        #expect(run.output.contains("server cryptography per payment: median"))
        let result = try BenchmarkSmokeTests.json(output)
        #expect(result["iterations"] as? Int == 5)
        let operations = try #require(result["cryptoOperations"] as? [String: Int])
        #expect(operations == ["ecdsaVerify": 2, "ecdsaSign": 1, "publicKeyDecoding": 2, "sha256": 3])
        #expect((result["serverCryptoMillisecondsPerPayment"] as? Double ?? 0) > 0)
        let summary = try #require(result["serverCryptoMilliseconds"] as? [String: Any])
        #expect(summary["count"] as? Int == 5)
        // A real submission's body: the base64 Confirm and the terms in JSON.
        let sizes = try #require(result["inputBytes"] as? [String: Int])
        #expect((sizes["requestBody"] ?? 0) > 300 && (sizes["confirmSigned"] ?? 0) > 100)
    }

    /// The scale-out driver reads the server's CPU time just before the first payment and after
    /// the last (Tools/scale-out.sh passes the server's pid): the result's CPU per payment.
    @Test func theScaleOutRunReadsTheServersCPUOverThePayments() throws {
        let directory = try BenchmarkSmokeTests.temporaryDirectory("server-cpu")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("result.json").path
        let run = try ScriptRun([
            "--bin", try ScriptRun.binDirectory(), "--database", "sqlite", "--servers", "1", "--terminals", "2",
            "--payments", "10", "--output", output, "--", "--copies", "1", "--late-retries", "0", "--timeout-every",
            "0",
        ])
        #expect(run.status == 0, "Tools/scale-out.sh failed:\n\(run.output)")
        #expect(run.output.contains("server CPU"), "\(run.output)")
        let result = try BenchmarkSmokeTests.json(output)
        let cpu = try #require(result["serverCPU"] as? [String: Any], "\(run.output)")
        #expect(cpu["processes"] as? Int == 1)
        let perPayment = try #require(cpu["millisecondsPerPayment"] as? Double)
        let total = try #require(cpu["milliseconds"] as? Double)
        #expect(perPayment > 0 && abs(perPayment * 10 - total) < 0.001)
    }

    /// `server-profile.sh --help` names what it records and how to allow perf; the profile itself
    /// (perf on a loaded test machine, about a minute) is run by hand: Benchmarks/README.md.
    @Test func theServerProfileScriptExplainsItself() throws {
        let run = try ScriptRun(["--help"], script: "Benchmarks/server-profile.sh", timeout: 60)
        #expect(run.status == 0, "Benchmarks/server-profile.sh --help failed:\n\(run.output)")
        for option in ["--postgres", "--payments", "--terminals", "--kernel", "--bin", "--output", "--keep"] {
            #expect(run.output.contains(option), "\(option) is not explained:\n\(run.output)")
        }
        #expect(run.output.contains("kernel.perf_event_paranoid"))
        let unknown = try ScriptRun(["--frequency", "99"], script: "Benchmarks/server-profile.sh", timeout: 60)
        #expect(unknown.status != 0 && unknown.output.contains("unknown option --frequency"))
    }
}
