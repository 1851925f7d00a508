import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonLedger

/// `horizon-server backup FILE`: a consistent copy of the database while payments go on.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the database to FILE while the server runs, and check the copy.",
        discussion: """
            SQLite: SQLite's online backup (one consistent snapshot; payments go on meanwhile), \
            written beside FILE and renamed into place. PostgreSQL: pg_dump's custom format \
            (pg_dump must be installed). The copy is then read back: for SQLite its integrity and \
            the ledger's audit (postings sum to zero, balances equal their postings); for \
            PostgreSQL pg_restore's listing. Keep the issuer key (issuer.pem) and server.json \
            with it. Restore with `horizon-server restore FILE`.
            """)

    @OptionGroup var options: ServerOptions

    @Argument(help: "Where the copy goes (a new file; an existing one is replaced only with --force).")
    var file: String

    @Flag(help: "Replace FILE if it exists.")
    var force = false

    func run() async throws {
        let settings = try options.settings()
        let target = (file as NSString).expandingTildeInPath
        if FileManager.default.fileExists(atPath: target), !force {
            throw CLIError("\(target) exists; choose another file or pass --force to replace it")
        }
        let console = Console()
        switch try DatabaseFile(settings.database, in: options.directory.path) {
        case .sqlite(let path):
            console.line("backing up \(path) …")
            let pages: Int
            let summary: LedgerBackup.Summary
            do {
                pages = try LedgerBackup.copy(sqliteAt: path, to: target)
                summary = try await LedgerBackup.check(sqliteAt: target)
            } catch { throw CLIError("\(error)") }
            console.line("backed up to \(target): \(pages) pages, \(summary)")
        case .postgres(let url):
            console.line("backing up the PostgreSQL database with pg_dump …")
            let partial = target + ".partial"
            try PostgresTools.run(
                "pg_dump", ["--format=custom", "--no-owner", "--no-privileges", "--file", partial, "--dbname", url])
            let listing = try PostgresTools.run("pg_restore", ["--list", partial])
            guard rename(partial, target) == 0 else { throw CLIError("cannot move \(partial) to \(target)") }
            let tables = listing.split(separator: "\n").filter { $0.contains(" TABLE DATA ") }.count
            console.line("backed up to \(target): \(tables) tables (pg_dump custom format)")
        }
    }
}

/// `horizon-server restore FILE`: puts a backup in the database's place.
struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Put a backup made by `horizon-server backup` in the database's place (stop the server first).",
        discussion: """
            The backup is checked before anything is replaced (SQLite: integrity and the \
            ledger's audit). A database already in place is kept: with --replace, SQLite's file \
            is moved aside to NAME.before-restore-TIME and PostgreSQL's tables are dropped and \
            restored in one transaction. `serve` then migrates the restored database to its \
            schema. Payments settled after the backup are not in it; terminals keep each \
            payment's answer and wallets their receipts.
            """)

    @OptionGroup var options: ServerOptions

    @Argument(help: "The backup file.")
    var file: String

    @Flag(help: "Replace the database in place (SQLite's is kept beside it).")
    var replace = false

    func run() async throws {
        let settings = try options.settings()
        let source = (file as NSString).expandingTildeInPath
        guard FileManager.default.fileExists(atPath: source) else { throw CLIError("there is no backup at \(source)") }
        let console = Console()
        switch try DatabaseFile(settings.database, in: options.directory.path) {
        case .sqlite(let path):
            let summary: LedgerBackup.Summary
            do { summary = try await LedgerBackup.check(sqliteAt: source) } catch { throw CLIError("\(error)") }
            if FileManager.default.fileExists(atPath: path) {
                guard replace else {
                    throw CLIError(
                        "\(path) exists; stop the server and pass --replace to put the backup in its place (the current file is kept beside it)"
                    )
                }
                let aside = "\(path).before-restore-\(Int(Date().timeIntervalSince1970))"
                for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                    guard rename(path + suffix, aside + suffix) == 0 else {
                        throw CLIError("cannot move \(path + suffix) aside to \(aside + suffix)")
                    }
                }
                console.line("the database that was in place is now \(aside)")
            }
            do { try LedgerBackup.copy(sqliteAt: source, to: path) } catch { throw CLIError("\(error)") }
            console.line("restored \(source) to \(path): \(summary)")
        case .postgres(let url):
            _ = try PostgresTools.run("pg_restore", ["--list", source])
            let hasData: Bool
            do { hasData = try await LedgerBackup.holdsLedger(postgresURL: url) } catch { throw CLIError("\(error)") }
            if hasData, !replace {
                throw CLIError(
                    "the database already holds a ledger; stop the servers and pass --replace to drop it and restore the backup"
                )
            }
            try PostgresTools.run(
                "pg_restore",
                [
                    "--clean", "--if-exists", "--no-owner", "--no-privileges", "--single-transaction", "--dbname", url,
                    source,
                ]
            )
            let restored: Ledger
            do { restored = try await Ledger.postgres(url: url) } catch { throw CLIError("\(error)") }
            let violations = (try? await LedgerAudit.violations(in: restored.store)) ?? ["the audit could not run"]
            await restored.close()
            guard violations.isEmpty else {
                throw CLIError("restored, but the audit found: \(violations.joined(separator: "; "))")
            }
            console.line("restored \(source) into the PostgreSQL database: audit clean")
        }
    }
}

/// The database `server.json` names, as a file or a PostgreSQL URL.
enum DatabaseFile {
    case sqlite(String)
    case postgres(String)

    init(_ database: String, in directory: String) throws {
        if database.hasPrefix("sqlite:") {
            let path = String(database.dropFirst("sqlite:".count))
            self = .sqlite(path.hasPrefix("/") ? path : (directory as NSString).appendingPathComponent(path))
        } else if database.hasPrefix("postgres://") || database.hasPrefix("postgresql://") {
            self = .postgres(database)
        } else {
            throw CLIError("the database \(database) is neither sqlite:PATH nor postgres://…")
        }
    }
}

/// PostgreSQL's own programs, run as they are installed.
enum PostgresTools {
    @discardableResult
    static func run(_ program: String, _ arguments: [String]) throws -> String {
        guard let executable = PostgresPrograms.path(of: program) else {
            throw CLIError("\(program) is not installed; install Debian's postgresql-client")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        do { try process.run() } catch { throw CLIError("cannot run \(executable): \(error)") }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let problems = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CLIError(
                "\(program) failed (exit \(process.terminationStatus)): \(problems.trimmingCharacters(in: .whitespacesAndNewlines))"
            )
        }
        return text
    }
}
