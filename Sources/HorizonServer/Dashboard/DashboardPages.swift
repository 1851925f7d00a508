import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonStores

// What each template shows. Mustache reads these by their property names (by reflection), so a
// name here is a name in `Templates/*.mustache`; every value is escaped as HTML when rendered.

/// The header's part: title, navigation, the signed-in merchant and the sign-out form.
struct Layout {
    var title: String
    var signedIn: Bool
    var merchantName: String
    /// The session's CSRF secret, for the sign-out form in the header.
    var csrf: String
    var onHome = false
    var onTransactions = false
    var onRegisterUsers = false
    var onTerminals = false
    var onAPIKeys = false
    var onWebhooks = false
    var onPrograms = false
    var onSettings = false
    var notice: String?
    var problem: String?

    static func signedOut(_ title: String, notice: String? = nil, problem: String? = nil) -> Layout {
        Layout(title: title, signedIn: false, merchantName: "", csrf: "", notice: notice, problem: problem)
    }

    static func signedIn(
        _ title: String, _ signedIn: Dashboard.SignedIn, current: WritableKeyPath<Layout, Bool>, notice: String?
    ) -> Layout {
        var layout = Layout(
            title: title, signedIn: true, merchantName: signedIn.merchant.name, csrf: signedIn.session.csrfSecret,
            notice: notice)
        layout[keyPath: current] = true
        return layout
    }
}

struct SignInPage {
    var layout: Layout
    var csrf: String
    var email: String
}

struct ErrorPage {
    var layout: Layout
    var explanation: String
    var next: String
    var nextLabel: String
}

struct Option {
    var value: String
    var label: String
    var selected: Bool
}

/// The type filter's choices and their query values.
enum TransactionTypeChoice {
    static let choices: [(value: String, label: String, type: TransactionType)] = [
        ("payment", "Payments", .payment), ("bonus", "Bonus redemptions", .bonusRedemption),
        ("gold", "Gold redemptions", .goldRedemption), ("coupon", "Coupon redemptions", .couponRedemption),
    ]

    static func type(for value: String) -> TransactionType? { choices.first { $0.value == value }?.type }

    static func options(selected: String) -> [Option] {
        [Option(value: "", label: "Any", selected: selected.isEmpty)]
            + choices.map { Option(value: $0.value, label: $0.label, selected: $0.value == selected) }
    }
}

struct TransactionsPage {
    var layout: Layout
    var csrf: String
    /// The merchant's time zone, named in the time column's header.
    var zone: String
    var query: String
    var from: String
    var to: String
    var types: [Option]
    var registerUsers: [Option]
    /// The terminal filter's id; nil when the list is not one terminal's.
    var terminal: String?
    var rows: [TransactionRow]
    var newestURL: String?
    var olderURL: String?
    var csvURL: String
}

/// How a terminal is named on every page: its label and its id, as the terminals page lists it.
struct TerminalName {
    var label: String
    var id: String
    /// Its transactions.
    var url: String

    init(_ terminal: TerminalRecord) {
        label = terminal.label
        id = terminal.id.rawValue
        url = Dashboard.url("/dashboard/transactions", [("terminal", terminal.id.rawValue)])
    }
}

/// The merchant's terminals by the key id a transaction names.
struct TerminalDirectory {
    private let byKeyID: [[UInt8]: TerminalRecord]

    init(_ terminals: [TerminalRecord]) {
        byKeyID = Dictionary(terminals.map { ($0.keyID, $0) }, uniquingKeysWith: { first, _ in first })
    }

    func name(of key: TerminalKeyID) -> TerminalName? { byKeyID[key.bytes].map(TerminalName.init) }
}

struct TransactionRow {
    var reference: Int64
    /// The payment id as the terminal, the wallet and the API spell it (hex).
    var paymentID: String
    var url: String
    var time: String
    var type: String
    var registerUser: String
    var terminal: TerminalName?
    var amount: String
    var tip: String
    var result: String
    var refunded: String?
    /// The merchant's order reference, for a payment made for a payment intent.
    var orderReference: String?

    init(_ transaction: LedgerTransaction, clock: MerchantClock, terminals: TerminalDirectory) {
        let result = transaction.result
        reference = transaction.reference
        orderReference = transaction.orderReference
        paymentID = result.paymentID.bytes.hexString
        url = "/dashboard/transactions/\(transaction.reference)"
        time = clock.format(result.settledAt)
        type = result.transactionType.description
        // A payment a terminal accepted offline, and whether the offline guarantee paid it.
        if let offline = transaction.offline {
            type += offline.guaranteed ? " (offline, guaranteed)" : " (offline)"
        }
        registerUser = transaction.registerUser.isEmpty ? "—" : transaction.registerUser
        terminal = terminals.name(of: transaction.terminalKeyID)
        switch result.transactionType {
        case .payment: amount = result.amount.description
        case .bonusRedemption: amount = "\(result.quantity) points"
        case .goldRedemption, .couponRedemption: amount = result.item.isEmpty ? "—" : result.item
        }
        tip = result.transactionType == .payment ? result.tip.description : "—"
        switch result.outcome {
        case .approved: self.result = "approved"
        case .declined(_, let reason): self.result = "declined: \(reason)"
        }
        refunded = nil
    }
}

/// One transaction's page: its receipt, its refunds and the refund form.
struct TransactionPage {
    var layout: Layout
    var csrf: String
    var zone: String
    var merchantName: String
    var row: TransactionRow
    var total: String?
    var offline: String?
    var refunds: [RefundRow]
    var refund: RefundForm?
}

struct RefundRow {
    var refundID: String
    var amount: String
    var time: String
    var destination: String
}

/// The refund form of a payment's page: the refund's id is made when the page is rendered, so
/// a form submitted twice names the same refund and the ledger refunds once. The amount box
/// starts empty: the merchant types what to give back, up to `refundable`.
struct RefundForm {
    var reference: Int64
    var refundID: String
    var refundable: String
    var currency: String
    var amount: String
}

/// "Are you sure?" before a refund, a removal or a revocation: the same form again, with
/// `confirm=yes`, and a way back that changes nothing.
struct ConfirmPage {
    var layout: Layout
    var question: String
    var consequence: String
    var action: String
    var fields: [FormField]
    var button: String
    var cancelURL: String
}

struct FormField {
    var name: String
    var value: String
}

/// The home page: today's and this week's takings and the last days as a chart.
struct HomePage {
    var layout: Layout
    var zone: String
    var today: TotalsTile
    var week: TotalsTile
    var chart: SalesChart
    var recent: [TransactionRow]
}

struct TotalsTile {
    var title: String
    var sales: String
    var payments: String
    var declined: String
    var refunds: String
    var net: String
    var url: String
}

/// Sales per day as an SVG bar chart drawn on the server (no script).
struct SalesChart {
    var width: Int
    var height: Int
    var baseline: Int
    var summary: String
    var maximum: String
    var bars: [ChartBar]
}

struct ChartBar {
    var x: Int
    var y: Int
    var width: Int
    var height: Int
    var labelX: Int
    var labelY: Int
    var label: String
    var title: String
    var url: String
}

struct SettingsPage {
    var layout: Layout
    var csrf: String
    var zone: String
    var now: String
    var zones: [Option]
}

struct RegisterUsersPage {
    var layout: Layout
    var csrf: String
    var zone: String
    var idPattern: String
    var idRule: String
    var maximumIDLength: Int
    var users: [RegisterUserRow]
    var newID: String
    var newName: String
}

struct RegisterUserRow {
    var id: String
    var name: String
    var added: String
}

struct TerminalsPage {
    var layout: Layout
    var csrf: String
    var zone: String
    var terminals: [TerminalRow]
}

struct TerminalRow {
    var name: TerminalName
    var activated: String
    var expires: String
    var status: String
    var active: Bool
}

struct ProgramsPage {
    var layout: Layout
    var csrf: String
    var zone: String
    var currency: String
    var points: String
    var bonusSummary: String
    var members: [MemberRow]
    var coupons: [CouponRow]
}

struct MemberRow {
    var wallet: String
    var tier: String
    var from: String
    var until: String
    var period: String
}

struct CouponRow {
    var code: String
    var wallet: String
    var description: String
    var value: String
    var expires: String
    var redeemed: String
}

/// The register-user form's id rule, the API's (`RegisterUserRules`): the browser checks it
/// before sending (`pattern`), the server again.
enum RegisterUserForm {
    /// An HTML `pattern` (anchored by the browser) for 1 to `maximumIDLength` of A-Z a-z 0-9 . _ : -
    static let idPattern = "[A-Za-z0-9._:\\-]{1,\(RegisterUserRules.maximumIDLength)}"
    static let idRule =
        "The id must be 1 to \(RegisterUserRules.maximumIDLength) characters of A-Z a-z 0-9 . _ : - (no spaces)."
}
