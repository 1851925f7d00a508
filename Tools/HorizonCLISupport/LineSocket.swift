import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A Unix stream socket carrying text lines: the terminal's control protocol, simple enough for
/// a register to drive with `socat`.
public final class LineConnection: @unchecked Sendable {
    public let descriptor: Int32
    private var buffer: [UInt8] = []
    private let writeLock = NSLock()
    /// Set when `readLine(maximumLength:)` met a line longer than allowed (it then returns nil).
    public private(set) var lineTooLong = false

    public init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    public static func connect(to path: String) throws -> LineConnection {
        var address = try socketAddress(path)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
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
        return LineConnection(descriptor: descriptor)
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
    /// stream), so a client that connects and says nothing cannot hold a server thread.
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

/// A listening control socket (mode 0660: the owner and its group, e.g. the register's user).
public final class LineListener: @unchecked Sendable {
    public let path: String
    private let descriptor: Int32

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
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
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
    }

    /// The next connection; nil once the listener is closed.
    public func accept() -> LineConnection? {
        while true {
            let connection = Glibc.accept(descriptor, nil, nil)
            if connection >= 0 { return LineConnection(descriptor: connection) }
            if errno == EINTR { continue }
            return nil
        }
    }

    public func close() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
        unlink(path)
    }
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
