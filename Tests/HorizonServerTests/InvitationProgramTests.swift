import Foundation
import Testing

/// `horizon-server invitations create|list|revoke`, run as the operator runs it.
@Suite("horizon-server invitations", .serialized)
struct InvitationProgramTests {
    @Test func theOperatorIssuesListsAndRevokesInvitationCodes() throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)

        // A generated code: 12 characters in groups of four, shown once.
        let generated = try ServerProcess.run(["invitations", "create", "--data-dir", data])
        #expect(generated.status == 0, "\(generated.errors)")
        let code = try #require(
            generated.output.split(whereSeparator: \.isWhitespace).first {
                $0.count == 14 && $0.split(separator: "-").count == 3
            }, "\(generated.output)")
        #expect(!code.contains("0") && !code.contains("O") && !code.contains("I") && !code.contains("1"))
        #expect(generated.output.contains("The code is shown only now"))

        let chosen = try ServerProcess.run([
            "invitations", "create", "--code", "launch-2026", "--uses", "50", "--bonus", "5.00", "--note", "party",
            "--json", "--data-dir", data,
        ])
        #expect(chosen.status == 0, "\(chosen.errors)")
        let created = try #require(
            try JSONSerialization.jsonObject(with: Data(chosen.output.utf8)) as? [String: Any])
        let id = try #require(created["invitationId"] as? String)
        #expect(created["maximumUses"] as? Int == 50 && created["bonus"] as? String == "5.00 EUR")

        // The same code again (in another spelling), a code of the wrong shape, a zero limit.
        let again = try ServerProcess.run(["invitations", "create", "--code", "LAUNCH 2026", "--data-dir", data])
        #expect(again.status != 0 && again.errors.contains("an invitation with this code exists already"))
        let bad = try ServerProcess.run(["invitations", "create", "--code", "no!", "--data-dir", data])
        #expect(bad.status != 0 && bad.errors.contains("--code must be 4 to 32 letters and digits"))
        let zero = try ServerProcess.run(["invitations", "create", "--uses", "0", "--data-dir", data])
        #expect(zero.status != 0 && zero.errors.contains("--uses must be 1 to 1000000"))

        let list = try ServerProcess.run(["invitations", "list", "--data-dir", data])
        #expect(list.status == 0)
        #expect(list.output.contains("\(id)  LAUN…  active  0/50 used  bonus 5.00 EUR  party"), "\(list.output)")
        #expect(!list.output.contains("LAUNCH2026") && !list.output.contains(String(code)))

        let revoked = try ServerProcess.run(["invitations", "revoke", id, "--data-dir", data])
        #expect(revoked.status == 0 && revoked.output.contains("Invitation \(id) revoked (0/50 used)"))
        #expect(try ServerProcess.run(["invitations", "list", "--data-dir", data]).output.contains("revoked  0/50"))
        let unknown = try ServerProcess.run(["invitations", "revoke", "inv_nothing", "--data-dir", data])
        #expect(unknown.status != 0 && unknown.errors.contains("no invitation has the id inv_nothing"))
    }
}
