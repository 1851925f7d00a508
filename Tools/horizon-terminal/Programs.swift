import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRadioCLISupport
import HorizonSecureChannel
import HorizonStores

/// Which wallet a `programs` command is about: its public key, or a wallet data directory on
/// this machine (the sandbox).
struct WalletChoice: ParsableArguments {
    @Option(help: "The wallet's public key, as hex (horizon-wallet init --json prints it).") var wallet: String?
    @Option(help: "A wallet data directory on this machine to read the key from.") var walletDir: String?

    func validate() throws {
        guard wallet == nil || walletDir == nil else {
            throw ValidationError("name the wallet with --wallet KEYHEX or --wallet-dir DIR, not both")
        }
    }

    var isGiven: Bool { wallet != nil || walletDir != nil }

    /// For the commands that change one wallet's standing.
    func require() throws {
        guard isGiven else { throw ValidationError("name the wallet with --wallet KEYHEX or --wallet-dir DIR") }
    }

    func key() throws -> PublicKeyBytes {
        guard isGiven else { throw ValidationError("name the wallet with --wallet KEYHEX or --wallet-dir DIR") }
        if let walletDir {
            return try WalletFiles(directory: DataDirectory(explicit: walletDir, role: "wallet")).loadPublicKey()
        }
        guard let hex = wallet, let bytes = [UInt8](hexString: hex), let key = try? PublicKeyBytes(bytes: bytes) else {
            throw ValidationError("--wallet must be a 65-byte uncompressed P-256 public key in hex (130 digits, 04…)")
        }
        return key
    }
}

/// `programs`: the merchant's loyalty programs; in the sandbox, also set them up.
struct Programs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the merchant's loyalty programs; set them up in the sandbox's in-process ledger.",
        discussion: """
            Without a wallet, `programs` shows which programs the merchant runs (bonus points, gold memberships, \
            coupons) and the bonus rule: an activated terminal asks its server, the sandbox its ledger. With \
            --wallet or --wallet-dir, and with points, gold and coupon, it shows or changes one wallet's standing \
            in the single-box sandbox; at a server these are the merchant's (the dashboard), not a terminal's.
            """,
        subcommands: [Show.self, Points.self, Gold.self, Coupon.self], defaultSubcommand: Show.self)

    /// Refuses a sandbox-only command on an activated terminal, whose programs live at its server.
    static func requireSandbox(_ global: GlobalOptions, _ what: String) throws {
        if let server = try global.terminalFiles.loadSettings().server {
            throw CLIError(
                "this terminal settles at \(server): \(what) is set up there by the merchant (the dashboard), not in a terminal's ledger"
            )
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Show the merchant's programs, or (sandbox) a wallet's points, membership and coupons.")
        @OptionGroup var walletChoice: WalletChoice
        @Flag(help: "Print JSON.") var json = false
        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: AdminSignInOptions

        func run() async throws {
            guard walletChoice.isGiven else {
                try await showMerchantPrograms()
                return
            }
            try Programs.requireSandbox(global, "a wallet's standing")
            let ledger = try await global.terminalFiles.loadLedger()
            let key = try walletChoice.key()
            let report = LoyaltyReport(
                points: try await ledger.account(for: key)?.bonusPoints ?? 0,
                gold: try await ledger.goldMembership(for: key),
                coupons: try await ledger.coupons(for: key).map(CouponRow.init))
            if json {
                try Console().json(report)
            } else {
                report.print()
            }
        }

        private func showMerchantPrograms() async throws {
            let summary: ProgramSummary
            if let merchant = try await admin.merchantService(global) {
                summary = ProgramSummary(
                    hasBonusProgram: await merchant.hasBonusProgram, hasGoldProgram: await merchant.hasGoldProgram,
                    hasCouponProgram: await merchant.hasCouponProgram,
                    bonusPointsPerMajorUnit: await merchant.bonusProgramDetails?.pointsPerMajorUnit ?? 0,
                    currency: await merchant.bonusProgramDetails?.currency ?? "")
            } else {
                let ledger = try await global.terminalFiles.loadLedger()
                let programs = try await ledger.merchantPrograms()
                summary = ProgramSummary(
                    hasBonusProgram: programs.hasBonusProgram, hasGoldProgram: programs.hasGoldProgram,
                    hasCouponProgram: programs.hasCouponProgram,
                    bonusPointsPerMajorUnit: ledger.merchant.bonusPointsPerMajorUnit, currency: ledger.currency.code)
            }
            if json {
                try Console().json(summary)
            } else {
                summary.print()
            }
        }
    }

    struct Points: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Give (or take, negative) bonus points.")
        @Argument(help: "Points to add (negative to remove).") var points: Int64
        @OptionGroup var walletChoice: WalletChoice
        @OptionGroup var global: GlobalOptions

        func validate() throws { try walletChoice.require() }

        func run() async throws {
            try Programs.requireSandbox(global, "bonus points")
            let ledger = try await global.lockedTerminalFiles().loadLedger()
            let key = try walletChoice.key()
            try await ledger.addBonusPoints(points, for: key, at: UnixTime(Date().timeIntervalSince1970))
            print("bonus points now \(try await ledger.account(for: key)?.bonusPoints ?? 0)")
        }
    }

    struct Gold: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Grant a gold membership.")
        @Option(help: "The tier's name.") var tier = "Gold"
        @Option(help: "Days the membership lasts from now.") var days = 365
        @Option(help: "Days in one benefit period (the benefit is usable once per period).") var periodDays = 30
        @OptionGroup var walletChoice: WalletChoice
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            try walletChoice.require()
            guard days > 0, periodDays > 0 else { throw ValidationError("--days and --period-days must be positive") }
        }

        func run() async throws {
            try Programs.requireSandbox(global, "a gold membership")
            let ledger = try await global.lockedTerminalFiles().loadLedger()
            let now = UnixTime(Date().timeIntervalSince1970)
            try await ledger.grantGoldMembership(
                to: try walletChoice.key(), tier: tier, validFrom: now, validUntil: now + Int64(days) * 86_400,
                benefitPeriod: Int64(periodDays) * 86_400)
            print("\(tier) membership granted for \(days) days, one benefit every \(periodDays) days")
        }
    }

    struct Coupon: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Issue a coupon to a wallet.")
        @Argument(help: "The coupon code (unique).") var code: String
        @Option(help: "What the coupon gives.") var description = ""
        @Option(help: "Its value, e.g. 5.00.") var value = "0"
        @Option(help: "Days until it expires.") var days = 30
        @OptionGroup var walletChoice: WalletChoice
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            try walletChoice.require()
            guard !code.isEmpty, code.utf8.count <= 64 else { throw ValidationError("a code must be 1 to 64 bytes") }
            guard days > 0 else { throw ValidationError("--days must be positive") }
        }

        func run() async throws {
            try Programs.requireSandbox(global, "a coupon")
            let ledger = try await global.lockedTerminalFiles().loadLedger()
            let worth = try AmountArgument.money(value, in: ledger.currency, option: "--value")
            let now = UnixTime(Date().timeIntervalSince1970)
            let key = try walletChoice.key()
            do {
                try await ledger.issueCoupon(
                    code: code, to: key, description: description, value: worth, expiresAt: now + Int64(days) * 86_400,
                    at: now)
            } catch .alreadyExists {
                throw CLIError("a coupon with code \(code) already exists")
            }
            print("coupon \(code) issued, valid \(days) days")
        }
    }
}

/// A wallet's loyalty standing in the in-process ledger.
struct LoyaltyReport: Encodable {
    let points: Int64
    let gold: Membership?
    let coupons: [CouponRow]

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

/// Which programs the merchant runs, and its bonus rule.
struct ProgramSummary: Encodable {
    let hasBonusProgram: Bool
    let hasGoldProgram: Bool
    let hasCouponProgram: Bool
    /// Points a payment earns per whole currency unit of its amount (tips earn none).
    let bonusPointsPerMajorUnit: Int64
    let currency: String

    func print() {
        func yesNo(_ flag: Bool) -> String { flag ? "yes" : "no" }
        Swift.print("bonus program   \(yesNo(hasBonusProgram))  (\(bonusPointsPerMajorUnit) points per 1 \(currency))")
        Swift.print("gold program    \(yesNo(hasGoldProgram))")
        Swift.print("coupon program  \(yesNo(hasCouponProgram))")
    }
}
