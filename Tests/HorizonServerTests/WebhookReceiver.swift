import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// A merchant's webhook receiver in the test process: it records every request and answers each
/// as the test's script says (a status and body, after a delay), the last step repeating.
final class WebhookReceiver: Sendable {
    struct Request: Sendable {
        let eventID: String?
        let signature: String?
        let contentType: String?
        let body: String
    }

    struct Answer: Sendable {
        var status: HTTPResponse.Status = .ok
        var body = "ok"
        var delay: Duration = .zero
    }

    private let state = Mutex<(requests: [Request], script: [Answer])>(([], [Answer()]))

    var requests: [Request] { state.withLock { $0.requests } }

    /// The answers to the next requests, in order; the last one repeats.
    func script(_ answers: [Answer]) { state.withLock { $0.script = answers.isEmpty ? [Answer()] : answers } }

    /// Waits (up to `timeout`) until `count` requests arrived.
    func waitFor(_ count: Int, timeout: Duration = .seconds(20)) async throws -> [Request] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let requests = self.requests
            if requests.count >= count { return requests }
            try await Task.sleep(for: .milliseconds(20))
        }
        return requests
    }

    /// Runs the receiver on a free loopback port for `body`, which gets its URL.
    func run<T: Sendable>(_ body: @Sendable (String) async throws -> T) async throws -> T {
        let router = Router()
        router.post("/hooks") { request, _ -> Response in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            let answer = self.state.withLock {
                $0.requests.append(
                    Request(
                        eventID: request.headers[HTTPField.Name("Horizon-Event-Id")!],
                        signature: request.headers[HTTPField.Name("Horizon-Signature")!],
                        contentType: request.headers[.contentType], body: String(buffer: bytes)))
                return $0.script.count > 1 ? $0.script.removeFirst() : $0.script[0]
            }
            if answer.delay > .zero { try? await Task.sleep(for: answer.delay) }
            return Response(status: answer.status, body: .init(byteBuffer: ByteBuffer(string: answer.body)))
        }
        let (ports, portFound) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "webhook.receiver")
        logger.logLevel = .critical
        let application = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portFound.yield(channel.localAddress?.port ?? 0)
                portFound.finish()
            }, logger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await application.runService()
                return nil
            }
            var port = 0
            for await found in ports { port = found }
            let result = try await body("http://127.0.0.1:\(port)/hooks")
            group.cancelAll()
            return result
        }
    }
}

/// How a receiver checks `Horizon-Signature`, written here from the documented scheme and not
/// from the server's code: HMAC-SHA256 built from SHA-256 itself (RFC 2104), keyed by the
/// secret's UTF-8 bytes, over `t`, ".", and the body; any `v1` may match; `t` within the
/// tolerance of the receiver's clock.
enum ReceiverSignatureCheck {
    static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var block = key.count > 64 ? Array(SHA256.hash(data: key)) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        let inner = Array(SHA256.hash(data: block.map { $0 ^ 0x36 } + message))
        return Array(SHA256.hash(data: block.map { $0 ^ 0x5C } + inner))
    }

    /// Whether `header` signs `body` with `secret` at a time within `tolerance` of `now`.
    static func verify(header: String?, body: String, secret: String, now: Int64, tolerance: Int64 = 300) -> Bool {
        guard let header else { return false }
        var timestamp: Int64?
        var signatures: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { continue }
            if pair[0] == "t" { timestamp = Int64(pair[1]) }
            if pair[0] == "v1" { signatures.append(pair[1]) }
        }
        guard let timestamp, abs(now - timestamp) <= tolerance else { return false }
        let expected = hmacSHA256(key: Array(secret.utf8), message: Array("\(timestamp).\(body)".utf8))
            .map { String(format: "%02x", $0) }.joined()
        return signatures.contains { candidate in
            // Constant time: every byte compared whatever the first difference.
            candidate.utf8.count == expected.utf8.count
                && zip(candidate.utf8, expected.utf8).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
        }
    }

    /// The `t` of a header.
    static func timestamp(_ header: String?) -> Int64? {
        header?.split(separator: ",").first { $0.hasPrefix("t=") }.flatMap { Int64($0.dropFirst(2)) }
    }
}
