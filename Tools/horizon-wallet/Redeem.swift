import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores

/// `redeem`: redeem loyalty at the nearest redemption terminal.
struct Redeem: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Redeem loyalty at the nearest terminal offering it: bonus points, the gold benefit, or a coupon.",
        discussion: """
            Shows what the terminal asks (verified), asks y/N unless --yes, then the result. A coupon \
            terminal needs --coupon CODE (see `horizon-wallet coupons`). Ctrl-C before confirming declines.
            """)

    @Option(help: "The coupon to redeem, for coupon terminals.") var coupon: String?
    @OptionGroup var options: ConfirmOptions

    func validate() throws {
        if let coupon, coupon.isEmpty || coupon.utf8.count > 64 {
            throw ValidationError("--coupon must be 1 to 64 bytes")
        }
    }

    func run() throws {
        let wallet = try options.openWallet()
        defer { wallet.radio.shutdown() }
        let hub = SightingHub(radio: wallet.radio)
        let clients: [RedemptionClient] = [.bonusRedemption, .goldRedemption, .couponRedemption].compactMap {
            RedemptionClient.redemptionClient(
                transactionType: $0, radio: wallet.radio, identity: wallet.identity, trustAnchors: wallet.anchors,
                pendingStore: wallet.pendingStore, scanner: hub)
        }
        let flow = try wallet.flow(
            clients: clients,
            decider: ManualConnectionDeciderCollection(deciders: clients.map(\.manualConnectionDecider)))
        let coupon = self.coupon
        try flow.run(
            timeout: options.timeout,
            script: ConfirmationScript(
                describe: { offer in
                    switch offer.quantity {
                    case 0: "offers \(offer.item)"
                    default: "offers \(offer.item) for \(offer.quantity) bonus points"
                    }
                },
                question: { offer, type in
                    switch type {
                    case .bonusRedemption: return "Redeem \(offer.quantity) points for \(offer.item)?"
                    case .couponRedemption:
                        guard let coupon else {
                            throw CLIError(
                                "this terminal redeems coupons: name yours with --coupon CODE (see `horizon-wallet coupons`)"
                            )
                        }
                        return "Redeem coupon \(coupon)?"
                    default: return "Use your gold benefit: \(offer.item)?"
                    }
                },
                confirm: { client, offer in
                    guard let redemption = client as? RedemptionClient else { return }
                    redemption.setRedemptionConfirmedByUser(true, coupon: coupon, for: offer)
                },
                success: { receipt in
                    let what = receipt.quantity > 0 ? "\(receipt.item) for \(receipt.quantity) points" : receipt.item
                    return [
                        "Redeemed at \(receipt.merchantName): \(what)",
                        "  id \(receipt.paymentID)  reference \(receipt.reference)  bonus points now \(receipt.bonusPointsBalance)",
                    ]
                }))
    }
}

/// The sandbox ledger a wallet's loyalty lives in: `--ledger`, or the local terminal's.
struct LedgerChoice: ParsableArguments {
    @Option(help: "A sandbox ledger file (default: the local terminal's, if any).") var ledger: String?

    var path: String { ledger ?? DataDirectory(explicit: nil, role: "terminal").file(TerminalFiles.ledger).path }

    /// The ledger, or nil when there is none to read (and none was named).
    func open() throws -> SandboxLedger? {
        guard FileManager.default.fileExists(atPath: path) else {
            if ledger != nil { throw CLIError("no ledger at \(path)") }
            return nil
        }
        do {
            // The currency is read from the file itself: a ledger keeps one for life.
            let currency =
                try SQLiteDatabase(path: path).query("SELECT value FROM meta WHERE key = 'currency'")
                .first?["value"].text.flatMap { try? Currency(code: $0) } ?? .eur
            return try SandboxLedger(
                path: path, configuration: LedgerConfiguration(currency: currency, enrollment: .refuseUnknown))
        } catch {
            throw CLIError("cannot read the ledger \(path): \(error)")
        }
    }

    func require() throws -> SandboxLedger {
        guard let ledger = try open() else {
            throw CLIError("no sandbox ledger on this machine; pass --ledger <terminal data dir>/ledger.sqlite")
        }
        return ledger
    }
}

/// `coupons`, `memberships`, `points`: this wallet's loyalty in the sandbox ledger.
struct Coupons: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List this wallet's coupons (from the sandbox ledger).")
    @OptionGroup var ledger: LedgerChoice
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let coupons = try ledger.require().coupons(for: try global.walletFiles.loadIdentity().publicKey)
        if json { return try Console().json(coupons) }
        if coupons.isEmpty { print("no coupons") }
        for coupon in coupons {
            let expiry = ISO8601DateFormatter().string(
                from: Date(timeIntervalSince1970: TimeInterval(coupon.expiresAt)))
            print(
                "\(coupon.code)  \(coupon.description)  \(coupon.redeemedAt == nil ? "valid until \(expiry)" : "redeemed")"
            )
        }
    }
}

struct Memberships: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this wallet's gold membership (from the sandbox ledger).")
    @OptionGroup var ledger: LedgerChoice
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let membership = try ledger.require().goldMembership(for: try global.walletFiles.loadIdentity().publicKey)
        if json { return try Console().json(membership.map { [$0] } ?? []) }
        guard let membership else { return print("no gold membership") }
        let until = ISO8601DateFormatter().string(
            from: Date(timeIntervalSince1970: TimeInterval(membership.validUntil)))
        print("\(membership.tier) until \(until), benefit once every \(membership.benefitPeriod / 86_400) days")
    }
}

struct Points: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this wallet's bonus points (from the sandbox ledger).")
    @OptionGroup var ledger: LedgerChoice
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let points =
            try ledger.require().account(for: try global.walletFiles.loadIdentity().publicKey)?.bonusPoints ?? 0
        if json { return try Console().json(["points": points]) }
        print("\(points) bonus points")
    }
}
