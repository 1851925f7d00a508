import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import Testing

/// An activated terminal's offers announce the merchant's programs as its server has them, not
/// as the sandbox ledger it keeps beside it says.
@Suite("The programs an activated terminal announces", .serialized, .offTheCooperativePool)
struct ActivatedTerminalProgramsTests {
    @Test func theProgramsComeFromTheServerAndNoneWhenItDoesNotAnswer() async throws {
        let rig = try RemoteLedgerRig()
        let files = TerminalFiles(directory: DataDirectory(explicit: rig.terminalDir, role: "terminal"))
        // The sandbox ledger beside it earns no points (bonus 0 in terminal.json); the server's
        // merchant has its bonus rule.
        var settings = try files.loadSettings()
        settings.bonusPointsPerMajorUnit = 0
        try JSONEncoder().encode(settings).write(to: URL(fileURLWithPath: rig.terminalDir + "/terminal.json"))
        let ledger = try await files.loadLedger()
        let sandbox = try await ledger.merchantPrograms()
        #expect(!sandbox.hasBonusProgram && !sandbox.hasGoldProgram && !sandbox.hasCouponProgram)
        let server = try #require(try files.serverClient(identity: try files.loadIdentity()))

        let shown = try Programs.run("horizon-terminal", ["programs", "show", "--json", "--data-dir", rig.terminalDir])
        let fromServer = try JSONSerialization.jsonObject(with: Data(shown.standardOutput.utf8)) as? [String: Any]
        #expect(fromServer?["hasBonusProgram"] as? Bool == true, "\(shown.standardOutput) \(shown.standardError)")
        let announced = try await files.merchantPrograms(
            server: server, ledger: ledger, logger: Logs.logger("test", verbose: false))
        #expect(announced.hasBonusProgram == (fromServer?["hasBonusProgram"] as? Bool ?? false))
        #expect(announced.hasGoldProgram == (fromServer?["hasGoldProgram"] as? Bool ?? false))
        #expect(announced.hasCouponProgram == (fromServer?["hasCouponProgram"] as? Bool ?? false))

        // A server that does not answer: no programs announced, rather than the sandbox's.
        _ = rig.stopServer()
        let offline = try await files.merchantPrograms(
            server: server, ledger: ledger, logger: Logs.logger("test", verbose: false))
        #expect(!offline.hasBonusProgram && !offline.hasGoldProgram && !offline.hasCouponProgram)
        await ledger.close()
    }
}
