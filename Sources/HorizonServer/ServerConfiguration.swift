import Foundation
import HorizonCore
import HorizonLedger

/// Everything a server process needs to know, from `server.json` in its data directory and the
/// command line. Defaults are what one small shop needs.
public struct ServerConfiguration: Sendable, Codable, Equatable {
    /// `HOST:PORT` to listen on; loopback by default (put a TLS proxy in front, or pass a certificate).
    public var listen: String
    /// `sqlite:PATH` (embedded, one process) or a `postgres://` URL (several processes).
    public var database: String
    /// The issuer's private key (PEM), relative paths from the data directory.
    public var issuerKeyPath: String
    /// The name wallets show for the anchor.
    public var issuerName: String
    /// How long a terminal credential is valid, in seconds (hours to a day; at most 24 h).
    public var credentialValidity: Int64
    /// Largest request body accepted, in bytes.
    public var maximumBodyBytes: Int
    /// Requests per client (a signing key, an admin session, else a client address), counted in
    /// the database: `rateLimitBurst` per window of burst / rate seconds (at least 1 s).
    public var rateLimitBurst: Int
    public var rateLimitPerSecond: Double
    /// How far a signed request's time may be from the server's, in seconds.
    public var signatureWindow: Int64
    /// scrypt cost (log2 N) for new merchant passwords.
    public var passwordCostLog2: Int
    public var loginAttemptsBeforeLock: Int
    public var loginFirstLockSeconds: Int64
    /// Sign-ins (the dashboard's, an admin session's, a terminal's activation) one client address
    /// may try within 15 minutes; nil for 30. Raise it where many terminals are activated from
    /// one address at once (a shop's NAT, a load test).
    public var signInsPerAddress: Int?
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// The most a daily token lets a wallet spend offline, in major units of the token's
    /// currency (50.00 EUR, like a card terminal's offline floor); nil for 50. Optional
    /// so that a `server.json` written before daily tokens still loads.
    public var offlineAllowanceMajorUnits: Int64?
    /// How long a daily token is valid, in seconds (at most 24 h); nil for 24 h.
    public var dailyTokenValidity: Int64?
    /// `true` when a TLS-terminating proxy stands in front: the dashboard's cookies then carry
    /// `Secure` although this process speaks plain HTTP. nil: `Secure` exactly when the server
    /// itself speaks TLS. (Not guessed from `X-Forwarded-Proto`, which any client can send.)
    public var behindTLSProxy: Bool?

    /// Whether the dashboard's cookies are marked `Secure`.
    public var secureCookies: Bool { tlsCertificatePath != nil || behindTLSProxy == true }

    /// The gateway's HPKE private key (PEM), relative paths from the data directory; nil for
    /// `gateway-key.pem`. Made by `horizon-server init` or the first `serve`, then kept:
    /// wallets cache the signed key configuration, so a new key on every restart would break them.
    public var gatewayKeyPath: String?
    /// Sealed requests one terminal may relay to the gateway a minute; nil for 60.
    public var gatewayRelaysPerMinute: Int?

    /// `HOST:PORT` the Prometheus metrics are served on (`GET /metrics`), apart from the API so
    /// that the public port never shows them; `off` serves none. nil: `127.0.0.1:0`, a free
    /// loopback port that `serve` prints (set a fixed one for Prometheus to scrape).
    public var metricsListen: String?

    /// Proxies whose `X-Forwarded-For` names the client: addresses and CIDR ranges, e.g.
    /// `["127.0.0.1", "10.0.0.0/8"]`. nil or empty: none, the peer is the client. From a trusted
    /// peer, the right-most address of the header that is not itself trusted is the client.
    public var trustedProxies: [String]?

    /// Mail delivery through a sendmail-style command; nil: mail stays in the outbox (sandbox).
    public var mail: MailSettings?
    /// SMS delivery through an HTTP gateway; nil: SMS stay in the outbox (sandbox).
    public var sms: SMSSettings?

    /// `true`: a wallet registers only with an invitation code the operator issued
    /// (`horizon-server invitations create`). nil or false: the code is optional.
    public var invitationsRequired: Bool?
    /// The most one payment (amount and tip) of a pinless wallet may be, in minor units of the
    /// merchant's currency; 0 for no limit, nil for 5000 (50.00). A pinless wallet's key is
    /// protected by its device alone, so a stolen device pays no more than this at a time.
    public var pinlessPaymentLimit: Int64?
    public var effectivePinlessPaymentLimit: Int64? {
        let limit = pinlessPaymentLimit ?? LedgerOptions.defaultPinlessPaymentLimit
        return limit == 0 ? nil : limit
    }
    /// How long a registration's activation link (mailed to the address) can be confirmed, in
    /// seconds (10 minutes to 7 days); nil for 24 h.
    public var activationLinkLifetime: Int64?
    /// The address people reach this server at, e.g. `https://pay.example.com`: the start of the
    /// links the server mails. nil: `http://` and `listen` (`https://` with a certificate),
    /// which suits a server on the person's own network only.
    public var publicURL: String?

    /// How long one webhook delivery attempt may take, in seconds (1 to 30); nil for 10. A
    /// delivery is claimed for this and 5 s more, so after a crash it is retried that late.
    public var webhookTimeout: Int64?

    /// `true`: webhook endpoints may be on loopback, link-local, private, multicast or
    /// unspecified addresses, and `http://` (a receiver on the shop's own network, or a test's);
    /// nil or false: only `https://` to the public internet, checked when an endpoint is
    /// registered and before each attempt.
    public var webhooksAllowPrivateAddresses: Bool?
    public var webhookAddressPolicy: WebhookAddressPolicy {
        WebhookAddressPolicy(allowsPrivateAddresses: webhooksAllowPrivateAddresses == true)
    }

    public static let defaultWebhookTimeout: Int64 = 10
    public var effectiveWebhookTimeout: Duration { .seconds(webhookTimeout ?? Self.defaultWebhookTimeout) }

    public static let defaultActivationLinkLifetime: Int64 = 86_400
    public var effectiveActivationLinkLifetime: Int64 { activationLinkLifetime ?? Self.defaultActivationLinkLifetime }

    /// The start of the links the server mails, without a trailing slash.
    public var effectivePublicURL: String {
        if let publicURL { return publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL }
        return (tlsCertificatePath == nil ? "http://" : "https://") + listen
    }

    public static let defaultMetricsListen = "127.0.0.1:0"

    /// The host and port of `metricsListen`; nil when it is `off`.
    public func metricsListenAddress() throws(ServerSetupError) -> (host: String, port: Int)? {
        let text = metricsListen ?? Self.defaultMetricsListen
        if text == "off" { return nil }
        return try Self.hostAndPort(text, option: "--metrics-listen")
    }

    public static let defaultGatewayKeyPath = "gateway-key.pem"
    public static let defaultGatewayRelaysPerMinute = 60

    public var effectiveGatewayRelaysPerMinute: Int { gatewayRelaysPerMinute ?? Self.defaultGatewayRelaysPerMinute }

    public func gatewayKeyFile(in directory: String) -> String {
        Self.resolve(gatewayKeyPath ?? Self.defaultGatewayKeyPath, in: directory)
    }

    public static let defaultOfflineAllowanceMajorUnits: Int64 = 50
    public static let defaultDailyTokenValidity: Int64 = 86_400

    /// The offline allowance cap in `currency`'s minor units (50 EUR is 5000; 50 JPY is 50).
    public func offlineAllowanceCap(in currency: Currency) -> Int64 {
        let majorUnits = offlineAllowanceMajorUnits ?? Self.defaultOfflineAllowanceMajorUnits
        let (cap, overflow) = majorUnits.multipliedReportingOverflow(by: currency.minorUnitsPerMajorUnit)
        return overflow ? Money.maximumMinorUnits : min(cap, Money.maximumMinorUnits)
    }

    public var effectiveDailyTokenValidity: Int64 { dailyTokenValidity ?? Self.defaultDailyTokenValidity }

    public init(
        listen: String = "127.0.0.1:8080", database: String = "sqlite:horizon.sqlite",
        issuerKeyPath: String = "issuer.pem",
        issuerName: String = "Horizon", credentialValidity: Int64 = 12 * 3600, maximumBodyBytes: Int = 64 * 1024,
        rateLimitBurst: Int = 100, rateLimitPerSecond: Double = 50, signatureWindow: Int64 = 300,
        passwordCostLog2: Int = 15, loginAttemptsBeforeLock: Int = 5, loginFirstLockSeconds: Int64 = 60,
        tlsCertificatePath: String? = nil, tlsKeyPath: String? = nil
    ) {
        self.listen = listen
        self.database = database
        self.issuerKeyPath = issuerKeyPath
        self.issuerName = issuerName
        self.credentialValidity = credentialValidity
        self.maximumBodyBytes = maximumBodyBytes
        self.rateLimitBurst = rateLimitBurst
        self.rateLimitPerSecond = rateLimitPerSecond
        self.signatureWindow = signatureWindow
        self.passwordCostLog2 = passwordCostLog2
        self.loginAttemptsBeforeLock = loginAttemptsBeforeLock
        self.loginFirstLockSeconds = loginFirstLockSeconds
        self.tlsCertificatePath = tlsCertificatePath
        self.tlsKeyPath = tlsKeyPath
    }

    /// Refuses settings that cannot work, with the reason.
    public func validate() throws(ServerSetupError) {
        let api = try listenAddress()
        if let metrics = try metricsListenAddress(), metrics.port != 0, metrics == api {
            throw .invalidSetting(
                "--metrics-listen must not be the API's address (\(listen)): metrics are kept off the public port")
        }
        guard (60...86_400).contains(credentialValidity) else {
            throw .invalidSetting("credentialValidity must be 60 to 86400 seconds (a credential lives at most 24 h)")
        }
        guard (1024...16 * 1024 * 1024).contains(maximumBodyBytes) else {
            throw .invalidSetting("maximumBodyBytes must be 1 KiB to 16 MiB")
        }
        _ = try TrustedProxies(trustedProxies ?? [])
        guard rateLimitBurst >= 1, rateLimitPerSecond > 0 else {
            throw .invalidSetting("rateLimitBurst must be at least 1 and rateLimitPerSecond above 0")
        }
        guard (10...3600).contains(signatureWindow) else {
            throw .invalidSetting("signatureWindow must be 10 to 3600 s")
        }
        if let signInsPerAddress, !(1...1_000_000).contains(signInsPerAddress) {
            throw .invalidSetting("signInsPerAddress must be 1 to 1000000 (sign-ins per client address in 15 minutes)")
        }
        if let offlineAllowanceMajorUnits, !(0...1_000_000).contains(offlineAllowanceMajorUnits) {
            throw .invalidSetting("offlineAllowanceMajorUnits must be 0 to 1000000 (major units of the currency)")
        }
        if let dailyTokenValidity, !(600...86_400).contains(dailyTokenValidity) {
            throw .invalidSetting("dailyTokenValidity must be 600 to 86400 seconds (a daily token lives at most 24 h)")
        }
        if let gatewayRelaysPerMinute, !(1...100_000).contains(gatewayRelaysPerMinute) {
            throw .invalidSetting(
                "gatewayRelaysPerMinute must be 1 to 100000 (sealed requests one terminal relays a minute)")
        }
        if let webhookTimeout, !(1...30).contains(webhookTimeout) {
            throw .invalidSetting("webhookTimeout must be 1 to 30 seconds")
        }
        if let pinlessPaymentLimit, !(0...Money.maximumMinorUnits).contains(pinlessPaymentLimit) {
            throw .invalidSetting("pinlessPaymentLimit must be 0 (no limit) to 10^15 minor units")
        }
        if let activationLinkLifetime, !(600...7 * 86_400).contains(activationLinkLifetime) {
            throw .invalidSetting("activationLinkLifetime must be 600 to 604800 seconds (10 minutes to 7 days)")
        }
        if let publicURL,
            URL(string: publicURL)?.host == nil || !(publicURL.hasPrefix("https://") || publicURL.hasPrefix("http://"))
        {
            throw .invalidSetting("publicURL must be an http:// or https:// address, e.g. https://pay.example.com")
        }
        try validateMessageSettings()
        guard (tlsCertificatePath == nil) == (tlsKeyPath == nil) else {
            throw .invalidSetting("--tls-certificate and --tls-key go together")
        }
        guard database.hasPrefix("sqlite:") || database.hasPrefix("postgres://") || database.hasPrefix("postgresql://")
        else {
            throw .invalidSetting("database must be sqlite:PATH or a postgres:// URL (got \(database))")
        }
    }

    /// The host and port of `listen`.
    public func listenAddress() throws(ServerSetupError) -> (host: String, port: Int) {
        try Self.hostAndPort(listen, option: "--listen")
    }

    static func hostAndPort(_ text: String, option: String) throws(ServerSetupError) -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { throw .invalidSetting("\(option) must be HOST:PORT, e.g. 127.0.0.1:8080 (got \(text))") }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw .invalidSetting("\(option) needs a host, e.g. 127.0.0.1:\(port)") }
        return (host, port)
    }

    public var loginPolicy: LoginPolicy {
        LoginPolicy(attemptsBeforeLock: loginAttemptsBeforeLock, firstLock: loginFirstLockSeconds)
    }

    /// Opens the ledger this configuration names, relative paths from `directory`.
    public func openLedger(relativeTo directory: String) async throws(LedgerError) -> Ledger {
        if database.hasPrefix("sqlite:") {
            return try await Ledger.sqlite(
                path: Self.resolve(String(database.dropFirst("sqlite:".count)), in: directory), options: ledgerOptions)
        }
        return try await Ledger.postgres(url: database, options: ledgerOptions)
    }

    /// The ledger's settings this configuration makes.
    public var ledgerOptions: LedgerOptions { LedgerOptions(pinlessPaymentLimit: effectivePinlessPaymentLimit) }

    static func resolve(_ path: String, in directory: String) -> String {
        path.hasPrefix("/") ? path : (directory as NSString).appendingPathComponent(path)
    }

    public func issuerKeyFile(in directory: String) -> String { Self.resolve(issuerKeyPath, in: directory) }

    /// The systemd credential names of the issuer and gateway keys (`LoadCredentialEncrypted=`).
    public static let issuerKeyCredential = "issuer.pem"
    public static let gatewayKeyCredential = "gateway-key.pem"

    /// Where the issuer key is read: the service's systemd credential when it has one, else the
    /// data directory's file. (`init` writes the data directory's file.)
    public func issuerKeySource(in directory: String) -> String {
        SystemdCredentials.file(Self.issuerKeyCredential) ?? issuerKeyFile(in: directory)
    }

    /// Where the gateway key is read: the systemd credential when there is one, else the data
    /// directory's file (made on the first start when missing).
    public func gatewayKeySource(in directory: String) -> String {
        SystemdCredentials.file(Self.gatewayKeyCredential) ?? gatewayKeyFile(in: directory)
    }
}
