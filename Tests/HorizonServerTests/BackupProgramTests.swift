import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSettlement
import HorizonTestSupport
import Synchronization
import Testing

/// `horizon-server backup` and `restore` as an operator runs them: a backup taken while payments
/// go on is consistent (it holds every payment settled before it started, none half-written, and
/// its books add up), restores into a fresh data directory, and every stored result in it replays
/// without moving money again.
@Suite("Backups that restore", .serialized, .offTheCooperativePool)
struct BackupProgramTests {
    static let payments = 150

    @Test func aBackupTakenDuringABurstOfPaymentsRestoresAndAddsUp() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        let path = sandbox.path("server/horizon.sqlite")
        let ledger = try await Ledger.sqlite(path: path)
        let merchant = try await ledger.createMerchant(
            name: "Corner Café", currency: .eur, adminEmail: "owner@cafe.example")
        let wallet = try await ledger.createWallet(name: "Alex", publicKey: walletKey(1))
        try await ledger.deposit(euros(1_000_00), to: wallet.id)

        // The burst: payments one after another from this process while the backup runs in another.
        let settled = Atomic(0)
        let burst = Task {
            for number in 1...Self.payments {
                _ = try await ledger.settle(request(number, amount: euros(100)), merchant: merchant.id)
                settled.add(1, ordering: .sequentiallyConsistent)
            }
        }
        while settled.load(ordering: .sequentiallyConsistent) < 20 { try await Task.sleep(for: .milliseconds(5)) }
        let before = settled.load(ordering: .sequentiallyConsistent)
        let backupFile = sandbox.path("horizon-backup.sqlite")
        let backup = try ServerProcess.run(["backup", backupFile, "--data-dir", data])
        let after = settled.load(ordering: .sequentiallyConsistent)
        try await burst.value
        #expect(backup.status == 0, "\(backup.errors)")
        #expect(backup.output.contains("audit clean"), "\(backup.output)")
        let mode = try FileManager.default.attributesOfItem(atPath: backupFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // Nothing of the next backup is left half-written beside it.
        #expect(!FileManager.default.fileExists(atPath: backupFile + ".partial"))
        // A second backup to the same file is refused unless asked for.
        let again = try ServerProcess.run(["backup", backupFile, "--data-dir", data])
        #expect(again.status != 0 && again.errors.contains("--force"), "\(again.errors)")

        // Restored into a fresh server's data directory: refused over its database, then replaced.
        let fresh = sandbox.path("restored")
        #expect(try ServerProcess.run(["init", "--data-dir", fresh]).status == 0)
        let refused = try ServerProcess.run(["restore", backupFile, "--data-dir", fresh])
        #expect(refused.status != 0 && refused.errors.contains("--replace"), "\(refused.errors)")
        let restore = try ServerProcess.run(["restore", backupFile, "--replace", "--data-dir", fresh])
        #expect(restore.status == 0, "\(restore.errors)")
        #expect(restore.output.contains("now \(sandbox.path("restored/horizon.sqlite")).before-restore-"))

        let restored = try await Ledger.sqlite(path: sandbox.path("restored/horizon.sqlite"))
        #expect(try await LedgerAudit.violations(in: restored.store).isEmpty)
        var inBackup = 0
        for number in 1...Self.payments where try await restored.executionCount(of: paymentID(number)) == 1 {
            inBackup += 1
        }
        // One snapshot: every payment settled before the backup started, none after it ended,
        // and nothing between them but whole payments (the balance matches the count).
        #expect(inBackup >= before && inBackup <= after, "\(before) ≤ \(inBackup) ≤ \(after)")
        for number in 1...inBackup {
            #expect(try await restored.executionCount(of: paymentID(number)) == 1, "payment \(number)")
        }
        #expect(try await restored.balance(of: wallet.id, in: .eur) == euros(1_000_00 - Int64(inBackup) * 100))
        // Every stored result replays: the same answer, no money moved.
        let replayed = try await restored.settle(request(1, amount: euros(100)), merchant: merchant.id)
        #expect(replayed == (try await ledger.settle(request(1, amount: euros(100)), merchant: merchant.id)))
        #expect(try await restored.balance(of: wallet.id, in: .eur) == euros(1_000_00 - Int64(inBackup) * 100))
        await restored.close()
        await ledger.close()
    }

    /// The same on PostgreSQL: pg_dump while payments go on, pg_restore into another database.
    @Test(.enabled(if: TestStores.postgresConfigured)) func aPostgreSQLBackupRestoresIntoAnotherDatabase() async throws
    {
        let url = try #require(TestStores.postgresURL)
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let (source, target) = ("horizon_backup_\(suffix)", "horizon_restore_\(suffix)")
        func database(_ name: String, user: String = "horizon") throws -> String {
            var parts = try #require(URLComponents(string: url))
            parts.user = user
            parts.path = "/" + name
            return try #require(parts.string)
        }
        let admin = try database("horizon_test", user: "horizon_admin")
        for name in [source, target] {
            _ = try PostgresTools.psql(admin, "CREATE DATABASE \(name) OWNER horizon")
        }
        defer {
            for name in [source, target] { _ = try? PostgresTools.psql(admin, "DROP DATABASE \(name) WITH (FORCE)") }
        }

        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        #expect(try ServerProcess.run(["init", "--database", try database(source), "--data-dir", data]).status == 0)
        let ledger = try await Ledger.postgres(url: try database(source))
        let merchant = try await ledger.createMerchant(
            name: "Corner Café", currency: .eur, adminEmail: "owner@cafe.example")
        let wallet = try await ledger.createWallet(name: "Alex", publicKey: walletKey(1))
        try await ledger.deposit(euros(1_000_00), to: wallet.id)
        let burst = Task {
            for number in 1...60 {
                _ = try await ledger.settle(request(number, amount: euros(100)), merchant: merchant.id)
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        let backupFile = sandbox.path("horizon.dump")
        let backup = try ServerProcess.run(["backup", backupFile, "--data-dir", data])
        try await burst.value
        #expect(backup.status == 0, "\(backup.errors)")
        #expect(backup.output.contains("tables (pg_dump custom format)"), "\(backup.output)")

        let restore = try ServerProcess.run([
            "restore", backupFile, "--database", try database(target), "--data-dir", data,
        ])
        #expect(restore.status == 0, "\(restore.errors)")
        #expect(restore.output.contains("audit clean"), "\(restore.output)")
        let again = try ServerProcess.run([
            "restore", backupFile, "--database", try database(target), "--data-dir", data,
        ])
        #expect(again.status != 0 && again.errors.contains("--replace"), "\(again.errors)")

        let restored = try await Ledger.postgres(url: try database(target))
        #expect(try await LedgerAudit.violations(in: restored.store).isEmpty)
        var count: Int64 = 0
        for number in 1...60 where try await restored.executionCount(of: paymentID(number)) == 1 { count += 1 }
        #expect(try await restored.balance(of: wallet.id, in: .eur) == euros(1_000_00 - count * 100))
        await restored.close()
        await ledger.close()
    }

    @Test func aFileThatIsNotABackupIsRefusedAndNothingIsReplaced() throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        let garbage = sandbox.path("garbage.sqlite")
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: garbage))
        let refused = try ServerProcess.run(["restore", garbage, "--replace", "--data-dir", data])
        #expect(refused.status != 0)
        #expect(refused.errors.contains("is not a file SQLite can read"), "\(refused.errors)")
        #expect(FileManager.default.fileExists(atPath: sandbox.path("server/horizon.sqlite")))
        #expect(try FileManager.default.contentsOfDirectory(atPath: data).allSatisfy { !$0.contains("before-restore") })
        let missing = try ServerProcess.run(["restore", sandbox.path("nothing.sqlite"), "--data-dir", data])
        #expect(missing.errors.contains("there is no backup at"), "\(missing.errors)")
    }
}

/// PostgreSQL's `psql`, found as `horizon-server` finds its tools.
enum PostgresTools {
    static func psql(_ url: String, _ sql: String) throws -> String {
        let executable = try #require(PostgresPrograms.path(of: "psql"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--no-psqlrc", "--quiet", "--set", "ON_ERROR_STOP=1", "--dbname", url, "--command", sql]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.runCheckingDescriptors()
        let problems = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "psql: \(problems)")
        return problems
    }
}
