import Crypto
import Foundation
import HTTPTypes
import HorizonCore
import HorizonLedger
import Hummingbird

/// The dashboard's limits: how long a session lives and how many sign-ins are tried before the
/// sign-in form refuses for a while.
struct DashboardSettings: Sendable {
    /// A session ends this long after sign-in (a working day), or at sign-out.
    var sessionLifetime: Int64 = 8 * 3600
    /// The sign-in rate limit's window, in seconds.
    var signInWindow: Int64 = 15 * 60
    /// Sign-in attempts per e-mail within the window (the password lock-out counts wrong ones
    /// of an existing account; this also stops guessing across many accounts' e-mails).
    var signInsPerEmail: Int = 10
    /// Sign-in attempts per client address within the window.
    var signInsPerAddress: Int = 30
    /// Transactions on one page.
    var pageSize: Int = 25
}

extension DashboardSettings {
    /// The defaults, with what the server's settings file overrides.
    init(_ configuration: ServerConfiguration) {
        self.init()
        if let perAddress = configuration.signInsPerAddress { signInsPerAddress = perAddress }
    }
}

/// The cookies and secrets of a dashboard session.
enum DashboardSecurity {
    /// The session cookie: a random token whose SHA-256 is the session's key in the database.
    static let sessionCookie = "horizon_session"
    /// The sign-in form's CSRF token (double submit: the form's hidden field must equal this
    /// cookie), since there is no session before sign-in to keep a secret in.
    static let signInCookie = "horizon_sign_in"
    /// Cookies are sent back only to the dashboard's own paths.
    static let cookiePath = "/dashboard"

    /// 32 random bytes as URL-safe base64 without padding: a cookie value and a form field.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func hash(_ token: String) -> [UInt8] { Array(SHA256.hash(data: Data(token.utf8))) }

    /// Compares two secrets in time that does not depend on where they differ.
    static func same(_ a: String, _ b: String) -> Bool {
        let left = Array(a.utf8)
        let right = Array(b.utf8)
        guard left.count == right.count, !left.isEmpty else { return false }
        var difference: UInt8 = 0
        for index in left.indices { difference |= left[index] ^ right[index] }
        return difference == 0
    }

    /// A cookie for the dashboard: HttpOnly (no script reads it), SameSite=Lax (not sent with
    /// another site's POST), Secure when the server speaks TLS. `maxAge` 0 deletes it.
    static func cookie(_ name: String, value: String, maxAge: Int, secure: Bool) -> Cookie {
        Cookie(
            name: name, value: value, maxAge: maxAge, path: cookiePath, secure: secure, httpOnly: true,
            sameSite: .lax)
    }
}

/// A form body or a query string (`application/x-www-form-urlencoded`): the first value of each name.
struct FormFields: Sendable {
    private var values: [String: String] = [:]

    init(encoded text: Substring) {
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = Self.decode(parts[0])
            let value = parts.count > 1 ? Self.decode(parts[1]) : ""
            if values[name] == nil { values[name] = value }
        }
    }

    subscript(_ name: String) -> String? { values[name] }

    /// The value trimmed, nil when absent or blank.
    func text(_ name: String) -> String? {
        guard let value = values[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else {
            return nil
        }
        return value
    }

    /// `+` is a space in forms; anything undecodable is kept as sent (and then fails validation).
    private static func decode(_ text: Substring) -> String {
        let spaced = text.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }
}

/// Dates as the dashboard shows and reads them: UTC, "2026-11-25 05:12".
enum DashboardDates {
    static func format(_ time: UnixTime) -> String {
        let (year, month, day) = civil(fromDays: floorDivide(time, 86_400))
        let seconds = time - floorDivide(time, 86_400) * 86_400
        return String(format: "%04d-%02d-%02d %02d:%02d", year, month, day, seconds / 3600, (seconds % 3600) / 60)
    }

    static func formatDay(_ time: UnixTime) -> String {
        let (year, month, day) = civil(fromDays: floorDivide(time, 86_400))
        return String(format: "%04d-%02d-%02d", year, month, day)
    }

    /// The start of a "YYYY-MM-DD" day in UTC, nil for anything else.
    static func parseDay(_ text: String) -> UnixTime? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int64(parts[0]), let month = Int64(parts[1]), let day = Int64(parts[2]),
            (1970...9999).contains(year), (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        let days = days(fromCivil: year, month, day)
        // 2026-02-31 would land in March: refuse it rather than show another day's transactions.
        guard civil(fromDays: days) == (year, month, day) else { return nil }
        return days * 86_400
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }

    // Howard Hinnant's days_from_civil and civil_from_days (proleptic Gregorian calendar).
    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = floorDivide(y, 400)
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
