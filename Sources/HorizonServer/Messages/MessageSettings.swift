import Foundation
import HorizonCore

/// Mail delivery (`server.json`'s `mail`): codes and receipts handed to a sendmail-style
/// command. Without it, mail stays in the outbox (the sandbox).
public struct MailSettings: Sendable, Codable, Equatable {
    /// Who the mail is from: `Name <address>` or an address.
    public var from: String
    /// The command and its arguments; nil for `/usr/sbin/sendmail -t -i`. It must read the
    /// message on standard input and take the recipient from the `To:` header (`-t`).
    public var command: [String]?
    /// How long the command may take, in seconds (1 to 300); nil for 30.
    public var timeoutSeconds: Int64?

    public init(from: String, command: [String]? = nil, timeoutSeconds: Int64? = nil) {
        self.from = from
        self.command = command
        self.timeoutSeconds = timeoutSeconds
    }

    /// `--mail-command "/usr/bin/msmtp -t -i"`: split at spaces (paths with spaces belong in server.json).
    public static func command(_ text: String) -> [String] { text.split(separator: " ").map(String.init) }

    func validate() throws(ServerSetupError) {
        do { _ = try MailAddress(parsing: from) } catch {
            throw .invalidSetting("mail from (--mail-from) is not usable: \(error)")
        }
        let command = command ?? SendmailTransport.defaultCommand
        guard let executable = command.first, executable.hasPrefix("/") else {
            throw .invalidSetting(
                "the mail command (--mail-command) must start with an absolute path, e.g. /usr/bin/msmtp -t -i")
        }
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw .invalidSetting(
                "the mail command \(executable) is not an executable file: install an MTA (e.g. Debian's msmtp-mta or postfix) or set --mail-command"
            )
        }
        if let timeoutSeconds, !(1...300).contains(timeoutSeconds) {
            throw .invalidSetting("mail timeoutSeconds must be 1 to 300")
        }
    }

    public func transport() throws(ServerSetupError) -> SendmailTransport {
        try validate()
        let from: MailAddress
        do { from = try MailAddress(parsing: self.from) } catch { throw .invalidSetting("\(error)") }
        return SendmailTransport(
            command: command ?? SendmailTransport.defaultCommand, from: from,
            timeout: .seconds(timeoutSeconds ?? 30))
    }
}

/// SMS delivery (`server.json`'s `sms`) through an HTTP gateway. Without it, SMS stay in the
/// outbox (the sandbox).
public struct SMSSettings: Sendable, Codable, Equatable {
    /// Where each SMS is POSTed (http:// or https://).
    public var url: String
    /// The body with `{to}` (E.164, e.g. +4915112345678) and `{text}`; nil for
    /// `{"to":"{to}","text":"{text}"}`.
    public var bodyTemplate: String?
    /// `json` or `form`: how the values are escaped and the Content-Type; nil for json.
    public var encoding: SMSGatewayTransport.Encoding?
    /// `bearer` or `basic` (the credential is then `USER:PASSWORD`); nil for bearer when there is a credential.
    public var authorization: String?
    /// A file holding the credential (relative paths from the data directory).
    public var credentialFile: String?
    /// An environment variable holding the credential (e.g. from `/etc/horizon/server.env`).
    public var credentialEnvironment: String?
    /// How long the gateway may take to answer, in seconds (1 to 120); nil for 10.
    public var timeoutSeconds: Int64?

    public static let defaultBodyTemplate = #"{"to":"{to}","text":"{text}"}"#
    /// The systemd credential read when neither a file nor a variable is named (`LoadCredential=sms-credential:…`).
    public static let credentialName = "sms-credential"

    public init(
        url: String, bodyTemplate: String? = nil, encoding: SMSGatewayTransport.Encoding? = nil,
        authorization: String? = nil, credentialFile: String? = nil, credentialEnvironment: String? = nil,
        timeoutSeconds: Int64? = nil
    ) {
        self.url = url
        self.bodyTemplate = bodyTemplate
        self.encoding = encoding
        self.authorization = authorization
        self.credentialFile = credentialFile
        self.credentialEnvironment = credentialEnvironment
        self.timeoutSeconds = timeoutSeconds
    }

    func validate() throws(ServerSetupError) {
        guard let parsed = URL(string: url), parsed.host != nil, url.hasPrefix("http://") || url.hasPrefix("https://")
        else {
            throw .invalidSetting("the SMS gateway (--sms-gateway) must be an http:// or https:// URL (got \(url))")
        }
        let template = bodyTemplate ?? Self.defaultBodyTemplate
        guard template.contains("{to}"), template.contains("{text}") else {
            throw .invalidSetting("the SMS body template (--sms-body) must contain {to} and {text}")
        }
        if let authorization, authorization != "bearer", authorization != "basic" {
            throw .invalidSetting("the SMS authorization (--sms-authorization) must be bearer or basic")
        }
        guard credentialFile == nil || credentialEnvironment == nil else {
            throw .invalidSetting("--sms-credential-file and --sms-credential-env: name one of them")
        }
        if let timeoutSeconds, !(1...120).contains(timeoutSeconds) {
            throw .invalidSetting("sms timeoutSeconds must be 1 to 120")
        }
    }

    /// The credential from its file, its variable or the systemd credential; nil when none is named.
    func credential(in directory: String, environment: [String: String]) throws(ServerSetupError) -> String? {
        let file =
            credentialFile.map { ServerConfiguration.resolve($0, in: directory) }
            ?? (credentialEnvironment == nil ? SystemdCredentials.file(Self.credentialName) : nil)
        let text: String
        if let file {
            do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
                throw .unreadable(path: file, reason: "the SMS gateway's credential: \(error.localizedDescription)")
            }
        } else if let name = credentialEnvironment {
            guard let value = environment[name], !value.isEmpty else {
                throw .invalidSetting("the SMS credential variable \(name) is not set (or empty)")
            }
            text = value
        } else {
            return nil
        }
        let credential = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !credential.isEmpty, !credential.unicodeScalars.contains(where: MailAddress.isControl) else {
            throw .invalidSetting("the SMS gateway's credential is empty or spans several lines")
        }
        return credential
    }

    public func transport(in directory: String, environment: [String: String]) throws(ServerSetupError)
        -> SMSGatewayTransport
    {
        try validate()
        let credential = try credential(in: directory, environment: environment)
        return SMSGatewayTransport(
            url: url, bodyTemplate: bodyTemplate ?? Self.defaultBodyTemplate, encoding: encoding ?? .json,
            authorization: credential.map {
                SMSGatewayTransport.authorization(scheme: authorization ?? "bearer", credential: $0)
            }, timeout: .seconds(timeoutSeconds ?? 10))
    }
}

extension ServerConfiguration {
    /// The transports `mail` and `sms` name (a channel without one stays in the sandbox outbox),
    /// credentials read now, so a missing one stops the start rather than the first message.
    public func messageTransports(
        in directory: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ServerSetupError) -> MessageTransports {
        MessageTransports(
            email: try mail?.transport(), sms: try sms?.transport(in: directory, environment: environment))
    }

    func validateMessageSettings() throws(ServerSetupError) {
        try mail?.validate()
        try sms?.validate()
    }
}
