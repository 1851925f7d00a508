import HorizonCore
import HorizonLedger

/// A coupon as the CLIs print it in JSON (the field names the sandbox ledger's coupons had).
public struct CouponRow: Encodable, Sendable {
    public let code: String
    public let description: String
    public let valueMinorUnits: Int64
    public let expiresAt: UnixTime
    public let redeemedAt: UnixTime?

    public init(_ coupon: IssuedCoupon) {
        code = coupon.code
        description = coupon.description
        valueMinorUnits = coupon.value.minorUnits
        expiresAt = coupon.expiresAt
        redeemedAt = coupon.redeemedAt
    }
}
