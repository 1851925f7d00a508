import Foundation

/// The HTTP date format (RFC 9110 section 5.6.7, IMF-fixdate): what a relayed request carries in
/// its `date` field so the gateway can refuse stale ones.
public enum HTTPDate {
    private static func formatter() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter
    }

    /// `unixSeconds` as an IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
    public static func format(_ unixSeconds: Int64) -> String {
        formatter().string(from: Date(timeIntervalSince1970: TimeInterval(unixSeconds)))
    }

    /// The Unix time of an IMF-fixdate; nil for anything else.
    public static func parse(_ text: String) -> Int64? {
        guard text.utf8.count == 29, let date = formatter().date(from: text) else { return nil }
        return Int64(date.timeIntervalSince1970)
    }
}
