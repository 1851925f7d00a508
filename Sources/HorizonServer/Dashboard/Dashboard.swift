import Foundation
import HTTPTypes
import HorizonCore
import HorizonLedger
import HorizonProtocol
import Hummingbird
import Logging
import NIOCore

/// The merchant dashboard: HTML pages under `/dashboard/`, rendered on the server from Mustache
/// templates, usable without JavaScript.
///
/// Sessions live in the database (only the token's hash, with its expiry and CSRF secret), so
/// any server process serves any request and a sign-out ends the session everywhere. Every query
/// is scoped to the signed-in merchant: a reference, terminal or register user of another
/// merchant is "not found".
struct Dashboard: Sendable {
    let ledger: Ledger
    /// The API's sign-in (password and lock-out rules), shared so both refuse alike.
    let api: APIHandler
    let templates: DashboardTemplates
    let settings: DashboardSettings
    /// Cookies carry `Secure` when the server speaks TLS or stands behind a TLS proxy.
    let secureCookies: Bool
    let maximumBodyBytes: Int
    let now: @Sendable () -> UnixTime

    init(api: APIHandler, configuration: ServerConfiguration, settings: DashboardSettings = DashboardSettings()) throws
    {
        ledger = api.ledger
        self.api = api
        templates = try DashboardTemplates()
        self.settings = settings
        secureCookies = configuration.secureCookies
        maximumBodyBytes = configuration.maximumBodyBytes
        now = api.now
    }

    /// The dashboard's routes, mounted at `/dashboard`: its pages only, without the API's
    /// JSON-only body rule and signatures, and with its own error pages (HTML, never the API's
    /// JSON envelope). Any other path or method under `/dashboard` is the dashboard's "page not
    /// found".
    func routes() -> RouteCollection<ServerRequestContext> {
        let routes = RouteCollection(context: ServerRequestContext.self)
        routes.add(middleware: DashboardPagesMiddleware(dashboard: self))
        var served: [String: Set<HTTPRequest.Method>] = [:]
        func on(
            _ method: HTTPRequest.Method, _ path: String,
            _ handler: @escaping @Sendable (Request, ServerRequestContext) async throws -> Response
        ) {
            routes.on(RouterPath(path), method: method, use: handler)
            served[path, default: []].insert(method)
        }
        on(.get, "") { _, _ in Self.redirect("/dashboard/home") }
        on(.get, "/style.css") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "public, max-age=3600"],
                body: .init(byteBuffer: ByteBuffer(string: templates.stylesheet)))
        }
        on(.get, "/sign-in") { request, _ in try await signInPage(request) }
        on(.post, "/sign-in") { request, context in try await signIn(request, context: context) }
        on(.post, "/sign-out") { request, _ in try await signOut(request) }
        on(.get, "/home") { request, _ in try await homePage(request) }
        on(.get, "/transactions") { request, _ in try await transactionsPage(request) }
        on(.get, "/transactions.csv") { request, _ in try await transactionsCSV(request) }
        on(.get, "/transactions/{reference}") { request, context in try await transactionPage(request, context: context)
        }
        on(.post, "/transactions/{reference}/refund") { request, context in try await refund(request, context: context)
        }
        on(.get, "/register-users") { request, _ in try await registerUsersPage(request) }
        on(.post, "/register-users") { request, _ in try await addRegisterUser(request) }
        on(.post, "/register-users/remove") { request, _ in try await removeRegisterUser(request) }
        on(.get, "/terminals") { request, _ in try await terminalsPage(request) }
        on(.post, "/terminals/revoke") { request, _ in try await revokeTerminal(request) }
        on(.get, "/api-keys") { request, _ in try await apiKeysPage(request) }
        on(.post, "/api-keys") { request, _ in try await createAPIKey(request) }
        on(.post, "/api-keys/roll") { request, _ in try await rollAPIKey(request) }
        on(.post, "/api-keys/revoke") { request, _ in try await revokeAPIKey(request) }
        on(.get, "/webhooks") { request, _ in try await webhooksPage(request) }
        on(.post, "/webhooks") { request, _ in try await createWebhookEndpoint(request) }
        on(.post, "/webhooks/roll") { request, _ in try await rollWebhookSecret(request) }
        on(.post, "/webhooks/delete") { request, _ in try await deleteWebhookEndpoint(request) }
        on(.post, "/webhooks/resend") { request, _ in try await resendWebhookDelivery(request) }
        on(.get, "/programs") { request, _ in try await programsPage(request) }
        on(.post, "/programs/bonus-rule") { request, _ in try await setBonusRule(request) }
        on(.get, "/settings") { request, _ in try await settingsPage(request) }
        on(.post, "/settings/time-zone") { request, _ in try await setTimeZone(request) }
        let notFound: @Sendable (Request, ServerRequestContext) async throws -> Response = { _, _ in
            throw DashboardRefusal.notFound
        }
        for (path, methods) in served.sorted(by: { $0.key < $1.key }) + [("/**", [])] {
            for method in Self.otherMethods where !methods.contains(method) {
                routes.on(RouterPath(path), method: method, use: notFound)
            }
        }
        return routes
    }

    /// The methods a browser or a scanner may send; each is "page not found" where a path does
    /// not serve it.
    static let otherMethods: [HTTPRequest.Method] = [.get, .head, .post, .put, .delete, .patch, .options]

    // MARK: Sign-in and sign-out

    func signInPage(_ request: Request) async throws -> Response {
        if try await session(of: request) != nil { return Self.redirect("/dashboard/home") }
        let token = DashboardSecurity.randomToken()
        var response = try page(
            "sign-in", SignInPage(layout: .signedOut("Sign in", notice: Self.notice(request)), csrf: token, email: ""))
        response.setCookie(
            DashboardSecurity.cookie(DashboardSecurity.signInCookie, value: token, maxAge: 3600, secure: secureCookies))
        return response
    }

    func signIn(_ request: Request, context: ServerRequestContext) async throws -> Response {
        let form = try await self.form(request)
        // Login CSRF: the form must come from our own sign-in page (its cookie and field agree).
        guard let cookie = request.cookies[DashboardSecurity.signInCookie]?.value, let field = form["csrf"],
            DashboardSecurity.same(cookie, field)
        else { throw DashboardRefusal.csrf(signedIn: false) }
        let email = form.text("email") ?? ""
        func again(_ status: HTTPResponse.Status, _ problem: String, headers: HTTPFields = [:]) throws -> Response {
            var response = try page(
                "sign-in", SignInPage(layout: .signedOut("Sign in", problem: problem), csrf: cookie, email: email),
                status: status)
            response.headers.append(contentsOf: headers)
            return response
        }
        guard !email.isEmpty, let password = form["password"], !password.isEmpty else {
            return try again(.badRequest, "Enter the e-mail and the password of the merchant's admin.")
        }
        guard email.utf8.count <= 254, password.utf8.count <= 1024 else {
            return try again(.badRequest, "The e-mail or the password is too long.")
        }
        // The API's sign-in: the same counters and back-off as the API's admin session and activation.
        let merchant: Merchant
        do {
            merchant = try await api.signIn(email: email, password: password)
        } catch let error as APIError where error.code == .invalidCredentials {
            RequestScope.current?.refusal.note(error.code.rawValue)
            return try again(.unauthorized, "The e-mail or the password is wrong.")
        } catch let error as APIError where error.code == .invalidRequest {
            return try again(.badRequest, "The e-mail cannot contain control characters.")
        } catch let error as APIError where error.code == .rateLimited {
            RequestScope.current?.refusal.note(error.code.rawValue)
            let minutes = (settings.signInWindow + 59) / 60
            return try again(
                .tooManyRequests, "Too many sign-in attempts from here. Wait \(minutes) minutes, then try again.",
                headers: error.headers)
        } catch let error as APIError where error.code == .accountLocked {
            RequestScope.current?.refusal.note(error.code.rawValue)
            // The API's words ("too many wrong sign-ins …; try again in 60 s"), as a sentence.
            return try again(
                .tooManyRequests, error.message.prefix(1).uppercased() + error.message.dropFirst() + ".",
                headers: error.headers)
        }
        let (token, _) = try await api.startMerchantSession(for: merchant.id, lifetime: settings.sessionLifetime)
        RequestScope.current?.logger.notice("dashboard sign-in", metadata: ["merchant": "\(merchant.id)"])
        var response = Self.redirect("/dashboard/home")
        response.setCookie(
            DashboardSecurity.cookie(
                DashboardSecurity.sessionCookie, value: token, maxAge: Int(settings.sessionLifetime),
                secure: secureCookies))
        response.setCookie(
            DashboardSecurity.cookie(DashboardSecurity.signInCookie, value: "", maxAge: 0, secure: secureCookies))
        return response
    }

    func signOut(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        _ = try await checkedForm(request, signedIn)
        try await ledger.deleteDashboardSession(tokenHash: signedIn.tokenHash)
        var response = Self.redirect("/dashboard/sign-in?done=signed-out")
        response.setCookie(
            DashboardSecurity.cookie(DashboardSecurity.sessionCookie, value: "", maxAge: 0, secure: secureCookies))
        return response
    }

    // MARK: Transactions

    func transactionsPage(_ request: Request) async throws -> Response {
        guard let signedIn = try await session(of: request) else { return Self.redirect("/dashboard/sign-in") }
        return try await transactions(signedIn, query: Self.query(of: request), notice: Self.notice(request))
    }

    /// The filters and search of a transactions list (its page, its CSV), read from a query.
    struct ListQuery {
        var filter = TransactionFilter()
        var before: TransactionCursor?
        var problems: [String] = []
        /// The query's own values, for the form and for links that keep them.
        var search = ""
        var from = ""
        var to = ""
        var type = ""
        var terminal = ""
        var links: [(String, String)] {
            [
                ("q", search), ("from", from), ("to", to), ("type", type),
                ("register_user", filter.registerUser ?? ""), ("terminal", terminal),
            ].filter { !$0.1.isEmpty }
        }
    }

    func listQuery(_ query: FormFields, _ merchant: Merchant, clock: MerchantClock, terminals: [TerminalRecord])
        -> ListQuery
    {
        var list = ListQuery()
        list.from = query.text("from") ?? ""
        list.to = query.text("to") ?? ""
        if !list.from.isEmpty {
            if let start = clock.startOfDay(list.from) {
                list.filter.from = start
            } else {
                list.problems.append("“From” must be a date such as 2026-11-25.")
            }
        }
        if !list.to.isEmpty {
            // "To" names the last day shown, so the range ends when that day does.
            if let start = clock.startOfDay(list.to) {
                list.filter.to = clock.day(containing: start).upperBound
            } else {
                list.problems.append("“To” must be a date such as 2026-11-25.")
            }
        }
        if let from = list.filter.from, let to = list.filter.to, from >= to {
            list.problems.append(
                "“From” (\(list.from)) is after “To” (\(list.to)), so no day is in the range: choose a first day on or before the last."
            )
        }
        list.type = query.text("type") ?? ""
        if !list.type.isEmpty {
            if let type = TransactionTypeChoice.type(for: list.type) {
                list.filter.type = type
            } else {
                list.problems.append("“Type” must be one of the listed types.")
            }
        }
        list.filter.registerUser = query.text("register_user")
        list.terminal = query.text("terminal") ?? ""
        if !list.terminal.isEmpty {
            if let terminal = terminals.first(where: { $0.id.rawValue == list.terminal }),
                let key = try? TerminalKeyID(bytes: terminal.keyID)
            {
                list.filter.terminalKeyID = key
            } else {
                list.problems.append("There is no terminal \(list.terminal) among yours.")
            }
        }
        list.search = (query.text("q") ?? "").trimmingCharacters(in: .whitespaces)
        if !list.search.isEmpty {
            if let matching = Self.searches(for: list.search, currency: merchant.currency) {
                list.filter.matching = matching
            } else {
                list.problems.append(
                    "Search for a payment id (32 hex digits), a reference such as 1042, or an amount such as 12.50.")
            }
        }
        if let text = query.text("before") {
            if let cursor = TransactionCursor(token: text) {
                list.before = cursor
            } else {
                list.problems.append("The page link is broken: start again from the newest transactions.")
            }
        }
        return list
    }

    /// What a search box's text can mean: a payment id, a reference or an amount (digits alone
    /// are a reference or a whole amount, either matches). Nil when it is none of them.
    static func searches(for text: String, currency: Currency) -> [TransactionSearch]? {
        let compact = text.hasPrefix("#") ? String(text.dropFirst()) : text
        if compact.utf8.count == PaymentID.byteCount * 2, let bytes = [UInt8](hexString: compact.lowercased()),
            let id = try? PaymentID(bytes: bytes)
        {
            return [.paymentID(id)]
        }
        var found: [TransactionSearch] = []
        if !compact.isEmpty, compact.utf8.count <= 18, compact.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            let reference = Int64(compact)
        {
            found.append(.reference(reference))
        }
        let amountText = text.replacingOccurrences(of: ",", with: ".")
            .replacingOccurrences(of: currency.code, with: "").trimmingCharacters(in: .whitespaces)
        if let amount = try? Money.parse(amountText, currency: currency) { found.append(.amount(amount.minorUnits)) }
        return found.isEmpty ? nil : found
    }

    /// The transactions page for `query`'s filters, search and page; `problem` is shown above
    /// the list with `status`.
    private func transactions(
        _ signedIn: SignedIn, query: FormFields, notice: String? = nil, problem: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let merchant = signedIn.merchant
        let clock = MerchantClock(identifier: merchant.timeZone)
        let terminals = try await ledger.terminals(of: merchant.id)
        let list = listQuery(query, merchant, clock: clock, terminals: terminals)
        let users = try await ledger.registerUsers(of: merchant.id)
        var model = TransactionsPage(
            layout: .signedIn("Transactions", signedIn, current: \.onTransactions, notice: notice),
            csrf: signedIn.session.csrfSecret, zone: clock.name, query: list.search, from: list.from, to: list.to,
            types: TransactionTypeChoice.options(selected: list.type),
            registerUsers: [Option(value: "", label: "Any", selected: list.filter.registerUser == nil)]
                + users.map {
                    Option(
                        value: $0.id, label: $0.name.isEmpty ? $0.id : "\($0.name) (\($0.id))",
                        selected: list.filter.registerUser == $0.id)
                }, terminal: list.terminal.isEmpty ? nil : list.terminal, rows: [], newestURL: nil, olderURL: nil,
            csvURL: Self.url("/dashboard/transactions.csv", list.links))
        if let user = list.filter.registerUser, !users.contains(where: { $0.id == user }) {
            // A register user no longer listed (removed, or named by the register itself) still filters.
            model.registerUsers.append(Option(value: user, label: user, selected: true))
        }
        guard list.problems.isEmpty else {
            model.layout.problem = list.problems.joined(separator: " ")
            return try page("transactions", model, status: .badRequest)
        }
        let page = try await ledger.transactions(
            of: merchant.id, filter: list.filter, limit: settings.pageSize, after: list.before)
        if list.before != nil, page.transactions.isEmpty {
            model.layout.problem = "There are no older transactions: this page is past the last one."
        }
        if let problem { model.layout.problem = problem }
        let directory = TerminalDirectory(terminals)
        model.rows = page.transactions.map { summary in
            var row = TransactionRow(summary.transaction, clock: clock, terminals: directory)
            if summary.refunded.minorUnits > 0 { row.refunded = summary.refunded.description }
            return row
        }
        if list.before != nil { model.newestURL = Self.url("/dashboard/transactions", list.links) }
        if let next = page.nextCursor {
            model.olderURL = Self.url("/dashboard/transactions", list.links + [("before", next.token)])
        }
        return try self.page("transactions", model, status: status)
    }

    /// The filtered list (every page of it) as CSV, in the merchant's time zone.
    func transactionsCSV(_ request: Request) async throws -> Response {
        guard let signedIn = try await session(of: request) else { return Self.redirect("/dashboard/sign-in") }
        let merchant = signedIn.merchant
        let clock = MerchantClock(identifier: merchant.timeZone)
        let terminals = try await ledger.terminals(of: merchant.id)
        let list = listQuery(Self.query(of: request), merchant, clock: clock, terminals: terminals)
        guard list.problems.isEmpty else {
            throw DashboardRefusal.failed(.badRequest, list.problems.joined(separator: " "))
        }
        let directory = TerminalDirectory(terminals)
        var csv = TransactionsCSV(clock: clock)
        var cursor: TransactionCursor?
        repeat {
            let page = try await ledger.transactions(of: merchant.id, filter: list.filter, limit: 1000, after: cursor)
            for summary in page.transactions {
                csv.append(summary, terminal: directory.name(of: summary.transaction.terminalKeyID))
            }
            cursor = page.nextCursor
        } while cursor != nil && csv.rows < TransactionsCSV.maximumRows
        let name = "transactions-\(clock.formatDay(now()))\(list.filter.matching.isEmpty ? "" : "-search").csv"
        return Response(
            status: .ok,
            headers: [
                .contentType: "text/csv; charset=utf-8", .contentDisposition: "attachment; filename=\"\(name)\"",
                .cacheControl: "no-store", .xContentTypeOptions: "nosniff",
            ], body: .init(byteBuffer: ByteBuffer(string: csv.text)))
    }

    // MARK: One transaction

    func transactionPage(_ request: Request, context: ServerRequestContext) async throws -> Response {
        guard let signedIn = try await session(of: request) else { return Self.redirect("/dashboard/sign-in") }
        return try await transaction(
            signedIn, reference: context.parameters.get("reference") ?? "", notice: Self.notice(request))
    }

    /// A payment's page: its receipt, the terminal and register user that took it, its refunds
    /// and (while something is left) the refund form.
    private func transaction(
        _ signedIn: SignedIn, reference text: String, notice: String? = nil, problem: String? = nil,
        status: HTTPResponse.Status = .ok, amount: String = ""
    ) async throws -> Response {
        // Another merchant's reference is "not found", exactly like one that does not exist.
        guard let reference = Int64(text),
            let found = try await ledger.transaction(reference: reference, of: signedIn.merchant.id),
            let details = try await ledger.transactionDetails(found.result.paymentID, merchant: signedIn.merchant.id)
        else { throw DashboardRefusal.failed(.notFound, "There is no transaction \(text) among yours.") }
        let clock = MerchantClock(identifier: signedIn.merchant.timeZone)
        let transaction = details.transaction
        let result = transaction.result
        var layout = Layout.signedIn(
            "Transaction \(reference)", signedIn, current: \.onTransactions, notice: notice)
        layout.problem = problem
        var row = TransactionRow(
            transaction, clock: clock,
            terminals: TerminalDirectory(try await ledger.terminals(of: signedIn.merchant.id)))
        let refunded = details.refunds.map(\.amount.minorUnits).reduce(0, +)
        if refunded > 0, let money = try? Money(minorUnits: refunded, currency: result.amount.currency) {
            row.refunded = money.description
        }
        var total: String?
        if result.transactionType == .payment,
            let sum = try? Money(
                minorUnits: result.amount.minorUnits + result.tip.minorUnits, currency: result.amount.currency)
        {
            total = sum.description
        }
        var refund: RefundForm?
        if details.refundable.minorUnits > 0 {
            refund = RefundForm(
                reference: reference, refundID: RefundID.generate().rawValue,
                refundable: details.refundable.formattedAmount, currency: result.amount.currency.code, amount: amount)
        }
        return try page(
            "transaction",
            TransactionPage(
                layout: layout, csrf: signedIn.session.csrfSecret, zone: clock.name,
                merchantName: signedIn.merchant.name, row: row, total: total,
                offline: transaction.offline.map {
                    "Accepted offline at \(clock.format($0.acceptedAt)) (\($0.guaranteed ? "paid by the offline guarantee" : "paid from the wallet's balance"))."
                },
                refunds: details.refunds.map {
                    RefundRow(
                        refundID: $0.refundID.rawValue, amount: $0.amount.description, time: clock.format($0.createdAt),
                        destination: $0.destination == .card ? "to the card" : "to the wallet's balance")
                }, refund: refund), status: status)
    }

    /// Refunds all or part of one of the merchant's payments from its page, after the merchant
    /// confirmed the amount. The form's refund id was made when the page was rendered:
    /// submitting it twice refunds once.
    func refund(_ request: Request, context: ServerRequestContext) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        let referenceText = context.parameters.get("reference") ?? ""
        // Another merchant's reference is "not found", exactly like one that does not exist.
        guard let reference = Int64(referenceText),
            let transaction = try await ledger.transaction(reference: reference, of: signedIn.merchant.id)
        else { throw DashboardRefusal.failed(.notFound, "That payment does not exist, so nothing was refunded.") }
        let amountText = (form.text("amount") ?? "").trimmingCharacters(in: .whitespaces)
        func refuse(_ problem: String, _ status: HTTPResponse.Status = .badRequest) async throws -> Response {
            try await self.transaction(
                signedIn, reference: referenceText, problem: problem, status: status, amount: amountText)
        }
        let currency = transaction.result.amount.currency
        guard !amountText.isEmpty else {
            return try await refuse("Enter the amount to refund; nothing was refunded.")
        }
        let amount: Money
        do { amount = try Money.parse(amountText, currency: currency) } catch {
            return try await refuse(
                "“\(amountText)” is not an amount in \(currency.code): write it like \(transaction.result.amount.formattedAmount)."
            )
        }
        let refundID = form["refund_id"] ?? ""
        guard form["confirm"] == "yes" else {
            var layout = Layout.signedIn("Confirm the refund", signedIn, current: \.onTransactions, notice: nil)
            layout.problem = nil
            return try page(
                "confirm",
                ConfirmPage(
                    layout: layout,
                    question:
                        "Refund \(amount) of payment \(reference) (\(transaction.result.amount) paid \(MerchantClock(identifier: signedIn.merchant.timeZone).format(transaction.result.settledAt)))?",
                    consequence: "The money goes back the way it was paid. A refund cannot be undone.",
                    action: "/dashboard/transactions/\(reference)/refund",
                    fields: [
                        FormField(name: "csrf", value: signedIn.session.csrfSecret),
                        FormField(name: "refund_id", value: refundID), FormField(name: "amount", value: amountText),
                        FormField(name: "confirm", value: "yes"),
                    ], button: "Refund \(amount)", cancelURL: "/dashboard/transactions/\(reference)"))
        }
        let request = RefundRequest(
            refundID: RefundID(rawValue: refundID), paymentID: transaction.result.paymentID, amount: amount)
        // To the method the payment came from: a card payment's refund goes on to its processor.
        let outcome: Result<Refund, LedgerError>
        do {
            outcome = .success(
                try await CardRefunds(ledger: ledger, processor: api.cards).refund(
                    request, merchant: signedIn.merchant.id, at: now()))
        } catch {
            switch error {
            case .ledger(let error): outcome = .failure(error)
            case .processor(_, let refund):
                return try await refuse(
                    "Refund \(refund.refundID) of \(refund.amount) is recorded, but the card processor has not confirmed it yet; finish it with `horizon-terminal refund \(refund.paymentID.bytes.hexString) --amount \(refund.amount.formattedAmount) --refund-id \(refund.refundID)` (the same id refunds once).",
                    .serviceUnavailable)
            }
        }
        switch outcome {
        case .success(let refund):
            RequestScope.current?.logger.notice(
                "refund from the dashboard",
                metadata: ["refund": "\(refund.refundID)", "reference": "\(reference)", "amount": "\(refund.amount)"])
            return Self.redirect("/dashboard/transactions/\(reference)?done=refunded")
        case .failure(.refundRefused(let refusal)):
            return try await refuse(Self.sentence(for: refusal, reference: reference), Self.status(for: refusal))
        case .failure(let error):
            throw error
        }
    }

    static func sentence(for refusal: RefundRefusal, reference: Int64) -> String {
        switch refusal {
        case .exceedsRemaining(let remaining):
            remaining.minorUnits == 0
                ? "Payment \(reference) is refunded in full already; nothing was refunded now."
                : "The refund is more than what is left of payment \(reference) (\(remaining)); nothing was refunded."
        case .invalidAmount: "A refund must be more than zero."
        case .idempotencyConflict:
            "This refund form was already used for another amount; nothing was refunded now. Use the form on the page as it is now."
        case .invalidRefundID:
            "The refund form is damaged (its refund id); nothing was refunded. Use the form on the page as it is now."
        case .paymentNotFound, .notRefundable, .currencyMismatch:
            "Payment \(reference) cannot be refunded: \(refusal)."
        }
    }

    static func status(for refusal: RefundRefusal) -> HTTPResponse.Status {
        switch refusal {
        case .exceedsRemaining, .idempotencyConflict: .conflict
        case .paymentNotFound: .notFound
        default: .badRequest
        }
    }

    // MARK: Register users

    func registerUsersPage(_ request: Request) async throws -> Response {
        guard let signedIn = try await session(of: request) else { return Self.redirect("/dashboard/sign-in") }
        return try await registerUsers(signedIn, notice: Self.notice(request))
    }

    private func registerUsers(
        _ signedIn: SignedIn, notice: String? = nil, problem: String? = nil, status: HTTPResponse.Status = .ok,
        newID: String = "", newName: String = ""
    ) async throws -> Response {
        let users = try await ledger.registerUsers(of: signedIn.merchant.id)
        var layout = Layout.signedIn("Register users", signedIn, current: \.onRegisterUsers, notice: notice)
        layout.problem = problem
        let clock = MerchantClock(identifier: signedIn.merchant.timeZone)
        return try page(
            "register-users",
            RegisterUsersPage(
                layout: layout, csrf: signedIn.session.csrfSecret, zone: clock.name,
                idPattern: RegisterUserForm.idPattern, idRule: RegisterUserForm.idRule,
                maximumIDLength: RegisterUserRules.maximumIDLength,
                users: users.map {
                    RegisterUserRow(id: $0.id, name: $0.name, added: clock.format($0.addedAt))
                }, newID: newID, newName: newName), status: status)
    }

    func addRegisterUser(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        let id = form.text("id") ?? ""
        let name = form.text("name") ?? ""
        func refuse(_ problem: String, _ status: HTTPResponse.Status = .badRequest) async throws -> Response {
            try await registerUsers(signedIn, problem: problem, status: status, newID: id, newName: name)
        }
        guard !id.isEmpty else { return try await refuse("Give the register user an id (the register sends it).") }
        guard !name.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            return try await refuse("Give the register user a name.")
        }
        // The merchant service's own rules, so nothing is stored here that the API would refuse
        // (and then could not rename or remove).
        let checkedName: String
        do { checkedName = try RegisterUserRules.check(id: id, name: name) ?? name } catch {
            switch error {
            case .invalidID:
                return try await refuse(RegisterUserForm.idRule)
            case .invalidName:
                return try await refuse(
                    "The name must be 1 to \(RegisterUserRules.maximumNameBytes) bytes of printable text (no control or format characters)."
                )
            }
        }
        // Checked before adding (the ledger's own refusal stays the backstop for a race).
        if try await ledger.registerUsers(of: signedIn.merchant.id).contains(where: { $0.id == id }) {
            return try await refuse("A register user with the id \(id) exists already.", .conflict)
        }
        try await ledger.addRegisterUser(id: id, name: checkedName, to: signedIn.merchant.id, at: now())
        return Self.redirect("/dashboard/register-users?done=user-added")
    }

    func removeRegisterUser(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        if form["confirm"] != "yes", let id = form["id"],
            let user = try await ledger.registerUsers(of: signedIn.merchant.id).first(where: { $0.id == id })
        {
            return try page(
                "confirm",
                ConfirmPage(
                    layout: .signedIn("Confirm the removal", signedIn, current: \.onRegisterUsers, notice: nil),
                    question: "Remove the register user \(user.name.isEmpty ? user.id : "\(user.name) (\(user.id))")?",
                    consequence:
                        "Payments already taken under this id keep it; a register that sends it after the removal is refused.",
                    action: "/dashboard/register-users/remove",
                    fields: [
                        FormField(name: "csrf", value: signedIn.session.csrfSecret), FormField(name: "id", value: id),
                        FormField(name: "confirm", value: "yes"),
                    ], button: "Remove \(user.name.isEmpty ? user.id : user.name)",
                    cancelURL: "/dashboard/register-users"))
        }
        guard let id = form["id"], try await ledger.removeRegisterUser(id: id, from: signedIn.merchant.id) else {
            return try await registerUsers(
                signedIn, problem: "That register user does not exist (removed already?).", status: .notFound)
        }
        return Self.redirect("/dashboard/register-users?done=user-removed")
    }

    // MARK: Terminals

    func terminalsPage(_ request: Request) async throws -> Response {
        guard let signedIn = try await session(of: request) else { return Self.redirect("/dashboard/sign-in") }
        return try await terminals(signedIn, notice: Self.notice(request))
    }

    private func terminals(
        _ signedIn: SignedIn, notice: String? = nil, problem: String? = nil, status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let terminals = try await ledger.terminals(of: signedIn.merchant.id)
        var layout = Layout.signedIn("Terminals", signedIn, current: \.onTerminals, notice: notice)
        layout.problem = problem
        let time = now()
        let clock = MerchantClock(identifier: signedIn.merchant.timeZone)
        return try page(
            "terminals",
            TerminalsPage(
                layout: layout, csrf: signedIn.session.csrfSecret, zone: clock.name,
                terminals: terminals.map { terminal in
                    TerminalRow(
                        name: TerminalName(terminal),
                        activated: clock.format(terminal.activatedAt),
                        expires: clock.format(terminal.credentialExpiresAt),
                        status: terminal.revokedAt.map { "revoked \(clock.format($0))" }
                            ?? (terminal.credentialExpiresAt > time ? "active" : "credential expired (renews on use)"),
                        active: !terminal.isRevoked)
                }), status: status)
    }

    func revokeTerminal(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        // Another merchant's terminal is "not found", exactly like one that does not exist.
        guard let id = form["id"],
            let terminal = try await ledger.terminals(of: signedIn.merchant.id)
                .first(where: { $0.id.rawValue == id })
        else {
            return try await terminals(signedIn, problem: "That terminal does not exist.", status: .notFound)
        }
        guard form["confirm"] == "yes" else {
            return try page(
                "confirm",
                ConfirmPage(
                    layout: .signedIn("Confirm the revocation", signedIn, current: \.onTerminals, notice: nil),
                    question: "Revoke the terminal \(terminal.label) (\(terminal.id))?",
                    consequence:
                        "It takes no more payments and gets no new credential, and wallets learn that it is revoked. This cannot be undone: the register needs a new activation.",
                    action: "/dashboard/terminals/revoke",
                    fields: [
                        FormField(name: "csrf", value: signedIn.session.csrfSecret),
                        FormField(name: "id", value: terminal.id.rawValue), FormField(name: "confirm", value: "yes"),
                    ], button: "Revoke \(terminal.label)", cancelURL: "/dashboard/terminals"))
        }
        try await ledger.revokeTerminal(terminal.id, at: now())
        RequestScope.current?.logger.notice(
            "terminal revoked from the dashboard", metadata: ["terminal": "\(terminal.id)"])
        return Self.redirect("/dashboard/terminals?done=terminal-revoked")
    }

    // MARK: Programs

    func programsPage(_ request: Request) async throws -> Response {
        guard let signedIn = try await session(of: request) else { return Self.redirect("/dashboard/sign-in") }
        return try await programs(signedIn, notice: Self.notice(request))
    }

    private func programs(
        _ signedIn: SignedIn, notice: String? = nil, problem: String? = nil, status: HTTPResponse.Status = .ok,
        points: String? = nil
    ) async throws -> Response {
        // Read again: the rule may have changed since sign-in.
        let merchant = try await ledger.merchant(signedIn.merchant.id)
        let members = try await ledger.goldMemberships(of: merchant.id)
        let coupons = try await ledger.coupons(of: merchant.id)
        var layout = Layout.signedIn("Programs", signedIn, current: \.onPrograms, notice: notice)
        layout.problem = problem
        let rule = merchant.bonusPointsPerMajorUnit
        let clock = MerchantClock(identifier: merchant.timeZone)
        return try page(
            "programs",
            ProgramsPage(
                layout: layout, csrf: signedIn.session.csrfSecret, zone: clock.name, currency: merchant.currency.code,
                points: points ?? String(rule),
                bonusSummary: rule > 0
                    ? "Payments earn \(rule) bonus \(rule == 1 ? "point" : "points") per whole \(merchant.currency.code) (tips earn none)."
                    : "The bonus program is off: payments earn no points.",
                members: members.map { member in
                    MemberRow(
                        wallet: member.walletName.isEmpty ? member.walletID.rawValue : member.walletName,
                        tier: member.membership.tier, from: clock.format(member.membership.validFrom),
                        until: clock.format(member.membership.validUntil),
                        period: Self.period(member.membership.benefitPeriod))
                },
                coupons: coupons.map { record in
                    CouponRow(
                        code: record.coupon.code,
                        wallet: record.walletName.isEmpty ? record.walletID.rawValue : record.walletName,
                        description: record.coupon.description, value: record.coupon.value.description,
                        expires: clock.format(record.coupon.expiresAt),
                        redeemed: record.coupon.redeemedAt.map(clock.format) ?? "no")
                }), status: status)
    }

    func setBonusRule(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        let text = form.text("points") ?? ""
        guard let points = Int64(text), (0...1_000_000).contains(points) else {
            return try await programs(
                signedIn, problem: "Points per unit must be a whole number from 0 to 1000000.", status: .badRequest,
                points: text)
        }
        try await ledger.setBonusRule(pointsPerMajorUnit: points, for: signedIn.merchant.id)
        return Self.redirect("/dashboard/programs?done=bonus-saved")
    }

    // MARK: Sessions and forms

    /// The signed-in merchant of a request: its session (by the cookie's token) and merchant.
    struct SignedIn: Sendable {
        let session: DashboardSession
        let merchant: Merchant
        let tokenHash: [UInt8]
    }

    func session(of request: Request) async throws -> SignedIn? {
        guard let token = request.cookies[DashboardSecurity.sessionCookie]?.value, !token.isEmpty,
            token.utf8.count <= 128
        else { return nil }
        let hash = DashboardSecurity.hash(token)
        guard let session = try await ledger.dashboardSession(tokenHash: hash, at: now()) else { return nil }
        return SignedIn(session: session, merchant: try await ledger.merchant(session.merchantID), tokenHash: hash)
    }

    /// A POST needs a session; without one there is nothing to check its CSRF token against.
    func requireSession(_ request: Request) async throws -> SignedIn {
        guard let signedIn = try await session(of: request) else { throw DashboardRefusal.sessionEnded }
        return signedIn
    }

    /// A form body, up to the server's body limit.
    func form(_ request: Request) async throws -> FormFields {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        let mediaType = type.split(separator: ";", maxSplits: 1).first?.trimmingCharacters(in: .whitespaces) ?? ""
        guard mediaType == "application/x-www-form-urlencoded" else { throw DashboardRefusal.notAForm }
        var request = request
        let body: ByteBuffer
        do { body = try await request.collectBody(upTo: maximumBodyBytes) } catch {
            throw DashboardRefusal.tooLarge(maximumBodyBytes)
        }
        return FormFields(encoded: Substring(String(buffer: body)))
    }

    /// A signed-in form: its CSRF field must be this session's secret, else nothing is done.
    func checkedForm(_ request: Request, _ signedIn: SignedIn) async throws -> FormFields {
        let form = try await form(request)
        guard let token = form["csrf"], DashboardSecurity.same(token, signedIn.session.csrfSecret) else {
            RequestScope.current?.logger.warning(
                "dashboard form refused: CSRF token missing or wrong", metadata: ["path": "\(request.uri.path)"])
            throw DashboardRefusal.csrf(signedIn: true)
        }
        return form
    }

    // MARK: Responses

    /// A rendered page with the headers every dashboard page carries.
    func page(_ template: String, _ model: Any, status: HTTPResponse.Status = .ok) throws -> Response {
        let html = try templates.render(template, model)
        return Response(
            status: status, headers: Self.pageHeaders, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// No script runs, nothing loads from elsewhere, no other site frames the pages or reads
    /// them from a cache, and forms post only to this server.
    static let pageHeaders: HTTPFields = [
        .contentType: "text/html; charset=utf-8",
        .contentSecurityPolicy:
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        .xContentTypeOptions: "nosniff", .referrerPolicy: "same-origin", .cacheControl: "no-store",
        HTTPField.Name("X-Frame-Options")!: "DENY",
    ]

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }

    /// The page for a refusal or failure: HTML, never the API's JSON envelope.
    func errorPage(for error: any Error, request: Request, signedIn: Bool) -> Response {
        let refusal: DashboardRefusal
        switch error {
        case let error as DashboardRefusal: refusal = error
        case let error as HTTPError where error.status == .notFound || error.status == .methodNotAllowed:
            refusal = .notFound
        case let error as LedgerError:
            let apiError = APIError(error)
            RequestScope.current?.refusal.note(apiError.code.rawValue)
            refusal =
                apiError.code == .databaseUnavailable
                ? .unavailable : .failed(APIError(error).status, "The request could not be done: \(error)")
        default:
            RequestScope.current?.logger.error(
                "dashboard page failed", metadata: ["error": "\(LogRedaction.describe(error))"])
            refusal = .failed(
                .internalServerError,
                "Something went wrong on the server. The request id \(RequestScope.current?.id ?? "") identifies it in the server's log."
            )
        }
        if let code = refusal.code { RequestScope.current?.refusal.note(code) }
        let model = ErrorPage(
            layout: .signedOut(refusal.title), explanation: refusal.explanation,
            next: signedIn && !refusal.needsSignIn ? "/dashboard/home" : "/dashboard/sign-in",
            nextLabel: signedIn && !refusal.needsSignIn ? "Back to the dashboard" : "Sign in")
        do {
            var response = try page("error", model, status: refusal.status)
            if case .tooLarge = refusal { response.headers[.connection] = "close" }
            return response
        } catch {
            return Response(
                status: refusal.status, headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: "\(refusal.title): \(refusal.explanation)\n")))
        }
    }

    /// The confirmation after a form's redirect, by a fixed code (never text from the URL).
    static func notice(_ request: Request) -> String? {
        let query = FormFields(encoded: request.uri.query.map { Substring($0) } ?? "")
        return switch query["done"] {
        case "signed-out": "You are signed out."
        case "user-added": "The register user was added."
        case "user-removed": "The register user was removed."
        case "terminal-revoked": "The terminal was revoked: it can take no more payments."
        case "key-revoked": "The API key was revoked: its secret is refused from now on."
        case "endpoint-deleted": "The webhook endpoint was deleted: no event is sent to it from now on."
        case "delivery-resent": "The delivery is being sent again; its answer shows here when it comes."
        case "bonus-saved": "The bonus rule was saved; it applies to payments from now on."
        case "time-zone-saved": "The time zone was saved: days and times are shown in it."
        case "refunded": "The refund was made."
        default: nil
        }
    }

    static func query(of request: Request) -> FormFields {
        FormFields(encoded: request.uri.query.map { Substring($0) } ?? "")
    }

    static func url(_ path: String, _ query: [(String, String)]) -> String {
        guard !query.isEmpty else { return path }
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return path + "?"
            + query.map {
                "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
            }.joined(separator: "&")
    }

    static func period(_ seconds: Int64) -> String {
        if seconds % 86_400 == 0 { return "\(seconds / 86_400) days" }
        if seconds % 3600 == 0 { return "\(seconds / 3600) hours" }
        return "\(seconds) s"
    }
}

/// Why the dashboard refused a request, as the page says it.
enum DashboardRefusal: Error, Sendable {
    case csrf(signedIn: Bool)
    case sessionEnded
    case notAForm
    case tooLarge(Int)
    case notFound
    case unavailable
    case failed(HTTPResponse.Status, String)

    var status: HTTPResponse.Status {
        switch self {
        case .csrf, .sessionEnded: .forbidden
        case .notAForm: .unsupportedMediaType
        case .tooLarge: .contentTooLarge
        case .notFound: .notFound
        case .unavailable: .serviceUnavailable
        case .failed(let status, _): status
        }
    }

    /// The code the log line names (a ledger's failure notes its own).
    var code: String? {
        switch self {
        case .csrf: "csrf_invalid"
        case .sessionEnded: "session_ended"
        case .notAForm: "unsupported_media_type"
        case .tooLarge: "payload_too_large"
        case .notFound: "not_found"
        case .unavailable: "database_unavailable"
        case .failed: nil
        }
    }

    var title: String {
        switch self {
        case .csrf: "This form has expired"
        case .sessionEnded: "Your session has ended"
        case .notAForm: "Not a form"
        case .tooLarge: "Too much data"
        case .notFound: "Page not found"
        case .unavailable: "The database cannot be reached"
        case .failed: "The request failed"
        }
    }

    var explanation: String {
        switch self {
        case .csrf(let signedIn):
            signedIn
                ? "The form did not carry this session's security token, so nothing was changed. Open the page again from the dashboard and resubmit."
                : "The sign-in form did not carry its security token (or cookies are off), so nobody was signed in. Open the sign-in page again."
        case .sessionEnded: "You are not signed in (the session expired or was signed out), so nothing was changed."
        case .notAForm: "The dashboard accepts only HTML form posts (application/x-www-form-urlencoded)."
        case .tooLarge(let limit): "The form sent more than \(limit) bytes."
        case .notFound: "There is no such page in the dashboard."
        case .unavailable: "Nothing was changed. Try again in a moment."
        case .failed(_, let message): message
        }
    }

    var needsSignIn: Bool {
        switch self {
        case .sessionEnded, .csrf(signedIn: false): true
        default: false
        }
    }
}

/// The dashboard's refusals and failures as its HTML error page, for the dashboard's routes
/// only (a route collection's middleware): the boundary's JSON envelope is the API's.
struct DashboardPagesMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let dashboard: Dashboard

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch {
            let signedIn = request.cookies[DashboardSecurity.sessionCookie] != nil
            return dashboard.errorPage(for: error, request: request, signedIn: signedIn)
        }
    }
}

extension HTTPField.Name {
    static let contentSecurityPolicy = HTTPField.Name.contentSecurityPolicy
    static let xContentTypeOptions = HTTPField.Name.xContentTypeOptions
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
}
