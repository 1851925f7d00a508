import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A Unix stream socket carrying text lines, read and written with blocking calls: the simple
/// client a test or a script uses to talk to the terminal's control socket.
public final class LineConnection: @unchecked Sendable {
    public let descriptor: Int32
    private var buffer: [UInt8] = []
    private let writeLock = NSLock()
    /// Set when `readLine(maximumLength:)` met a line longer than allowed (it then returns nil).
    public private(set) var lineTooLong = false

    public init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    public static func connect(to path: String) throws -> LineConnection {
        LineConnection(descriptor: try connectedSocket(to: path))
    }

    /// Sends one line; false if the peer is gone.
    @discardableResult
    public func send(_ line: String) -> Bool {
        writeLock.lock()
        defer { writeLock.unlock() }
        var bytes = Array((line + "\n").utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            bytes = bytes.dropFirst(written)
        }
        return true
    }

    /// Ends reads that wait longer than `seconds` (the read then returns nil, as at end of
    /// stream).
    public func setReadTimeout(seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The next line without its newline; nil at end of stream, after the read timeout, or for a
    /// line longer than `maximumLength` bytes (`lineTooLong` tells which).
    public func readLine(maximumLength: Int = 4096) -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                guard newline <= maximumLength else {
                    lineTooLong = true
                    return nil
                }
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            if buffer.count > maximumLength {
                lineTooLong = true
                return nil
            }
            var chunk = [UInt8](repeating: 0, count: 1024)
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received < 0, errno == EINTR { continue }
            guard received > 0 else {
                guard !buffer.isEmpty else { return nil }
                defer { buffer.removeAll() }
                return String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(contentsOf: chunk[..<received])
        }
    }
}

/// What reading a line from an `AsyncLineConnection` gave.
public enum LineRead: Sendable, Equatable {
    case line(String)
    /// The peer closed its side (or the connection was closed here) before a newline.
    case end
    /// The line grew past the reader's maximum length; it is refused, not buffered.
    case tooLong
}

/// A non-blocking Unix stream socket carrying text lines, for servers that serve many clients
/// from tasks: bytes arrive through a dispatch read source (no thread waits in `recv`), and a
/// write that would block waits for a write source instead.
public final class AsyncLineConnection: Sendable {
    private struct State {
        var readSource: ReadSource?
        /// `close()` was called: the descriptor goes as soon as no source watches it.
        var closeRequested = false
        /// The read source's cancel handler ran: dispatch no longer uses the descriptor.
        var readSourceReleased = false
        var closed = false
    }

    private let descriptor: Int32
    private let queue = DispatchQueue(label: "horizon.line-connection")
    private let state = Mutex(State())

    /// Takes ownership of `descriptor` and makes it non-blocking.
    public init(descriptor: Int32) {
        self.descriptor = descriptor
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, (flags < 0 ? 0 : flags) | O_NONBLOCK)
    }

    deinit { close() }

    public static func connect(to path: String) throws -> AsyncLineConnection {
        AsyncLineConnection(descriptor: try connectedSocket(to: path))
    }

    /// Reads lines of at most `maximumLength` bytes. One reader per connection: it owns the
    /// read side from then on.
    public func lineReader(maximumLength: Int) -> LineReader {
        let (chunks, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .unbounded)
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        let descriptor = self.descriptor
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
            let closeNow = state.withLock { state -> Bool in
                state.readSourceReleased = true
                return state.closeRequested && !state.closed
            }
            if closeNow { closeDescriptor() }
        }
        // A reader that stops iterating (its task cancelled) stops the reads too.
        continuation.onTermination = { [weak self] _ in self?.stopReading() }
        let alreadyClosed = state.withLock { state -> Bool in
            guard !state.closeRequested else { return true }
            state.readSource = ReadSource(source)
            return false
        }
        if alreadyClosed {
            continuation.finish()
        } else {
            source.resume()
        }
        return LineReader(chunks: chunks, maximumLength: maximumLength)
    }

    private func stopReading() { state.withLock { $0.readSource }?.source.cancel() }

    /// Sends one line; false if the peer is gone or the connection closed.
    @discardableResult
    public func send(_ line: String) async -> Bool {
        var bytes = Array((line + "\n").utf8)[...]
        while !bytes.isEmpty {
            guard !state.withLock({ $0.closeRequested }) else { return false }
            let written = bytes.withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if written > 0 {
                bytes = bytes.dropFirst(written)
            } else if written < 0, errno == EINTR {
                continue
            } else if written < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                await writable()
            } else {
                return false
            }
        }
        return true
    }

    /// Waits until the socket takes more bytes (a client that reads slowly), without a thread.
    private func writable() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumed = Mutex(false)
            let source = DispatchSource.makeWriteSource(fileDescriptor: descriptor, queue: queue)
            source.setEventHandler {
                source.cancel()
                let first = resumed.withLock { resumed in
                    defer { resumed = true }
                    return !resumed
                }
                if first { continuation.resume() }
            }
            source.resume()
        }
    }

    /// Closes the connection: the peer sees the end at once; the descriptor is released once no
    /// dispatch source watches it any more (closing it earlier could hand its number to another
    /// file while a source still reads it). Safe to call more than once.
    public func close() {
        let (source, closeNow) = state.withLock { state -> (ReadSource?, Bool) in
            guard !state.closeRequested else { return (nil, false) }
            state.closeRequested = true
            return (state.readSource, state.readSource == nil || state.readSourceReleased)
        }
        shutdown(descriptor, Int32(SHUT_RDWR))
        if closeNow {
            closeDescriptor()
        } else {
            source?.source.cancel()
        }
    }

    private func closeDescriptor() {
        let first = state.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
        if first { Glibc.close(descriptor) }
    }
}

/// The lines of one `AsyncLineConnection`, in order; used by the one task that reads them.
public struct LineReader {
    private var chunks: AsyncStream<[UInt8]>.Iterator
    private var buffer: [UInt8] = []
    private var ended = false
    public let maximumLength: Int

    init(chunks: AsyncStream<[UInt8]>, maximumLength: Int) {
        self.chunks = chunks.makeAsyncIterator()
        self.maximumLength = maximumLength
    }

    /// The next line without its newline. At the end, a last line without a newline is still
    /// returned; the reader's task being cancelled ends it too.
    public mutating func next() async -> LineRead {
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                guard newline <= maximumLength else { return .tooLong }
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return .line(line)
            }
            if buffer.count > maximumLength { return .tooLong }
            guard !ended, let chunk = await chunks.next() else {
                ended = true
                guard !buffer.isEmpty else { return .end }
                defer { buffer.removeAll() }
                return .line(String(decoding: buffer, as: UTF8.self))
            }
            buffer.append(contentsOf: chunk)
        }
    }
}

/// A listening control socket (mode 0660: the owner and its group, e.g. the register's user)
/// whose connections arrive as an `AsyncStream` (a dispatch read source on the listening socket
/// accepts them; no thread waits in `accept`).
public final class LineListener: Sendable {
    public let path: String
    private let descriptor: Int32
    private let queue = DispatchQueue(label: "horizon.line-listener")
    private struct State {
        var source: ReadSource?
        var closed = false
    }
    private let state = Mutex(State())

    public init(path: String) throws {
        self.path = path
        var address = try socketAddress(path)
        // Only a stale socket is replaced: a path that is something else (a file, a directory, a
        // link an attacker planted) is refused, never unlinked.
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else {
                throw CLIError(
                    "\(path) exists and is not a socket; refusing to replace it (remove it yourself or choose another --control-socket)"
                )
            }
            unlink(path)
        }
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw CLIError("cannot create a socket") }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw CLIError("cannot listen on \(path): \(reason)")
        }
        chmod(path, 0o660)
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, (flags < 0 ? 0 : flags) | O_NONBLOCK)
    }

    /// The connections, as clients arrive, until `close()`. One consumer.
    public func connections() -> AsyncStream<AsyncLineConnection> {
        let (stream, continuation) = AsyncStream<AsyncLineConnection>.makeStream(bufferingPolicy: .unbounded)
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        let descriptor = self.descriptor
        source.setEventHandler {
            // Every client waiting now; the source fires again for the next ones.
            while true {
                let client = accept(descriptor, nil, nil)
                if client >= 0 {
                    _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                    continuation.yield(AsyncLineConnection(descriptor: client))
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
        let closed = state.withLock { state -> Bool in
            guard !state.closed, state.source == nil else { return true }
            state.source = ReadSource(source)
            return false
        }
        if closed {
            continuation.finish()
        } else {
            source.resume()
        }
        return stream
    }

    /// Stops accepting, ends `connections()` and removes the socket file. Safe to call more than
    /// once.
    public func close() {
        let (first, source) = state.withLock { state -> (Bool, ReadSource?) in
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

/// A dispatch read source kept in a lock's state. Dispatch sources are safe to use from any
/// thread (`cancel()` in particular); the type just does not say so.
private struct ReadSource: @unchecked Sendable {
    let source: any DispatchSourceRead
    init(_ source: any DispatchSourceRead) { self.source = source }
}

/// A connected Unix stream socket to `path`, with a message naming the service when none listens.
private func connectedSocket(to path: String) throws -> Int32 {
    var address = try socketAddress(path)
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { throw CLIError("cannot create a socket") }
    let status = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard status == 0 else {
        Glibc.close(descriptor)
        throw CLIError("no terminal service listens at \(path); start it with `horizon-terminal serve`")
    }
    return descriptor
}

private func socketAddress(_ path: String) throws -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard bytes.count < capacity else { throw CLIError("socket path longer than \(capacity - 1) bytes: \(path)") }
    withUnsafeMutableBytes(of: &address.sun_path) { buffer in
        for (index, byte) in bytes.enumerated() { buffer[index] = byte }
        buffer[bytes.count] = 0
    }
    return address
}
