import Crypto
import HorizonCore
import HorizonProtocol
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores

// A terminal that cannot reach its server accepts a payment against the
// wallet's daily token, within the merchant's offline limits, journals it, and forwards it to
// the server exactly once when the server is back.

/// The merchant's offline limits: how much risk one terminal takes on while it cannot reach the
/// server. Card terminals' floor limits are the model; the defaults are 50.00 per payment,
/// 200.00 stored, 20 payments stored, the oldest stored at most 24 h old.
public struct OfflineLimits: Sendable, Equatable {
    /// The most one payment (amount plus tip) may be, in the terminal's currency.
    public var perPayment: Money
    /// The most all payments not yet forwarded may add up to, this one included.
    public var totalStored: Money
    /// How many payments may wait to be forwarded, this one included.
    public var maximumStoredCount: Int
    /// How old (seconds) the oldest payment waiting to be forwarded may be: a terminal that has
    /// not reached its server for longer takes nothing more offline.
    public var maximumAge: Int64

    public init(perPayment: Money, totalStored: Money, maximumStoredCount: Int = 20, maximumAge: Int64 = 86_400) {
        self.perPayment = perPayment
        self.totalStored = totalStored
        self.maximumStoredCount = maximumStoredCount
        self.maximumAge = maximumAge
    }

    /// The defaults in `currency`: 50 and 200 of its major unit, 20 payments, 24 h.
    public static func defaults(for currency: Currency) -> OfflineLimits {
        let unit = currency.minorUnitsPerMajorUnit
        // Exponents are 0 to 3, so these cannot leave Money's range.
        let perPayment = (try? Money(minorUnits: 50 * unit, currency: currency)) ?? .zero(currency)
        let total = (try? Money(minorUnits: 200 * unit, currency: currency)) ?? .zero(currency)
        return OfflineLimits(perPayment: perPayment, totalStored: total)
    }
}

/// How a payment host accepts payments offline. Without it (the default) a payment whose server
/// is unreachable stays pending.
public struct OfflineAcceptanceConfiguration: Sendable {
    public var limits: OfflineLimits
    /// The anchors whose daily tokens this terminal honours: the server's issuer key, the one
    /// that vouches for this terminal.
    public var trustAnchors: [TrustAnchor]
    /// Where accepted offline payments are kept (the terminal's journal).
    public var store: any OfflinePaymentStore
    /// How long the terminal waits for the wallet's token once it asked for it.
    public var tokenWait: Duration

    public init(
        limits: OfflineLimits, trustAnchors: [TrustAnchor], store: any OfflinePaymentStore,
        tokenWait: Duration = .seconds(5)
    ) {
        self.limits = limits
        self.trustAnchors = trustAnchors
        self.store = store
        self.tokenWait = tokenWait
    }
}

/// What the terminal decided about a payment it could not settle online.
public enum OfflineDecision: Sendable, Equatable {
    case accept(OfflinePaymentRecord)
    /// Not accepted offline; the payment stays pending. The reason is for the cashier and the
    /// wallet: "offline and no valid daily token: …" or "offline limit reached: …".
    case refuse(String)
}

/// The rules of offline acceptance, as a pure function of what the terminal knows.
public enum OfflineAcceptance {
    public static let noTokenPrefix = "offline and no valid daily token"
    public static let limitPrefix = "offline limit reached"

    /// Whether `request` may be accepted offline with `tokenBytes` (the wallet's presentation;
    /// empty when it has none) at `now`, given the payments this terminal already stored.
    ///
    /// The token must verify against `trustAnchors`, be valid now, be the confirming wallet's
    /// (the key that signed the Confirm on this channel), be in the payment's currency, and
    /// cover amount plus tip after what this terminal already accepted under the same token.
    /// The limits count the payments not yet forwarded.
    public static func decide(
        _ request: SettlementRequest, tokenBytes: [UInt8], trustAnchors: [TrustAnchor], limits: OfflineLimits,
        stored: [StoredOfflinePayment], now: UnixTime
    ) -> OfflineDecision {
        if case .confirm(let confirm)? = try? SessionMessage.decode(request.signedConfirmation) {
            // The token is an allowance on the wallet's account: a card payment needs its issuer,
            // which only the server reaches.
            if case .card = confirm.paymentMethod {
                return .refuse("offline: a card payment needs the server; pay from the account balance")
            }
            // The server settles an offline payment only if it was accepted within this window
            // before the expiry the wallet signed; a wallet whose clock runs far ahead would be
            // accepted here and refused there, unpaid.
            let (latest, overflow) = now.addingReportingOverflow(DailyToken.offlineConfirmationWindow)
            if !overflow, confirm.expiresAt > latest {
                return .refuse(
                    "offline: the wallet's confirmation is valid until \(confirm.expiresAt), more than \(DailyToken.offlineConfirmationWindow) s from now (\(now)); check the wallet's clock"
                )
            }
        }
        guard !tokenBytes.isEmpty else { return .refuse("\(noTokenPrefix): the wallet presented none") }
        let token: DailyToken
        do {
            token = try DailyToken.decode(tokenBytes)
            guard let walletKey = try? P256.Signing.PublicKey(x963Representation: request.walletKey.bytes) else {
                return .refuse("\(noTokenPrefix): the confirming wallet's key is malformed")
            }
            try token.verify(trusting: trustAnchors, at: now, walletKey: walletKey)
        } catch {
            return .refuse("\(noTokenPrefix): \(error)")
        }
        let total = request.amount.minorUnits + request.tip.minorUnits
        let currency = request.amount.currency
        guard token.allowance.currency == currency else {
            return .refuse(
                "\(noTokenPrefix): the token is for \(token.allowance.currency.code), the payment in \(currency.code)")
        }
        let spentUnderToken = stored.filter { $0.record.tokenID == token.tokenID && $0.state != .declined }
            .reduce(Int64(0)) { $0 + $1.record.totalMinorUnits }
        let left = token.allowance.minorUnits - spentUnderToken
        guard total <= left else {
            return .refuse(
                "\(noTokenPrefix): the token allows \(format(max(0, left), currency)) more, the payment is \(format(total, currency))"
            )
        }
        guard limits.perPayment.currency == currency, limits.totalStored.currency == currency else {
            return .refuse("\(limitPrefix): the offline limits are not in \(currency.code)")
        }
        guard total <= limits.perPayment.minorUnits else {
            return .refuse(
                "\(limitPrefix): \(format(total, currency)) is above \(limits.perPayment) per offline payment")
        }
        let outstanding = stored.filter { $0.state.isOutstanding }
        guard outstanding.count < limits.maximumStoredCount else {
            return .refuse(
                "\(limitPrefix): \(outstanding.count) payments are stored already (at most \(limits.maximumStoredCount))"
            )
        }
        let storedTotal = outstanding.reduce(Int64(0)) { $0 + $1.record.totalMinorUnits }
        guard storedTotal + total <= limits.totalStored.minorUnits else {
            return .refuse(
                "\(limitPrefix): \(format(storedTotal, currency)) stored and \(format(total, currency)) more is above \(limits.totalStored) in total"
            )
        }
        if let oldest = outstanding.map(\.record.acceptedAt).min(), now - oldest > limits.maximumAge {
            return .refuse(
                "\(limitPrefix): the oldest stored payment is \((now - oldest) / 3600) h old (at most \(limits.maximumAge / 3600) h); forward it first"
            )
        }
        return .accept(
            OfflinePaymentRecord(
                paymentID: request.paymentID, sessionID: request.sessionID, walletKey: request.walletKey,
                terminalKeyID: request.terminalKeyID, amount: request.amount, tip: request.tip,
                registerUser: request.registerUser, signedConfirmation: request.signedConfirmation,
                dailyToken: tokenBytes, tokenID: token.tokenID, acceptedAt: now))
    }

    private static func format(_ minorUnits: Int64, _ currency: Currency) -> String {
        (try? Money(minorUnits: minorUnits, currency: currency))?.description ?? "\(minorUnits) \(currency.code)"
    }
}
