import HorizonCore
import HorizonRadio

// The HorizonLinkTests target depends on HorizonCore, HorizonRadio and HorizonLink only, so the
// message link is exercised here over a small in-test radio with the simulated radio's contract:
// a virtual clock, an ordered pair of `ByteLink`s with an ATT MTU and a fixed delivery delay,
// payloads held until a handler is set, `closedLocally` / `closedByPeer` after data in flight,
// and planned per-frame `drop` and `cut` faults (a cut loses everything from that frame on, and
// both sides hear `connectionLost` after the supervision timeout).

/// A virtual clock: nothing happens until `run`, which fires due actions in time order (ties in
/// the order they were scheduled) on the caller's thread.
final class VirtualClock: Scheduler, @unchecked Sendable {
    private struct Event {
        let time: Instant
        let sequence: Int
        let handle: ScheduledAction
        let action: @Sendable () -> Void
    }

    private(set) var now: Instant = .zero
    private var events: [Event] = []
    private var nextSequence = 0

    var wallClock: UnixTime { 1_800_000_000 + now.nanoseconds / 1_000_000_000 }

    @discardableResult
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let handle = ScheduledAction()
        let event = Event(time: now + max(delay, .zero), sequence: nextSequence, handle: handle, action: action)
        nextSequence += 1
        let index =
            events.firstIndex { ($0.time, $0.sequence) > (event.time, event.sequence) } ?? events.endIndex
        events.insert(event, at: index)
        return handle
    }

    func run(until deadline: Instant) {
        while let first = events.first, first.time <= deadline {
            events.removeFirst()
            now = first.time
            if !first.handle.isCancelled { first.action() }
        }
        if now < deadline { now = deadline }
    }

    func run(for duration: Duration) { run(until: now + duration) }

    var pendingCount: Int { events.count }
}

enum LoopbackFault {
    case drop
    case cut
}

/// Both ends of one link and what is on the wire.
final class LoopbackWire: @unchecked Sendable {
    let clock: VirtualClock
    let attMTU: Int
    let delay: Duration
    let supervisionTimeout: Duration

    fileprivate var handlers: [ByteLinkHandler?] = [nil, nil]
    fileprivate var pending: [[[UInt8]]] = [[], []]
    fileprivate var pendingClose: [LinkCloseReason?] = [nil, nil]
    fileprivate var closedLocally = [false, false]
    fileprivate var notified = [false, false]
    fileprivate var open = true
    fileprivate var lost = false
    /// Planned faults by frame index, counted over both directions from 0.
    var faults: [Int: LoopbackFault] = [:]
    /// Every frame put on air, by side (0 = central, 1 = peripheral).
    private(set) var sent: [[[UInt8]]] = [[], []]
    private(set) var framesSent = 0

    init(
        clock: VirtualClock, attMTU: Int = 247, delay: Duration = .milliseconds(30),
        supervisionTimeout: Duration = .seconds(2)
    ) {
        self.clock = clock
        self.attMTU = attMTU
        self.delay = delay
        self.supervisionTimeout = supervisionTimeout
    }

    fileprivate func send(_ payload: [UInt8], from side: Int) throws(RadioError) {
        guard open, !closedLocally[side], !notified[side] else { throw .linkClosed }
        guard payload.count <= attMTU - 3 else { throw .payloadTooLarge(size: payload.count, maximum: attMTU - 3) }
        guard !lost else { return }
        let index = framesSent
        framesSent += 1
        sent[side].append(payload)
        switch faults[index] {
        case .drop?:
            return
        case .cut?:
            lost = true
            for end in 0...1 {
                clock.schedule(after: supervisionTimeout) { [self] in notifyClose(end, .connectionLost) }
            }
        case nil:
            let receiver = 1 - side
            clock.schedule(after: delay) { [self] in deliver(payload, to: receiver) }
        }
    }

    /// Frames sent before a cut are still delivered; only the cut frame and later ones are lost.
    private func deliver(_ payload: [UInt8], to side: Int) {
        guard !closedLocally[side], !notified[side] else { return }
        guard let handler = handlers[side] else {
            pending[side].append(payload)
            return
        }
        handler.onReceive(payload)
    }

    fileprivate func close(from side: Int) {
        guard !closedLocally[side], !notified[side] else { return }
        closedLocally[side] = true
        clock.execute { [self] in notifyClose(side, .closedLocally) }
        guard open, !lost else { return }
        open = false
        // Scheduled after every delivery already in flight from this side.
        clock.schedule(after: delay) { [self] in notifyClose(1 - side, .closedByPeer) }
    }

    private func notifyClose(_ side: Int, _ reason: LinkCloseReason) {
        guard !notified[side] else { return }
        notified[side] = true
        if notified.allSatisfy({ $0 }) { open = false }
        guard let handler = handlers[side] else {
            pendingClose[side] = reason
            return
        }
        handler.onClose(reason)
    }

    fileprivate func setHandler(_ handler: ByteLinkHandler, side: Int) {
        handlers[side] = handler
        let payloads = pending[side]
        pending[side] = []
        for payload in payloads { handler.onReceive(payload) }
        if let reason = pendingClose[side] {
            pendingClose[side] = nil
            handler.onClose(reason)
        }
    }
}

/// A wire and its two ends: the central's (wallet's) and the peripheral's (terminal's).
struct LoopbackPair {
    let wire: LoopbackWire
    let central: LoopbackEnd
    let peripheral: LoopbackEnd

    init(clock: VirtualClock, attMTU: Int = 247, delay: Duration = .milliseconds(30)) {
        wire = LoopbackWire(clock: clock, attMTU: attMTU, delay: delay)
        central = LoopbackEnd(wire: wire, side: 0, peer: PeerAddress("5E:1A:00:00:00:00"))
        peripheral = LoopbackEnd(wire: wire, side: 1, peer: PeerAddress("5E:1A:00:00:00:01"))
    }
}

final class LoopbackEnd: ByteLink, @unchecked Sendable {
    let wire: LoopbackWire
    let side: Int
    let peer: PeerAddress

    init(wire: LoopbackWire, side: Int, peer: PeerAddress) {
        self.wire = wire
        self.side = side
        self.peer = peer
    }

    var attMTU: Int { wire.attMTU }
    func setHandler(_ handler: ByteLinkHandler) { wire.setHandler(handler, side: side) }
    func send(_ payload: [UInt8]) throws(RadioError) { try wire.send(payload, from: side) }
    func close() { wire.close(from: side) }
}
