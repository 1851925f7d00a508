import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonServiceClients

struct Balance: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this wallet's balance per currency and its bonus points, from its server.",
        discussion: """
            Asked of the server the wallet is registered with, signed with the wallet's key. While the server \
            cannot be reached, the last known answer is shown and marked as such. The offline allowance is what \
            the current daily token (`horizon-wallet token`) still allows at a terminal without network. With \
            --via-terminal the request goes sealed through the nearest terminal taking a payment, for a wallet \
            without a route to its server.
            """)

    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: TerminalRelayOptions

    func run() async throws {
        let session = try await WalletSession.open(global.walletFiles, pin: pin, relay: relay, verbose: global.verbose)
        defer { session.finish(json: json) }
        // Read from the kept token, no server call (it is what the wallet can spend
        // offline right now).
        let tokens = DailyTokenClient(
            identityClient: session.identity, cache: session.cache,
            trustAnchors: try global.walletFiles.loadTrustAnchors())
        let offline = tokens.currentToken
        let account = AccountDataClient(identityClient: session.identity, cache: session.cache)
        let programs = BonusProgramClient(identityClient: session.identity, cache: session.cache)
        let balances = try await session.call { () async throws(ServiceClientError) in try await account.balances() }
        let points = try await session.call { () async throws(ServiceClientError) in
            try await programs.participatingBonusPrograms()
        }
        if json {
            return try Console().json(
                BalanceReport(
                    balances: balances.value.map { JSONMoney(minorUnits: $0.amount, currency: $0.currency) },
                    bonusPoints: points.value.map {
                        .init(merchantId: $0.merchantId, merchantName: $0.merchantName, points: $0.points)
                    },
                    freshness: FreshnessJSON(balances), viaTerminal: session.terminalRelay != nil,
                    offlineAllowance: offline.map { JSONMoney($0.remainingAllowance) }))
        }
        if balances.value.isEmpty { print("balance       none yet") }
        for balance in balances.value { print("balance       \(moneyText(balance.amount, balance.currency))") }
        if points.value.isEmpty { print("bonus points  none yet") }
        for program in points.value { print("bonus points  \(program.points) at \(program.merchantName)") }
        print("offline       \(offlineAllowanceText(offline))")
        if let note = WalletSession.note(balances) ?? WalletSession.note(points) { print(note) }
    }
}

struct BalanceReport: Encodable {
    struct Points: Encodable {
        let merchantId: String
        let merchantName: String
        let points: Int64
    }
    let balances: [JSONMoney]
    let bonusPoints: [Points]
    let freshness: FreshnessJSON
    /// The answer came through a terminal (the request proxy).
    let viaTerminal: Bool
    /// What the current daily token still allows offline; nil without a valid token.
    let offlineAllowance: JSONMoney?
}
