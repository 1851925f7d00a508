import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger

/// `register-users`: the cashiers payments are attributed to.
struct RegisterUsers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register-users", abstract: "Manage the cashiers (register users) payments are attributed to.",
        subcommands: [List.self, Add.self, Remove.self], defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List register users.")
        @Flag(help: "Print JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let users = try await global.terminalFiles.loadLedger().registerUsers()
            if json {
                try Console().json(users)
            } else if users.isEmpty {
                print("no register users")
            } else {
                for user in users { print(user) }
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a register user.")
        @Argument(help: "The cashier's name.") var name: String
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            guard !name.isEmpty, name.utf8.count <= 64 else { throw ValidationError("a name must be 1 to 64 bytes") }
        }

        func run() async throws {
            try await global.terminalFiles.loadLedger().addRegisterUser(
                name, at: UnixTime(Date().timeIntervalSince1970))
            print("added \(name)")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a register user.")
        @Argument(help: "The cashier's name.") var name: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            guard try await global.terminalFiles.loadLedger().removeRegisterUser(name) else {
                throw CLIError("no register user named '\(name)'")
            }
            print("removed \(name)")
        }
    }
}
