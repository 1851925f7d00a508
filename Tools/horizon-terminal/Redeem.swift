import ArgumentParser
import Crypto
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRadioCLISupport
import HorizonRoles
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores
import Logging

/// `redeem bonus|gold|coupon`: a loyalty redemption at the register.
struct Redeem: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Offer a loyalty redemption to a nearby wallet: bonus points, the gold benefit, or a coupon.",
        discussion: """
            horizon-terminal redeem bonus --points 100 --reward "Free coffee" [--value 3.20]
            horizon-terminal redeem gold --benefit "Free dessert" [--value 6.00]
            horizon-terminal redeem coupon [--value 5.00]        (the wallet names the coupon it holds)
            Exit code 0 only when the redemption completed; Ctrl-C cancels.
            """)

    @OptionGroup var terms: RedemptionTerms
    @Option(help: "Give up if no wallet redeems within this many seconds.") var waitForWallet = 300
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func validate() throws {
        guard waitForWallet > 0 else { throw ValidationError("--wait-for-wallet must be positive") }
    }

    func run() async throws {
        let logger = Logs.logger("horizon.terminal", verbose: global.verbose)
        let files = try global.lockedTerminalFiles()
        let settings = try files.loadSettings()
        // An activated terminal renews its credential first when half of it is used up.
        let (identity, _) = try await files.renewCredentialIfDue(
            identity: try files.loadIdentity(), now: UnixTime(Date().timeIntervalSince1970), logger: logger)
        let ledger = try await files.loadLedger(logger: logger)
        let (kind, offer) = (terms.kind, try terms.offer(in: ledger.currency))
        let device = try await radio.open(name: "terminal", defaultPosition: .origin, logger: logger)
        defer { device.shutdown() }
        let runtime = try await files.startTerminal(radio: device, identity: identity, ledger: ledger, logger: logger)
        let service = runtime.service
        guard
            let host = RedemptionHost.redemptionHost(
                transactionType: kind.transactionType, service: service, processor: runtime.processor,
                configuration: runtime.hostConfiguration(
                    ledger: ledger, decisionTimeoutSeconds: settings.userDecisionTimeoutSeconds))
        else { throw CLIError("\(kind) is not a redemption") }
        // Wallets with bad network may send their requests through this terminal.
        let requestProxy = runtime.startRequestProxy(hosts: [host.connector])
        defer { requestProxy?.stop() }
        let console = Console()
        let cashier = terms.registerUser.map(RegisterUser.init(name:))
        let outcome = await SessionRun(
            label: "\(kind) redemption", json: json, console: console, logger: logger, service: service,
            waitForWallet: waitForWallet
        ).run(states: host.states(), observeWallets: host.observeWallets) { () async throws(HostError) in
            try await host.collect(offer, registerUser: cashier)
        }
        let result: SettlementResult
        switch outcome.result {
        case .success(let settled): result = settled
        case .failure(let error):
            let message = outcome.message(for: error, noun: host.transactionType.description, verb: "redeemed")
            // A start the host refused opened no session: one error line, as for bad input.
            guard outcome.lastState != nil else { throw CLIError(message) }
            if !json { console.line() }
            throw CommandFailure(message, errorCode: JSONErrorCode.transactionFailed)
        }
        if json {
            try console.json(TransactionRow(result))
        } else {
            let item = result.item.sanitizedForDisplay  // the wallet named it
            let what = result.quantity > 0 ? "\(item) for \(result.quantity) points" : item
            console.line("Redeemed (\(kind)): \(what)  id \(result.paymentID)")
        }
    }
}

/// What a redemption asks for, as `redeem` and `serve`'s `redeem` request take it (one parser,
/// one validation for both).
struct RedemptionTerms: ParsableArguments {
    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case bonus, gold, coupon

        var transactionType: TransactionType {
            switch self {
            case .bonus: .bonusRedemption
            case .gold: .goldRedemption
            case .coupon: .couponRedemption
            }
        }
    }

    @Argument(help: "What to redeem: bonus, gold or coupon.") var kind: Kind
    @Option(help: "Points the reward costs (bonus).") var points: Int64?
    @Option(help: "The reward (bonus).") var reward: String?
    @Option(help: "The benefit (gold).") var benefit: String?
    @Option(help: "The value shown to the customer, e.g. 3.20 (nothing is charged).") var value = "0"
    @Option(name: .customLong("register"), help: "The cashier's name.") var registerUser: String?

    func validate() throws {
        switch kind {
        case .bonus:
            guard let points, points > 0 else { throw ValidationError("redeem bonus needs --points (1 or more)") }
            guard let reward, !reward.isEmpty, reward.utf8.count <= 64 else {
                throw ValidationError("redeem bonus needs --reward (1 to 64 bytes)")
            }
        case .gold:
            guard points == nil else { throw ValidationError("--points is for bonus redemptions") }
            guard let benefit, !benefit.isEmpty, benefit.utf8.count <= 64 else {
                throw ValidationError("redeem gold needs --benefit (1 to 64 bytes)")
            }
        case .coupon:
            guard points == nil else { throw ValidationError("--points is for bonus redemptions") }
        }
    }

    /// The offer these terms make, its value in the terminal's currency.
    func offer(in currency: Currency) throws -> RedemptionOffer {
        let worth = try AmountArgument.money(value, in: currency, option: "--value")
        return RedemptionOffer(item: reward ?? benefit ?? "coupon", points: points ?? 0, value: worth)
    }
}
