import Crypto
import Foundation
import HTTPTypes
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import Hummingbird
import HummingbirdTesting
import Testing

/// What a shop owner opens the dashboard for: the day's and week's takings, finding one
/// payment, its receipt, an export, days in the shop's own time zone. (Tools/dashboard-check.sh
/// shows the same pages in headless Chromium at desktop and phone widths.)
@Suite("Dashboard for a shop owner")
struct DashboardShopOwnerTests {
    /// The test clock's now, 2025-06-15 15:06:40 UTC, is a Sunday.
    static let sunday: UnixTime = 1_750_000_000
    static let day: UnixTime = 86_400

    @Test func theHomePageShowsTodaysAndThisWeeksSalesAndAChartWithoutScript() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let shop = try await DashboardShop(server.ledger, merchant: merchant.id)
        let now = server.clock.now
        #expect(now == Self.sunday)
        try await shop.pay(12_50, tip: 1_50, registerUser: "anna", at: now - 60)  // today
        try await shop.pay(3_00, registerUser: "anna", at: now - 120)  // today, refunded in part
        try await shop.pay(20_00, registerUser: "ben", at: now - 2 * Self.day)  // Friday: this week
        try await shop.pay(40_00, registerUser: "ben", at: now - 7 * Self.day)  // last Sunday: the chart only
        try await shop.pay(99_00, registerUser: "ben", at: now - 30 * Self.day)  // before the chart
        let refunded = try #require(
            try await server.ledger.transactions(of: merchant.id, filter: TransactionFilter(), limit: 2).transactions
                .last?.transaction.result.paymentID)
        _ = try await server.ledger.refund(
            RefundRequest(
                refundID: RefundID(rawValue: "r1"), paymentID: refunded, amount: Money(minorUnits: 1_00, currency: .eur)
            ),
            merchant: merchant.id, at: now - 30)
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            let (signIn, _) = try await browser.signIn()
            #expect(signIn.headers[.location] == "/dashboard/home")
            let home = try await browser.get("/dashboard/home")
            #expect(home.status == .ok)
            let text = home.text
            #expect(text.contains("<h2>Today, 2025-06-15</h2>"))
            #expect(text.contains("<p class=\"big\">17.00 EUR</p>"))  // 12.50 + 1.50 tip + 3.00
            #expect(text.contains("2 payments · 0 declines · 1 refund (1.00 EUR)"))
            #expect(text.contains("Net of refunds: 16.00 EUR"))
            #expect(text.contains("<h2>This week, from 2025-06-09</h2>"))
            #expect(text.contains("<p class=\"big\">37.00 EUR</p>"))
            #expect(text.contains("3 payments · 0 declines"))
            // The chart is SVG in the page: 14 days, a bar each, today's and last Sunday's named.
            #expect(text.contains("<svg viewBox=\"0 0 700 220\" role=\"img\""))
            #expect(text.matches(of: /<rect class="bar"/).count == 14)
            #expect(text.contains("<title>2025-06-15: 17.00 EUR, 2 payments</title>"))
            #expect(text.contains("<title>2025-06-08: 40.00 EUR, 1 payment</title>"))
            #expect(text.contains("<title>2025-06-02: 0.00 EUR, 0 payments</title>"))
            #expect(
                text.contains("Sales per day for the last 14 days: 77.00 EUR in all, most on 2025-06-08 (40.00 EUR)."))
            // No script anywhere, and the page's policy allows none.
            #expect(!text.contains("<script"))
            #expect(home.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("default-src 'none'") == true)
            // A day's bar and a tile lead to that day's payments.
            #expect(
                text.contains("href=\"/dashboard/transactions?type=payment&amp;from=2025-06-15&amp;to=2025-06-15\""))
            #expect(
                text.contains("href=\"/dashboard/transactions?type=payment&amp;from=2025-06-09&amp;to=2025-06-15\""))
        }
    }

    @Test func daysAndTimesAreTheMerchantsTimeZoneOnceSet() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let shop = try await DashboardShop(server.ledger, merchant: merchant.id)
        // 2025-06-14 23:06 UTC: yesterday in UTC, 01:06 today in Berlin (UTC+2 in summer).
        try await shop.pay(5_00, registerUser: "anna", at: Self.sunday - 16 * 3600)
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let utc = try await browser.get("/dashboard/home")
            #expect(utc.text.contains("<p class=\"big\">0.00 EUR</p>"))
            #expect(try await browser.get("/dashboard/transactions").text.contains("2025-06-14 23:06"))

            let settings = try await browser.get("/dashboard/settings")
            #expect(settings.text.contains("<strong>UTC</strong>"))
            #expect(settings.text.contains("<option value=\"Europe/Berlin\">Europe/Berlin</option>"))
            let refused = try await browser.post(
                "/dashboard/settings/time-zone", ["time_zone": "Mars/Olympus"], csrf: true)
            #expect(refused.status == .badRequest)
            #expect(refused.text.contains("“Mars/Olympus” is not a time zone this server knows"))
            #expect(try await server.ledger.merchant(merchant.id).timeZone == "UTC")
            let saved = try await browser.post(
                "/dashboard/settings/time-zone", ["time_zone": "Europe/Berlin"], csrf: true)
            #expect(saved.headers[.location] == "/dashboard/settings?done=time-zone-saved")
            #expect(try await server.ledger.merchant(merchant.id).timeZone == "Europe/Berlin")

            let berlin = try await browser.get("/dashboard/home")
            #expect(berlin.text.contains("<h2>Today, 2025-06-15</h2>"))
            #expect(berlin.text.contains("<p class=\"big\">5.00 EUR</p>"))
            let list = try await browser.get("/dashboard/transactions")
            #expect(list.text.contains("Time (Europe/Berlin)"))
            #expect(list.text.contains("2025-06-15 01:06"))
            // A date filter's days are Berlin's days too.
            let sunday = try await browser.get("/dashboard/transactions?from=2025-06-15&to=2025-06-15")
            #expect(sunday.text.contains("5.00 EUR"))
            let saturday = try await browser.get("/dashboard/transactions?from=2025-06-14&to=2025-06-14")
            #expect(saturday.text.contains("No transactions match."))
            let csv = try await browser.get("/dashboard/transactions.csv")
            #expect(csv.text.contains(",2025-06-15T01:06:40+02:00,"))
        }
    }

    @Test func searchFindsAPaymentByItsIDReferenceOrAmount() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let shop = try await DashboardShop(server.ledger, merchant: merchant.id)
        let now = server.clock.now
        let first = try await shop.pay(12_50, tip: 1_50, registerUser: "anna", at: now - 300)
        let second = try await shop.pay(7_25, registerUser: "ben", at: now - 200)
        try await shop.pay(42_00, registerUser: "ben", at: now - 100)
        let firstReference = try #require(try await server.ledger.transaction(for: first.paymentID)?.reference)
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            func rows(_ query: String) async throws -> [String] {
                let page = try await browser.get("/dashboard/transactions?q=\(query)")
                #expect(page.status == .ok, "\(query): \(page.text)")
                return page.text.matches(of: /data-label="Amount">([^<]+)</).map { String($0.1) }
            }
            let hex = first.paymentID.bytes.hexString
            #expect(try await rows(hex) == ["12.50 EUR"])
            #expect(try await rows(hex.uppercased()) == ["12.50 EUR"])
            #expect(try await rows("\(firstReference)") == ["12.50 EUR"])
            #expect(try await rows("%23\(firstReference)") == ["12.50 EUR"])
            #expect(try await rows("7.25") == ["7.25 EUR"])
            #expect(try await rows("7%2C25") == ["7.25 EUR"])  // a decimal comma
            #expect(try await rows("14.00") == ["12.50 EUR"])  // what the customer paid, tip included
            #expect(try await rows("42") == ["42.00 EUR"])  // digits: a reference or a whole amount
            #expect(try await rows("99.99").isEmpty)
            let page = try await browser.get("/dashboard/transactions?q=\(second.paymentID.bytes.hexString)")
            #expect(page.text.contains("value=\"\(second.paymentID.bytes.hexString)\""))  // the box keeps it
            #expect(page.text.contains("href=\"/dashboard/transactions.csv?q=\(second.paymentID.bytes.hexString)\""))
            let bad = try await browser.get("/dashboard/transactions?q=coffee")
            #expect(bad.status == .badRequest)
            #expect(
                bad.text.contains(
                    "Search for a payment id (32 hex digits), a reference such as 1042, or an amount such as 12.50."))
        }
    }

    @Test func aTransactionsPageShowsItsReceiptRefundsAndTheTerminalAsTheTerminalsPageNamesIt() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let terminal = try await server.ledger.activateTerminal(
            merchant: merchant.id, label: "Till 1, Market St",
            publicKey: try PublicKeyBytes(bytes: Array(P256.Signing.PrivateKey().publicKey.x963Representation)),
            keyID: DashboardShop.terminalKeyID, credentialExpiresAt: server.clock.now + 3600, at: server.clock.now)
        let shop = try await DashboardShop(server.ledger, merchant: merchant.id)
        let payment = try await shop.pay(12_50, tip: 1_50, registerUser: "anna", at: server.clock.now - 60)
        let reference = try #require(try await server.ledger.transaction(for: payment.paymentID)?.reference)
        _ = try await server.ledger.refund(
            RefundRequest(
                refundID: RefundID(rawValue: "r_coffee"), paymentID: payment.paymentID,
                amount: Money(minorUnits: 2_00, currency: .eur)), merchant: merchant.id, at: server.clock.now - 30)
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let page = try await browser.get("/dashboard/transactions/\(reference)")
            #expect(page.status == .ok)
            let text = page.text
            #expect(text.contains("<h1>Transaction \(reference)</h1>"))
            #expect(text.contains("<h2>Corner Bakery</h2>"))
            #expect(text.contains("<dt>Amount</dt><dd class=\"num\">12.50 EUR</dd>"))
            #expect(text.contains("<dt>Tip</dt><dd class=\"num\">1.50 EUR</dd>"))
            #expect(text.contains("<dt>Total</dt><dd class=\"num total\">14.00 EUR</dd>"))
            #expect(text.contains("<dt>Time (UTC)</dt><dd>2025-06-15 15:05</dd>"))
            #expect(text.contains("<code class=\"id\">\(payment.paymentID.bytes.hexString)</code>"))
            #expect(text.contains("<dt>Register user</dt><dd>anna</dd>"))
            #expect(text.contains("refunded 2.00 EUR"))
            #expect(text.contains("<code>r_coffee</code>"))
            #expect(text.contains("Up to 12.00 EUR can be refunded."))
            // The terminal by its label and id, exactly as the terminals page shows them.
            let named = "<a href=\"/dashboard/transactions?terminal=\(terminal.id.rawValue)\">Till 1, Market St</a>"
            #expect(text.contains("\(named) <code>\(terminal.id.rawValue)</code>"))
            let list = try await browser.get("/dashboard/transactions")
            #expect(list.text.contains("\(named) <code>\(terminal.id.rawValue)</code>"))
            let terminals = try await browser.get("/dashboard/terminals")
            #expect(terminals.text.contains(named))
            #expect(terminals.text.contains("<code>\(terminal.id.rawValue)</code>"))
            // The terminal's link lists its payments; an unknown terminal is said to be unknown.
            let taken = try await browser.get("/dashboard/transactions?terminal=\(terminal.id.rawValue)")
            #expect(taken.text.contains("12.50 EUR"))
            #expect(taken.text.contains("Only the payments of terminal <code>\(terminal.id.rawValue)</code>."))
            #expect(taken.text.contains("<input type=\"hidden\" name=\"terminal\" value=\"\(terminal.id.rawValue)\">"))
            #expect(!list.text.contains("Only the payments of terminal"))
            #expect(!list.text.contains("name=\"terminal\""))
            let unknown = try await browser.get("/dashboard/transactions?terminal=t_nothing")
            #expect(unknown.status == .badRequest)
            #expect(unknown.text.contains("There is no terminal t_nothing among yours."))
            let missing = try await browser.get("/dashboard/transactions/999999")
            #expect(missing.status == .notFound)
            #expect(missing.text.contains("There is no transaction 999999 among yours."))
        }
    }

    @Test func theCSVExportHoldsTheFilteredListWithEveryPage() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let shop = try await DashboardShop(server.ledger, merchant: merchant.id)
        let now = server.clock.now
        // More of Anna's payments than a page of the list holds (25).
        var payments: [PaymentID] = []
        for index in 0..<40 {
            payments.append(
                try await shop.pay(
                    Int64(index + 1) * 1_00, tip: 10, registerUser: index % 4 == 3 ? "ben" : "anna",
                    at: now - 500 + Int64(index)
                ).paymentID)
        }
        let newestOfAnna = payments[38]
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let list = try await browser.get("/dashboard/transactions?register_user=anna")
            #expect(list.text.contains("href=\"/dashboard/transactions.csv?register_user=anna\""))
            let csv = try await browser.get("/dashboard/transactions.csv?register_user=anna")
            #expect(csv.status == .ok)
            #expect(csv.headers[.contentType] == "text/csv; charset=utf-8")
            #expect(csv.headers[.contentDisposition] == "attachment; filename=\"transactions-2025-06-15.csv\"")
            let lines = csv.text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
            #expect(
                lines.first
                    == "reference,payment_id,time,type,register_user,terminal,terminal_id,amount,tip,total,currency,result,refunded,order_reference"
            )
            // Every one of Anna's 30 payments, newest first; none of Ben's.
            #expect(lines.count == 31)
            let amounts = lines.dropFirst().map {
                String($0.split(separator: ",", omittingEmptySubsequences: false)[7])
            }
            #expect(amounts.first == "39.00" && amounts.last == "1.00")
            #expect(!amounts.contains("40.00") && !amounts.contains("4.00"))
            let newest = try #require(try await server.ledger.transaction(for: newestOfAnna))
            #expect(
                lines[1]
                    == "\(newest.reference),\(newestOfAnna.bytes.hexString),2025-06-15T14:58:58+00:00,payment,anna,,,39.00,0.10,39.10,EUR,approved,0.00,"
            )
            let bad = try await browser.get("/dashboard/transactions.csv?from=2025-06-20&to=2025-06-10")
            #expect(bad.status == .badRequest)
        }
    }

    @Test func aBadDateRangeIsExplainedInWordsOnTheSamePage() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let page = try await browser.get("/dashboard/transactions?from=2025-06-20&to=2025-06-10&type=payment")
            #expect(page.status == .badRequest)
            #expect(
                page.text.contains(
                    "“From” (2025-06-20) is after “To” (2025-06-10), so no day is in the range: choose a first day on or before the last."
                ))
            // The same page, its filters kept, so the merchant corrects one field.
            #expect(page.text.contains("<h1>Transactions</h1>"))
            #expect(page.text.contains("id=\"from\" name=\"from\" type=\"date\" value=\"2025-06-20\""))
            #expect(page.text.contains("id=\"to\" name=\"to\" type=\"date\" value=\"2025-06-10\""))
            #expect(page.text.contains("<option value=\"payment\" selected>"))
            let oneDay = try await browser.get("/dashboard/transactions?from=2025-06-10&to=2025-06-10")
            #expect(oneDay.status == .ok)
        }
    }

    /// The register-user form checks the API's id rule in the browser (`pattern`) and the
    /// server checks it again: every id is accepted or refused alike by both.
    @Test func theRegisterUserFormEnforcesTheAPIsIDRule() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let page = try await browser.get("/dashboard/register-users")
            let pattern = try #require(
                page.text.firstMatch(of: /id="id" name="id" required maxlength="64" pattern="([^"]+)"/))
            #expect(pattern.1 == "[A-Za-z0-9._:\\-]{1,64}")
            #expect(page.text.contains("The id must be 1 to 64 characters of A-Z a-z 0-9 . _ : - (no spaces)."))
            // A browser anchors the pattern to the whole value.
            let regex = try Regex("^(?:\(pattern.1))$")
            for id in [
                "till-1", "007", "a.b_c:d-e", String(repeating: "i", count: 64), "till 3", "x<script>",
                String(repeating: "i", count: 65), "tíll", "", "till/1",
            ] {
                let browserAccepts = id.wholeMatch(of: regex) != nil
                let apiAccepts: Bool
                do {
                    _ = try RegisterUserRules.check(id: id, name: nil)
                    apiAccepts = true
                } catch { apiAccepts = false }
                #expect(browserAccepts == apiAccepts, "\(id)")
            }
        }
    }

    @Test func everyPageIsReadableOnAPhoneWithTheAmountsKept() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let shop = try await DashboardShop(server.ledger, merchant: merchant.id)
        try await shop.pay(12_50, registerUser: "anna", at: server.clock.now)
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let style = try await browser.get("/dashboard/style.css")
            // Below 640 px a table's rows become cards; no column is hidden, each cell is labelled.
            #expect(style.text.contains("@media (max-width: 640px)"))
            #expect(style.text.contains("table.stack td::before { content: attr(data-label);"))
            #expect(!style.text.contains("display: none"))
            let list = try await browser.get("/dashboard/transactions")
            #expect(list.text.contains("<table class=\"stack\">"))
            #expect(list.text.contains("<td class=\"num\" data-label=\"Amount\">12.50 EUR</td>"))
            #expect(list.text.contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"))
        }
    }
}
