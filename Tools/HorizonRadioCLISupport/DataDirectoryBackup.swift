import Foundation
import HorizonCLISupport
import HorizonStores

/// A copy of a terminal's or a wallet's data directory that is itself a data directory: each
/// SQLite file through SQLiteDatabase's online backup (one consistent snapshot, so a `serve`
/// taking payments meanwhile is fine), every other file (keys, credential, settings, cache)
/// copied with its mode. Lock files, sockets and SQLite's WAL files are left out.
public enum DataDirectoryBackup {
    /// What was copied, by name relative to the directory.
    public struct Report: Sendable, Equatable {
        public var databases: [String] = []
        public var files: [String] = []
    }

    /// What `backup --help` says, for a program whose long-running command is `running`.
    public static func discussion(running: String) -> String {
        "Safe while `\(running)` runs: each SQLite file is copied with SQLite's online backup (one consistent "
            + "snapshot) and checked; other files keep their modes. The copy is a data directory: to restore, stop "
            + "the program and put the copy in the data directory's place (or pass it as --data-dir)."
    }

    /// Copies `directory` into `destination` (a new or empty directory) and says what was copied.
    public static func run(_ directory: DataDirectory, into destination: String) throws {
        let destination = (destination as NSString).expandingTildeInPath
        let report = try copy(directory, to: destination)
        Console().line(
            "backed up \(directory.path) to \(destination): \(report.databases.joined(separator: ", ")) "
                + "(online backups, checked) and \(report.files.count) other files")
    }

    public static func copy(_ directory: DataDirectory, to destination: String) throws -> Report {
        let source = directory.path
        guard FileManager.default.fileExists(atPath: source) else {
            throw CLIError("there is no data directory at \(source)")
        }
        if let existing = try? FileManager.default.contentsOfDirectory(atPath: destination), !existing.isEmpty {
            throw CLIError("\(destination) is not empty; back up into a new directory")
        }
        do {
            try FileManager.default.createDirectory(
                atPath: destination, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch { throw CLIError("cannot create \(destination): \(error.localizedDescription)") }
        var report = Report()
        try copyTree(from: source, to: destination, relative: "", report: &report)
        return report
    }

    private static func copyTree(from source: String, to destination: String, relative: String, report: inout Report)
        throws
    {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: source)) ?? []
        for name in names.sorted() where !skipped(name) {
            let from = source + "/" + name
            let to = destination + "/" + name
            let path = relative.isEmpty ? name : relative + "/" + name
            var status = stat()
            guard lstat(from, &status) == 0 else { continue }
            switch status.st_mode & S_IFMT {
            case S_IFDIR:
                try FileManager.default.createDirectory(
                    atPath: to, withIntermediateDirectories: false,
                    attributes: [.posixPermissions: Int(status.st_mode & 0o777)])
                try copyTree(from: from, to: to, relative: path, report: &report)
            case S_IFREG where isSQLite(from):
                do {
                    let database = try SQLiteDatabase(path: from)
                    defer { database.close() }
                    try database.backup(to: to)
                    let copy = try SQLiteDatabase(path: to)
                    defer { copy.close() }
                    if let problem = try copy.integrityProblem() {
                        throw CLIError("the copy of \(path) is damaged: \(problem)")
                    }
                } catch let error as CLIError { throw error } catch {
                    throw CLIError("cannot back up \(path): \(error)")
                }
                report.databases.append(path)
            case S_IFREG:
                guard let data = FileManager.default.contents(atPath: from) else {
                    throw CLIError("cannot read \(from)")
                }
                let mode = Int(status.st_mode & 0o777)
                guard FileManager.default.createFile(atPath: to, contents: data, attributes: [.posixPermissions: mode])
                else { throw CLIError("cannot write \(to)") }
                chmod(to, mode_t(mode))
                report.files.append(path)
            default:
                continue  // sockets, links: made again by the program
            }
        }
    }

    /// Files that are not data: the lock, SQLite's WAL and shared-memory files (their content is
    /// in the online backup), a copy in progress.
    private static func skipped(_ name: String) -> Bool {
        name == "lock" || name.hasSuffix("-wal") || name.hasSuffix("-shm") || name.hasSuffix("-journal")
            || name.hasSuffix(".partial")
    }

    private static func isSQLite(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        return header == Data("SQLite format 3\0".utf8)
    }
}
