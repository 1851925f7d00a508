import Foundation
import HorizonCore

/// The merchant's time zone, for every time and day the dashboard shows or reads: "today",
/// "this week" (from Monday), a date filter's days and each row's time are the merchant's, not
/// the server's or UTC (unless the merchant chose UTC, the default).
struct MerchantClock: Sendable {
    /// The IANA name shown in column headers ("Europe/Berlin").
    let name: String
    private let calendar: Calendar

    /// The zone named `identifier`; UTC when this machine's time zone database does not know it.
    init(identifier: String) {
        let zone = TimeZone(identifier: identifier)
        name = zone == nil ? "UTC" : identifier
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone ?? TimeZone(identifier: "UTC") ?? calendar.timeZone
        // Weeks start on Monday, as ISO 8601 and most shops count them.
        calendar.firstWeekday = 2
        calendar.minimumDaysInFirstWeek = 4
        self.calendar = calendar
    }

    /// Whether this machine knows the zone (the settings refuse one it does not).
    static func isKnown(_ identifier: String) -> Bool { TimeZone(identifier: identifier) != nil }

    /// Every zone this machine knows, for the settings' list.
    static var knownIdentifiers: [String] { TimeZone.knownTimeZoneIdentifiers.sorted() }

    /// "2026-11-25 14:05", the merchant's wall-clock time.
    func format(_ time: UnixTime) -> String {
        let parts = components(time)
        return String(
            format: "%04d-%02d-%02d %02d:%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0, parts.hour ?? 0,
            parts.minute ?? 0)
    }

    /// "2026-11-25", the merchant's day.
    func formatDay(_ time: UnixTime) -> String {
        let parts = components(time)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }

    /// "Wed 25", a chart's label for a day.
    func shortDay(_ time: UnixTime) -> String {
        let parts = components(time)
        let names = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        return "\(names[((parts.weekday ?? 1) - 1) % 7]) \(parts.day ?? 0)"
    }

    /// ISO 8601 with the zone's offset at that moment ("2026-11-25T14:05:09+01:00"), for exports.
    func iso8601(_ time: UnixTime) -> String {
        let parts = components(time)
        let offset = calendar.timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(time)))
        let sign = offset < 0 ? "-" : "+"
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d%@%02d:%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0,
            parts.hour ?? 0, parts.minute ?? 0, parts.second ?? 0, sign, abs(offset) / 3600, abs(offset) % 3600 / 60)
    }

    /// When the merchant's day "YYYY-MM-DD" begins; nil for anything that is not such a day.
    func startOfDay(_ text: String) -> UnixTime? {
        guard DashboardDates.parseDay(text) != nil else { return nil }
        let parts = text.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3,
            let date = calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2]))
        else { return nil }
        return UnixTime(date.timeIntervalSince1970.rounded(.down))
    }

    /// The merchant's day holding `time`.
    func day(containing time: UnixTime) -> Range<UnixTime> {
        let start = calendar.startOfDay(for: date(time))
        return seconds(
            start)..<seconds(calendar.date(byAdding: .day, value: 1, to: start) ?? start.addingTimeInterval(86_400))
    }

    /// The merchant's week (Monday to Sunday) holding `time`.
    func week(containing time: UnixTime) -> Range<UnixTime> {
        guard let interval = calendar.dateInterval(of: .weekOfYear, for: date(time)) else {
            return day(containing: time)
        }
        return seconds(interval.start)..<seconds(interval.end)
    }

    /// The `count` days up to and including the one holding `time`, oldest first.
    func days(_ count: Int, endingWith time: UnixTime) -> [Range<UnixTime>] {
        var days = [day(containing: time)]
        while days.count < count, let first = days.first {
            days.insert(day(containing: first.lowerBound - 1), at: 0)
        }
        return days
    }

    private func components(_ time: UnixTime) -> DateComponents {
        calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday], from: date(time))
    }

    private func date(_ time: UnixTime) -> Date { Date(timeIntervalSince1970: TimeInterval(time)) }

    private func seconds(_ date: Date) -> UnixTime { UnixTime(date.timeIntervalSince1970.rounded(.down)) }
}
