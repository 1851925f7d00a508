import Synchronization

/// Work a program finishes before it exits, such as the frames a remote radio has queued for its
/// server (a wallet's "declined" must reach the terminal after the wallet has stopped). Run by
/// `CommandRunner` on every exit, bounded in time so a peer that reads nothing cannot hold the
/// program.
public enum BeforeExit {
    private static let work = Mutex<[@Sendable () async -> Void]>([])

    public static func add(_ item: @escaping @Sendable () async -> Void) { work.withLock { $0.append(item) } }

    /// Runs what was added, in order, for `limit` at most.
    static func run(within limit: Duration = .seconds(2)) async {
        let items = work.withLock { items in
            defer { items = [] }
            return items
        }
        guard !items.isEmpty else { return }
        // Unstructured on purpose: a wait that ignores cancellation must not hold the exit.
        let (done, finished) = AsyncStream<Void>.makeStream()
        Task {
            for item in items { await item() }
            finished.finish()
        }
        Task {
            try? await Task.sleep(for: limit)
            finished.finish()
        }
        for await _ in done {}
    }
}
