import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A non-blocking Unix stream socket for servers that serve many clients from tasks: bytes
/// arrive through a dispatch read source (no thread waits in `recv`), and a write that would
/// block waits for a write source instead.
///
/// The descriptor is closed only once `close()` was called and no dispatch source watches it any
/// more, and every other use of it happens under the lock while it is open: closing it earlier
/// could hand its number to another file (a new listener, say) while a source or a late `send`
/// still used it.
public final class UnixConnection: Sendable {
    private struct State {
        var readSource: DispatchSourceBox?
        var writeSource: DispatchSourceBox?
        /// Sources whose cancel handler has not run yet: dispatch may still use the descriptor.
        var watching = 0
        /// `close()` was called: the descriptor goes as soon as no source watches it.
        var closeRequested = false
        var closed = false
    }

    private let descriptor: Int32
    private let queue: DispatchQueue
    private let state = Mutex(State())

    /// Takes ownership of `descriptor` and makes it non-blocking; its sources run on `queue`.
    public init(descriptor: Int32, queue: DispatchQueue = DispatchQueue(label: "horizon.unix-connection")) {
        self.descriptor = descriptor
        self.queue = queue
        UnixSocket.setNonBlocking(descriptor)
    }

    deinit { close() }

    public static func connect(to path: String) throws(UnixSocketError) -> UnixConnection {
        UnixConnection(descriptor: try UnixSocket.connect(to: path))
    }

    /// The bytes as they arrive, until the peer closes or `close()`. One reader per connection:
    /// it owns the read side from then on; a reader that stops iterating (its task cancelled)
    /// stops the reads too.
    public func chunks() -> AsyncStream<[UInt8]> {
        let (chunks, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .unbounded)
        let descriptor = self.descriptor
        let box = state.withLock { state -> DispatchSourceBox? in
            guard !state.closeRequested, state.readSource == nil else { return nil }
            let box = DispatchSourceBox(DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue))
            state.readSource = box
            state.watching += 1
            return box
        }
        guard let source = box?.source else {
            continuation.finish()
            return chunks
        }
        source.setEventHandler {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received > 0 {
                continuation.yield(Array(chunk[..<received]))
            } else if received == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                continuation.finish()
                source.cancel()
            }
        }
        source.setCancelHandler { [self] in
            continuation.finish()
            released { $0.readSource = nil }
        }
        continuation.onTermination = { [weak self] _ in self?.stopReading() }
        // Activated in any case (dispatch must not release a source that never was); one that
        // `close()` cancelled meanwhile goes straight to its cancel handler.
        source.resume()
        return chunks
    }

    /// Reads text lines of at most `maximumLength` bytes (see `chunks()`: one reader).
    public func lines(maximumLength: Int) -> LineReader {
        LineReader(chunks: chunks(), maximumLength: maximumLength)
    }

    /// Reads frames of at most `maximumSize` bytes (see `chunks()`: one reader).
    public func frames(maximumSize: Int) -> FrameReader {
        FrameReader(chunks: chunks(), maximumSize: maximumSize)
    }

    private func stopReading() { state.withLock { $0.readSource }?.source.cancel() }

    /// Sends `bytes`; false if the peer is gone or the connection closed. One writer at a time.
    @discardableResult
    public func send(_ bytes: [UInt8]) async -> Bool {
        var remaining = bytes[...]
        while !remaining.isEmpty {
            let attempt = state.withLock { state -> (written: Int, error: Int32)? in
                guard !state.closeRequested else { return nil }
                let written = remaining.withUnsafeBytes {
                    Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                }
                return (written, written < 0 ? errno : 0)
            }
            guard let attempt else { return false }
            if attempt.written > 0 {
                remaining = remaining.dropFirst(attempt.written)
            } else if attempt.error == EINTR {
                continue
            } else if attempt.error == EAGAIN || attempt.error == EWOULDBLOCK {
                await writable()
            } else {
                return false
            }
        }
        return true
    }

    /// Sends one line; false if the peer is gone or the connection closed.
    @discardableResult
    public func send(line: String) async -> Bool { await send(Array((line + "\n").utf8)) }

    /// Waits until the socket takes more bytes (a client that reads slowly) or the connection
    /// closes, without a thread.
    private func writable() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let descriptor = self.descriptor
            let box = state.withLock { state -> DispatchSourceBox? in
                guard !state.closeRequested else { return nil }
                let box = DispatchSourceBox(DispatchSource.makeWriteSource(fileDescriptor: descriptor, queue: queue))
                state.writeSource = box
                state.watching += 1
                return box
            }
            guard let source = box?.source else {
                continuation.resume()
                return
            }
            source.setEventHandler { source.cancel() }
            // Writable or closed, the writer goes on (and finds out which).
            source.setCancelHandler { [self] in
                released { $0.writeSource = nil }
                continuation.resume()
            }
            source.resume()
        }
    }

    /// A source's cancel handler ran: dispatch no longer uses the descriptor for it.
    private func released(_ forget: (inout State) -> Void) {
        state.withLock { state in
            forget(&state)
            state.watching -= 1
            closeIfUnwatched(&state)
        }
    }

    /// Closes the connection: the peer sees the end at once; the descriptor is released once no
    /// dispatch source watches it any more. Safe to call more than once.
    public func close() {
        let sources = state.withLock { state -> [DispatchSourceBox] in
            guard !state.closeRequested else { return [] }
            state.closeRequested = true
            shutdown(descriptor, Int32(SHUT_RDWR))
            closeIfUnwatched(&state)
            return [state.readSource, state.writeSource].compactMap { $0 }
        }
        for source in sources { source.source.cancel() }
    }

    /// Under the lock, so that no use of the descriptor can run between the check and the close.
    private func closeIfUnwatched(_ state: inout State) {
        guard state.closeRequested, state.watching == 0, !state.closed else { return }
        state.closed = true
        Glibc.close(descriptor)
    }
}
