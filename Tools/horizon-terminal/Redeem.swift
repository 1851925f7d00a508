import ArgumentParser
import Crypto
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRoles
import HorizonSecureChannel
import HorizonStores

/// `redeem bonus|gold|coupon`: a loyalty redemption at the register.
struct Redeem: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Offer a loyalty redemption to a nearby wallet: bonus points, the gold benefit, or a coupon.",
        discussion: """
            horizon-terminal redeem bonus --points 100 --reward "Free coffee" [--value 3.20]
            horizon-terminal redeem gold --benefit "Free dessert" [--value 6.00]
            horizon-terminal redeem coupon [--value 5.00]        (the wallet names the coupon it holds)
            Exit code 0 only when the redemption completed; Ctrl-C cancels.
            """)

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
    @Option(help: "Give up if no wallet redeems within this many seconds.") var waitForWallet = 300
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

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
        guard waitForWallet > 0 else { throw ValidationError("--wait-for-wallet must be positive") }
    }

    func run() throws {
        let logger = Logs.logger("horizon.terminal", verbose: global.verbose)
        let files = global.terminalFiles
        let settings = try files.loadSettings()
        let identity = try files.loadIdentity()
        let ledger = try files.loadLedger()
        let worth = try AmountArgument.money(value, in: ledger.configuration.currency, option: "--value")
        let item = reward ?? benefit ?? "coupon"
        let device = try radio.open(name: "terminal", defaultPosition: .origin, logger: logger)
        defer { device.shutdown() }
        let runtime = try files.startTerminal(radio: device, identity: identity, ledger: ledger, logger: logger)
        let service = runtime.service
        guard
            let host = RedemptionHost.redemptionHost(
                transactionType: kind.transactionType, service: service, processor: runtime.processor,
                configuration: PaymentHostConfiguration(
                    userDecisionTimeout: .seconds(settings.userDecisionTimeoutSeconds),
                    currency: ledger.configuration.currency, merchantPrograms: try ledger.merchantPrograms()))
        else { throw CLIError("\(kind) is not a redemption") }
        let console = Console()
        let offer = RedemptionOffer(item: item, points: points ?? 0, value: worth)
        try SessionRun(label: "\(kind) redemption", json: json, console: console, logger: logger, service: service)
            .run(
                observe: host.observeState, observeWallets: host.observeWallets, cancel: host.cancel,
                waitForWallet: waitForWallet
            ) {
                guard host.start(offer, registerUser: registerUser.map(RegisterUser.init(name:))) else {
                    throw CLIError(host.humanizedError ?? "the redemption could not start")
                }
            }
        guard host.state == .completed, let result = host.finalRedemption else {
            if !json { console.line() }
            throw CommandFailure(host.humanizedError ?? "the redemption did not complete")
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

/// Which wallet a `programs` command is about: its public key, or a wallet data directory on
/// this machine (the sandbox).
struct WalletChoice: ParsableArguments {
    @Option(help: "The wallet's public key, as hex (horizon-wallet init --json prints it).") var wallet: String?
    @Option(help: "A wallet data directory on this machine to read the key from.") var walletDir: String?

    func validate() throws {
        guard (wallet == nil) != (walletDir == nil) else {
            throw ValidationError("name the wallet with --wallet KEYHEX or --wallet-dir DIR")
        }
    }

    func key() throws -> PublicKeyBytes {
        if let walletDir {
            return try WalletFiles(directory: DataDirectory(explicit: walletDir, role: "wallet")).loadIdentity()
                .publicKey
        }
        guard let hex = wallet, let bytes = [UInt8](hexString: hex), let key = try? PublicKeyBytes(bytes: bytes) else {
            throw ValidationError("--wallet must be a 65-byte uncompressed P-256 public key in hex (130 digits, 04…)")
        }
        return key
    }
}

/// `programs`: set up the loyalty programs in the sandbox ledger.
struct Programs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set up loyalty programs in the sandbox ledger: bonus points, gold memberships, coupons.",
        subcommands: [Show.self, Points.self, Gold.self, Coupon.self], defaultSubcommand: Show.self)

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "Show a wallet's points, membership and coupons.")
        @OptionGroup var walletChoice: WalletChoice
        @Flag(help: "Print JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let ledger = try global.terminalFiles.loadLedger()
            let key = try walletChoice.key()
            let report = LoyaltyReport(
                points: try ledger.account(for: key)?.bonusPoints ?? 0, gold: try ledger.goldMembership(for: key),
                coupons: try ledger.coupons(for: key))
            if json {
                try Console().json(report)
            } else {
                report.print()
            }
        }
    }

    struct Points: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Give (or take, negative) bonus points.")
        @Argument(help: "Points to add (negative to remove).") var points: Int64
        @OptionGroup var walletChoice: WalletChoice
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let ledger = try global.terminalFiles.loadLedger()
            let key = try walletChoice.key()
            try ledger.addBonusPoints(points, for: key, at: UnixTime(Date().timeIntervalSince1970))
            print("bonus points now \(try ledger.account(for: key)?.bonusPoints ?? 0)")
        }
    }

    struct Gold: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Grant a gold membership.")
        @Option(help: "The tier's name.") var tier = "Gold"
        @Option(help: "Days the membership lasts from now.") var days = 365
        @Option(help: "Days in one benefit period (the benefit is usable once per period).") var periodDays = 30
        @OptionGroup var walletChoice: WalletChoice
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            guard days > 0, periodDays > 0 else { throw ValidationError("--days and --period-days must be positive") }
        }

        func run() throws {
            let ledger = try global.terminalFiles.loadLedger()
            let now = UnixTime(Date().timeIntervalSince1970)
            try ledger.grantGoldMembership(
                to: try walletChoice.key(), tier: tier, validFrom: now, validUntil: now + Int64(days) * 86_400,
                benefitPeriod: Int64(periodDays) * 86_400)
            print("\(tier) membership granted for \(days) days, one benefit every \(periodDays) days")
        }
    }

    struct Coupon: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Issue a coupon to a wallet.")
        @Argument(help: "The coupon code (unique).") var code: String
        @Option(help: "What the coupon gives.") var description = ""
        @Option(help: "Its value, e.g. 5.00.") var value = "0"
        @Option(help: "Days until it expires.") var days = 30
        @OptionGroup var walletChoice: WalletChoice
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            guard !code.isEmpty, code.utf8.count <= 64 else { throw ValidationError("a code must be 1 to 64 bytes") }
            guard days > 0 else { throw ValidationError("--days must be positive") }
        }

        func run() throws {
            let ledger = try global.terminalFiles.loadLedger()
            let worth = try AmountArgument.money(value, in: ledger.configuration.currency, option: "--value")
            let now = UnixTime(Date().timeIntervalSince1970)
            do {
                try ledger.issueCoupon(
                    code: code, to: try walletChoice.key(), description: description, value: worth,
                    expiresAt: now + Int64(days) * 86_400, at: now)
            } catch let error as DatabaseError where error.message.contains("UNIQUE") {
                throw CLIError("a coupon with code \(code) already exists")
            }
            print("coupon \(code) issued, valid \(days) days")
        }
    }
}

/// A wallet's loyalty standing in the sandbox ledger.
struct LoyaltyReport: Encodable {
    let points: Int64
    let gold: GoldMembership?
    let coupons: [HorizonStores.Coupon]

    func print() {
        Swift.print("bonus points  \(points)")
        if let gold {
            let until = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(gold.validUntil)))
            Swift.print("gold          \(gold.tier) until \(until), benefit every \(gold.benefitPeriod / 86_400) days")
        } else {
            Swift.print("gold          none")
        }
        if coupons.isEmpty { Swift.print("coupons       none") }
        for coupon in coupons {
            let state = coupon.redeemedAt != nil ? "redeemed" : "valid"
            Swift.print("coupon        \(coupon.code)  \(coupon.description)  \(state)")
        }
    }
}
