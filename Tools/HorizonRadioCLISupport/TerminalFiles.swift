import Crypto
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonServerClient
import HorizonServiceClients
import HorizonSettlement
import HorizonStores
import Logging

/// What `horizon-terminal init` decides once: who the merchant is and how the sandbox behaves.
public struct TerminalSettings: Codable, Sendable {
    public var merchantID: String
    public var merchantName: String
    /// Which till this is ("Till 2, Market St"): in the credential, shown by wallets.
    public var terminalLabel: String
    public var currency: String
    public var startingBalanceMinorUnits: Int64
    public var userDecisionTimeoutSeconds: Int
    public var bonusPointsPerMajorUnit: Int64
    /// The Horizon server that activated this terminal and settles its payments (`activate`);
    /// nil for a sandbox terminal, which settles in its own ledger.
    public var server: String?
    /// The terminal's id at the server.
    public var terminalID: String?
    /// The merchant's offline limits (see `OfflineSettings`); nil takes the defaults.
    public var offline: OfflineSettings?
    /// The most one payment may be, in whole units of the terminal's currency: a shop's sanity
    /// limit against a mistyped amount (12500 for 125.00). Nil takes the default.
    public var maximumAmountMajorUnits: Int64?

    /// 10,000 units of the terminal's currency unless set (`init --max-amount`).
    public static let defaultMaximumAmountMajorUnits: Int64 = 10_000

    public static let defaultTerminalLabel = "Till 1"

    public init(
        merchantID: String, merchantName: String, terminalLabel: String = defaultTerminalLabel, currency: String,
        startingBalanceMinorUnits: Int64, userDecisionTimeoutSeconds: Int, bonusPointsPerMajorUnit: Int64,
        server: String? = nil, terminalID: String? = nil, maximumAmountMajorUnits: Int64? = nil
    ) {
        self.maximumAmountMajorUnits = maximumAmountMajorUnits
        self.server = server
        self.terminalID = terminalID
        self.merchantID = merchantID
        self.merchantName = merchantName
        self.terminalLabel = terminalLabel
        self.currency = currency
        self.startingBalanceMinorUnits = startingBalanceMinorUnits
        self.userDecisionTimeoutSeconds = userDecisionTimeoutSeconds
        self.bonusPointsPerMajorUnit = bonusPointsPerMajorUnit
    }

    private enum CodingKeys: String, CodingKey {
        case merchantID, merchantName, terminalLabel, currency, startingBalanceMinorUnits, userDecisionTimeoutSeconds
        case bonusPointsPerMajorUnit, server, terminalID, offline, maximumAmountMajorUnits
    }

    /// Settings written before terminal labels existed get the default label (migrated, not refused).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        merchantID = try container.decode(String.self, forKey: .merchantID)
        merchantName = try container.decode(String.self, forKey: .merchantName)
        terminalLabel =
            try container.decodeIfPresent(String.self, forKey: .terminalLabel) ?? Self.defaultTerminalLabel
        currency = try container.decode(String.self, forKey: .currency)
        startingBalanceMinorUnits = try container.decode(Int64.self, forKey: .startingBalanceMinorUnits)
        userDecisionTimeoutSeconds = try container.decode(Int.self, forKey: .userDecisionTimeoutSeconds)
        bonusPointsPerMajorUnit = try container.decode(Int64.self, forKey: .bonusPointsPerMajorUnit)
        server = try container.decodeIfPresent(String.self, forKey: .server)
        terminalID = try container.decodeIfPresent(String.self, forKey: .terminalID)
        offline = try container.decodeIfPresent(OfflineSettings.self, forKey: .offline)
        maximumAmountMajorUnits = try container.decodeIfPresent(Int64.self, forKey: .maximumAmountMajorUnits)
    }

    /// The most one payment may be in `currency`.
    public func maximumAmount(in currency: Currency) -> Money {
        let units = maximumAmountMajorUnits ?? Self.defaultMaximumAmountMajorUnits
        let (minorUnits, overflow) = units.multipliedReportingOverflow(by: currency.minorUnitsPerMajorUnit)
        return (try? Money(minorUnits: overflow ? Money.maximumMinorUnits : minorUnits, currency: currency))
            ?? .zero(currency)
    }

    /// Why `amount` may not be taken here, or nil when it is within the maximum.
    public func refusal(of amount: Money) -> String? {
        let maximum = maximumAmount(in: amount.currency)
        guard amount.minorUnits > maximum.minorUnits else { return nil }
        return
            "\(amount) is more than this terminal's maximum of \(maximum) per payment; check the amount (the maximum is set with `horizon-terminal init --max-amount` or `activate --max-amount`)"
    }
}

/// The terminal's data directory: sandbox trust anchor, terminal key, credential, ledger.
public struct TerminalFiles: Sendable {
    public static let settings = "terminal.json"
    public static let terminalKey = "terminal-key.pem"
    public static let anchorKey = "anchor-key.pem"
    /// Give this file to wallets (`horizon-wallet init --trust`): it is what they trust.
    public static let anchorPublicKey = "anchor.pub"
    public static let credential = "credential.bin"
    /// The in-process ledger (HorizonLedger, SQLite). An old sandbox ledger found under this
    /// name is migrated into it and kept as `ledger.sqlite.sandbox-v2`.
    public static let ledger = "ledger.sqlite"
    /// Every step of every payment and redemption (see `JournalStep`).
    public static let journal = "journal.sqlite"
    public static let initCommand = "horizon-terminal init"

    public let directory: DataDirectory

    public init(directory: DataDirectory) { self.directory = directory }

    /// Creates keys, a credential (valid one year) signed by a new sandbox anchor, and the ledger.
    /// Returns what opening the ledger migrated from an old sandbox ledger, if anything. Nothing
    /// is left half-made: what can fail (the credential, the ledger) comes before the first key
    /// is written, `terminal.json` (what marks a terminal) is written last, and on a failure the
    /// files this call added are removed again.
    @discardableResult
    public func initialize(settings: TerminalSettings, force: Bool, logger: Logger? = nil) async throws
        -> LegacySandboxMigration?
    {
        if directory.exists(Self.settings), !force {
            throw CLIError(
                "\(directory.path) already holds a terminal; pass --force to replace its keys (the ledger is kept)")
        }
        guard let currency = try? Currency(code: settings.currency) else {
            throw CLIError("unsupported currency '\(settings.currency)'; use an ISO 4217 code such as EUR, USD, JPY")
        }
        try directory.create()
        let present = Set((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
        do {
            let anchor = P256.Signing.PrivateKey()
            let terminalKey = P256.Signing.PrivateKey()
            let credential = try Self.issueCredential(by: anchor, for: terminalKey, settings: settings)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let settingsData = try encoder.encode(settings)
            let ledger = try await openLedger(settings: settings, currency: currency, logger: logger)
            await ledger.close()
            try KeyFiles.writePrivate(anchor, to: Self.anchorKey, in: directory)
            try KeyFiles.writePublic(anchor.publicKey, to: Self.anchorPublicKey, in: directory)
            try KeyFiles.writePrivate(terminalKey, to: Self.terminalKey, in: directory)
            try directory.write(Data(credential.encoded()), to: Self.credential)
            try directory.write(settingsData, to: Self.settings)
            return ledger.migration
        } catch {
            let now = Set((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            for added in now.subtracting(present) { try? FileManager.default.removeItem(at: directory.file(added)) }
            throw error
        }
    }

    /// Whether the ledger or the journal holds any payment or redemption; what cannot be read
    /// counts as holding one (the caller then asks before replacing anything).
    func hasTakenPayments() async -> Bool {
        if directory.exists(Self.journal) {
            guard let journal = try? openJournal(), let records = try? journal.records(limit: 1) else { return true }
            if !records.isEmpty { return true }
        }
        guard directory.exists(Self.ledger) else { return false }
        guard let settings = try? loadSettings(), let currency = try? Currency(code: settings.currency),
            let ledger = try? await openLedger(settings: settings, currency: currency, logger: nil)
        else { return true }
        let transactions = try? await ledger.transactions(limit: 1)
        await ledger.close()
        return transactions?.isEmpty != true
    }

    public func loadSettings() throws -> TerminalSettings {
        try directory.requireInitialized(marker: Self.settings, initCommand: Self.initCommand)
        do {
            return try JSONDecoder().decode(TerminalSettings.self, from: try directory.read(Self.settings))
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("\(directory.file(Self.settings).path) is damaged: \(error)")
        }
    }

    /// A credential valid for a year, signed by the sandbox anchor.
    static func issueCredential(
        by anchor: P256.Signing.PrivateKey, for terminalKey: P256.Signing.PrivateKey, settings: TerminalSettings
    ) throws -> TerminalCredential {
        let now = UnixTime(Date().timeIntervalSince1970)
        return try TerminalCredential.issue(
            by: anchor, merchantID: settings.merchantID, merchantName: settings.merchantName,
            terminalLabel: settings.terminalLabel, terminalKey: terminalKey.publicKey, notBefore: now - 86_400,
            expiresAt: now + 365 * 86_400)
    }

    public func loadIdentity() throws -> TerminalIdentity {
        try directory.requireInitialized(marker: Self.settings, initCommand: Self.initCommand)
        let key = try KeyFiles.readPrivate(Self.terminalKey, in: directory)
        do {
            let credential: TerminalCredential
            do {
                credential = try TerminalCredential.decode(Array(try directory.read(Self.credential)))
            } catch SecureChannelError.unsupportedVersion(let version) where version < TerminalCredential.version {
                // A credential from before terminal labels: the sandbox anchor issues it anew,
                // with the label from the settings, so an older data directory keeps working.
                credential = try Self.issueCredential(
                    by: try KeyFiles.readPrivate(Self.anchorKey, in: directory), for: key, settings: try loadSettings())
                try directory.write(Data(credential.encoded()), to: Self.credential)
            }
            return try TerminalIdentity(signingKey: key, credential: credential)
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError(
                "the terminal credential in \(directory.path) is unusable: \(error); run `horizon-terminal init --force`"
            )
        }
    }

    /// The terminal's in-process ledger (migrating an old sandbox ledger file on the way).
    /// An activated terminal settles through its server; it still opens this one for its
    /// currency, programs and register users.
    public func loadLedger(logger: Logger? = nil) async throws -> InProcessLedger {
        let settings = try loadSettings()
        guard let currency = try? Currency(code: settings.currency) else {
            throw CLIError("\(directory.file(Self.settings).path) names an unsupported currency '\(settings.currency)'")
        }
        let ledger = try await openLedger(settings: settings, currency: currency, logger: logger)
        // Once, on the command that found an old ledger: the user should know where it went.
        if let migration = ledger.migration { FileHandle.standardError.write(Data("note: \(migration)\n".utf8)) }
        return ledger
    }

    private func openLedger(settings: TerminalSettings, currency: Currency, logger: Logger?) async throws
        -> InProcessLedger
    {
        do {
            return try await InProcessLedger.open(
                path: directory.file(Self.ledger).path,
                configuration: InProcessLedgerConfiguration(
                    currency: currency,
                    enrollment: .sandboxOnFirstContact(startingBalance: settings.startingBalanceMinorUnits),
                    bonusPointsPerMajorUnit: settings.bonusPointsPerMajorUnit, merchantID: settings.merchantID,
                    merchantName: settings.merchantName),
                logger: logger)
        } catch {
            throw CLIError("cannot open the ledger: \(error)")
        }
    }
}

/// What a terminal command runs on: its processor (the ledger, behind crash injection when asked
/// for) and the radio service over its journal, with whatever a crash left in the journal settled.
public struct TerminalRuntime {
    public let processor: any PaymentProcessor & RedemptionProcessor
    public let service: TerminalRadioService
    /// The journal itself (the service may see it behind crash injection): it keeps the offline
    /// payments and the last server contact.
    public let journal: SQLiteTerminalJournal
    /// Offline acceptance, for an activated terminal (nil for a sandbox one).
    public let offline: OfflineAcceptanceConfiguration?
    /// Each server call that got an answer yields here (the service forwards offline payments
    /// then); nothing yields for a sandbox terminal.
    public let serverAnswered: AsyncStream<Void>
    /// Relays wallets' sealed requests to the server; nil: this terminal does not
    /// relay, and wallets asking are told so (`proxyUnavailable`).
    public var requestProxy: TerminalRequestProxy?
    /// The merchant's programs every offer announces: the server's for an activated terminal,
    /// the in-process ledger's for a sandbox one.
    public var merchantPrograms: MerchantPrograms

    public init(
        processor: any PaymentProcessor & RedemptionProcessor, service: TerminalRadioService,
        journal: SQLiteTerminalJournal, offline: OfflineAcceptanceConfiguration?, serverAnswered: AsyncStream<Void>,
        requestProxy: TerminalRequestProxy? = nil, merchantPrograms: MerchantPrograms = .none
    ) {
        self.merchantPrograms = merchantPrograms
        self.processor = processor
        self.service = service
        self.journal = journal
        self.offline = offline
        self.serverAnswered = serverAnswered
        self.requestProxy = requestProxy
    }
    /// Starts relaying for the wallets of `hosts` (one budget for all of them), if this terminal
    /// has a gateway; returns the running coordinator.
    @discardableResult
    public func startRequestProxy(hosts: [any ProxyHostConnector]) -> RequestProxyHostCoordinator? {
        requestProxy?.start(hosts: hosts)
    }
}

/// The terminal's request proxy as the apps run it: a `RequestProxyHostCoordinator`
/// over the hosts a command opens, relaying through `gateway` within `limits`. An activated
/// terminal's gateway posts to its server (`HorizonServerClient.forwardToGateway`).
public struct TerminalRequestProxy: Sendable {
    public let gateway: any ProxyGateway
    public let limits: RequestProxyLimits
    public let logger: Logger

    public init(gateway: any ProxyGateway, limits: RequestProxyLimits = RequestProxyLimits(), logger: Logger) {
        self.gateway = gateway
        self.limits = limits
        self.logger = logger
    }

    /// A configured coordinator over `hosts`.
    public func start(hosts: [any ProxyHostConnector]) -> RequestProxyHostCoordinator {
        let coordinator = RequestProxyHostCoordinator(proxyHostConnectors: hosts, logger: logger)
        coordinator.configure(gateway: gateway, limits: limits)
        return coordinator
    }
}

extension TerminalRuntime {
    /// The payment host `pay` and `serve` run: the ledger's currency, the merchant's programs,
    /// the given decision timeout.
    public func paymentHost(ledger: InProcessLedger, decisionTimeoutSeconds: Int) -> PaymentHost {
        PaymentHost(
            service: service, processor: processor,
            configuration: hostConfiguration(ledger: ledger, decisionTimeoutSeconds: decisionTimeoutSeconds))
    }

    /// What every host of this terminal runs with (payments and redemptions alike).
    public func hostConfiguration(ledger: InProcessLedger, decisionTimeoutSeconds: Int) -> PaymentHostConfiguration {
        PaymentHostConfiguration(
            userDecisionTimeout: .seconds(decisionTimeoutSeconds), currency: ledger.currency,
            merchantPrograms: merchantPrograms, offline: offline)
    }
}

extension TerminalFiles {
    public func openJournal() throws -> SQLiteTerminalJournal {
        try directory.requireInitialized(marker: Self.settings, initCommand: Self.initCommand)
        do {
            return try SQLiteTerminalJournal(path: directory.file(Self.journal).path)
        } catch {
            throw CLIError("cannot open the journal: \(error)")
        }
    }

    /// The server client of an activated terminal, signed with its key and waiting
    /// `HORIZON_SERVER_TIMEOUT` (10 s by default) for each answer; nil for a sandbox terminal.
    public func serverClient(identity: TerminalIdentity) throws -> HorizonServerClient? {
        guard let url = try loadSettings().server else { return nil }
        return HorizonServerClient(
            serverURL: try Self.serverURL(url), signingKey: identity.signingKey, timeout: try Self.serverTimeout())
    }

    /// Opens the journal, builds the radio service and recovers: every request a crash left
    /// confirmed but unanswered is settled (once, same id) before any session opens.
    public func startTerminal(
        radio: any PeripheralRadio, identity: TerminalIdentity, ledger: InProcessLedger, logger: Logger
    ) async throws -> TerminalRuntime {
        try CrashInjection.validate(for: "terminal")
        let rawJournal = try openJournal()
        let (serverAnswered, answered) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        // An activated terminal settles through its server; otherwise the ledger runs in process.
        // Every server call is watched: the journal keeps when the server last answered (the
        // status's online/offline) and an answer lets the service forward offline payments.
        let server = try serverClient(identity: identity)
        // The server's answers must be signed by the anchor pinned at activation.
        let anchor = try server.map { _ in try KeyFiles.readPublic(at: directory.file(Self.anchorPublicKey)) }
        let processor: any PaymentProcessor & RedemptionProcessor =
            if let server, let anchor {
                ServerReachabilityProcessor(base: ServerPaymentProcessor(client: server, anchor: anchor)) { reachable in
                    try? rawJournal.recordServerContact(
                        reachable: reachable, at: UnixTime(Date().timeIntervalSince1970))
                    if reachable { answered.yield() }
                }
            } else {
                CrashInjection.processor(wrapping: ledger)
            }
        if !(processor is ServerReachabilityProcessor) {
            // Said once at start, so nobody mistakes play money for a real deployment.
            logger.notice("settling in process: \(ledger.modeDescription)")
        }
        let journal = CrashInjection.journal(wrapping: rawJournal)
        let service = TerminalRadioService(
            radio: radio, identity: identity, processor: processor, journal: journal, logger: logger)
        let recovery: JournalRecoveryReport
        do {
            recovery = try await service.recoverJournal(redemptions: processor)
        } catch {
            throw CLIError("cannot recover from the journal: \(error)")
        }
        if recovery.isEmpty {
            logger.debug("\(recovery)")
        } else {
            logger.notice("\(recovery)")
        }
        // An activated terminal relays wallets' sealed requests to its server's gateway.
        let requestProxy = server.map {
            TerminalRequestProxy(gateway: ServerProxyGateway(client: $0), logger: logger)
        }
        return TerminalRuntime(
            processor: processor, service: service, journal: rawJournal,
            offline: try offlineAcceptance(journal: rawJournal), serverAnswered: serverAnswered,
            requestProxy: requestProxy,
            merchantPrograms: try await merchantPrograms(server: server, ledger: ledger, logger: logger))
    }

    /// The programs an offer announces. An activated terminal's come from its server, where the
    /// merchant's loyalty rules live; a server that does not answer now leaves the offers
    /// announcing none (said at notice) rather than programs the merchant may not have.
    public func merchantPrograms(server: HorizonServerClient?, ledger: InProcessLedger, logger: Logger) async throws
        -> MerchantPrograms
    {
        guard let server else { return try await ledger.merchantPrograms() }
        let merchant = MerchantServiceClient(server: server)
        do {
            try await merchant.start()
        } catch {
            logger.notice("the merchant's programs could not be read from the server (\(error)); offers announce none")
            return .none
        }
        return MerchantPrograms(
            hasBonusProgram: await merchant.hasBonusProgram, hasGoldProgram: await merchant.hasGoldProgram,
            hasCouponProgram: await merchant.hasCouponProgram)
    }
}

/// The wallet's data directory: its key, the trust anchors it accepts, its store.
public struct WalletFiles {
    public static let walletKey = "wallet-key.pem"
    public static let trustDirectory = "trust"
    public static let store = "wallet.sqlite"
    public static let initCommand = "horizon-wallet init"

    public let directory: DataDirectory

    public init(directory: DataDirectory) { self.directory = directory }

    /// Creates the wallet key (pinless, protected as `keyProtection` says) and store and trusts
    /// `anchors` (PEM files). Returns the anchors trusted.
    public func initialize(
        trusting anchorFiles: [URL], force: Bool, keyProtection: WalletKeyProtectionChoice = .file
    ) throws -> [URL] {
        if directory.exists(Self.walletKey), !force {
            throw CLIError("\(directory.path) already holds a wallet; pass --force to replace its key")
        }
        try directory.create()
        let keys = try anchorFiles.map { try KeyFiles.readPublic(at: $0) }
        // A new key has no PIN yet: an attempt record of the old one would only block it (storePinless drops it).
        try keyVault().storePinless(P256.Signing.PrivateKey(), protection: keyProtection)
        let trust = DataDirectory(explicit: directory.file(Self.trustDirectory).path, role: "")
        try trust.create()
        for key in keys {
            let name = keyIdentifier(of: key).hexString + ".pub"
            try KeyFiles.writePublic(key, to: name, in: trust)
        }
        _ = try openStore()
        return anchorFiles
    }

    /// The key file and its PIN protection.
    public func keyVault(policy: PINPolicy = PINPolicy(), cost: PINKeyCost = .standard) -> WalletKeyVault {
        WalletKeyVault(directory: directory, keyFile: Self.walletKey, policy: policy, cost: cost)
    }

    /// The wallet's signing identity; `pin` is asked for only when the key is sealed under a PIN.
    public func loadIdentity(pin: () throws -> String) throws -> WalletIdentity {
        try directory.requireInitialized(marker: Self.walletKey, initCommand: Self.initCommand)
        return WalletIdentity(signingKey: try keyVault().unlock(pin: pin))
    }

    /// The wallet's public key, which needs no PIN.
    public func loadPublicKey() throws -> PublicKeyBytes {
        try directory.requireInitialized(marker: Self.walletKey, initCommand: Self.initCommand)
        let key = try keyVault().publicKey()
        do { return try PublicKeyBytes(bytes: Array(key.x963Representation)) } catch {
            throw CLIError("\(directory.file(Self.walletKey).path) holds a key that is not an uncompressed P-256 key")
        }
    }

    public func loadTrustAnchors() throws -> [TrustAnchor] {
        try directory.requireInitialized(marker: Self.walletKey, initCommand: Self.initCommand)
        let folder = directory.file(Self.trustDirectory)
        let files = (try? FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)) ?? []
        let anchors = try files.filter { $0.pathExtension == "pub" }.sorted { $0.path < $1.path }
            .map {
                TrustAnchor(
                    publicKey: try KeyFiles.readPublic(at: $0), name: $0.deletingPathExtension().lastPathComponent)
            }
        guard !anchors.isEmpty else {
            throw CLIError(
                "this wallet trusts no terminal issuer; run `horizon-wallet init --force --trust <terminal data dir>/anchor.pub`"
            )
        }
        return anchors
    }

    public func openStore() throws -> WalletStore {
        do {
            return try WalletStore(path: directory.file(Self.store).path)
        } catch {
            throw CLIError("cannot open the wallet store: \(error)")
        }
    }
}
