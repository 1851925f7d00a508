import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An OTLP/HTTP collector stand-in on a loopback port: keeps every request body POSTed to it
/// (keep-alive connections included) and answers 200 `{}`. Plain sockets and threads, so tests
/// need no HTTP server library for it.
public final class OTLPReceiver: Sendable {
    public let port: Int
    private let listener: Int32
    private let bodies = Mutex<[Data]>([])

    public init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        guard listener >= 0 else { throw ReceiverError("socket failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(listener, 16) == 0 else { throw ReceiverError("bind or listen failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                Thread.detachNewThread { self.serve(connection) }
            }
        }
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// `http://127.0.0.1:PORT`, the base of `OTEL_EXPORTER_OTLP_ENDPOINT`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Every body received so far.
    public var received: [Data] { bodies.withLock { $0 } }

    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        while true {
            // A request's head, then as many body bytes as its Content-Length says.
            while buffer.firstRange(of: separator) == nil {
                let count = recv(connection, &chunk, chunk.count, 0)
                guard count > 0 else { return }
                buffer += chunk[0..<count]
            }
            guard let end = buffer.firstRange(of: separator) else { return }
            let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self).lowercased()
            let length =
                head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            buffer.removeSubrange(..<end.upperBound)
            while buffer.count < length {
                let count = recv(connection, &chunk, chunk.count, 0)
                guard count > 0 else { return }
                buffer += chunk[0..<count]
            }
            let body = Data(buffer[..<length])
            buffer.removeSubrange(..<length)
            bodies.withLock { $0.append(body) }
            let answer = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".utf8)
            guard send(connection, answer, answer.count, Int32(MSG_NOSIGNAL)) == answer.count else { return }
        }
    }

    struct ReceiverError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
