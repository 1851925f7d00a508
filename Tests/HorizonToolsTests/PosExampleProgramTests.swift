import Foundation
import Testing

/// `Tools/pos-example.sh` itself, on the built programs: a POS creates a payment intent through
/// the API with an API key, the terminal's `serve` collects it, a simulated-radio wallet pays,
/// the webhook receiver prints the signed event, and the intent read by its order reference is
/// `succeeded`; the script leaves no folder behind.
@Suite(.offTheCooperativePool) struct PosExampleProgramTests {
    @Test func thePOSExampleCollectsAnIntentHearsItsWebhookAndReadsItSucceeded() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let run = try RunningProgram(
            URL(fileURLWithPath: "/bin/bash"),
            [root.appendingPathComponent("Tools/pos-example.sh").path, "--bin", Programs.binDirectory.path],
            input: nil
        ).finish(timeout: 150)
        let output = run.standardOutput + run.standardError
        #expect(run.status == 0, "\(output)")
        #expect(output.contains("pos example: ORDER-4711 succeeded"), "\(output)")
        #expect(
            output.range(
                of:
                    #"webhook  \| received intent\.succeeded evt_[0-9a-f]+ order=ORDER-4711 status=succeeded signature=valid"#,
                options: .regularExpression) != nil, "\(output)")
        #expect(output.contains("ORDER-4711: payment intent") && output.contains(" succeeded, paid 1250 minor units"))
        // Its folder is removed on exit.
        let folder = try #require(
            output.range(of: #"/tmp/horizon-pos\.[A-Za-z0-9]+"#, options: .regularExpression).map { String(output[$0]) }
        )
        #expect(!FileManager.default.fileExists(atPath: folder), "\(folder) was left behind")
    }

    @Test func thePOSExampleExplainsItself() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let run = try RunningProgram(
            URL(fileURLWithPath: "/bin/bash"), [root.appendingPathComponent("Tools/pos-example.sh").path, "--help"],
            input: nil
        ).finish(timeout: 30)
        #expect(run.status == 0)
        #expect(run.standardOutput.contains("Tools/pos-example.sh --bin DIR"), "\(run.standardOutput)")
    }
}
