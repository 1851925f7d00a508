import HorizonCore
import HorizonRadio
import Synchronization

/// A scheduler whose clock moves only when told, so a fuzz input runs the same way every time
/// and timers (reassembly timeout, handshake deadline) fire when the target says.
final class ManualScheduler: Scheduler {
    private struct Timer {
        let due: Instant
        let order: Int
        let handle: ScheduledAction
        let action: @Sendable () -> Void
    }

    private struct State {
        var now = Instant.zero
        var timers: [Timer] = []
        var nextOrder = 0
    }

    private let state = Mutex(State())
    let wallClockAtStart: UnixTime

    init(wallClockAtStart: UnixTime) { self.wallClockAtStart = wallClockAtStart }

    var now: Instant { state.withLock { $0.now } }
    var wallClock: UnixTime { wallClockAtStart + now.nanoseconds / 1_000_000_000 }

    @discardableResult
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let handle = ScheduledAction()
        state.withLock { state in
            state.timers.append(
                Timer(due: state.now + max(delay, .zero), order: state.nextOrder, handle: handle, action: action))
            state.nextOrder += 1
        }
        return handle
    }

    /// Moves the clock forward by `duration`, firing every timer that falls due, in order.
    func advance(by duration: Duration) {
        let deadline = now + duration
        while true {
            let next: Timer? = state.withLock { state in
                guard
                    let index = state.timers.indices.filter({ state.timers[$0].due <= deadline })
                        .min(by: {
                            (state.timers[$0].due, state.timers[$0].order) < (
                                state.timers[$1].due, state.timers[$1].order
                            )
                        })
                else { return nil }
                let timer = state.timers.remove(at: index)
                state.now = max(state.now, timer.due)
                return timer
            }
            guard let next else { break }
            if !next.handle.isCancelled { next.action() }
        }
        state.withLock { $0.now = max($0.now, deadline) }
    }

    /// Drops the timers that never fired: they hold the links they would time out, which hold
    /// this scheduler, and one input's objects must not outlive it.
    func tearDown() { state.withLock { $0.timers = [] } }
}

/// One end of a link that goes nowhere: what the code under test sends is kept (for the
/// checks), what the fuzz input says arrives is handed to the handler.
final class FakeLink: ByteLink {
    let peer = PeerAddress("FU:ZZ:00:00:00:01")
    let attMTU: Int

    private struct State {
        var handler: ByteLinkHandler?
        var sent: [[UInt8]] = []
        var closed = false
        var early: [[UInt8]] = []
    }

    private let state = Mutex(State())

    init(attMTU: Int) { self.attMTU = attMTU }

    var sent: [[UInt8]] { state.withLock { $0.sent } }
    var isClosed: Bool { state.withLock { $0.closed } }

    func setHandler(_ handler: ByteLinkHandler) {
        let early = state.withLock { state in
            state.handler = handler
            defer { state.early = [] }
            return state.early
        }
        for payload in early { handler.onReceive(payload) }
    }

    func send(_ payload: [UInt8]) throws(RadioError) {
        let error: RadioError? = state.withLock { state in
            guard !state.closed else { return .linkClosed }
            guard payload.count <= attMTU - 3 else {
                return .payloadTooLarge(size: payload.count, maximum: attMTU - 3)
            }
            state.sent.append(payload)
            return nil
        }
        if let error { throw error }
    }

    func close() {
        let handler = state.withLock { state -> ByteLinkHandler? in
            guard !state.closed else { return nil }
            state.closed = true
            return state.handler
        }
        handler?.onClose(.closedLocally)
    }

    /// A payload from the peer, as the radio would deliver it (dropped once the link is closed).
    func deliver(_ payload: [UInt8]) {
        let handler = state.withLock { state -> ByteLinkHandler? in
            guard !state.closed else { return nil }
            if state.handler == nil { state.early.append(payload) }
            return state.handler
        }
        handler?.onReceive(payload)
    }

    /// Forgets the handler (which holds the layers above, which hold this link) once an input is done.
    func tearDown() {
        state.withLock { state in
            state.closed = true
            state.handler = nil
            state.early = []
        }
    }

    /// The peer goes away.
    func peerClosed(_ reason: LinkCloseReason) {
        let handler = state.withLock { state -> ByteLinkHandler? in
            guard !state.closed else { return nil }
            state.closed = true
            return state.handler
        }
        handler?.onClose(reason)
    }
}
