import Foundation

/// PostgreSQL's own programs (`pg_dump`, `pg_restore`, `psql`…) as Debian installs them: one
/// directory per major version under /usr/lib/postgresql, and wrappers in /usr/bin.
public enum PostgresPrograms {
    /// The newest installed version's `program` (a dump must be made by a `pg_dump` at least as
    /// new as the server), else the one on /usr/bin; nil when PostgreSQL's client is not installed.
    public static func path(of program: String, under root: String = "/usr/lib/postgresql") -> String? {
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .sorted { $0.compare($1, options: .numeric) == .orderedDescending }
        let candidates = versions.map { "\(root)/\($0)/bin/\(program)" } + ["/usr/bin/\(program)"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
