import ArgumentParser
import Crypto
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonRadioCLISupport
import HorizonServiceClients

/// The wallet's account on its server, through the service clients (`HorizonServiceClients`)
/// with the wallet's own key: what `account`, `balance`, `history`, `points`, `coupons` and
/// `memberships` ask. No command opens another program's file; a wallet set up for the
/// single-box sandbox has no server to ask and is told what to do instead.
struct WalletSession {
    let account: WalletAccount
    let identity: IdentityClient
    let cache: Cache
    /// The unlocked key: a `--via-terminal` session's radio client signs with it too.
    let signingKey: P256.Signing.PrivateKey
    /// The terminal this session's requests go through (`--via-terminal`), nil for direct.
    var terminalRelay: TerminalRelay? = nil

    /// The advice for a wallet that has no server account.
    static let sandboxAdvice = """
        this wallet is not registered with a Horizon server, so it has no account to ask. In the single-box \
        sandbox the terminal keeps points, coupons, memberships and balances in its own ledger: ask on the \
        terminal with `horizon-terminal programs show --wallet-dir DIR`. To have an account of your own, register \
        this wallet with a server: `horizon-wallet register --server URL --name NAME --email EMAIL --phone PHONE` \
        (in another --data-dir if this one should stay the sandbox's)
        """

    /// The registered account (account.json), or nil for a sandbox wallet.
    static func account(_ files: WalletFiles) throws -> WalletAccount? { try WalletServer.account(files) }

    /// Opens the session: the account, the key unlocked with the PIN (asked only when the key is
    /// sealed), and the wallet's persistent cache (`<data dir>/cache`), which answers while the
    /// server cannot be reached.
    static func open(_ files: WalletFiles, pin: PINOptions) async throws -> WalletSession {
        guard try account(files) != nil else { throw CLIError(sandboxAdvice) }
        let key = try await WalletKeys.unlock(files, pin: pin.current)
        guard let session = try open(files, signingKey: key) else { throw CLIError(sandboxAdvice) }
        return session
    }

    /// The session of a registered wallet whose key is already unlocked; nil for a sandbox wallet.
    static func open(_ files: WalletFiles, signingKey key: P256.Signing.PrivateKey) throws -> WalletSession? {
        guard let account = try account(files) else { return nil }
        let url = try WalletServer.url(account.server)
        let cache = try Cache.persistentCache(directory: files.directory.file("cache"))
        return WalletSession(
            account: account, identity: IdentityClient(serverURL: url, signingKey: key, timeout: .seconds(10)),
            cache: cache, signingKey: key)
    }

    /// `open`, then with `--via-terminal` every request of the session goes through the nearest
    /// terminal advertising a session (the request proxy).
    static func open(_ files: WalletFiles, pin: PINOptions, relay: TerminalRelayOptions, verbose: Bool) async throws
        -> WalletSession
    {
        var session = try await open(files, pin: pin)
        guard relay.viaTerminal else { return session }
        session.terminalRelay = try await TerminalRelay.open(
            relay, identity: session.identity, key: session.signingKey, cache: session.cache, files: files,
            verbose: verbose)
        return session
    }

    /// Says that the answers came through a terminal, if they did (on standard error under
    /// JSON, so the JSON stays whole), and shuts the relay's radio down.
    func finish(json: Bool) {
        guard let terminalRelay else { return }
        if json {
            FileHandle.standardError.write(Data((terminalRelay.note + "\n").utf8))
        } else {
            print(terminalRelay.note)
        }
        terminalRelay.close()
    }

    /// Runs a client call; a failure becomes one line a person can act on.
    func call<T: Sendable>(_ body: () async throws(ServiceClientError) -> T) async throws -> T {
        do { return try await body() } catch {
            throw CLIError(describe(error))
        }
    }

    func describe(_ error: ServiceClientError) -> String {
        switch error {
        case .identityNotReady:
            return "this wallet has no key to sign with; run `horizon-wallet init` or `horizon-wallet restore`"
        case .identityInvalidated(let message):
            return
                "the server no longer accepts this wallet's key: \(message). Its cached answers were cleared"
        case .server(let error):
            guard let url = URL(string: account.server) else { return error.description }
            if error.isNetworkFailure {
                return WalletServer.describe(error, server: url)
                    + " (and nothing was cached to show instead; near a terminal taking a payment, --via-terminal asks through it)"
            }
            return WalletServer.describe(error, server: url)
        }
    }

    /// The note printed under an answer that came from the cache.
    static func note<T>(_ result: ServiceResult<T>) -> String? {
        guard case .cached(let storedAt) = result.freshness else { return nil }
        return
            "(the server cannot be reached: this is the last known answer, from \(ISO8601DateFormatter().string(from: storedAt)))"
    }
}

/// How a result's freshness reads in JSON.
struct FreshnessJSON: Encodable {
    let cached: Bool
    let storedAt: Int64?

    init<T>(_ result: ServiceResult<T>) {
        if case .cached(let date) = result.freshness {
            cached = true
            storedAt = Int64(date.timeIntervalSince1970)
        } else {
            cached = false
            storedAt = nil
        }
    }
}

/// Minor units in a currency as a person reads them ("12.50 EUR"); the code alone if this
/// program does not know the currency.
func moneyText(_ minorUnits: Int64, _ code: String) -> String {
    guard let currency = try? Currency(code: code), let money = try? Money(minorUnits: minorUnits, currency: currency)
    else { return "\(minorUnits) (minor units) \(code)" }
    return "\(money)"
}

/// "12.50" without the code, for JSON.
func amountText(_ minorUnits: Int64, _ code: String) -> String {
    guard let currency = try? Currency(code: code), let money = try? Money(minorUnits: minorUnits, currency: currency)
    else { return "\(minorUnits)" }
    return money.formattedAmount
}

func timeText(_ time: Int64) -> String {
    ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(time)))
}

/// `account`: the wallet user's data on the server; `--set-name` renames.
struct Account: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this wallet's account on its server, or change its name (--set-name).")

    @Option(help: "A new name for the account (1 to 200 bytes).") var setName: String?
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: TerminalRelayOptions

    func run() async throws {
        let session = try await WalletSession.open(global.walletFiles, pin: pin, relay: relay, verbose: global.verbose)
        defer { session.finish(json: json) }
        let client = AccountDataClient(identityClient: session.identity, cache: session.cache)
        let result: ServiceResult<WalletUserData>
        if let setName {
            let current = try await session.call { () async throws(ServiceClientError) in
                try await client.accountData()
            }
            var data = current.value
            data.name = setName
            let stored = try await session.call { () async throws(ServiceClientError) in
                try await client.setAccountData(data)
            }
            result = ServiceResult(value: stored, freshness: .fresh)
        } else {
            result = try await session.call { () async throws(ServiceClientError) in try await client.accountData() }
        }
        let data = result.value
        if json {
            return try Console().json(
                AccountJSON(
                    walletId: data.walletID, name: data.name, email: data.email, phone: data.phone,
                    createdAt: data.createdAt, server: session.account.server, freshness: FreshnessJSON(result)))
        }
        if setName != nil { print("Renamed: the account's name is now \(data.name)") }
        print("name        \(data.name)")
        print("e-mail      \(data.email ?? "-")")
        print("phone       \(data.phone ?? "-")")
        print("account     \(data.walletID) at \(session.account.server)")
        print("registered  \(timeText(data.createdAt))")
        if let note = WalletSession.note(result) { print(note) }
    }

    struct AccountJSON: Encodable {
        let walletId: String
        let name: String
        let email: String?
        let phone: String?
        let createdAt: Int64
        let server: String
        let freshness: FreshnessJSON
    }
}
