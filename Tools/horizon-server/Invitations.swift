import ArgumentParser
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonServer

struct Invitations: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Issue, list and revoke invitation codes for wallet registration.",
        discussion: """
            A wallet registers with an invitation code when it has one; with `"invitationsRequired": true` in \
            server.json, only with one. A code may register one wallet or several (--uses), and may carry a bonus \
            credited on each such wallet's first top-up (--bonus). Only a hash of a code is kept: it is shown once, \
            when created.
            """,
        subcommands: [Create.self, List.self, Revoke.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Issue an invitation code and print it (once).")

        @OptionGroup var options: ServerOptions
        @Option(help: "How many wallets the code may register.") var uses = 1
        @Option(help: "The code to issue (4 to 32 letters and digits); default: 12 random characters.")
        var code: String?
        @Option(help: "A bonus credited on the first top-up of each wallet registered with it, e.g. 5.00.")
        var bonus: String?
        @Option(help: "ISO 4217 currency of the bonus.") var currency = "EUR"
        @Option(help: "A note for the list (who the code is for).") var note = ""
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            guard (1...1_000_000).contains(uses) else { throw ValidationError("--uses must be 1 to 1000000") }
            if let code, InvitationCodes.normalized(code) == nil {
                throw ValidationError("--code must be 4 to 32 letters and digits (dashes and spaces are ignored)")
            }
        }

        func run() async throws {
            var bonusMoney: Money?
            if let bonus {
                let money = try AmountArgument.money(bonus, in: try AmountArgument.currency(currency))
                guard money.minorUnits > 0 else { throw ValidationError("--bonus must be more than zero") }
                bonusMoney = money
            }
            let typed = code ?? InvitationCodes.generate()
            guard let normalized = InvitationCodes.normalized(typed) else {
                throw ValidationError("--code must be 4 to 32 letters and digits")
            }
            let (uses, note, bonus) = (uses, note, bonusMoney)
            let invitation = try await withLedger(options) { ledger, _ in
                do {
                    return try await ledger.createInvitation(
                        codeHash: InvitationCodes.hash(normalized), hint: InvitationCodes.hint(normalized),
                        maximumUses: uses, bonus: bonus, note: note)
                } catch LedgerError.alreadyExists {
                    throw CLIError("an invitation with this code exists already; choose another --code")
                }
            }
            if json {
                return try Console().json(InvitationJSON(invitation, code: typed))
            }
            Console().line("Invitation \(invitation.id): code \(typed)")
            Console().line(
                "  registers up to \(uses) wallet\(uses == 1 ? "" : "s")"
                    + (bonus.map { "; bonus \($0) on each one's first top-up" } ?? ""))
            Console().line("The code is shown only now: only its hash is kept.")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every invitation code, newest first.")

        @OptionGroup var options: ServerOptions
        @Flag(help: "Print them as JSON.") var json = false

        func run() async throws {
            let list = try await withLedger(options) { ledger, _ in try await ledger.invitations() }
            let console = Console()
            if json { return try console.json(list.map { InvitationJSON($0, code: nil) }) }
            if list.isEmpty { console.line("No invitation codes yet: horizon-server invitations create") }
            for invitation in list {
                console.line(
                    "\(invitation.id)  \(invitation.hint)  \(invitation.status.rawValue)  "
                        + "\(invitation.uses)/\(invitation.maximumUses) used"
                        + (invitation.bonus.map { "  bonus \($0)" } ?? "")
                        + (invitation.note.isEmpty ? "" : "  \(invitation.note.sanitizedForDisplay)"))
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Withdraw an invitation code: registrations not yet complete with it are refused.")

        @OptionGroup var options: ServerOptions
        @Argument(help: "The invitation's id (inv_…), as the list shows it.") var invitation: String

        func run() async throws {
            let id = InvitationID(rawValue: invitation)
            let revoked = try await withLedger(options) { ledger, _ in
                do { return try await ledger.revokeInvitation(id) } catch LedgerError.notFound {
                    throw CLIError("no invitation has the id \(id); see horizon-server invitations list")
                }
            }
            Console().line("Invitation \(revoked.id) revoked (\(revoked.uses)/\(revoked.maximumUses) used)")
        }
    }
}

struct InvitationJSON: Encodable {
    let invitationId: String
    let code: String?
    let hint: String
    let status: String
    let maximumUses: Int
    let uses: Int
    let bonus: String?
    let note: String
    let createdAt: Int64
    let revokedAt: Int64?

    init(_ invitation: Invitation, code: String?) {
        invitationId = invitation.id.rawValue
        self.code = code
        hint = invitation.hint
        status = invitation.status.rawValue
        maximumUses = invitation.maximumUses
        uses = invitation.uses
        bonus = invitation.bonus.map { "\($0)" }
        note = invitation.note
        createdAt = invitation.createdAt
        revokedAt = invitation.revokedAt
    }
}
