import Foundation
import HorizonCLISupport
import HorizonUnixSocket

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
        LineConnection(descriptor: try ControlSocket.connect(to: path))
    }

    /// Sends one line; false if the peer is gone.
    @discardableResult
    public func send(_ line: String) -> Bool {
        writeLock.lock()
        defer { writeLock.unlock() }
        return UnixSocket.writeAll(Array((line + "\n").utf8), to: descriptor)
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

/// The terminal's control socket as the programs open it, with the CLI's advice when that fails.
public enum ControlSocket {
    /// Listens at `path` (mode 0660: the owner and its group, e.g. the register's user).
    public static func listen(at path: String) throws -> UnixListener {
        // A socket that still answers belongs to a running service (of another data directory,
        // given the same --control-socket): it is refused, never replaced. Only a stale one goes.
        var status = stat()
        if lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK, let live = try? UnixSocket.connect(to: path)
        {
            UnixSocket.close(live)
            throw CLIError(
                "a terminal service already listens at \(path); stop it first or choose another --control-socket")
        }
        do {
            return try UnixListener(path: path, mode: 0o660, backlog: 16)
        } catch .notASocket {
            throw CLIError(
                "\(UnixSocketError.notASocket(path: path)) (remove it yourself or choose another --control-socket)")
        } catch {
            throw CLIError("\(error)")
        }
    }

    /// A connected socket to a running `serve`.
    public static func connect(to path: String) throws -> Int32 {
        do {
            return try UnixSocket.connect(to: path)
        } catch .noListener {
            throw noService(at: path)
        } catch {
            throw CLIError("\(error)")
        }
    }

    /// A connection to a running `serve`, for async clients.
    public static func connection(to path: String) throws -> UnixConnection {
        UnixConnection(descriptor: try connect(to: path))
    }

    private static func noService(at path: String) -> CLIError {
        CLIError("no terminal service listens at \(path); start it with `horizon-terminal serve`")
    }
}
