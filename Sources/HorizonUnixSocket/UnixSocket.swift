#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Why a Unix-socket operation failed.
public enum UnixSocketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The path does not fit in a socket address.
    case pathTooLong(path: String, maximum: Int)
    /// Something other than a socket is at the path; a listener never replaces it.
    case notASocket(path: String)
    /// Connecting failed: nothing listens at the path (or it cannot be reached).
    case noListener(path: String, reason: String)
    /// A system call failed.
    case system(operation: String, path: String, reason: String)

    public var description: String {
        switch self {
        case .pathTooLong(let path, let maximum): "socket path longer than \(maximum) bytes: \(path)"
        case .notASocket(let path): "\(path) exists and is not a socket; refusing to replace it"
        case .noListener(let path, let reason): "nothing listens at \(path): \(reason)"
        case .system(let operation, let path, let reason): "cannot \(operation) \(path): \(reason)"
        }
    }
}

/// Plumbing shared by every Unix stream socket of the package (the simulated radio's server and
/// its clients, the terminal's control socket): addresses, connecting, and the length-prefixed
/// frames the radio speaks. `UnixListener` and `UnixConnection` serve from dispatch sources and
/// tasks; the blocking calls here are for clients that read on a thread of their own.
public enum UnixSocket {
    /// A frame is its length (4 bytes, big endian) and then its bytes.
    public static let frameHeaderSize = 4

    /// A connected socket to `path`, closed on exec (a spawned program inherits none).
    public static func connect(to path: String) throws(UnixSocketError) -> Int32 {
        var address = try address(path)
        let descriptor = try makeSocket(path)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard status == 0 else {
            let reason = lastError()
            Glibc.close(descriptor)
            throw .noListener(path: path, reason: reason)
        }
        return descriptor
    }

    public static func close(_ descriptor: Int32) { _ = Glibc.close(descriptor) }

    /// `payload` as a frame.
    public static func frame(_ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        var bytes: [UInt8] = [
            UInt8(truncatingIfNeeded: length >> 24), UInt8(truncatingIfNeeded: length >> 16),
            UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length),
        ]
        bytes.reserveCapacity(frameHeaderSize + payload.count)
        bytes.append(contentsOf: payload)
        return bytes
    }

    /// Writes all of `bytes`, blocking while the socket is full; false once the peer is gone.
    @discardableResult
    public static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
        var remaining = bytes[...]
        while !remaining.isEmpty {
            let written = remaining.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            remaining = remaining.dropFirst(written)
        }
        return true
    }

    /// Writes one frame, blocking; false once the peer is gone.
    public static func writeFrame(_ payload: [UInt8], to descriptor: Int32) -> Bool {
        writeAll(frame(payload), to: descriptor)
    }

    /// The next frame, blocking; nil at the end of the stream or for a frame over `maximumSize`.
    public static func readFrame(from descriptor: Int32, maximumSize: Int) -> [UInt8]? {
        guard let header = readExactly(frameHeaderSize, from: descriptor) else { return nil }
        let length = frameLength(header[...])
        guard length <= maximumSize else { return nil }
        return readExactly(length, from: descriptor)
    }

    static func frameLength(_ header: ArraySlice<UInt8>) -> Int {
        header.prefix(frameHeaderSize).reduce(0) { $0 << 8 | Int($1) }
    }

    private static func readExactly(_ count: Int, from descriptor: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let received = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return recv(descriptor, base + offset, count - offset, 0)
            }
            if received < 0, errno == EINTR { continue }
            guard received > 0 else { return nil }
            offset += received
        }
        return buffer
    }

    static func makeSocket(_ path: String) throws(UnixSocketError) -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .system(operation: "create a socket for", path: path, reason: lastError()) }
        return descriptor
    }

    static func address(_ path: String) throws(UnixSocketError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { throw .pathTooLong(path: path, maximum: capacity - 1) }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in bytes.enumerated() { buffer[index] = byte }
            buffer[bytes.count] = 0
        }
        return address
    }

    static func setNonBlocking(_ descriptor: Int32) {
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, (flags < 0 ? 0 : flags) | O_NONBLOCK)
    }

    static func lastError() -> String { String(cString: strerror(errno)) }
}
