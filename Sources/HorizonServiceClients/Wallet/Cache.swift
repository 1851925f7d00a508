import Crypto
import Foundation
import Synchronization

/// The reference's `Cache`: the last answer of each service read, kept so that a client can show
/// it while the network is down (`ServiceResult.freshness` says so). `persistentCache(directory:)`
/// keeps answers in files that outlive the process; `temporaryAnonymousCache()` keeps them in
/// memory only.
///
/// Keys name the client, the identity and the item (`Cache.key`), so `reset(client:)` clears one
/// client's answers for every identity, and one identity never reads another's.
public final class Cache: Sendable {
    private struct Entry: Codable {
        let key: String
        let storedAt: Date
        let value: Data
    }

    /// Nil: memory only.
    public let directory: URL?
    private let entries = Mutex<[String: Entry]>([:])

    private init(directory: URL?) { self.directory = directory }

    /// Answers in files under `directory` (created, mode 0700; files 0600), read back by a later
    /// process. What a file cannot be read as is treated as absent, never as an answer.
    public static func persistentCache(directory: URL) throws -> Cache {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CacheError.directoryUnusable(directory.path, "\(error)")
        }
        return Cache(directory: directory)
    }

    /// Answers in this process's memory only, tied to no one once it ends.
    public static func temporaryAnonymousCache() -> Cache { Cache(directory: nil) }

    /// The key of `item` of `client` for the identity `scope`.
    public static func key(client: String, scope: String, item: String) -> String { "\(client)/\(scope)/\(item)" }

    /// Stores `value` as the last known answer for `key`. Best effort on disk: an answer that
    /// cannot be written stays in memory, because failing the fresh answer the caller has just
    /// got would be worse than not having it after a restart.
    public func store<T: Encodable>(_ value: T, for key: String, at date: Date = Date()) {
        guard let data = try? JSONEncoder().encode(value) else { return }
        let entry = Entry(key: key, storedAt: date, value: data)
        entries.withLock { $0[key] = entry }
        guard let file = file(for: key), let bytes = try? JSONEncoder().encode(entry) else { return }
        if (try? bytes.write(to: file, options: .atomic)) != nil {
            try? FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        }
    }

    /// The last known answer for `key` and when it was stored, if there is one that decodes as `T`.
    public func value<T: Decodable>(_ type: T.Type, for key: String) -> (value: T, storedAt: Date)? {
        var entry = entries.withLock { $0[key] }
        if entry == nil, let file = file(for: key), let data = try? Data(contentsOf: file),
            let stored = try? JSONDecoder().decode(Entry.self, from: data), stored.key == key
        {
            entry = stored
            entries.withLock { $0[key] = stored }
        }
        guard let entry, let value = try? JSONDecoder().decode(T.self, from: entry.value) else { return nil }
        return (value, entry.storedAt)
    }

    /// Removes every answer whose key starts with `prefix`.
    public func removeValues(withPrefix prefix: String) {
        entries.withLock { entries in
            for key in entries.keys where key.hasPrefix(prefix) { entries.removeValue(forKey: key) }
        }
        guard let directory else { return }
        for file in (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        where file.pathExtension == "json" {
            guard let data = try? Data(contentsOf: file),
                let stored = try? JSONDecoder().decode(Entry.self, from: data)
            else { continue }
            if stored.key.hasPrefix(prefix) { try? FileManager.default.removeItem(at: file) }
        }
    }

    /// Removes one client's answers, for every identity.
    public func reset(client: String) { removeValues(withPrefix: client + "/") }

    /// Removes every answer (the reference's `-[Cache reset:]`).
    public func reset() { removeValues(withPrefix: "") }

    /// Keys are hashed into file names: they hold identity scopes and ids that need not be
    /// valid file names.
    private func file(for key: String) -> URL? {
        guard let directory else { return nil }
        let name = Array(SHA256.hash(data: Data(key.utf8))).map { String(format: "%02x", $0) }.joined()
        return directory.appendingPathComponent(name + ".json")
    }
}

public enum CacheError: Error, Equatable, Sendable, CustomStringConvertible {
    case directoryUnusable(String, String)

    public var description: String {
        switch self {
        case .directoryUnusable(let path, let reason):
            "the cache directory \(path) cannot be created or used (\(reason)); pass a writable directory"
        }
    }
}
