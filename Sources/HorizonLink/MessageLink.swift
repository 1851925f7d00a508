import HorizonCore
import HorizonRadio
import Synchronization

/// Limits the link layer enforces on what a peer sends.
public struct LinkLimits: Sendable, Equatable {
    /// The largest message either side may send: a maximum session message (8 KiB) sealed in a
    /// record, with room to spare. At the slowest link (MTU 23, 30 ms interval, 4 packets per
    /// event) it takes about 3.3 s, well inside the default reassembly timeout.
    public static let defaultMaximumMessageSize = 8 * 1024 + 64
    public var maximumMessageSize: Int
    /// How long a half-received message may wait for its remaining fragments.
    public var reassemblyTimeout: Duration

    public init(maximumMessageSize: Int = defaultMaximumMessageSize, reassemblyTimeout: Duration = .seconds(10)) {
        self.maximumMessageSize = maximumMessageSize
        self.reassemblyTimeout = reassemblyTimeout
    }
}

/// How a message link ended.
public enum MessageLinkEnd: Error, Equatable, Sendable, CustomStringConvertible {
    /// The radio link closed between messages.
    case closed(LinkCloseReason)
    /// The peer broke the framing rules (or a message was cut off); the link was closed.
    case failed(LinkError)

    public var description: String {
        switch self {
        case .closed(let reason): "link \(reason)"
        case .failed(let error): "link failed: \(error)"
        }
    }
}

/// What a message link reports, on the radio's scheduler.
public struct MessageLinkHandler: Sendable {
    public var onMessage: @Sendable ([UInt8]) -> Void
    public var onEnd: @Sendable (MessageLinkEnd) -> Void

    public init(onMessage: @escaping @Sendable ([UInt8]) -> Void, onEnd: @escaping @Sendable (MessageLinkEnd) -> Void) {
        self.onMessage = onMessage
        self.onEnd = onEnd
    }
}

/// Whole messages over a `ByteLink`: fragments outgoing messages to the link's MTU and
/// reassembles incoming ones. Any framing violation closes the link and is reported once, so a
/// peer sending garbage is disconnected rather than left half-understood.
public final class MessageLink: Sendable {
    public let link: any ByteLink
    public let scheduler: any Scheduler
    public let limits: LinkLimits

    private struct State {
        var fragmenter: Fragmenter
        var reassembler: Reassembler
        var handler: MessageLinkHandler?
        var ended = false
        var bytesSent = 0
        var bytesReceived = 0
    }

    private let state: Mutex<State>

    public init(link: any ByteLink, scheduler: any Scheduler, limits: LinkLimits = LinkLimits()) throws(LinkError) {
        self.link = link
        self.scheduler = scheduler
        self.limits = limits
        let fragmenter = try Fragmenter(
            maximumFragmentSize: link.maximumPayloadSize, maximumMessageSize: limits.maximumMessageSize)
        state = Mutex(
            State(fragmenter: fragmenter, reassembler: Reassembler(maximumMessageSize: limits.maximumMessageSize)))
    }

    public var peer: PeerAddress { link.peer }

    /// Bytes this side has put on air, headers included.
    public var bytesSent: Int { state.withLock { $0.bytesSent } }
    public var bytesReceived: Int { state.withLock { $0.bytesReceived } }

    /// Starts delivering messages to `handler`.
    public func start(_ handler: MessageLinkHandler) {
        state.withLock { $0.handler = handler }
        link.setHandler(
            ByteLinkHandler(
                onReceive: { [self] fragment in receive(fragment) },
                onClose: { [self] reason in linkClosed(reason) }))
    }

    public func send(_ message: [UInt8]) throws(LinkError) {
        let fragments: [[UInt8]] = try state.withLock { (state) throws(LinkError) -> [[UInt8]] in
            guard !state.ended else { throw .radio(RadioErrorDescription(RadioError.linkClosed.description)) }
            let fragments = try state.fragmenter.fragments(of: message)
            state.bytesSent += fragments.reduce(0) { $0 + $1.count }
            return fragments
        }
        for fragment in fragments {
            do {
                try link.send(fragment)
            } catch {
                throw .radio(RadioErrorDescription(error.description))
            }
        }
    }

    /// Closes the link; the handler hears `.closed(.closedLocally)`.
    public func close() { link.close() }

    private func receive(_ fragment: [UInt8]) {
        let now = scheduler.now
        let outcome: Result<[UInt8]?, LinkError> = state.withLock { state in
            guard !state.ended else { return .success(nil) }
            state.bytesReceived += fragment.count
            let wasInside = state.reassembler.isInsideMessage
            do throws(LinkError) {
                let message = try state.reassembler.receive(fragment, at: now)
                if !wasInside, message == nil, let started = state.reassembler.messageStartedAt {
                    armReassemblyTimer(startedAt: started)
                }
                return .success(message)
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let message?): state.withLock { $0.handler }?.onMessage(message)
        case .success(nil): break
        case .failure(let error): fail(error)
        }
    }

    private func armReassemblyTimer(startedAt: Instant) {
        scheduler.schedule(after: limits.reassemblyTimeout) { [self] in
            let stale = state.withLock { state -> LinkError? in
                guard state.reassembler.messageStartedAt == startedAt else { return nil }
                return state.reassembler.incompleteMessageError
            }
            if let stale { fail(stale) }
        }
    }

    private func fail(_ error: LinkError) {
        guard let handler = markEnded() else { return }
        link.close()
        handler.onEnd(.failed(error))
    }

    private func linkClosed(_ reason: LinkCloseReason) {
        let incomplete = state.withLock { $0.reassembler.incompleteMessageError }
        guard let handler = markEnded() else { return }
        handler.onEnd(incomplete.map { .failed($0) } ?? .closed(reason))
    }

    /// Marks the link ended; returns the handler to tell, or nil if it was already told.
    ///
    /// The handler is forgotten here: its callbacks hold the layer above (a `SecureLink`), which
    /// holds this link, and only breaking that cycle lets an ended link be freed.
    private func markEnded() -> MessageLinkHandler? {
        state.withLock { state in
            guard !state.ended else { return nil }
            state.ended = true
            defer { state.handler = nil }
            return state.handler
        }
    }
}
