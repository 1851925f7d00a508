import HorizonUnixSocket
import Synchronization

/// The frames waiting to be written to one end of a radio server connection, in order, and the
/// task that writes them: the room's events and a device's radio calls queue a frame without
/// waiting for the socket.
final class FrameOutbox: Sendable {
    private let connection: UnixConnection
    private let frames: AsyncStream<[UInt8]>
    private let continuation: AsyncStream<[UInt8]>.Continuation
    private let maximumQueuedBytes: Int
    private let queuedBytes = Atomic<Int>(0)
    init(connection: UnixConnection, maximumQueuedBytes: Int) {
        self.connection = connection
        let (frames, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .unbounded)
        self.frames = frames
        self.continuation = continuation
        self.maximumQueuedBytes = maximumQueuedBytes
    }

    /// Queues `payload` as a frame; false once `finish()` was called or the other end is
    /// `maximumQueuedBytes` behind. Past that the connection is ended (a device out of range)
    /// rather than held in memory or allowed to stall the sender.
    @discardableResult
    func enqueue(_ payload: [UInt8]) -> Bool {
        let frame = UnixSocket.frame(payload)
        let queued = queuedBytes.add(frame.count, ordering: .relaxed).newValue
        guard queued <= maximumQueuedBytes else {
            // Closing ends a write that waits for the socket, and with it the drain.
            connection.close()
            continuation.finish()
            return false
        }
        if case .terminated = continuation.yield(frame) { return false }
        return true
    }

    /// Writes until `finish()` (after what was queued before it) or until the other end is gone;
    /// then closes the connection, which ends its reads too.
    func drain() async {
        for await frame in frames {
            guard await connection.send(frame) else { break }
            queuedBytes.subtract(frame.count, ordering: .relaxed)
        }
        connection.close()
    }

    /// Ends the queue: what is queued is still written, nothing after it.
    func finish() { continuation.finish() }
}
