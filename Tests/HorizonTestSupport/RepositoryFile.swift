import Foundation

/// Files of this repository (docs, policies, scripts) that tests hold to what the code does.
public enum RepositoryFile {
    /// The repository's root: three folders above this file.
    public static var root: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// The text of `path`, relative to the repository's root.
    public static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }
}
