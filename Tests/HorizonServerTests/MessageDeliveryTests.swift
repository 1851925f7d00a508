import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonServer
import HorizonTestSupport
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing

/// Mail handed to msmtp and read back from a real SMTP server (aiosmtpd), SMS posted to a local
/// HTTP gateway, and the outbox they are delivered from.
@Suite("Message delivery")
struct MessageDeliveryTests {
    static let from = "Café Horizon <noreply@shop.example>"

    static func mailer(_ command: [String], timeout: Duration = .seconds(20)) throws -> SendmailTransport {
        SendmailTransport(command: command, from: try MailAddress(parsing: from), timeout: timeout)
    }

    // MARK: Mail through a sendmail-style command

    @Test(.enabled(if: MailCatcher.available, "\(MailCatcher.missing)"))
    func aMailReachesARealSMTPServerThroughMsmtpAsAProperUTF8Message() async throws {
        let catcher = try MailCatcher()
        let mailer = try Self.mailer(try catcher.msmtpCommand())
        let body = """
            Grüße, Zoë! Your code is 12345678.
            .a line that starts with a dot stays a line
            From the start of a line, too
            \(String(repeating: "long ", count: 40))end
            """
        try await mailer.deliver(
            to: "zoe@example.org", subject: "Ihr Code für das Café — 12345678", body: body, at: 1_750_000_000)
        let mail = try #require(try await catcher.waitFor(1).first)
        #expect(mail.rcptTos == ["zoe@example.org"])
        #expect(mail.headers["From"] == "Café Horizon <noreply@shop.example>")
        #expect(mail.headers["To"] == "zoe@example.org")
        #expect(mail.headers["Subject"] == "Ihr Code für das Café — 12345678")
        #expect(mail.headers["Date"] == "Sun, 15 Jun 2025 15:06:40 +0000")
        #expect(mail.headers["MIME-Version"] == "1.0")
        #expect(mail.headers["Content-Type"] == #"text/plain; charset="utf-8""#)
        #expect(mail.headers["Content-Transfer-Encoding"] == "quoted-printable")
        let messageID = try #require(mail.headers["Message-ID"])
        #expect(messageID.hasPrefix("<") && messageID.hasSuffix("@shop.example>"))
        // Lines end in CRLF on the wire.
        #expect(mail.body.replacingOccurrences(of: "\r\n", with: "\n").trimmingCharacters(in: .newlines) == body)
        // 7-bit on the wire, every line within RFC 5322's limit.
        #expect(mail.raw.unicodeScalars.allSatisfy { $0.isASCII })
        let long = mail.raw.components(separatedBy: "\r\n").filter { $0.utf8.count > 78 }
        #expect(long.isEmpty, "\(long)")
    }

    @Test(.enabled(if: MailCatcher.available, "\(MailCatcher.missing)"))
    func headerInjectionIsRefusedBeforeAnythingIsSent() async throws {
        let catcher = try MailCatcher()
        let mailer = try Self.mailer(try catcher.msmtpCommand())
        // A recipient or subject that would add a header or a recipient, however it is spelt.
        let recipients = [
            "victim@example.org\nBcc: everyone@example.org", "victim@example.org\r\nBcc: everyone@example.org",
            "victim@example.org, everyone@example.org", "Victim <victim@example.org>", "victim@example.org\u{2028}x",
            "-oQ/tmp@example.org", "victim@exämple.org", "",
        ]
        for recipient in recipients {
            await #expect(throws: MessageDeliveryError.self) {
                try await mailer.deliver(to: recipient, subject: "Code", body: "1", at: 1_750_000_000)
            }
        }
        for subject in ["Code\nBcc: everyone@example.org", "Code\r\n\r\nforged body", "Code\rX: y", "Code\u{0}"] {
            do {
                try await mailer.deliver(to: "victim@example.org", subject: subject, body: "1", at: 1_750_000_000)
                Issue.record("a subject with a line break was sent")
            } catch {
                #expect(error == .refused("a mail subject must not contain line breaks or control characters"))
                #expect(error.isPermanent)
            }
        }
        #expect(throws: MessageDeliveryError.self) {
            try MailAddress(parsing: "Shop\nBcc: everyone@example.org <noreply@shop.example>")
        }
        #expect(try catcher.received().isEmpty)
    }

    @Test(.enabled(if: MailCatcher.available, "\(MailCatcher.missing)"))
    func anMTAThatCannotSendIsATypedErrorWithItsOwnSentence() async throws {
        let catcher = try MailCatcher()
        let mailer = try Self.mailer(try catcher.msmtpCommand(port: try MailCatcher.closedPort()))
        do {
            try await mailer.deliver(to: "zoe@example.org", subject: "Code", body: "1", at: 1_750_000_000)
            Issue.record("msmtp reported success without a server")
        } catch {
            guard case .commandFailed(let command, let status, let stderr) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(command.hasPrefix("/usr/bin/msmtp -C "))
            #expect(status == 75)  // EX_TEMPFAIL: the MTA may take it later
            #expect(stderr.contains("cannot connect to 127.0.0.1"), "\(stderr)")
            #expect(!stderr.contains("\n"))
            #expect("\(error)".hasPrefix("the mail command /usr/bin/msmtp -C "))
            #expect(!error.isPermanent)
        }
    }

    @Test func aCommandThatFailsOrHangsIsStoppedAndReported() async throws {
        let failing = try Self.mailer([
            "/bin/sh", "-c",
            "cat >/dev/null; echo 'sendmail: fatal: no such user' >&2; echo 'second line' >&2; exit 75",
        ])
        await #expect(
            throws: MessageDeliveryError.commandFailed(
                command:
                    "/bin/sh -c cat >/dev/null; echo 'sendmail: fatal: no such user' >&2; echo 'second line' >&2; exit 75",
                status: 75, stderr: "sendmail: fatal: no such user; second line")
        ) { try await failing.deliver(to: "zoe@example.org", subject: "Code", body: "1", at: 0) }

        // Exits without reading its input: no SIGPIPE takes the server down.
        let deaf = try Self.mailer(["/bin/sh", "-c", "exit 0"])
        try await deaf.deliver(
            to: "zoe@example.org", subject: "Code", body: String(repeating: "x", count: 1 << 20), at: 0)

        let hanging = try Self.mailer(["/bin/sh", "-c", "exec sleep 30"], timeout: .seconds(1))
        let started = ContinuousClock.now
        await #expect(throws: MessageDeliveryError.commandTimedOut(command: "/bin/sh -c exec sleep 30", seconds: 1)) {
            try await hanging.deliver(to: "zoe@example.org", subject: "Code", body: "1", at: 0)
        }
        // Stopped at its 1 s timeout, not after its 30 s (a loaded machine takes seconds more).
        #expect(ContinuousClock.now - started < .seconds(20))

        let missing = try Self.mailer(["/nonexistent/sendmail", "-t"])
        await #expect(throws: MessageDeliveryError.self) {
            try await missing.deliver(to: "zoe@example.org", subject: "Code", body: "1", at: 0)
        }
    }

    @Test func theCommandStartsWithNoSignalBlockedOrIgnored() async throws {
        // A server's threads block signals and it ignores SIGPIPE; an MTA must not inherit either.
        let mailer = try Self.mailer([
            "/bin/sh", "-c", "cat >/dev/null; grep -E '^Sig(Blk|Ign)' /proc/self/status >&2; exit 1",
        ])
        do {
            try await mailer.deliver(to: "zoe@example.org", subject: "Code", body: "1", at: 0)
            Issue.record("the command's exit status 1 was taken for a delivery")
        } catch {
            guard case .commandFailed(_, 1, let stderr) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            // `SigBlk:0000000000000000; SigIgn:…` (tabs dropped from the one-line sentence).
            let masks = Dictionary(
                uniqueKeysWithValues: stderr.split(separator: ";").map { field in
                    let parts = field.split(separator: ":").map { $0.trimmingCharacters(in: .whitespaces) }
                    return (parts[0], UInt64(parts[1], radix: 16) ?? .max)
                })
            #expect(masks["SigBlk"] == 0, "\(stderr)")
            // SIGPIPE (13) and SIGTERM (15) at their defaults; glibc's own real-time signals aside.
            #expect((masks["SigIgn"] ?? .max) & (1 << 12 | 1 << 14) == 0, "\(stderr)")
        }
    }

    @Test func nonASCIINamesAndLongSubjectsAreEncodedWords() throws {
        let message = try MailMessage(
            from: try MailAddress(parsing: #""Dupont, Café" <noreply@shop.example>"#),
            to: try MailAddress(displayName: "Zoë Ångström-Øster 日本", address: "zoe@example.org"),
            subject: String(repeating: "Über ", count: 30), body: "x", date: 0, messageID: "<1@shop.example>")
        let text = String(decoding: message.rendered(), as: UTF8.self)
        #expect(text.unicodeScalars.allSatisfy { $0.isASCII })
        #expect(text.contains(#"From: "Dupont, Café" <noreply@shop.example>"#) == false)
        #expect(text.split(separator: "\n").allSatisfy { $0.utf8.count <= 78 })
        #expect(text.contains("To: =?utf-8?B?"))
        #expect(text.contains("Date: Thu, 01 Jan 1970 00:00:00 +0000"))
    }

    // MARK: SMS through an HTTP gateway

    @Test func anSMSIsPostedWithTheTemplateTheCredentialAndEscapedValues() async throws {
        let receiver = SMSReceiver()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sms-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("s3cret-token\n".utf8).write(to: directory.appendingPathComponent("sms.token"))
        try await receiver.run { url in
            let json = try SMSSettings(url: url, credentialFile: "sms.token").transport(
                in: directory.path, environment: [:])
            try await json.deliver(
                to: "+4915112345678", subject: "ignored", body: "Code \"12345678\" für Zoë\nline 2", at: 0)
            let form = try SMSSettings(
                url: url, bodyTemplate: "recipient={to}&message={text}&sender=Shop", encoding: .form,
                authorization: "basic", credentialEnvironment: "SMS_CREDENTIAL"
            ).transport(in: directory.path, environment: ["SMS_CREDENTIAL": "shop:pa ss"])
            try await form.deliver(to: "+4915112345678", subject: "ignored", body: "Code 1&2=3 für Zoë", at: 0)
        }
        let requests = receiver.requests
        try #require(requests.count == 2)
        #expect(requests[0].contentType == "application/json; charset=utf-8")
        #expect(requests[0].authorization == "Bearer s3cret-token")
        let decoded = try JSONSerialization.jsonObject(with: Data(requests[0].body.utf8)) as? [String: String]
        #expect(decoded == ["to": "+4915112345678", "text": "Code \"12345678\" für Zoë\nline 2"])
        #expect(requests[1].contentType == "application/x-www-form-urlencoded; charset=utf-8")
        #expect(requests[1].authorization == "Basic " + Data("shop:pa ss".utf8).base64EncodedString())
        #expect(
            requests[1].body == "recipient=%2B4915112345678&message=Code%201%262%3D3%20f%C3%BCr%20Zo%C3%AB&sender=Shop")
    }

    @Test func aGatewayThatFailsOrHangsIsATypedError() async throws {
        let receiver = SMSReceiver()
        try await receiver.run { url in
            let gateway = try SMSSettings(url: url, timeoutSeconds: 1).transport(in: "/", environment: [:])
            receiver.answer(.serviceUnavailable)
            await #expect(
                throws: MessageDeliveryError.gatewayRejected(status: 503, body: "gateway says no; retry later")
            ) {
                try await gateway.deliver(to: "+4915112345678", subject: "", body: "1", at: 0)
            }
            receiver.answer(.ok, after: .seconds(3))
            let started = ContinuousClock.now
            do {
                try await gateway.deliver(to: "+4915112345678", subject: "", body: "1", at: 0)
                Issue.record("a gateway that did not answer in time counted as delivered")
            } catch let error as MessageDeliveryError {
                guard case .gatewayUnreachable(let reason) = error else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(reason.contains("no answer within 1 s"), "\(reason)")
            }
            #expect(ContinuousClock.now - started < .seconds(3))
        }
        let closed = try SMSSettings(url: "http://127.0.0.1:\(try MailCatcher.closedPort())/sms").transport(
            in: "/", environment: [:])
        await #expect(throws: MessageDeliveryError.self) {
            try await closed.deliver(to: "+4915112345678", subject: "", body: "1", at: 0)
        }
    }

    // MARK: Registration codes delivered from the outbox

    @Test(.enabled(if: MailCatcher.available, "\(MailCatcher.missing)"))
    func registrationCodesAreDeliveredAfterTheCommitAndAFailedMailIsRetried() async throws {
        let catcher = try MailCatcher()
        let receiver = SMSReceiver()
        let server = try await RegistrationServer()
        let logs = LogRecorder()
        // The MTA is down at first: msmtp's configuration names a port nobody listens on.
        let configuration = catcher.directory.appendingPathComponent("msmtprc")
        try catcher.writeMsmtpConfiguration(port: try MailCatcher.closedPort(), to: configuration)
        try await receiver.run { url in
            let parts = HorizonServer.Parts(
                configuration: ServerConfiguration(
                    rateLimitBurst: 1000, rateLimitPerSecond: 1000, passwordCostLog2: 10),
                ledger: server.ledger, issuer: server.issuer, now: { server.now },
                transports: MessageTransports(
                    email: try Self.mailer([MailCatcher.msmtp, "-C", configuration.path, "-t", "-i"]),
                    sms: try SMSSettings(url: url).transport(in: "/", environment: [:])))
            let application = Application(
                router: try HorizonServer.router(parts), logger: logs.logger(level: .critical))
            try await application.test(.router) { client in
                let device = WalletDevice()
                let start = try await client.postJSON(
                    "/v1/wallets/registrations", device.registration(name: "Zoë", email: "zoe@example.org"))
                // Answered from the commit: nothing was handed over yet.
                #expect(start.status == .accepted, "\(start.bodyText)")
                let id = try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: start.bodyData)
                    .registrationId
                #expect(receiver.requests.isEmpty)
                let queued = try await server.ledger.outbox()
                #expect(queued.count == 2 && queued.allSatisfy { $0.delivery.dueAt == server.now })

                let first = await parts.deliverer.deliverDue(logger: logs.logger(level: .info))
                #expect(first.delivered.count == 1 && first.failed.count == 1)
                let sms = try #require(receiver.requests.first)
                let smsCode = try #require(Self.code(in: sms.body))
                // Not delivered: kept due, with the reason, logged at notice.
                let mail = try #require(try await server.ledger.outbox(recipient: "zoe@example.org").first)
                #expect(mail.delivery.dueAt == server.now + 30 && mail.delivery.attempts == 1)
                #expect(mail.delivery.lastError?.contains("exited with status 75") == true, "\(mail.delivery)")
                let notice = try #require(logs.first("a message was not delivered yet"))
                #expect(notice.level == .notice && notice.metadata["error"]?.contains("cannot connect") == true)

                // The MTA is back; the retry is due 30 s later.
                try catcher.writeMsmtpConfiguration(port: catcher.port, to: configuration)
                #expect(await parts.deliverer.deliverDue(logger: logs.logger(level: .info)).delivered.isEmpty)
                server.advance(30)
                #expect(await parts.deliverer.deliverDue(logger: logs.logger(level: .info)).delivered.count == 1)
                let received = try #require(try await catcher.waitFor(1).first)
                #expect(received.rcptTos == ["zoe@example.org"])
                #expect(received.headers["Subject"] == "Your Horizon wallet code")
                let emailCode = try #require(Self.code(in: received.body))
                // Delivered codes are not kept in the database.
                #expect(
                    try await server.ledger.outbox().allSatisfy {
                        !$0.body.contains(smsCode) && !$0.body.contains(emailCode)
                    })
                #expect(try await server.ledger.outbox().allSatisfy { $0.delivery.deliveredAt != nil })

                let verify = try await client.postJSON(
                    "/v1/wallets/registrations/\(id)/verify", SentCodes(sms: smsCode, email: emailCode).json)
                #expect(verify.status == .created, "\(verify.bodyText)")
            }
        }
    }

    @Test func aRegistrationIsNotHeldByASlowMailCommand() async throws {
        let server = try await RegistrationServer()
        let parts = HorizonServer.Parts(
            configuration: ServerConfiguration(rateLimitBurst: 1000, rateLimitPerSecond: 1000, passwordCostLog2: 10),
            ledger: server.ledger, issuer: server.issuer, now: { server.now },
            transports: MessageTransports(email: try Self.mailer(["/bin/sh", "-c", "exec sleep 30"])))
        let application = Application(
            router: try HorizonServer.router(parts), logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() })
        let started = ContinuousClock.now
        try await application.test(.router) { client in
            let start = try await client.postJSON("/v1/wallets/registrations", WalletDevice().registration())
            #expect(start.status == .accepted, "\(start.bodyText)")
        }
        // Well before the mail command's 30 s (a loaded machine takes seconds for the request).
        #expect(ContinuousClock.now - started < .seconds(25))
        // The SMS channel has no transport: it stays in the sandbox outbox, readable there.
        let sms = try #require(try await server.ledger.outbox(recipient: "+4915112345678").first)
        #expect(sms.delivery.dueAt == nil && Self.code(in: sms.body) != nil)
    }

    static func code(in text: String) -> String? {
        text.split(whereSeparator: { !$0.isNumber }).first { $0.count == 8 }.map(String.init)
    }

    // MARK: Configuration

    @Test func settingsThatCannotWorkAreRefusedAtTheStart() throws {
        func refusal(_ change: (inout ServerConfiguration) -> Void) -> String? {
            var configuration = ServerConfiguration()
            change(&configuration)
            do {
                try configuration.validate()
                _ = try configuration.messageTransports(in: "/", environment: [:])
                return nil
            } catch { return "\(error)" }
        }
        #expect(refusal { _ in } == nil)
        #expect(refusal { $0.mail = MailSettings(from: "noreply@shop.example", command: ["/bin/true"]) } == nil)
        #expect(
            refusal { $0.mail = MailSettings(from: "noreply@shop.example", command: ["msmtp", "-t"]) }
                == "the mail command (--mail-command) must start with an absolute path, e.g. /usr/bin/msmtp -t -i")
        #expect(
            refusal { $0.mail = MailSettings(from: "noreply@shop.example", command: ["/nonexistent/sendmail"]) }?
                .hasPrefix("the mail command /nonexistent/sendmail is not an executable file") == true)
        #expect(
            refusal { $0.mail = MailSettings(from: "shop\nBcc: x@y.org", command: ["/bin/true"]) }?
                .hasPrefix("mail from (--mail-from) is not usable") == true)
        #expect(
            refusal { $0.sms = SMSSettings(url: "http://gw.example/sms", bodyTemplate: "to={to}") }
                == "the SMS body template (--sms-body) must contain {to} and {text}")
        #expect(
            refusal { $0.sms = SMSSettings(url: "ftp://gw.example/sms") }
                == "the SMS gateway (--sms-gateway) must be an http:// or https:// URL (got ftp://gw.example/sms)")
        #expect(
            refusal { $0.sms = SMSSettings(url: "http://gw.example/sms", credentialEnvironment: "NOT_SET_ANYWHERE") }
                == "the SMS credential variable NOT_SET_ANYWHERE is not set (or empty)")
        // A server.json from before mail and SMS loads, and keeps the sandbox.
        let old = try JSONDecoder().decode(
            ServerConfiguration.self, from: try JSONEncoder().encode(ServerConfiguration()))
        #expect(old.mail == nil && old.sms == nil)
        #expect(try old.messageTransports(in: "/", environment: [:]).isEmpty)
    }

    @Test func serveTakesTheMailAndSMSOptionsAndRefusesOnesThatCannotWork() throws {
        let help = try ServerProcess.run(["serve", "--help"])
        for option in ["--mail-from", "--mail-command", "--sms-gateway", "--sms-body", "--sms-credential-file"] {
            #expect(help.output.contains(option), "\(option)")
        }
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("mail-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: data) }
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        let serve = ["serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--metrics-listen", "off"]
        let relative = try ServerProcess.run(
            serve + ["--mail-from", "noreply@shop.example", "--mail-command", "msmtp -t"])
        #expect(relative.status == 2)
        #expect(
            relative.errors.contains(
                "the mail command (--mail-command) must start with an absolute path, e.g. /usr/bin/msmtp -t -i"),
            "\(relative.errors)")
        let noGateway = try ServerProcess.run(serve + ["--sms-body", "to={to}&text={text}"])
        #expect(noGateway.status == 2)
        #expect(noGateway.errors.contains("the --sms-… options need --sms-gateway"), "\(noGateway.errors)")
        let noCredential = try ServerProcess.run(
            serve + ["--sms-gateway", "http://127.0.0.1:9/sms", "--sms-credential-env", "HORIZON_TEST_UNSET_VARIABLE"])
        #expect(noCredential.status == 2)
        #expect(
            noCredential.errors.contains("the SMS credential variable HORIZON_TEST_UNSET_VARIABLE is not set"),
            "\(noCredential.errors)")
    }

    // MARK: The outbox as the record delivered from

    static let stores: [StoreKind] = TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite]

    @Test(arguments: stores)
    func aDueMessageIsClaimedByOneProcessAtATimeAndRetriedAfterItsLease(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let time: UnixTime = 1_750_000_000
            try await ledger.enqueue(.email, to: "sandbox@example.org", subject: "s", body: "kept", at: time)
            let id = try await ledger.enqueue(
                .email, to: "zoe@example.org", subject: "s", body: "code 12345678",
                registration: RegistrationID(rawValue: "reg-1"), expiresAt: time + 600, deliver: true, at: time)
            let claimed = try await ledger.claimDueOutboxMessages(at: time, lease: 120)
            #expect(claimed.map(\.id) == [id])
            #expect(try await ledger.claimDueOutboxMessages(at: time + 119, lease: 120).isEmpty)
            // The claimer died: once its lease is over another takes it.
            #expect(try await ledger.claimDueOutboxMessages(at: time + 120, lease: 120).map(\.id) == [id])
            try await ledger.recordOutboxDeliveryFailed(id, reason: "the MTA is down", retryAt: time + 300)
            #expect(try await ledger.claimDueOutboxMessages(at: time + 299).isEmpty)
            #expect(try await ledger.claimDueOutboxMessages(at: time + 300).map(\.id) == [id])
            try await ledger.recordOutboxDelivered(id, at: time + 301)
            #expect(try await ledger.claimDueOutboxMessages(at: time + 10_000).isEmpty)
            let stored = try #require(try await ledger.outbox(recipient: "zoe@example.org").first)
            #expect(stored.delivery == OutboxDelivery(dueAt: nil, deliveredAt: time + 301, attempts: 2, lastError: nil))
            // Delivered, the code is not kept.
            #expect(stored.body == Ledger.deliveredCodeBody)
            let sandbox = try #require(try await ledger.outbox(recipient: "sandbox@example.org").first)
            #expect(sandbox.body == "kept" && sandbox.delivery.attempts == 0 && sandbox.delivery.dueAt == nil)
            // An expired code is not delivered.
            try await ledger.enqueue(
                .sms, to: "+4915112345678", subject: "s", body: "late", registration: RegistrationID(rawValue: "reg-2"),
                expiresAt: time + 20_000, deliver: true, at: time + 10_000)
            #expect(try await ledger.claimDueOutboxMessages(at: time + 20_000).isEmpty)
        }
    }

    @Test func retriesBackOffAndStopAtTheCodesExpiryOrARefusal() {
        let down = MessageDeliveryError.gatewayUnreachable("down")
        func retry(_ attempts: Int64, expiresAt: UnixTime? = nil, _ error: MessageDeliveryError = down) -> UnixTime? {
            OutboxDeliverer.retryTime(attempts: attempts, expiresAt: expiresAt, after: 1000, error: error)
        }
        #expect(retry(0) == 1030)
        #expect(retry(1) == 1060)
        #expect(retry(5) == 1900)
        #expect(retry(6) == 1900)
        #expect(retry(7) == nil)
        #expect(retry(0, expiresAt: 1030) == nil)
        #expect(retry(0, .refused("no")) == nil)
    }
}

extension TestClientProtocol {
    fileprivate func postJSON(_ uri: String, _ json: String) async throws -> TestResponse {
        try await executeRequest(
            uri: uri, method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: json))
    }
}

extension TestResponse {
    fileprivate var bodyText: String { String(buffer: body) }
    fileprivate var bodyData: Data { Data(body.readableBytesView) }
}
