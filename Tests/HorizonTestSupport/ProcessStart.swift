import Foundation

/// Foundation's `Process.run` on Linux reads the `/proc/self/fd` listing into a fixed buffer
/// and overruns it once more than about 1,365 descriptors are open, which kills the whole test
/// process with a memory error. A test that leaks descriptors (a database nobody closed) then
/// takes every other test down with it, far from the leak. Starting programs through
/// `runCheckingDescriptors` turns that into one failed test that names the files held.
extension Process {
    /// The most descriptors a test process may hold when it starts a program.
    public static let descriptorLimitForStarting = 1_000

    public struct TooManyOpenDescriptors: Error, CustomStringConvertible {
        public let count: Int
        public let mostHeld: [(path: String, count: Int)]
        public var description: String {
            let held = mostHeld.map { "\($0.count)× \($0.path)" }.joined(separator: ", ")
            return "the test process holds \(count) descriptors (over \(Process.descriptorLimitForStarting)); "
                + "Foundation's Process.run would crash. Most held: \(held)"
        }
    }

    /// `run()`, after checking that the process does not hold so many descriptors that
    /// Foundation would crash starting it.
    public func runCheckingDescriptors() throws {
        let targets = Self.openDescriptorTargets()
        guard targets.count <= Self.descriptorLimitForStarting else {
            // Grouped by directory (a leak is many files of one kind of temporary directory), and
            // sockets, pipes and the like by kind ("socket:[1234]" counts as "socket").
            let byDirectory = Dictionary(grouping: targets) { target in
                target.hasPrefix("/")
                    ? (target as NSString).deletingLastPathComponent
                    : String(target.prefix { $0 != "[" }).replacingOccurrences(of: ":", with: "")
                        + (target.hasPrefix("anon_inode") ? " " + target.drop { $0 != "[" } : "")
            }
            let most = byDirectory.map { (path: $0.key, count: $0.value.count) }.sorted { $0.count > $1.count }
            throw TooManyOpenDescriptors(count: targets.count, mostHeld: Array(most.prefix(5)))
        }
        try run()
    }

    /// What each descriptor of this process refers to.
    public static func openDescriptorTargets() -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") }
    }
}
