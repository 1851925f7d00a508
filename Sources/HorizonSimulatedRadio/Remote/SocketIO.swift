import HorizonCore
import HorizonRadio

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Blocking Unix-domain stream sockets carrying length-prefixed frames, for the radio server.
enum UnixSocket {
    /// Frames larger than this are a protocol error (a link payload is at most 514 bytes).
    static let maximumFrameSize = 64 * 1024

    static func makeAddress(_ path: String) throws(RadioError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else {
            throw .invalidConfiguration("socket path longer than \(capacity - 1) bytes: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in bytes.enumerated() { buffer[index] = byte }
            buffer[bytes.count] = 0
        }
        return address
    }

    static func listen(at path: String) throws(RadioError) -> Int32 {
        var address = try makeAddress(path)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw .backend(name: "socket", message: "cannot create a socket") }
        unlink(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, Glibc.listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw .backend(name: "bind", message: "cannot listen on \(path): \(String(cString: strerror(errno)))")
        }
        chmod(path, 0o600)
        return descriptor
    }

    static func connect(to path: String) throws(RadioError) -> Int32 {
        var address = try makeAddress(path)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw .backend(name: "socket", message: "cannot create a socket") }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw .adapterUnavailable(.serviceUnavailable)
        }
        return descriptor
    }

    static func close(_ descriptor: Int32) {
        _ = Glibc.close(descriptor)
    }

    static func writeFrame(_ payload: [UInt8], to descriptor: Int32) -> Bool {
        var writer = ByteWriter(capacity: payload.count + 4)
        writer.write(UInt32(payload.count))
        writer.write(raw: payload)
        var remaining = writer.bytes[...]
        while !remaining.isEmpty {
            let written = remaining.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            remaining = remaining.dropFirst(written)
        }
        return true
    }

    /// The next frame, or nil at end of stream or on a malformed length.
    static func readFrame(from descriptor: Int32) -> [UInt8]? {
        guard let header = readExactly(4, from: descriptor) else { return nil }
        let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard length <= maximumFrameSize else { return nil }
        return readExactly(length, from: descriptor)
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
}
