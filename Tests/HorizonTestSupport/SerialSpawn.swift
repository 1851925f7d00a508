import Foundation
import Synchronization

/// Foundation's `Process.run()` has crashed whole test runs inside its own `memcpy` while other
/// threads of the run were starting programs too (seen under load, in `Process.run` itself, with
/// no environment changed by anyone). Starting a program takes milliseconds, so the tests start
/// theirs one at a time through this lock; what the programs then do runs in parallel as before.
private let spawning = Mutex<Void>(())

extension Process {
    /// `run()`, one process start at a time across the whole test run.
    public func runSerially() throws {
        try spawning.withLock { _ in try run() }
    }
}
