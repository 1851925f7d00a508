import Foundation
import HorizonCore
import HorizonLedger
import Hummingbird

extension Dashboard {
    /// How many days the home page's chart shows, today included.
    static let chartDays = 14

    // MARK: Home

    /// Today's and this week's takings in the merchant's time zone, the last two weeks as a bar
    /// chart drawn on the server, and the newest transactions.
    func homePage(_ request: Request) async throws -> Response {
        guard let signedIn = try await session(of: request) else { return Self.redirect("/dashboard/sign-in") }
        let merchant = signedIn.merchant
        let clock = MerchantClock(identifier: merchant.timeZone)
        let time = now()
        let today = clock.day(containing: time)
        let week = clock.week(containing: time)
        let days = clock.days(Self.chartDays, endingWith: time)
        let totals = try await ledger.totals(of: merchant.id, in: [today, week] + days)
        let recent = try await ledger.transactions(of: merchant.id, filter: TransactionFilter(), limit: 5)
        let terminals = TerminalDirectory(try await ledger.terminals(of: merchant.id))
        func tile(_ title: String, _ totals: PeriodTotals, from: UnixTime, to: UnixTime) -> TotalsTile {
            TotalsTile(
                title: title, sales: totals.sales.description,
                payments: Self.count(totals.payments, "payment", "payments"),
                declined: Self.count(totals.declined, "decline", "declines"),
                refunds: totals.refunds == 0
                    ? "no refunds" : "\(Self.count(totals.refunds, "refund", "refunds")) (\(totals.refunded))",
                net: Self.signed(totals.netMinorUnits, merchant.currency),
                url: Self.url(
                    "/dashboard/transactions",
                    [("type", "payment"), ("from", clock.formatDay(from)), ("to", clock.formatDay(to - 1))]))
        }
        let model = HomePage(
            layout: .signedIn("Home", signedIn, current: \.onHome, notice: Self.notice(request)), zone: clock.name,
            today: tile("Today, \(clock.formatDay(time))", totals[0], from: today.lowerBound, to: today.upperBound),
            week: tile(
                "This week, from \(clock.formatDay(week.lowerBound))", totals[1], from: week.lowerBound,
                to: week.upperBound),
            chart: Self.chart(Array(totals.dropFirst(2)), clock: clock, currency: merchant.currency),
            recent: recent.transactions.map {
                var row = TransactionRow($0.transaction, clock: clock, terminals: terminals)
                if $0.refunded.minorUnits > 0 { row.refunded = $0.refunded.description }
                return row
            })
        return try page("home", model)
    }

    static func count(_ number: Int64, _ one: String, _ many: String) -> String {
        "\(number) \(number == 1 ? one : many)"
    }

    /// An amount that may be below zero (more refunded than sold), in the money's own words.
    static func signed(_ minorUnits: Int64, _ currency: Currency) -> String {
        let money = try? Money(minorUnits: Int64(clamping: minorUnits.magnitude), currency: currency)
        guard let money else { return "\(minorUnits) \(currency.code)" }
        return minorUnits < 0 ? "−\(money)" : money.description
    }

    /// Sales per day as bars; the tallest day fills the height, a day without sales shows a
    /// hairline so every day keeps its place.
    static func chart(_ days: [PeriodTotals], clock: MerchantClock, currency: Currency) -> SalesChart {
        let width = 700
        let height = 220
        let top = 12
        let baseline = height - 28
        let slot = width / max(days.count, 1)
        let largest = days.map(\.sales.minorUnits).max() ?? 0
        let bars = days.enumerated().map { index, day in
            let barHeight =
                largest == 0
                ? 1 : max(1, Int((Double(day.sales.minorUnits) / Double(largest)) * Double(baseline - top)))
            let x = index * slot + slot / 6
            return ChartBar(
                x: x, y: baseline - barHeight, width: slot * 2 / 3, height: barHeight, labelX: x + slot / 3,
                labelY: height - 8,
                label: clock.shortDay(day.period.lowerBound),
                title:
                    "\(clock.formatDay(day.period.lowerBound)): \(day.sales), \(count(day.payments, "payment", "payments"))",
                url: url(
                    "/dashboard/transactions",
                    [
                        ("type", "payment"), ("from", clock.formatDay(day.period.lowerBound)),
                        ("to", clock.formatDay(day.period.lowerBound)),
                    ]))
        }
        let total = days.map(\.sales.minorUnits).reduce(0, +)
        let best = days.max { $0.sales.minorUnits < $1.sales.minorUnits }
        var summary = "Sales per day for the last \(days.count) days: \(signed(total, currency)) in all"
        if let best, best.sales.minorUnits > 0 {
            summary += ", most on \(clock.formatDay(best.period.lowerBound)) (\(best.sales))"
        }
        return SalesChart(
            width: width, height: height, baseline: baseline, summary: summary + ".",
            maximum: largest == 0 ? "no sales" : "highest day \(signed(largest, currency))", bars: bars)
    }

    // MARK: Settings

    func settingsPage(_ request: Request) async throws -> Response {
        guard let signedIn = try await session(of: request) else { return Self.redirect("/dashboard/sign-in") }
        return try settings(signedIn, notice: Self.notice(request))
    }

    private func settings(
        _ signedIn: SignedIn, notice: String? = nil, problem: String? = nil, status: HTTPResponse.Status = .ok
    ) throws -> Response {
        let clock = MerchantClock(identifier: signedIn.merchant.timeZone)
        var layout = Layout.signedIn("Settings", signedIn, current: \.onSettings, notice: notice)
        layout.problem = problem
        var zones = MerchantClock.knownIdentifiers
        if !zones.contains(clock.name) { zones.insert(clock.name, at: 0) }
        return try page(
            "settings",
            SettingsPage(
                layout: layout, csrf: signedIn.session.csrfSecret, zone: clock.name, now: clock.format(now()),
                zones: zones.map {
                    Option(value: $0, label: $0.replacingOccurrences(of: "_", with: " "), selected: $0 == clock.name)
                }),
            status: status)
    }

    func setTimeZone(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        let identifier = form.text("time_zone") ?? ""
        guard MerchantClock.isKnown(identifier), identifier.utf8.count <= 64 else {
            return try settings(
                signedIn,
                problem:
                    "“\(identifier)” is not a time zone this server knows: choose one from the list, such as Europe/Berlin.",
                status: .badRequest)
        }
        try await ledger.setTimeZone(identifier, for: signedIn.merchant.id)
        RequestScope.current?.logger.notice(
            "time zone set from the dashboard", metadata: ["time_zone": "\(identifier)"])
        return Self.redirect("/dashboard/settings?done=time-zone-saved")
    }
}

/// The transactions export: one header line, then one line per transaction; amounts as plain
/// decimals beside their currency, times in ISO 8601 with the merchant's offset.
struct TransactionsCSV {
    /// An export stops here (a spreadsheet's comfortable size); narrow the dates for more.
    static let maximumRows = 100_000
    static let header = [
        "reference", "payment_id", "time", "type", "register_user", "terminal", "terminal_id", "amount", "tip",
        "total", "currency", "result", "refunded", "order_reference",
    ]
    let clock: MerchantClock
    private(set) var text = header.joined(separator: ",") + "\r\n"
    private(set) var rows = 0

    init(clock: MerchantClock) { self.clock = clock }

    mutating func append(_ summary: TransactionSummary, terminal: TerminalName?) {
        let transaction = summary.transaction
        let result = transaction.result
        let isPayment = result.transactionType == .payment
        var type = result.transactionType.description
        if let offline = transaction.offline { type += offline.guaranteed ? " (offline, guaranteed)" : " (offline)" }
        let outcome: String
        switch result.outcome {
        case .approved: outcome = "approved"
        case .declined(_, let reason): outcome = "declined: \(reason)"
        }
        let total = try? Money(
            minorUnits: result.amount.minorUnits + result.tip.minorUnits, currency: result.amount.currency)
        let fields = [
            String(transaction.reference), result.paymentID.bytes.hexString, clock.iso8601(result.settledAt), type,
            transaction.registerUser, terminal?.label ?? "", terminal?.id ?? "",
            isPayment ? result.amount.formattedAmount : "", isPayment ? result.tip.formattedAmount : "",
            isPayment ? total?.formattedAmount ?? "" : "", result.amount.currency.code, outcome,
            summary.refunded.formattedAmount, transaction.orderReference ?? "",
        ]
        text += fields.map(Self.cell).joined(separator: ",") + "\r\n"
        rows += 1
    }

    /// One cell: quoted when it holds a comma, quote or line break, and kept from being read as
    /// a formula by a spreadsheet (a text starting with = + - @ gets a leading apostrophe).
    static func cell(_ value: String) -> String {
        var value = value
        if let first = value.first, "=+-@\t\r".contains(first), Double(value) == nil { value = "'" + value }
        guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
