import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Why a command could not do its job, as one line a person can act on.
public struct CLIError: Error, CustomStringConvertible {
    public let description: String
    /// The code `--json` prints (the HTTP API's where the failure is the server's answer).
    public let code: String
    public init(_ description: String, code: String = JSONErrorCode.commandFailed) {
        self.description = description
        self.code = code
    }
}

/// A program's data directory (keys, credential, ledger, wallet store): mode 0700, files 0600.
public struct DataDirectory: Sendable {
    public let url: URL

    /// `--data-dir` if given, else `$XDG_DATA_HOME/horizon/<role>` (default `~/.local/share`).
    public init(explicit: String?, role: String) {
        if let explicit {
            url = URL(fileURLWithPath: explicit, isDirectory: true)
        } else {
            url = Self.defaultBase.appendingPathComponent(role, isDirectory: true)
        }
    }

    public static var defaultBase: URL {
        let environment = ProcessInfo.processInfo.environment
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent("horizon", isDirectory: true)
        }
        let home =
            environment["HOME"].map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.homeDirectoryForCurrentUser
        return home.appendingPathComponent(".local/share/horizon", isDirectory: true)
    }

    public var path: String { url.path }

    public func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    public func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: file(name).path) }

    /// Creates the directory (0700), and any missing parent, if needed. mkdir(2) one level at a
    /// time, so a refusal names the system's reason and where it happened.
    public func create() throws {
        var missing: [String] = []
        var current = url.standardizedFileURL
        var isDirectory: ObjCBool = false
        while !FileManager.default.fileExists(atPath: current.path, isDirectory: &isDirectory), current.path != "/" {
            missing.append(current.path)
            current.deleteLastPathComponent()
        }
        if missing.isEmpty, !isDirectory.boolValue {
            throw CLIError("cannot use \(path) as the data directory: it is a file; choose another --data-dir")
        }
        for directory in missing.reversed() where mkdir(directory, 0o700) != 0 && errno != EEXIST {
            let reason =
                errno == ENOTDIR
                ? "\((directory as NSString).deletingLastPathComponent) is a file, not a directory"
                : String(cString: strerror(errno)).lowercased()
            let place = directory == url.standardizedFileURL.path ? "" : " (\(directory))"
            throw CLIError("cannot create the data directory \(path): \(reason)\(place); choose another --data-dir")
        }
    }

    /// Fails with a clear message unless `marker` (a file `init` writes) is present.
    public func requireInitialized(marker: String, initCommand: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CLIError("no data directory at \(path); run `\(initCommand)` first (or pass --data-dir)")
        }
        guard exists(marker) else {
            throw CLIError("\(path) is not initialised (no \(marker)); run `\(initCommand)` first")
        }
    }

    /// Writes `data` to `name` with mode 0600, atomically.
    public func write(_ data: Data, to name: String) throws {
        let target = file(name)
        let temporary = url.appendingPathComponent(".\(name).tmp")
        _ = FileManager.default.createFile(
            atPath: temporary.path, contents: nil, attributes: [.posixPermissions: 0o600])
        do {
            let handle = try FileHandle(forWritingTo: temporary)
            try handle.write(contentsOf: data)
            try handle.synchronize()
            try handle.close()
            // rename(2) replaces the old file atomically: a reader sees the old or the new, never half.
            guard rename(temporary.path, target.path) == 0 else {
                throw CLIError("cannot replace \(target.path): \(String(cString: strerror(errno)))")
            }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw CLIError("cannot write \(target.path): \(error.localizedDescription)")
        }
    }

    /// The file `lock` holds the data directory's lock (flock(2)) and the pid of its holder.
    public static let lockFile = "lock"

    /// The directories this process holds the lock of (their descriptors stay open until exit).
    private static let heldLocks = Mutex<Set<String>>([])

    /// Takes the directory's lock for the rest of this process's life, or refuses when another
    /// process holds it: two programs writing one terminal's journal and ledger, or serving on
    /// one control socket, would each take the other's work for a crash's. The kernel releases
    /// the lock when the holder exits, however it ends, so a crash leaves nothing stale.
    /// `program` names the holder in the refusal. The directory must exist.
    public func lockForLife(program: String) throws {
        try Self.heldLocks.withLock { held in
            guard !held.contains(path) else { return }
            let lockPath = file(Self.lockFile).path
            let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                throw CLIError("cannot open the lock file \(lockPath): \(String(cString: strerror(errno)))")
            }
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
                let reason = errno
                let holder = Self.pid(in: descriptor)
                close(descriptor)
                guard reason == EWOULDBLOCK else {
                    throw CLIError("cannot lock \(lockPath): \(String(cString: strerror(reason)))")
                }
                throw CLIError(
                    "another \(program)\(holder.map { " (pid \($0))" } ?? "") is using \(path); stop it first")
            }
            // Who holds it, for the next one's refusal.
            let text = Array("\(getpid())\n".utf8)
            _ = ftruncate(descriptor, 0)
            _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
            held.insert(path)
        }
    }

    private static func pid(in descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Int32(String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    public func read(_ name: String) throws -> Data {
        do {
            return try Data(contentsOf: file(name))
        } catch {
            throw CLIError("cannot read \(file(name).path): \(error.localizedDescription)")
        }
    }
}
