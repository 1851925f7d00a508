import Foundation
import HTTPTypes
import HorizonServer
import Hummingbird
import Logging
import NIOCore
import Synchronization
import Testing

/// A real SMTP server for a test: Python's aiosmtpd (Debian's python3-aiosmtpd) on a free
/// loopback port, writing every message it accepts as JSON (envelope, headers and body as
/// Python's `email` package decodes them, and the raw bytes) into a directory.
final class MailCatcher: Sendable {
    /// aiosmtpd and msmtp, which Tools/test.sh installs.
    static let available: Bool = {
        guard FileManager.default.isExecutableFile(atPath: msmtp) else { return false }
        let check = Process()
        check.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        check.arguments = ["-c", "import aiosmtpd"]
        check.standardError = FileHandle.nullDevice
        guard (try? check.run()) != nil else { return false }
        check.waitUntilExit()
        return check.terminationStatus == 0
    }()
    static let missing =
        "needs python3-aiosmtpd and msmtp (Tools/test.sh installs them; apt-get install python3-aiosmtpd msmtp)"
    static let msmtp = "/usr/bin/msmtp"

    struct Mail: Decodable {
        let mailFrom: String
        let rcptTos: [String]
        let headers: [String: String]
        let headerNames: [String]
        let body: String
        let raw: String
    }

    let directory: URL
    let port: Int
    private let process: ProcessBox

    static let script = #"""
        from asyncio import get_running_loop, run
        from email import message_from_bytes, policy
        from json import dump
        from os import path, rename
        from sys import argv
        from aiosmtpd.smtp import SMTP

        out = argv[1]

        class Handler:
            count = 0

            async def handle_DATA(self, server, session, envelope):
                Handler.count += 1
                raw = getattr(envelope, "original_content", None) or envelope.content
                message = message_from_bytes(raw, policy=policy.default)
                record = {
                    "mailFrom": envelope.mail_from,
                    "rcptTos": envelope.rcpt_tos,
                    "headers": {name: str(value) for name, value in message.items()},
                    "headerNames": [name for name, _ in message.items()],
                    "body": message.get_content(),
                    "raw": raw.decode("utf-8", "replace"),
                }
                partial = path.join(out, "%d.part" % Handler.count)
                with open(partial, "w") as file:
                    dump(record, file)
                rename(partial, path.join(out, "%d.json" % Handler.count))
                return "250 Message accepted for delivery"

        async def main():
            loop = get_running_loop()
            server = await loop.create_server(lambda: SMTP(Handler(), hostname="catcher.test"), "127.0.0.1", 0)
            print(server.sockets[0].getsockname()[1], flush=True)
            await server.serve_forever()

        run(main())
        """#

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("horizon-mail-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let scriptURL = directory.appendingPathComponent("catcher.py")
        try Data(Self.script.utf8).write(to: scriptURL)
        let inbox = directory.appendingPathComponent("inbox")
        try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [scriptURL.path, inbox.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        self.process = ProcessBox(process)
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            process.terminate()
            throw CatcherError(
                "the SMTP server did not start (it printed \"\(String(decoding: line, as: UTF8.self))\")")
        }
        self.port = port
    }

    deinit {
        // SIGKILL: a child of a Foundation `Process` may start with SIGTERM blocked.
        kill(process.value.processIdentifier, SIGKILL)
        process.value.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    /// msmtp's configuration for `port` (this server's unless another is given), written 0600 as
    /// msmtp wants it; returns the sendmail-style command that uses it.
    func msmtpCommand(port: Int? = nil, name: String = "msmtprc") throws -> [String] {
        let file = directory.appendingPathComponent(name)
        try writeMsmtpConfiguration(port: port ?? self.port, to: file)
        return [Self.msmtp, "-C", file.path, "-t", "-i"]
    }

    func writeMsmtpConfiguration(port: Int, to file: URL) throws {
        let text = """
            account default
            host 127.0.0.1
            port \(port)
            from bounces@shop.example
            auth off
            tls off
            """
        try Data(text.utf8).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
    }

    /// The messages received so far, oldest first.
    func received() throws -> [Mail] {
        let inbox = directory.appendingPathComponent("inbox")
        let names = try FileManager.default.contentsOfDirectory(atPath: inbox.path).filter { $0.hasSuffix(".json") }
            .sorted { Int($0.dropLast(5)) ?? 0 < Int($1.dropLast(5)) ?? 0 }
        return try names.map {
            try JSONDecoder().decode(Mail.self, from: Data(contentsOf: inbox.appendingPathComponent($0)))
        }
    }

    /// Waits (up to 10 s) until `count` messages arrived.
    func waitFor(_ count: Int) async throws -> [Mail] {
        for _ in 0..<200 {
            let mails = try received()
            if mails.count >= count { return mails }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try received()
    }

    /// A port nothing listens on (bound, then closed).
    static func closedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw CatcherError("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

struct CatcherError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

private final class ProcessBox: @unchecked Sendable {
    let value: Process
    init(_ value: Process) { self.value = value }
}

/// An HTTP server in the test process standing in for an SMS gateway: it records each request
/// and answers with the status the test chose, after the delay it chose.
final class SMSReceiver: Sendable {
    struct Request: Sendable {
        let path: String
        let contentType: String?
        let authorization: String?
        let body: String
    }

    private let state = Mutex<(requests: [Request], status: HTTPResponse.Status, delay: Duration)>(([], .ok, .zero))

    var requests: [Request] { state.withLock { $0.requests } }
    func answer(_ status: HTTPResponse.Status, after delay: Duration = .zero) {
        state.withLock {
            $0.status = status
            $0.delay = delay
        }
    }

    /// Runs the receiver on a free loopback port for `body`, which gets its URL.
    func run<T: Sendable>(_ body: @Sendable (String) async throws -> T) async throws -> T {
        let router = Router()
        router.post("/sms") { request, _ -> Response in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            let (status, delay) = self.state.withLock {
                $0.requests.append(
                    Request(
                        path: request.uri.path, contentType: request.headers[.contentType],
                        authorization: request.headers[.authorization], body: String(buffer: bytes)))
                return ($0.status, $0.delay)
            }
            if delay > .zero { try? await Task.sleep(for: delay) }
            return Response(
                status: status,
                body: .init(byteBuffer: ByteBuffer(string: status == .ok ? "queued" : "gateway says no\nretry later")))
        }
        let (ports, portFound) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "sms.receiver")
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
            let result = try await body("http://127.0.0.1:\(port)/sms")
            group.cancelAll()
            return result
        }
    }
}
