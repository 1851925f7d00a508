import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonRadioCLISupport
import HorizonSecureChannel
import HorizonServiceClients

/// `token`: the wallet's daily token for offline payments, through the
/// `DailyTokenClient`: fetched from the server, verified against the anchor the wallet pinned
/// at registration, kept in the wallet's cache and shown from there while the server is down.
struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this wallet's daily token for offline payments (id, allowance, validity).",
        discussion: """
            The server signs one token per wallet and day: what the wallet may spend at a terminal that cannot \
            reach the server (its balance, at most the server's offline limit, 50.00 by default), valid for at \
            most 24 h. Asking again gives the same token; --refresh asks for a new one, which the server signs \
            only if the balance or its revocation data changed, or the token has less than a quarter of its \
            validity left. The token is checked against the issuer this wallet pinned before it is kept. While \
            the server cannot be reached, the kept token is shown and marked as cached. Fetched online, it also \
            keeps the server's gateway key, which --via-terminal (on token, balance, history and the other \
            account commands) seals requests to, so that a wallet without network can ask through a terminal, \
            and the server's list of revoked terminals (checked against the token's signed revocation data), \
            which `pay` and `redeem` refuse from then on.
            """)

    @Flag(help: "Ask the server for a new token if the balance changed or this one is ending.") var refresh = false
    @Option(help: "The token's currency (needed when the wallet holds none or several), e.g. EUR.")
    var currency: String?
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: TerminalRelayOptions

    func validate() throws {
        if let currency, (try? Currency(code: currency)) == nil {
            throw ValidationError("--currency must be a supported ISO 4217 code such as EUR, not \(currency)")
        }
    }

    func run() async throws {
        let files = global.walletFiles
        let session = try await WalletSession.open(files, pin: pin, relay: relay, verbose: global.verbose)
        defer { session.finish(json: json) }
        let anchors = try files.loadTrustAnchors()
        let client = DailyTokenClient(
            identityClient: session.identity, cache: session.cache, trustAnchors: anchors,
            currency: currency)
        let token: StoredDailyToken
        let state: TokenState
        do {
            let fetched = try await client.fetchDailyToken(refresh: refresh)
            (token, state) = (fetched.token, fetched.issuedNow ? .new : .fresh)
            // The gateway key too, verified against the anchor, so that this wallet can
            // later send requests through a terminal (`--via-terminal`) without a route of its own.
            if session.terminalRelay == nil {
                let keys = GatewayKeyConfigClient(
                    identityClient: session.identity, cache: session.cache, trustAnchors: anchors)
                do { try await keys.fetchKeyConfiguration() } catch {
                    FileHandle.standardError.write(
                        Data(
                            "warning: the server's gateway key was not kept (\(error)); --via-terminal needs it\n".utf8)
                    )
                }
            }
            // The terminals the server revoked, checked against the token's signed revocation
            // state; `pay` and `redeem` refuse them from now on.
            do {
                try await RevocationListClient(identityClient: session.identity, cache: session.cache).fetch(
                    checkingWith: client)
            } catch {
                FileHandle.standardError.write(Data("warning: \(error)\n".utf8))
            }
        } catch {
            if case .service(.server(let serverError)) = error, serverError.isNetworkFailure,
                let kept = client.currentToken
            {
                (token, state) = (kept, .cached)
            } else if case .service(let serviceError) = error {
                throw CLIError(session.describe(serviceError))
            } else {
                throw CLIError(
                    "\(error.description); the token was not kept. Check the server this wallet registered with")
            }
        }
        let daily = token.token
        if json {
            return try Console().json(
                TokenReport(
                    tokenId: daily.tokenIDHex, allowance: JSONMoney(daily.allowance),
                    remaining: JSONMoney(token.remainingAllowance), issuedAt: daily.issuedAt,
                    expiresAt: daily.expiresAt, state: state.rawValue))
        }
        let left = max(0, daily.expiresAt - Int64(Date().timeIntervalSince1970))
        print("token       \(daily.tokenIDHex)")
        print("allowance   \(daily.allowance) (remaining \(token.remainingAllowance))")
        print(
            "valid       \(timeText(daily.issuedAt)) to \(timeText(daily.expiresAt)) (\(left / 3600) h \(left % 3600 / 60) min left)"
        )
        print("state       \(state.description)")
    }
}

enum TokenState: String {
    case new, fresh, cached

    var description: String {
        switch self {
        case .new: "new (signed by the server just now)"
        case .fresh: "fresh (the server's current token, unchanged)"
        case .cached: "cached (the server cannot be reached; this is the token kept from before)"
        }
    }
}

struct TokenReport: Encodable {
    let tokenId: String
    let allowance: JSONMoney
    let remaining: JSONMoney
    let issuedAt: Int64
    let expiresAt: Int64
    /// new, fresh or cached.
    let state: String
}
