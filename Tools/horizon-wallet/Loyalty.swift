import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores

/// The terminal's in-process ledger a wallet's loyalty lives in (a single box: terminal and
/// wallet on one machine): `--ledger`, or the local terminal's. A wallet of an activated
/// terminal asks its server instead.
struct LedgerChoice: ParsableArguments {
    @Option(help: "A terminal's in-process ledger file (default: the local terminal's, if any).") var ledger: String?

    var path: String { ledger ?? DataDirectory(explicit: nil, role: "terminal").file(TerminalFiles.ledger).path }

    /// The ledger, or nil when there is none to read (and none was named). Opened as it is:
    /// reading changes nothing and enrols nobody.
    func open() async throws -> InProcessLedger? {
        guard FileManager.default.fileExists(atPath: path) else {
            if ledger != nil { throw CLIError("no ledger at \(path)") }
            return nil
        }
        do {
            return try await InProcessLedger.openExisting(path: path)
        } catch {
            throw CLIError("cannot read the ledger \(path): \(error)")
        }
    }

    func require() async throws -> InProcessLedger {
        guard let ledger = try await open() else {
            throw CLIError("no terminal ledger on this machine; pass --ledger <terminal data dir>/ledger.sqlite")
        }
        return ledger
    }
}

/// `coupons`, `memberships`, `points`: this wallet's loyalty in a terminal's in-process ledger.
struct Coupons: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List this wallet's coupons (from the terminal's in-process ledger).")
    @OptionGroup var ledger: LedgerChoice
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let coupons = try await ledger.require().coupons(for: try global.walletFiles.loadPublicKey())
        if json { return try Console().json(coupons.map(CouponRow.init)) }
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

struct Memberships: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this wallet's gold membership (from the terminal's in-process ledger).")
    @OptionGroup var ledger: LedgerChoice
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let membership = try await ledger.require().goldMembership(for: try global.walletFiles.loadPublicKey())
        if json { return try Console().json(membership.map { [$0] } ?? []) }
        guard let membership else { return print("no gold membership") }
        let until = ISO8601DateFormatter().string(
            from: Date(timeIntervalSince1970: TimeInterval(membership.validUntil)))
        print("\(membership.tier) until \(until), benefit once every \(membership.benefitPeriod / 86_400) days")
    }
}

struct Points: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this wallet's bonus points (from the terminal's in-process ledger).")
    @OptionGroup var ledger: LedgerChoice
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let points =
            try await ledger.require().account(for: try global.walletFiles.loadPublicKey())?.bonusPoints ?? 0
        if json { return try Console().json(["points": points]) }
        print("\(points) bonus points")
    }
}
