import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores

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
        let coupons = try ledger.require().coupons(for: try global.walletFiles.loadPublicKey())
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
        let membership = try ledger.require().goldMembership(for: try global.walletFiles.loadPublicKey())
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
            try ledger.require().account(for: try global.walletFiles.loadPublicKey())?.bonusPoints ?? 0
        if json { return try Console().json(["points": points]) }
        print("\(points) bonus points")
    }
}
