import Crypto
import Foundation
import HTTPTypes
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import HorizonSettlement
import HorizonStores
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The merchant dashboard over the router: sign-in, sessions in the database, cookies, CSRF,
/// the sign-in rate limit and the isolation of merchants. (Tools/dashboard-check.sh drives the
/// same pages in headless Chromium.)
@Suite("Dashboard")
struct DashboardTests {
    // MARK: Sign-in and the session cookie

    @Test func signInSetsAnHttpOnlySameSiteCookieAndStoresOnlyTheTokensHash() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            let (response, token) = try await browser.signIn()
            #expect(response.status == .seeOther)
            #expect(response.headers[.location] == "/dashboard/home")
            let cookie = try #require(
                response.headers[values: .setCookie].first {
                    $0.hasPrefix("horizon_session=") && !$0.contains("Max-Age=0")
                })
            #expect(cookie.contains("HttpOnly"))
            #expect(cookie.contains("SameSite=Lax"))
            #expect(cookie.contains("Path=/dashboard"))
            #expect(cookie.contains("Max-Age=28800"))
            #expect(!cookie.contains("Secure"), "no TLS here: a Secure cookie would never come back over plain HTTP")

            // The database keeps the SHA-256 of the token, never the token itself.
            let rows = try await server.ledger.store.transaction { db in
                try await db.query("SELECT token_hash, csrf_secret, merchant_id FROM dashboard_sessions")
            }
            #expect(rows.count == 1)
            #expect(try rows[0].bytes("token_hash") == Array(SHA256.hash(data: Data(token.utf8))))
            #expect(try rows[0].text("merchant_id") == merchant.id.rawValue)
            #expect(try rows[0].text("csrf_secret") != token)

            let page = try await browser.get("/dashboard/transactions")
            #expect(page.status == .ok)
            #expect(page.text.contains("Corner Bakery"))
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            #expect(page.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("default-src 'none'") == true)
            #expect(page.headers[.cacheControl] == "no-store")
        }
    }

    @Test func theCookieIsSecureWhenTheServerSpeaksTLS() async throws {
        var configuration = ServerConfiguration.testing()
        configuration.tlsCertificatePath = "server.crt"
        configuration.tlsKeyPath = "server.key"
        let server = try await TestServer(configuration: configuration)
        try await server.addMerchant()
        try await server.withClient { client in
            let (response, _) = try await DashboardBrowser(client).signIn()
            let cookie = try #require(response.headers[values: .setCookie].first { $0.hasPrefix("horizon_session=") })
            #expect(cookie.contains("Secure"))
            #expect(cookie.contains("HttpOnly"))
        }
    }

    /// Behind a TLS-terminating proxy the process speaks HTTP, yet the browser is on HTTPS: the
    /// operator says so, and the cookies are Secure. A client's `X-Forwarded-Proto` alone is not
    /// believed.
    @Test func theCookieIsSecureBehindATLSProxyOnlyWhenConfigured() async throws {
        for behindProxy in [false, true] {
            var configuration = ServerConfiguration.testing()
            configuration.behindTLSProxy = behindProxy
            let server = try await TestServer(configuration: configuration)
            try await server.addMerchant()
            try await server.withClient { client in
                let browser = DashboardBrowser(client)
                browser.extraHeaders = [HTTPField.Name("X-Forwarded-Proto")!: "https"]
                let (response, _) = try await browser.signIn()
                let cookie = try #require(
                    response.headers[values: .setCookie].first { $0.hasPrefix("horizon_session=") })
                #expect(cookie.contains("Secure") == behindProxy, "\(cookie)")
            }
        }
    }

    @Test func theServersRootSendsABrowserToTheDashboard() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        try await server.withClient { client in
            let root = try await client.send(.get, "/")
            #expect(root.status == .seeOther)
            #expect(root.headers[.location] == "/dashboard")
            let home = try await client.send(.get, "/dashboard")
            #expect(home.headers[.location] == "/dashboard/home")
            let signIn = try await client.send(.get, "/dashboard/transactions")
            #expect(signIn.headers[.location] == "/dashboard/sign-in")
            // Signed in, the same address leads to the dashboard's pages.
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let signedIn = try await browser.get("/")
            #expect(signedIn.status == .seeOther && signedIn.headers[.location] == "/dashboard")
            #expect(try await browser.get("/dashboard/transactions").status == .ok)
            // Only reading the root is redirected; the API still has nothing to post there.
            #expect(try await client.send(.post, "/").status != .seeOther)
        }
    }

    @Test func withoutASessionPagesSendToSignIn() async throws {
        let server = try await TestServer()
        try await server.withClient { client in
            for path in ["/dashboard", "/dashboard/transactions", "/dashboard/register-users", "/dashboard/terminals"] {
                let response = try await client.send(.get, path)
                #expect(response.status == .seeOther, "\(path)")
            }
            let forged = try await client.send(
                .get, "/dashboard/programs", headers: [.cookie: "horizon_session=forged"])
            #expect(forged.headers[.location] == "/dashboard/sign-in")
            let unknown = try await client.send(.get, "/dashboard/nothing-here")
            #expect(unknown.status == .notFound)
            #expect(unknown.text.contains("Page not found"))
        }
    }

    @Test func wrongPasswordsAreRefusedThenLockTheAccount() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            let wrong = try await browser.signIn(password: "not the password")
            #expect(wrong.response.status == .unauthorized)
            #expect(wrong.response.text.contains("The e-mail or the password is wrong."))
            #expect(wrong.response.headers[values: .setCookie].allSatisfy { !$0.hasPrefix("horizon_session=") })
            // ServerConfiguration.testing() locks after 3 wrong passwords (the API's lock-out rules).
            _ = try await browser.signIn(password: "not the password")
            let locked = try await browser.signIn(password: "not the password")
            #expect(locked.response.status == .tooManyRequests)
            #expect(locked.response.text.contains("Too many wrong sign-ins for this e-mail"))
            let evenRight = try await browser.signIn()
            #expect(evenRight.response.status == .tooManyRequests)
        }
    }

    // MARK: CSRF

    @Test func formsWithoutOrWithAWrongCSRFTokenAreRefusedWith403() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            for csrf in [nil, "", "wrong-token"] as [String?] {
                var fields = ["id": "till-9", "name": "Mallory"]
                if let csrf { fields["csrf"] = csrf }
                let response = try await browser.post("/dashboard/register-users", fields)
                #expect(response.status == .forbidden, "csrf \(String(describing: csrf))")
                #expect(response.text.contains("This form has expired"))
                #expect(response.text.contains("nothing was changed"))
            }
            #expect(try await server.ledger.registerUsers(of: merchant.id).isEmpty)
            // Sign-out is a form too: without the token the session stays.
            let signOut = try await browser.post("/dashboard/sign-out", [:])
            #expect(signOut.status == .forbidden)
            #expect(try await server.ledger.dashboardSessionCount(of: merchant.id, at: server.clock.now) == 1)
            // With the page's token the same form works.
            let added = try await browser.post(
                "/dashboard/register-users", ["id": "till-9", "name": "Alex"], csrf: true)
            #expect(added.status == .seeOther)
            #expect(try await server.ledger.registerUsers(of: merchant.id).map(\.id) == ["till-9"])
        }
    }

    @Test func theSignInFormNeedsItsOwnToken() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        try await server.withClient { client in
            // No sign-in cookie (a form posted from another site): refused before the password is checked.
            let body = "email=\(TestServer.email)&password=\(TestServer.password)&csrf=anything"
            let response = try await client.send(
                .post, "/dashboard/sign-in", headers: [.contentType: "application/x-www-form-urlencoded"],
                body: body)
            #expect(response.status == .forbidden)
            #expect(response.text.contains("did not carry its security token"))
            #expect(try await server.ledger.dashboardSessionCount(of: merchant.id, at: server.clock.now) == 0)
        }
    }

    // MARK: Rate limit

    @Test func wrongSignInsForAnEmailAreHeldBackWhetherItExistsOrNot() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            // An e-mail nobody has is held back like an account's: the answers do not tell them apart.
            for _ in 0..<2 {
                let attempt = try await browser.signIn(email: "guess@bakery.example", password: "guess")
                #expect(attempt.response.status == .unauthorized)
            }
            let limited = try await browser.signIn(email: "guess@bakery.example", password: "guess")
            #expect(limited.response.status == .tooManyRequests)
            #expect(limited.response.text.contains("Too many wrong sign-ins for this e-mail or from this address"))
            #expect(limited.response.headers[.retryAfter] == "60")
            // The back-off passes by itself.
            server.clock.advance(61)
            let later = try await DashboardBrowser(client).signIn(email: "guess@bakery.example", password: "guess")
            #expect(later.response.status == .tooManyRequests)
            #expect(later.response.headers[.retryAfter] == "120")
            server.clock.advance(121)
            #expect(try await DashboardBrowser(client).signIn().response.status == .seeOther)
        }
    }

    @Test func signInsAreRateLimitedPerClientAddress() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        try await server.withClient { client in
            // Every attempt counts, right or wrong (wrong ones also set the address back).
            for _ in 0..<30 {
                #expect(try await DashboardBrowser(client).signIn().response.status == .seeOther)
            }
            // The right password does not help once this address is over its limit.
            let limited = try await DashboardBrowser(client).signIn()
            #expect(limited.response.status == .tooManyRequests)
            #expect(limited.response.text.contains("Too many sign-in attempts"))
        }
    }

    @Test func theSettingsFileSetsTheSignInsPerAddress() async throws {
        var configuration = ServerConfiguration.testing()
        configuration.signInsPerAddress = 3
        let server = try await TestServer(configuration: configuration)
        try await server.addMerchant()
        try await server.withClient { client in
            for _ in 0..<3 {
                let allowed = try await DashboardBrowser(client).signIn()
                #expect(allowed.response.status == .seeOther)
            }
            let limited = try await DashboardBrowser(client).signIn()
            #expect(limited.response.status == .tooManyRequests)
        }
        configuration.signInsPerAddress = 0
        #expect(throws: ServerSetupError.self) { try configuration.validate() }
    }

    @Test func aNewPasswordEndsTheSessionsSignedInWithTheOldOne() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            try await browser.signIn()
            #expect(try await browser.get("/dashboard/transactions").status == .ok)
            try await server.ledger.setPasswordHash(
                PasswordHasher(costLog2: 10).hash("a new password"), for: merchant.id)
            #expect(try await server.ledger.dashboardSessionCount(of: merchant.id, at: Ledger.now()) == 0)
            let after = try await browser.get("/dashboard/transactions")
            #expect(after.status == .seeOther && after.headers[.location] == "/dashboard/sign-in")
            #expect(try await browser.signIn(password: "a new password").response.status == .seeOther)
        }
    }

    // MARK: Sign-out

    @Test func signOutDeletesTheSession() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            let (_, token) = try await browser.signIn()
            #expect(try await server.ledger.dashboardSessionCount(of: merchant.id, at: server.clock.now) == 1)
            _ = try await browser.get("/dashboard/transactions")
            let response = try await browser.post("/dashboard/sign-out", [:], csrf: true)
            #expect(response.status == .seeOther)
            #expect(response.headers[.location] == "/dashboard/sign-in?done=signed-out")
            #expect(
                response.headers[values: .setCookie].contains {
                    $0.hasPrefix("horizon_session=;") && $0.contains("Max-Age=0")
                })
            #expect(try await server.ledger.dashboardSessionCount(of: merchant.id, at: server.clock.now) == 0)
            // The old token (kept by someone who copied it) no longer signs anybody in.
            let replay = try await client.send(
                .get, "/dashboard/transactions", headers: [.cookie: "horizon_session=\(token)"])
            #expect(replay.status == .seeOther)
            #expect(replay.headers[.location] == "/dashboard/sign-in")
        }
    }

    @Test func sessionsExpire() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            #expect(try await browser.get("/dashboard/terminals").status == .ok)
            server.clock.advance(8 * 3600)
            #expect(try await browser.get("/dashboard/terminals").status == .seeOther)
        }
    }

    // MARK: Pages

    @Test func transactionsAreFilteredAndPaged() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let shop = try await DashboardShop(server.ledger, merchant: merchant.id)
        let start = server.clock.now
        for index in 0..<27 {
            try await shop.pay(
                100 + Int64(index), registerUser: index % 2 == 0 ? "anna" : "ben", at: start + Int64(index))
        }
        try await server.ledger.addRegisterUser(id: "anna", name: "Anna", to: merchant.id)
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let first = try await browser.get("/dashboard/transactions")
            #expect(first.text.contains("1.26 EUR"))  // the newest
            #expect(!first.text.contains(">1.01 EUR<"))  // on the second page
            let older = try #require(
                first.text.firstMatch(of: /href="(\/dashboard\/transactions\?before=[A-Za-z0-9_-]+)"/))
            let second = try await browser.get(String(older.1))
            #expect(second.text.contains("1.00 EUR"))
            #expect(second.text.contains("1.01 EUR"))
            #expect(!second.text.contains("1.26 EUR"))
            #expect(second.text.contains("Newest"))

            let anna = try await browser.get("/dashboard/transactions?register_user=anna")
            #expect(anna.text.contains("1.26 EUR"))
            #expect(!anna.text.contains("1.25 EUR"))
            let day = DashboardDay.of(start)
            let today = try await browser.get("/dashboard/transactions?type=payment&from=\(day)&to=\(day)")
            #expect(today.text.contains("1.26 EUR"))
            let coupons = try await browser.get("/dashboard/transactions?type=coupon")
            #expect(coupons.text.contains("No transactions match."))

            let badDate = try await browser.get("/dashboard/transactions?from=2026-02-31")
            #expect(badDate.status == .badRequest)
            #expect(badDate.text.contains("“From” must be a date such as 2026-11-25."))
            // A cursor before the oldest reference (base64url of "tx1:1"): past the end.
            let pastTheEnd = try await browser.get("/dashboard/transactions?before=dHgxOjE")
            #expect(pastTheEnd.status == .ok)
            #expect(pastTheEnd.text.contains("There are no older transactions"))
            let broken = try await browser.get("/dashboard/transactions?before=not-a-cursor")
            #expect(broken.status == .badRequest)
            #expect(broken.text.contains("The page link is broken"))
        }
    }

    @Test func registerUsersAreAddedAndRemovedWithReadableRefusals() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            _ = try await browser.get("/dashboard/register-users")
            let added = try await browser.post(
                "/dashboard/register-users", ["id": "till-1", "name": "Anna"], csrf: true)
            #expect(added.headers[.location] == "/dashboard/register-users?done=user-added")
            let page = try await browser.get("/dashboard/register-users?done=user-added")
            #expect(page.text.contains("The register user was added."))
            #expect(page.text.contains("Anna"))
            let duplicate = try await browser.post(
                "/dashboard/register-users", ["id": "till-1", "name": "Other"], csrf: true)
            #expect(duplicate.status == .conflict)
            #expect(duplicate.text.contains("A register user with the id till-1 exists already."))
            let empty = try await browser.post("/dashboard/register-users", ["id": "till-2", "name": "  "], csrf: true)
            #expect(empty.status == .badRequest)
            #expect(empty.text.contains("Give the register user a name."))
            // The merchant service's rules, exactly: nothing is stored that the API would refuse
            // (and then could not rename or remove).
            let refusedIDs = ["x<script>", "till 3", String(repeating: "i", count: 65), "till\u{7}"]
            for id in refusedIDs {
                let refused = try await browser.post(
                    "/dashboard/register-users", ["id": id, "name": "Ann"], csrf: true)
                #expect(refused.status == .badRequest, "\(id)")
                #expect(refused.text.contains("The id must be 1 to 64 characters of A-Z a-z 0-9 . _ : - (no spaces)."))
            }
            let refusedNames = [
                String(repeating: "n", count: 65), String(repeating: "n", count: 150), "Ann\u{1B}[31m", "An\u{0B}n",
                "\u{202E}nnA", "Ann\u{2066}", "A\u{200B}nn",
            ]
            for name in refusedNames {
                let refused = try await browser.post(
                    "/dashboard/register-users", ["id": "till-3", "name": name], csrf: true)
                #expect(refused.status == .badRequest, "\(name.debugDescription)")
                #expect(refused.text.contains("The name must be 1 to 64 bytes of printable text"))
            }
            let hostile = try await browser.post(
                "/dashboard/register-users", ["id": "till-4", "name": "<b>Bold</b>"], csrf: true)
            #expect(hostile.status == .seeOther)
            let escaped = try await browser.get("/dashboard/register-users")
            #expect(escaped.text.contains("&lt;b&gt;Bold&lt;/b&gt;"))
            #expect(!escaped.text.contains("<b>Bold</b>"))
            // Removing asks first, and only the confirmed form removes.
            let asked = try await browser.post("/dashboard/register-users/remove", ["id": "till-1"], csrf: true)
            #expect(asked.status == .ok)
            #expect(asked.text.contains("Remove the register user Anna (till-1)?"))
            #expect(asked.text.contains("name=\"confirm\" value=\"yes\""))
            #expect(asked.text.contains("href=\"/dashboard/register-users\">Cancel</a>"))
            #expect(try await server.ledger.registerUsers(of: merchant.id).count == 2)
            let removed = try await browser.post(
                "/dashboard/register-users/remove", ["id": "till-1", "confirm": "yes"], csrf: true)
            #expect(removed.status == .seeOther)
            let stored = try await server.ledger.registerUsers(of: merchant.id)
            #expect(stored.map(\.id) == ["till-4"])
            // What the dashboard stored, the API accepts: it can be renamed and removed there.
            for user in stored {
                #expect(throws: Never.self) { try RegisterUserRules.check(id: user.id, name: user.name) }
            }
        }
    }

    @Test func terminalsAreListedAndRevoked() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let credential = try await server.activate(TerminalKey(), label: "Till by the door")
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let page = try await browser.get("/dashboard/terminals")
            #expect(page.text.contains("Till by the door"))
            #expect(page.text.contains("Revoke"))
            let asked = try await browser.post("/dashboard/terminals/revoke", ["id": credential.terminalId], csrf: true)
            #expect(asked.status == .ok)
            #expect(asked.text.contains("Revoke the terminal Till by the door (\(credential.terminalId))?"))
            #expect(try await server.ledger.terminals(of: merchant.id).first?.isRevoked == false)
            let revoked = try await browser.post(
                "/dashboard/terminals/revoke", ["id": credential.terminalId, "confirm": "yes"], csrf: true)
            #expect(revoked.status == .seeOther)
            #expect(try await server.ledger.terminals(of: merchant.id).first?.isRevoked == true)
            #expect(try await browser.get("/dashboard/terminals").text.contains("revoked"))
        }
    }

    @Test func programsShowTheRuleMembershipsAndCouponsAndTheRuleIsEdited() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let shop = try await DashboardShop(server.ledger, merchant: merchant.id)
        try await server.ledger.grantGoldMembership(
            to: shop.wallet, at: merchant.id, tier: "Gold", validFrom: 1_000, validUntil: 2_000_000_000)
        try await server.ledger.issueCoupon(
            code: "WELCOME", to: shop.wallet, at: merchant.id, description: "A free croissant",
            value: try Money(minorUnits: 250, currency: .eur), expiresAt: 2_000_000_000)
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let page = try await browser.get("/dashboard/programs")
            #expect(page.text.contains("Payments earn 1 bonus point per whole EUR"))
            #expect(page.text.contains("Gold"))
            #expect(page.text.contains("Alex"))
            #expect(page.text.contains("WELCOME"))
            #expect(page.text.contains("2.50 EUR"))
            let bad = try await browser.post("/dashboard/programs/bonus-rule", ["points": "-3"], csrf: true)
            #expect(bad.status == .badRequest)
            #expect(bad.text.contains("Points per unit must be a whole number from 0 to 1000000."))
            let saved = try await browser.post("/dashboard/programs/bonus-rule", ["points": "4"], csrf: true)
            #expect(saved.status == .seeOther)
            #expect(try await server.ledger.merchant(merchant.id).bonusPointsPerMajorUnit == 4)
        }
    }

    // MARK: Refunds

    @Test func refundsFromThePaymentsPageAreConfirmedIdempotentPartialAndNeverMoreThanWasPaid() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let shop = try await DashboardShop(server.ledger, merchant: merchant.id)
        let payment = try await shop.pay(20_00, registerUser: "anna", at: server.clock.now)
        let reference = try #require(
            try await server.ledger.transaction(for: payment.paymentID)?.reference)
        let balance: @Sendable () async throws -> Int64 = {
            try await server.ledger.balance(of: shop.wallet, in: .eur).minorUnits
        }
        let paid = try await balance()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            // The list leads to the payment's page, which has the refund form.
            let list = try await browser.get("/dashboard/transactions")
            #expect(list.text.contains("href=\"/dashboard/transactions/\(reference)\""))
            #expect(!list.text.contains("name=\"refund_id\""))
            let page = try await browser.get("/dashboard/transactions/\(reference)")
            let form = try #require(page.text.firstMatch(of: /action="(\/dashboard\/transactions\/\d+\/refund)"/))
            let refundID = try #require(page.text.firstMatch(of: /name="refund_id" value="([^"]+)"/))
            // The box is empty: the merchant types the amount; what may be refunded is said.
            #expect(page.text.contains("name=\"amount\" inputmode=\"decimal\""))
            #expect(page.text.contains("value=\"\">"))
            #expect(!page.text.contains("value=\"20.00\""))
            #expect(page.text.contains("Up to 20.00 EUR can be refunded."))

            // Sent without the confirmation, nothing moves: the page asks first.
            let asked = try await browser.post(
                String(form.1), ["refund_id": String(refundID.1), "amount": "7.50"], csrf: true)
            #expect(asked.status == .ok)
            #expect(asked.text.contains("Refund 7.50 EUR of payment \(reference) (20.00 EUR paid"))
            #expect(asked.text.contains("A refund cannot be undone."))
            #expect(asked.text.contains("href=\"/dashboard/transactions/\(reference)\">Cancel</a>"))
            #expect(try await balance() == paid)
            let empty = try await browser.post(
                String(form.1), ["refund_id": String(refundID.1), "amount": ""], csrf: true)
            #expect(empty.status == .badRequest)
            #expect(empty.text.contains("Enter the amount to refund; nothing was refunded."))

            // Confirmed, part of it; the same form sent twice (a double click) refunds once.
            for _ in 0..<2 {
                let response = try await browser.post(
                    String(form.1), ["refund_id": String(refundID.1), "amount": "7.50", "confirm": "yes"], csrf: true)
                #expect(response.status == .seeOther)
                #expect(response.headers[.location] == "/dashboard/transactions/\(reference)?done=refunded")
            }
            #expect(try await balance() == paid + 7_50)
            // The same refund id for another amount is refused; nothing moves.
            let conflict = try await browser.post(
                String(form.1), ["refund_id": String(refundID.1), "amount": "1.00", "confirm": "yes"], csrf: true)
            #expect(conflict.status == .conflict)
            #expect(conflict.text.contains("This refund form was already used for another amount"))

            let after = try await browser.get("/dashboard/transactions/\(reference)?done=refunded")
            #expect(after.text.contains("The refund was made."))
            #expect(after.text.contains("refunded 7.50 EUR"))
            #expect(after.text.contains("<code>\(refundID.1)</code>"))  // in the refunds table
            #expect(after.text.contains("Up to 12.50 EUR can be refunded."))  // what is left
            let freshID = try #require(after.text.firstMatch(of: /name="refund_id" value="([^"]+)"/))
            #expect(freshID.1 != refundID.1)
            let tooMuch = try await browser.post(
                String(form.1), ["refund_id": String(freshID.1), "amount": "12.51", "confirm": "yes"], csrf: true)
            #expect(tooMuch.status == .conflict)
            #expect(tooMuch.text.contains("The refund is more than what is left of payment"))
            #expect(tooMuch.text.contains("12.50 EUR"))
            let notMoney = try await browser.post(
                String(form.1), ["refund_id": String(freshID.1), "amount": "lots", "confirm": "yes"], csrf: true)
            #expect(notMoney.status == .badRequest)
            #expect(notMoney.text.contains("is not an amount in EUR"))
            let rest = try await browser.post(
                String(form.1), ["refund_id": String(freshID.1), "amount": "12.50", "confirm": "yes"], csrf: true)
            #expect(rest.status == .seeOther)
            #expect(try await balance() == paid + 20_00)
            let done = try await browser.get("/dashboard/transactions/\(reference)")
            #expect(done.text.contains("refunded 20.00 EUR"))
            #expect(!done.text.contains("name=\"refund_id\""))  // nothing left to refund
            #expect(try await browser.get("/dashboard/transactions").text.contains("refunded 20.00 EUR"))
            let forged = try await browser.post(
                String(form.1), ["refund_id": "r_forged", "amount": "1.00", "confirm": "yes", "csrf": "wrong"])
            #expect(forged.status == .forbidden)
        }
    }

    // MARK: Isolation

    @Test func oneMerchantsSessionNeverSeesOrChangesAnothersData() async throws {
        let server = try await TestServer()
        let bakery = try await server.addMerchant()
        let florist = try await server.addMerchant(name: "Florist", email: "owner@florist.example")
        let floristShop = try await DashboardShop(server.ledger, merchant: florist.id, key: 2)
        try await floristShop.pay(987_65, registerUser: "rose", at: server.clock.now)
        try await server.ledger.addRegisterUser(id: "rose", name: "Rose", to: florist.id)
        let floristTerminal = try await server.ledger.activateTerminal(
            merchant: florist.id, label: "Florist till",
            publicKey: try PublicKeyBytes(bytes: Array(P256.Signing.PrivateKey().publicKey.x963Representation)),
            keyID: [9, 9, 9, 9, 9, 9, 9, 9], credentialExpiresAt: server.clock.now + 3600, at: server.clock.now)
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            for path in [
                "/dashboard/home", "/dashboard/transactions", "/dashboard/transactions?register_user=rose",
                "/dashboard/transactions.csv", "/dashboard/transactions?q=98765", "/dashboard/register-users",
                "/dashboard/terminals", "/dashboard/programs",
            ] {
                let page = try await browser.get(path)
                #expect(page.status == .ok, "\(path)")
                #expect(!page.text.contains("987.65"), "\(path)")
                #expect(!page.text.contains("Rose"), "\(path)")
                #expect(!page.text.contains("Florist till"), "\(path)")
            }
            let revoke = try await browser.post(
                "/dashboard/terminals/revoke", ["id": floristTerminal.id.rawValue], csrf: true)
            #expect(revoke.status == .notFound)
            #expect(try await server.ledger.terminal(floristTerminal.id).isRevoked == false)
            let remove = try await browser.post("/dashboard/register-users/remove", ["id": "rose"], csrf: true)
            #expect(remove.status == .notFound)
            #expect(try await server.ledger.registerUsers(of: florist.id).map(\.id) == ["rose"])
            let floristPayment = try #require(
                try await server.ledger.transactions(of: florist.id, filter: TransactionFilter(), limit: 1)
                    .transactions.first?.transaction)
            let refund = try await browser.post(
                "/dashboard/transactions/\(floristPayment.reference)/refund",
                ["refund_id": "r_steal", "amount": "987.65", "confirm": "yes"], csrf: true)
            #expect(refund.status == .notFound)
            let page = try await browser.get("/dashboard/transactions/\(floristPayment.reference)")
            #expect(page.status == .notFound)
            #expect(!page.text.contains("987.65"))
            #expect(refund.status == .notFound)
            #expect(refund.text.contains("That payment does not exist, so nothing was refunded."))
            #expect(
                try await server.ledger.refunds(of: floristPayment.result.paymentID, merchant: florist.id).isEmpty)
        }
        // The florist's own session sees them (the filters above hid nothing by accident).
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn(email: "owner@florist.example")
            #expect(try await browser.get("/dashboard/transactions").text.contains("987.65 EUR"))
        }
        #expect(try await server.ledger.registerUsers(of: bakery.id).isEmpty)
    }
}

// MARK: Helpers

/// A browser's part of the dashboard conversation: the cookies it holds and the CSRF token of
/// the last page it read.
final class DashboardBrowser: @unchecked Sendable {
    let client: any TestClientProtocol
    private(set) var cookies: [String: String] = [:]
    private(set) var csrf = ""
    /// Sent with every request (e.g. what a proxy in front would add).
    var extraHeaders: HTTPFields = [:]

    init(_ client: any TestClientProtocol) { self.client = client }

    /// Opens the sign-in page and posts its form; returns the response and the session token set.
    @discardableResult
    func signIn(email: String = TestServer.email, password: String = TestServer.password) async throws -> (
        response: TestResponse, token: String
    ) {
        _ = try await get("/dashboard/sign-in")
        let response = try await post("/dashboard/sign-in", ["email": email, "password": password], csrf: true)
        let token = cookies["horizon_session"] ?? ""
        // Follows the redirect as a browser does, so the next form carries the session's token.
        if response.status == .seeOther, let location = response.headers[.location] { _ = try await get(location) }
        return (response, token)
    }

    func get(_ path: String) async throws -> TestResponse {
        let response = try await client.executeRequest(uri: path, method: .get, headers: cookieHeader, body: nil)
        remember(response)
        return response
    }

    /// Posts a form; `csrf: true` adds the token of the last page read.
    func post(_ path: String, _ fields: [String: String], csrf: Bool = false) async throws -> TestResponse {
        var fields = fields
        if csrf { fields["csrf"] = self.csrf }
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let body = fields.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
            .joined(separator: "&")
        var headers = cookieHeader
        headers[.contentType] = "application/x-www-form-urlencoded"
        let response = try await client.executeRequest(
            uri: path, method: .post, headers: headers, body: ByteBuffer(string: body))
        remember(response)
        return response
    }

    private var cookieHeader: HTTPFields {
        var headers = extraHeaders
        if !cookies.isEmpty { headers[.cookie] = cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
        return headers
    }

    private func remember(_ response: TestResponse) {
        for header in response.headers[values: .setCookie] {
            let pair = header.split(separator: ";", maxSplits: 1)[0].split(separator: "=", maxSplits: 1)
            let name = String(pair[0])
            let value = pair.count > 1 ? String(pair[1]) : ""
            if header.contains("Max-Age=0") || value.isEmpty { cookies[name] = nil } else { cookies[name] = value }
        }
        if let match = response.text.firstMatch(of: /name="csrf" value="([^"]*)"/) { csrf = String(match.1) }
    }
}

extension TestClientProtocol {
    func send(_ method: HTTPRequest.Method, _ uri: String, headers: HTTPFields = [:], body: String) async throws
        -> TestResponse
    {
        try await executeRequest(uri: uri, method: method, headers: headers, body: ByteBuffer(string: body))
    }
}

/// A wallet with money at a merchant, paying straight into the ledger (no radio).
struct DashboardShop: Sendable {
    let ledger: Ledger
    let merchant: MerchantID
    let key: PublicKeyBytes
    let wallet: WalletID

    init(_ ledger: Ledger, merchant: MerchantID, key seed: UInt8 = 1) async throws {
        self.ledger = ledger
        self.merchant = merchant
        key = try PublicKeyBytes(bytes: [0x04] + [UInt8](repeating: seed, count: 64))
        wallet = try await ledger.createWallet(name: "Alex", publicKey: key).id
        try await ledger.deposit(try Money(minorUnits: 10_000_00, currency: .eur), to: wallet)
    }

    /// The key id of the terminal every payment here names (`terminalKeyID`).
    static let terminalKeyID: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]

    @discardableResult
    func pay(_ cents: Int64, tip: Int64 = 0, registerUser: String, at time: UnixTime) async throws -> SettlementResult {
        var generator = SystemRandomNumberGenerator()
        let request = SettlementRequest(
            paymentID: PaymentID.random(using: &generator), sessionID: try #require(SessionID(rawValue: 7)),
            walletKey: key, terminalKeyID: try TerminalKeyID(bytes: Self.terminalKeyID),
            amount: try Money(minorUnits: cents, currency: .eur), tip: try Money(minorUnits: tip, currency: .eur),
            registerUser: registerUser, contentDigest: [UInt8](repeating: 7, count: 32))
        let result = try await ledger.settle(request, merchant: merchant, at: time)
        #expect(result.outcome.isApproved)
        return result
    }
}

enum DashboardDay {
    /// "YYYY-MM-DD" of a Unix time, in UTC.
    static func of(_ time: UnixTime) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
    }
}
