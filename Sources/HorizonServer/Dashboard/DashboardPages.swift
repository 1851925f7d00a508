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
    var onTransactions = false
    var onRegisterUsers = false
    var onTerminals = false
    var onPrograms = false
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
    var from: String
    var to: String
    var types: [Option]
    var registerUsers: [Option]
    var rows: [TransactionRow]
    var newestURL: String?
    var olderURL: String?
}

/// A refund form of one row: the refund's id is made when the page is rendered, so a form
/// submitted twice names the same refund and the ledger refunds once.
struct RefundForm {
    var refundID: String
    /// What is left to refund, as the amount field's default.
    var refundable: String
    var currency: String
}

struct TransactionRow {
    var reference: Int64
    var time: String
    var type: String
    var registerUser: String
    var amount: String
    var tip: String
    var result: String
    var refunded: String?
    var refund: RefundForm?

    init(_ transaction: LedgerTransaction) {
        let result = transaction.result
        reference = transaction.reference
        time = DashboardDates.format(result.settledAt)
        type = result.transactionType.description
        // A payment a terminal accepted offline, and whether the offline guarantee paid it.
        if let offline = transaction.offline {
            type += offline.guaranteed ? " (offline, guaranteed)" : " (offline)"
        }
        registerUser = transaction.registerUser.isEmpty ? "—" : transaction.registerUser
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
        refund = nil
    }
}

struct RegisterUsersPage {
    var layout: Layout
    var csrf: String
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
    var terminals: [TerminalRow]
}

struct TerminalRow {
    var id: String
    var label: String
    var activated: String
    var expires: String
    var status: String
    var active: Bool
}

struct ProgramsPage {
    var layout: Layout
    var csrf: String
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
