import HorizonCore
import HorizonRadio
import Synchronization

/// What a BlueZ link received and how it ended, handed to its owner on the scheduler in order.
/// Payloads that arrive before the owner sets a handler are held until it does (the `ByteLink`
/// promise), and the close is reported exactly once (like the simulated radio, also to the side
/// that closed), after every payload received before it; a local close drops what is unread.
final class LinkInbox: Sendable {
    private struct State {
        var handler: ByteLinkHandler?
        var held: [[UInt8]] = []
        var closeReason: LinkCloseReason?
        var closeReported = false
    }

    private let scheduler: any Scheduler
    private let state = Mutex(State())

    init(scheduler: any Scheduler) { self.scheduler = scheduler }

    var isClosed: Bool { state.withLock { $0.closeReason != nil } }

    func setHandler(_ handler: ByteLinkHandler) {
        state.withLock { $0.handler = handler }
        scheduler.execute { [self] in flush() }
    }

    /// From any thread; dropped once the link is closed.
    func receive(_ payload: [UInt8]) {
        let accepted = state.withLock { state -> Bool in
            guard state.closeReason == nil else { return false }
            state.held.append(payload)
            return true
        }
        if accepted { scheduler.execute { [self] in flush() } }
    }

    /// Marks the link closed; true the first time.
    @discardableResult
    func close(_ reason: LinkCloseReason) -> Bool {
        let first = state.withLock { state -> Bool in
            guard state.closeReason == nil else { return false }
            state.closeReason = reason
            if reason == .closedLocally { state.held.removeAll() }
            return true
        }
        if first { scheduler.execute { [self] in flush() } }
        return first
    }

    /// Runs on the scheduler: delivers held payloads, then the close.
    private func flush() {
        let (handler, payloads, close) = state.withLock { state -> (ByteLinkHandler?, [[UInt8]], LinkCloseReason?) in
            guard let handler = state.handler else { return (nil, [], nil) }
            let payloads = state.held
            state.held.removeAll()
            var close: LinkCloseReason?
            if let reason = state.closeReason, !state.closeReported {
                state.closeReported = true
                close = reason
            }
            return (handler, payloads, close)
        }
        guard let handler else { return }
        for payload in payloads { handler.onReceive(payload) }
        if let close { handler.onClose(close) }
    }
}
