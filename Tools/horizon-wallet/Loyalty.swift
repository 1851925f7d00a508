import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonServiceClients

// `points`, `coupons`, `memberships`: this wallet's loyalty at every merchant, asked of its
// server with its own key (BonusProgramClient, CouponProgramClient, GoldProgramMembershipsClient).

struct Points: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this wallet's bonus programs and points at every merchant; join or leave one.",
        discussion: """
            Leaving a program forfeits the points held there (they are not paid out and do not come back on \
            joining again); while left, payments there earn no points.
            """)

    @Option(help: "Join the bonus program of this merchant id.") var join: String?
    @Option(help: "Leave the bonus program of this merchant id (forfeits its points).") var leave: String?
    @Flag(help: "List every program the wallet can join, not only the ones it takes part in.") var all = false
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: TerminalRelayOptions

    func validate() throws {
        if join != nil, leave != nil { throw ValidationError("pass --join or --leave, not both") }
    }

    func run() async throws {
        let session = try await WalletSession.open(global.walletFiles, pin: pin, relay: relay, verbose: global.verbose)
        defer { session.finish(json: json) }
        let client = BonusProgramClient(identityClient: session.identity, cache: session.cache)
        if let merchant = join ?? leave {
            let state: BonusProgramMembershipState = join != nil ? .joined : .left
            let program = try await session.call { () async throws(ServiceClientError) in
                try await client.updateBonusProgramMembership(merchantID: merchant, state: state)
            }
            if json { return try Console().json(ProgramJSON(program)) }
            switch state {
            case .joined: print("Joined the bonus program of \(program.merchantName): \(program.points) points")
            case .left: print("Left the bonus program of \(program.merchantName); its points were forfeited")
            }
            return
        }
        let result = try await session.call { () async throws(ServiceClientError) in
            all ? try await client.allBonusPrograms() : try await client.participatingBonusPrograms()
        }
        if json {
            return try Console().json(
                ProgramsJSON(programs: result.value.map(ProgramJSON.init), freshness: FreshnessJSON(result)))
        }
        if result.value.isEmpty {
            print(
                all ? "no bonus programs" : "no bonus points yet (`horizon-wallet points --all` lists programs to join)"
            )
        }
        for program in result.value {
            let state = program.state == .notJoined ? "not joined" : program.state.rawValue
            print("\(program.points) points at \(program.merchantName)  (\(state); merchant \(program.merchantId))")
        }
        if let note = WalletSession.note(result) { print(note) }
    }

    struct ProgramJSON: Encodable {
        let merchantId: String
        let merchantName: String
        let state: String
        let points: Int64
        let pointsPerMajorUnit: Int64

        init(_ program: BonusProgram) {
            merchantId = program.merchantId
            merchantName = program.merchantName
            state = program.state.rawValue
            points = program.points
            pointsPerMajorUnit = program.pointsPerMajorUnit
        }
    }

    struct ProgramsJSON: Encodable {
        let programs: [ProgramJSON]
        let freshness: FreshnessJSON
    }
}

struct Coupons: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List this wallet's coupons, open and redeemed.")

    @Flag(help: "Only the coupons that can still be redeemed.") var open = false
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: TerminalRelayOptions

    func run() async throws {
        let session = try await WalletSession.open(global.walletFiles, pin: pin, relay: relay, verbose: global.verbose)
        defer { session.finish(json: json) }
        let client = CouponProgramClient(identityClient: session.identity, cache: session.cache)
        let result = try await session.call { () async throws(ServiceClientError) in
            open ? try await client.openCoupons() : try await client.coupons()
        }
        if json {
            return try Console().json(
                CouponsJSON(
                    coupons: result.value.map {
                        CouponJSON(
                            merchantId: $0.merchantId, merchantName: $0.merchantName, code: $0.code,
                            description: $0.description, value: JSONMoney(minorUnits: $0.value, currency: $0.currency),
                            expiresAt: $0.expiresAt, redeemedAt: $0.redeemedAt,
                            status: $0.status.rawValue)
                    }, freshness: FreshnessJSON(result)))
        }
        if result.value.isEmpty { print(open ? "no open coupons" : "no coupons") }
        for coupon in result.value {
            let state =
                switch coupon.status {
                case .open: "valid until \(timeText(coupon.expiresAt))"
                case .redeemed: "redeemed \(coupon.redeemedAt.map(timeText) ?? "")"
                case .expired: "expired \(timeText(coupon.expiresAt))"
                }
            print(
                "\(coupon.code)  \(coupon.description)  \(moneyText(coupon.value, coupon.currency)) at \(coupon.merchantName)  \(state)"
            )
        }
        if let note = WalletSession.note(result) { print(note) }
    }

    struct CouponJSON: Encodable {
        let merchantId: String
        let merchantName: String
        let code: String
        let description: String
        let value: JSONMoney
        let expiresAt: Int64
        let redeemedAt: Int64?
        let status: String
    }

    struct CouponsJSON: Encodable {
        let coupons: [CouponJSON]
        let freshness: FreshnessJSON
    }
}

struct Memberships: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show this wallet's gold memberships.")

    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: TerminalRelayOptions

    func run() async throws {
        let session = try await WalletSession.open(global.walletFiles, pin: pin, relay: relay, verbose: global.verbose)
        defer { session.finish(json: json) }
        let client = GoldProgramMembershipsClient(identityClient: session.identity, cache: session.cache)
        let result = try await session.call { () async throws(ServiceClientError) in try await client.memberships() }
        if json {
            return try Console().json(
                MembershipsJSON(
                    memberships: result.value.map {
                        MembershipJSON(
                            merchantId: $0.merchantId, merchantName: $0.merchantName, tier: $0.tier,
                            validFrom: $0.validFrom, validUntil: $0.validUntil, benefitPeriod: $0.benefitPeriod,
                            benefitAvailable: $0.benefitAvailable)
                    }, freshness: FreshnessJSON(result)))
        }
        if result.value.isEmpty { print("no gold memberships") }
        for membership in result.value {
            print(
                "\(membership.tier) at \(membership.merchantName) until \(timeText(membership.validUntil)), benefit once every \(membership.benefitPeriod / 86_400) days (\(membership.benefitAvailable ? "available now" : "used this period"))"
            )
        }
        if let note = WalletSession.note(result) { print(note) }
    }

    struct MembershipJSON: Encodable {
        let merchantId: String
        let merchantName: String
        let tier: String
        let validFrom: Int64
        let validUntil: Int64
        let benefitPeriod: Int64
        let benefitAvailable: Bool
    }

    struct MembershipsJSON: Encodable {
        let memberships: [MembershipJSON]
        let freshness: FreshnessJSON
    }
}
