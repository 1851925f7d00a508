import Crypto
import Foundation
import HorizonAPI
import HorizonCLISupport
import HorizonCore
import HorizonRoles
import HorizonSecureChannel
import HorizonServerClient
import Logging
import ServiceLifecycle

/// A terminal activated with a Horizon server: its key is made here and never
/// leaves; the server's issuer vouches for it with a short-lived credential, renewed while the
/// terminal is online. No anchor private key is kept.
extension TerminalFiles {
    static func serverURL(_ text: String) throws -> URL {
        do { return try HorizonServerClient.url(text) } catch { throw CLIError("\(error)") }
    }

    public static let serverTimeoutVariable = "HORIZON_SERVER_TIMEOUT"

    /// How long the terminal waits for the server's answer to a payment before it reports the
    /// payment pending (it stays owed, and is asked again at the next recovery): 10 s, or
    /// `HORIZON_SERVER_TIMEOUT` seconds (0.1 to 300; a slow link may need more, tests less).
    static func serverTimeout(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws
        -> Duration
    {
        guard let text = environment[serverTimeoutVariable] else { return .seconds(10) }
        guard let seconds = Double(text), (0.1...300).contains(seconds) else {
            throw CLIError("\(serverTimeoutVariable)=\(text) must be 0.1 to 300 seconds")
        }
        return .milliseconds(Int64(seconds * 1000))
    }

    /// Makes the terminal's key, activates it for the merchant whose admin signs in with
    /// `email`/`password`, and writes key, credential, settings and the server's anchor.
    public func activate(
        server: String, email: String, password: String, label: String, decisionTimeoutSeconds: Int,
        maximumAmountMajorUnits: Int64? = nil, force: Bool
    ) async throws -> (TerminalSettings, Components.Schemas.TerminalCredentialResponse) {
        if directory.exists(Self.settings), !force { try await requireReplaceableWithoutForce() }
        // What a sandbox leaves behind: its ledger (nil: none), which may keep another currency
        // than the server's; true when it holds payments.
        let sandboxLedgerTookPayments: Bool? =
            directory.exists(Self.settings) && (try? loadSettings())?.server == nil && directory.exists(Self.ledger)
            ? await hasTakenPayments() : nil
        // A maximum set before (at init) stays unless a new one is given.
        let maximumAmountMajorUnits =
            maximumAmountMajorUnits
            ?? (directory.exists(Self.settings) ? try? loadSettings() : nil)?.maximumAmountMajorUnits
        let url = try Self.serverURL(server)
        let key = P256.Signing.PrivateKey()
        let response: Components.Schemas.TerminalCredentialResponse
        do {
            // A minute, not the client's usual 10 s: the server checks the password with scrypt,
            // which takes seconds on a small or busy machine, and a person waits for it anyway.
            response = try await HorizonServerClient(serverURL: url, timeout: .seconds(60)).activateTerminal(
                email: email, password: password, label: label, key: key)
        } catch {
            throw CLIError("activation failed: \(error)")
        }
        let credential = try Self.decodeCredential(response, for: key)
        try directory.create()
        try KeyFiles.writePrivate(key, to: Self.terminalKey, in: directory)
        try directory.write(Data(credential.encoded()), to: Self.credential)
        guard let anchorBytes = Data(base64Encoded: response.anchor.publicKey),
            let anchor = try? P256.Signing.PublicKey(x963Representation: anchorBytes)
        else { throw CLIError("the server's anchor is not a P-256 public key") }
        try KeyFiles.writePublic(anchor, to: Self.anchorPublicKey, in: directory)
        // A sandbox's anchor private key must not survive into an activated terminal.
        try? FileManager.default.removeItem(at: directory.file(Self.anchorKey))
        var settings = TerminalSettings(
            merchantID: response.merchantId, merchantName: response.merchantName, terminalLabel: response.label,
            currency: response.currency, startingBalanceMinorUnits: 0,
            userDecisionTimeoutSeconds: decisionTimeoutSeconds,
            bonusPointsPerMajorUnit: 0, server: url.absoluteString, terminalID: response.terminalId)
        settings.maximumAmountMajorUnits = maximumAmountMajorUnits
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try directory.write(try encoder.encode(settings), to: Self.settings)
        if let sandboxLedgerTookPayments { retireSandboxLedger(keep: sandboxLedgerTookPayments) }
        return (settings, response)
    }

    /// The activated terminal starts a ledger of its own (in the server's currency): the
    /// sandbox's is kept beside it as `ledger.sqlite.sandbox` when it holds payments, and
    /// removed when it holds none.
    private func retireSandboxLedger(keep: Bool) {
        for suffix in ["", "-wal", "-shm"] where directory.exists(Self.ledger + suffix) {
            let file = directory.file(Self.ledger + suffix)
            if keep {
                try? FileManager.default.moveItem(at: file, to: directory.file(Self.ledger + ".sandbox" + suffix))
            } else {
                try? FileManager.default.removeItem(at: file)
            }
        }
    }

    /// `init` then `activate` is the documented order: a sandbox terminal that has taken nothing
    /// yet is activated as it is. One that settled payments, or one already activated, is
    /// replaced only when asked (--force), and the refusal says what that does.
    func requireReplaceableWithoutForce() async throws {
        let settings = try loadSettings()
        if let server = settings.server {
            throw CLIError(
                "\(directory.path) already holds a terminal activated with \(server); pass --force to replace it with a new activation (a new key; its journal is kept)"
            )
        }
        if await hasTakenPayments() {
            throw CLIError(
                "\(directory.path) holds a sandbox terminal that has taken payments; pass --force to activate it anyway (a new key from the server; its sandbox ledger and journal are kept)"
            )
        }
    }

    /// Renews the credential when less than half of its validity is left (or `force`), writing
    /// the new one. Returns the identity to use, and whether it was renewed. A server that cannot
    /// be reached leaves the current credential in use while it is valid.
    public func renewCredentialIfDue(identity: TerminalIdentity, now: UnixTime, force: Bool = false, logger: Logger)
        async throws -> (TerminalIdentity, renewed: Bool)
    {
        guard let server = try loadSettings().server else { return (identity, false) }
        let credential = identity.credential
        let half = (credential.expiresAt - credential.notBefore) / 2
        guard force || now >= credential.expiresAt - half else { return (identity, false) }
        let client = HorizonServerClient(serverURL: try Self.serverURL(server), signingKey: identity.signingKey)
        let response: Components.Schemas.TerminalCredentialResponse
        do {
            response = try await client.renewTerminalCredential()
        } catch {
            if case .refused(_, let code, let message, _) = error,
                code == "terminal_revoked" || code == "terminal_unknown"
            {
                throw CLIError("the server refuses this terminal (\(code)): \(message)")
            }
            guard now < credential.expiresAt else {
                throw CLIError("the terminal's credential expired and cannot be renewed: \(error)")
            }
            logger.warning(
                "credential renewal failed; the current one stays valid until \(credential.expiresAt): \(error)")
            return (identity, false)
        }
        let renewed = try Self.decodeCredential(response, for: identity.signingKey)
        try directory.write(Data(renewed.encoded()), to: Self.credential)
        logger.info("credential renewed until \(renewed.expiresAt)")
        return (try TerminalIdentity(signingKey: identity.signingKey, credential: renewed), true)
    }

    static func decodeCredential(
        _ response: Components.Schemas.TerminalCredentialResponse, for key: P256.Signing.PrivateKey
    )
        throws -> TerminalCredential
    {
        guard let bytes = Data(base64Encoded: response.credential),
            let credential = try? TerminalCredential.decode(Array(bytes)),
            credential.terminalKey == Array(key.publicKey.x963Representation)
        else { throw CLIError("the server's credential is not one for this terminal's key") }
        return credential
    }
}

/// Keeps a serving terminal's credential fresh: wakes when half of it is used up, renews it with
/// the server and puts it in use for new connections; retries a minute later when the server
/// cannot be reached. Stops on graceful shutdown. Only for an activated terminal.
public struct CredentialRenewalService: Service {
    let files: TerminalFiles
    let service: TerminalRadioService
    let logger: Logger
    let retryAfter: Duration
    let clock: @Sendable () -> UnixTime

    public init(
        files: TerminalFiles, service: TerminalRadioService, logger: Logger, retryAfter: Duration = .seconds(60),
        clock: @escaping @Sendable () -> UnixTime = { UnixTime(Date().timeIntervalSince1970) }
    ) {
        self.files = files
        self.service = service
        self.logger = logger
        self.retryAfter = retryAfter
        self.clock = clock
    }

    public func run() async throws {
        // A shutdown cancels the waits: that is this service's normal end, not a failure (a
        // CancellationError out of here would fail the whole group, and systemd's stop with it).
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let credential = service.identity.credential
                let due = credential.notBefore + (credential.expiresAt - credential.notBefore) / 2
                let now = clock()
                if now < due { guard (try? await Task.sleep(for: .seconds(due - now))) != nil else { return } }
                do {
                    let (renewed, changed) = try await files.renewCredentialIfDue(
                        identity: service.identity, now: clock(), logger: logger)
                    if changed {
                        try service.replaceCredential(renewed.credential)
                        continue
                    }
                } catch {
                    if Task.isCancelled { return }
                    logger.error("credential renewal refused: \(error)")
                }
                guard (try? await Task.sleep(for: retryAfter)) != nil else { return }
            }
        }
    }
}
