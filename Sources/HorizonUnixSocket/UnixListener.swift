import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A listening Unix stream socket whose connections arrive as an `AsyncStream`: a dispatch read
/// source on the listening socket accepts them, so no thread waits in `accept`, and a server
/// serves each client from a task rather than a thread.
public final class UnixListener: Sendable {
    public let path: String
    private let descriptor: Int32
    /// Accepts here, and every accepted connection reads and writes here: the handlers only move
    /// bytes, so one serial queue serves all of a server's clients.
    private let queue: DispatchQueue
    private struct State {
        var source: DispatchSourceBox?
        var closed = false
    }
    private let state = Mutex(State())

    /// Listens at `path` with file mode `mode` (e.g. 0o600: the owner only). Only a stale socket
    /// at the path is replaced: anything else there (a file, a directory, a link someone planted)
    /// is refused, never unlinked.
    public init(path: String, mode: mode_t, backlog: Int32 = 64) throws(UnixSocketError) {
        self.path = path
        var address = try UnixSocket.address(path)
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else { throw .notASocket(path: path) }
            unlink(path)
        }
        let descriptor = try UnixSocket.makeSocket(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(descriptor, backlog) == 0 else {
            let reason = UnixSocket.lastError()
            Glibc.close(descriptor)
            throw .system(operation: "listen on", path: path, reason: reason)
        }
        chmod(path, mode)
        UnixSocket.setNonBlocking(descriptor)
        self.descriptor = descriptor
        queue = DispatchQueue(label: "horizon.unix-listener")
    }

    /// The connections, as clients arrive, until `close()`. One consumer.
    public func connections() -> AsyncStream<UnixConnection> {
        let (stream, continuation) = AsyncStream<UnixConnection>.makeStream(bufferingPolicy: .unbounded)
        let (descriptor, queue) = (self.descriptor, self.queue)
        let box = state.withLock { state -> DispatchSourceBox? in
            guard !state.closed, state.source == nil else { return nil }
            let box = DispatchSourceBox(DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue))
            state.source = box
            return box
        }
        guard let source = box?.source else {
            continuation.finish()
            return stream
        }
        source.setEventHandler {
            // Every client waiting now; the source fires again for the next ones.
            while true {
                let client = accept(descriptor, nil, nil)
                if client >= 0 {
                    // (accept4 would do it at once, but Swift does not see it without _GNU_SOURCE.)
                    _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                    continuation.yield(UnixConnection(descriptor: client, queue: queue))
                } else if errno == EINTR || errno == ECONNABORTED {
                    continue
                } else {
                    return
                }
            }
        }
        // The listening descriptor is released only once dispatch no longer watches it.
        source.setCancelHandler {
            continuation.finish()
            Glibc.close(descriptor)
        }
        // Activated in any case (dispatch must not release a source that never was); one that
        // `close()` cancelled meanwhile goes straight to its cancel handler.
        source.resume()
        return stream
    }

    /// Stops accepting, ends `connections()` and removes the socket file. Safe to call more than
    /// once.
    public func close() {
        let (first, source) = state.withLock { state -> (Bool, DispatchSourceBox?) in
            defer { state.closed = true }
            return (!state.closed, state.source)
        }
        guard first else { return }
        unlink(path)
        if let source {
            source.source.cancel()
        } else {
            Glibc.close(descriptor)
        }
    }
}

/// A dispatch source kept in a lock's state. Dispatch sources are safe to use from any thread
/// (`cancel()` in particular); the type just does not say so.
struct DispatchSourceBox: @unchecked Sendable {
    let source: any DispatchSourceProtocol
    init(_ source: any DispatchSourceProtocol) { self.source = source }
}
