import Crypto
import Foundation
import HorizonCore

/// The `Horizon-Signature` header of a webhook delivery: `t=` the Unix time of signing, then one
/// `v1=` per valid secret, each the lower-case hex HMAC-SHA256, keyed by the secret's UTF-8
/// bytes, of `t`, a full stop and the body's exact bytes. A receiver recomputes it with its
/// secret, accepts when one `v1` matches (compared in constant time) and `t` is within its
/// tolerance (five minutes, as docs/api.md says), which stops a captured delivery from being
/// replayed later.
public enum WebhookSignature {
    public static let headerName = "Horizon-Signature"
    /// What receivers are told to allow between `t` and their clock.
    public static let tolerance: Int64 = 300

    /// The header's value for `body` signed at `time` with each of `secrets`.
    public static func header(body: String, secrets: [String], at time: UnixTime) -> String {
        (["t=\(time)"] + secrets.map { "v1=" + signature(body: body, secret: $0, at: time) }).joined(separator: ",")
    }

    /// One `v1` value.
    public static func signature(body: String, secret: String, at time: UnixTime) -> String {
        let key = SymmetricKey(data: Data(secret.utf8))
        let mac = HMAC<SHA256>.authenticationCode(for: Data("\(time).\(body)".utf8), using: key)
        return Array(mac).hexString
    }

    /// A new endpoint secret: `whsec_` and 32 random bytes, URL-safe base64.
    public static func newSecret() -> String { "whsec_" + DashboardSecurity.randomToken() }
}
