import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// HTTP/1.1 by hand over a TCP socket, for what a test client does not send (a chunked body
/// with no length) and for talking to a server process. One request per connection.
enum RawHTTP {
    struct Response: Sendable {
        let status: Int
        /// Lowercased names.
        let headers: [String: String]
        let body: String
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Sends `request` (its bytes as written) to 127.0.0.1:`port` and reads the answer until the
    /// server closes. The blocking socket calls run on a thread of their own, never on the
    /// cooperative pool the server under test needs.
    static func exchange(port: Int, _ request: [UInt8], timeout: Int = 10) async throws -> Response {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try blockingExchange(port: port, request, timeout: timeout) })
            }
        }
    }

    /// `GET path` with `Connection: close`.
    static func get(port: Int, _ path: String) async throws -> Response {
        try await exchange(
            port: port, Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8))
    }

    static func blockingExchange(port: Int, _ request: [UInt8], timeout: Int) throws -> Response {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var time = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            throw Failure(description: "connect to port \(port): \(String(cString: strerror(errno)))")
        }
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            // The server may answer (413) and close before it has read everything: read what it said.
            if count <= 0 { break }
            sent += count
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return try parse(received)
    }

    static func parse(_ bytes: [UInt8]) throws -> Response {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else {
            throw Failure(description: "no complete response head in \(bytes.count) bytes: \(text)")
        }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw Failure(description: "bad status line \(lines[0])")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        var body = String(text[split.upperBound...])
        if headers["transfer-encoding"]?.lowercased() == "chunked" {
            var decoded = ""
            var rest = Substring(body)
            while let end = rest.range(of: "\r\n"), let size = Int(rest[..<end.lowerBound], radix: 16), size > 0 {
                let start = end.upperBound
                let stop = rest.utf8.index(start, offsetBy: size, limitedBy: rest.endIndex) ?? rest.endIndex
                decoded += rest[start..<stop]
                rest = rest[stop...].dropFirst(2)
            }
            body = decoded
        }
        return Response(status: status, headers: headers, body: body)
    }
}
