/// What `body` gives within `limit`, or nil when the time runs out first (`body` is then
/// cancelled): a wait a command may give up on (a control-socket line, a terminal to hear).
public func value<T: Sendable>(within limit: Duration, _ body: @escaping @Sendable () async -> T?) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
