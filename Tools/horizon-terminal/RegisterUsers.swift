import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonRadioCLISupport
import HorizonServiceClients

/// `register-users`: the cashiers payments are attributed to.
struct RegisterUsers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register-users", abstract: "Manage the cashiers (register users) payments are attributed to.",
        discussion: """
            An activated terminal manages its merchant's register users at the server (signed with the terminal's \
            key), where each has an id (1 to 64 characters of A-Z a-z 0-9 . _ : -) and a name (1 to 64 bytes). \
            The single-box sandbox keeps them by name in its own ledger.
            """,
        subcommands: [List.self, Add.self, Rename.self, Remove.self], defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List register users.")
        @Flag(help: "Print JSON.") var json = false
        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: AdminSignInOptions

        func run() async throws {
            if let merchant = try await admin.merchantService(global) {
                let users = await merchant.registerUsers.map(RegisterUserRow.init)
                if json {
                    try Console().json(users)
                } else if users.isEmpty {
                    print("no register users")
                } else {
                    // The server's text, made safe to print (no escape sequences, no bidi overrides).
                    for user in users { print("\(user.id.sanitizedForDisplay)\t\(user.name.sanitizedForDisplay)") }
                }
                return
            }
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
        static let configuration = CommandConfiguration(
            abstract: "Add a register user.",
            discussion: """
                At a server the register user gets --id, or an id made from the name (letters and digits, \
                lowercased); `register_user_exists` means the id is taken: choose another with --id.
                """)
        @Argument(help: "The cashier's name.") var name: String
        @Option(help: "The register user's id at the server (default: made from the name).") var id: String?
        @Flag(help: "Print JSON.") var json = false
        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: AdminSignInOptions

        func validate() throws {
            let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty, trimmed.utf8.count <= RegisterUserRules.maximumNameBytes else {
                throw ValidationError("a name must be 1 to \(RegisterUserRules.maximumNameBytes) bytes")
            }
        }

        func run() async throws {
            if let merchant = try await admin.merchantService(global) {
                let id = id ?? Self.id(from: name)
                let user = try await merchant.run { try await $0.addRegisterUser(id: id, name: name) }
                if json {
                    try Console().json(RegisterUserRow(user))
                } else {
                    print("added \(user.name) (id \(user.id))".sanitizedForDisplay)
                }
                return
            }
            try await global.lockedTerminalFiles().loadLedger().addRegisterUser(
                name, at: UnixTime(Date().timeIntervalSince1970))
            print("added \(name)")
        }

        /// The name's letters and digits, lowercased, runs of others as one "-": "Ada Lovelace" → "ada-lovelace".
        static func id(from name: String) -> String {
            var id = ""
            for scalar in name.lowercased().unicodeScalars {
                if scalar.isASCII, CharacterSet.alphanumerics.contains(scalar) {
                    id.unicodeScalars.append(scalar)
                } else if !id.isEmpty, !id.hasSuffix("-") {
                    id += "-"
                }
            }
            while id.hasSuffix("-") { id.removeLast() }
            return id.isEmpty ? "user-" + String(MerchantServiceClient.makeRefundID().suffix(8)) : String(id.prefix(64))
        }
    }

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rename a register user (an activated terminal's, at its server).")
        @Argument(help: "The register user's id.") var id: String
        @Argument(help: "The new name.") var name: String
        @Flag(help: "Print JSON.") var json = false
        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: AdminSignInOptions

        func run() async throws {
            guard let merchant = try await admin.merchantService(global) else {
                throw CLIError(
                    "the single-box sandbox keeps register users by name: remove the old name and add the new one")
            }
            let user = try await merchant.run { try await $0.renameRegisterUser(id: id, name: name) }
            if json {
                try Console().json(RegisterUserRow(user))
            } else {
                print("renamed \(user.id) to \(user.name)".sanitizedForDisplay)
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a register user: by id at the server, by name in the sandbox.")
        @Argument(help: "The register user's id (the sandbox: the cashier's name).") var name: String
        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: AdminSignInOptions

        func run() async throws {
            if let merchant = try await admin.merchantService(global) {
                try await merchant.run { try await $0.removeRegisterUser(id: name) }
                print("removed \(name)")
                return
            }
            guard try await global.lockedTerminalFiles().loadLedger().removeRegisterUser(name) else {
                throw CLIError("no register user named '\(name)'")
            }
            print("removed \(name)")
        }
    }
}

/// A register user as the CLI prints it (an activated terminal's).
struct RegisterUserRow: Encodable {
    let id: String
    let name: String
    let addedAt: Int64

    init(_ user: MerchantServiceClient.RegisterUser) {
        id = user.id
        name = user.name
        addedAt = user.addedAt
    }
}
