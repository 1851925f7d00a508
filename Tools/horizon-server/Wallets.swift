import ArgumentParser
import HorizonCLISupport
import HorizonCore
import HorizonLedger

struct Wallets: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List registered wallets, and top one up (sandbox money).", subcommands: [List.self, TopUp.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every registered wallet, oldest first.")

        @OptionGroup var options: ServerOptions
        @Flag(help: "Print them as JSON.") var json = false

        func run() async throws {
            let wallets = try await withLedger(options) { ledger, _ in try await ledger.walletsWithContacts() }
            let console = Console()
            if json {
                try console.json(
                    wallets.map { wallet, contact in
                        WalletJSON(
                            walletId: wallet.id.rawValue, name: wallet.name, email: contact.email, phone: contact.phone,
                            createdAt: wallet.createdAt)
                    })
                return
            }
            if wallets.isEmpty { console.line("No wallets yet: horizon-wallet register --server URL …") }
            for (wallet, contact) in wallets {
                console.line("\(wallet.id)  \(wallet.name)  <\(contact.email ?? "-")>  \(contact.phone ?? "-")")
            }
        }
    }

    struct TopUp: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "top-up",
            abstract: "Add money to a wallet from outside (sandbox: no card is charged; posted as a deposit).")

        @OptionGroup var options: ServerOptions
        @Argument(help: "The wallet: its id (w_…) or its e-mail.") var wallet: String
        @Argument(help: "The amount, as a person types it (e.g. 100.00).") var amount: String
        @Option(help: "ISO 4217 currency.") var currency = "EUR"

        func run() async throws {
            let currency = try AmountArgument.currency(currency)
            let money = try AmountArgument.money(amount, in: currency)
            guard money.minorUnits > 0 else { throw ValidationError("the amount must be greater than zero") }
            let balance = try await withLedger(options) { ledger, _ in
                let id: WalletID
                if wallet.contains("@") {
                    guard let found = try await ledger.wallet(email: wallet) else {
                        throw CLIError("no wallet is registered with \(wallet)")
                    }
                    id = found
                } else {
                    id = WalletID(rawValue: wallet)
                }
                try await ledger.deposit(money, to: id)
                return try await ledger.balance(of: id, in: currency)
            }
            Console().line("Topped up \(wallet) with \(money); balance \(balance)")
        }
    }
}

struct WalletJSON: Encodable {
    let walletId: String
    let name: String
    let email: String?
    let phone: String?
    let createdAt: Int64
}

struct Transactions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A merchant's transactions as the server records them, newest first.")

    @OptionGroup var options: ServerOptions
    @Option(help: "The merchant's id (default: the only merchant).") var merchant: String?
    @Option(help: "At most this many (1 to 1000).") var limit = 20
    @Flag(help: "Print them as JSON.") var json = false

    func run() async throws {
        guard (1...1000).contains(limit) else { throw ValidationError("--limit must be 1 to 1000") }
        let rows = try await withLedger(options) { ledger, _ in
            let id: MerchantID
            if let merchant {
                id = MerchantID(rawValue: merchant)
            } else {
                let merchants = try await ledger.merchants()
                guard merchants.count == 1, let only = merchants.first else {
                    throw CLIError(
                        "there are \(merchants.count) merchants; name one with --merchant (see `merchants list`)")
                }
                id = only.id
            }
            // Each with its refunds: a list that left them out would show money the merchant gave back as kept.
            var rows: [(LedgerTransaction, [Refund])] = []
            for transaction in try await ledger.transactions(of: id, limit: limit) {
                rows.append((transaction, try await ledger.refunds(of: transaction.result.paymentID, merchant: id)))
            }
            return rows
        }
        let console = Console()
        let lines = rows.map { transaction, refunds in
            let result = transaction.result
            let outcome: String
            let reason: String?
            let reference: Int64?
            switch result.outcome {
            case .approved(let number, _, _):
                (outcome, reason, reference) = ("approved", nil, Int64(truncatingIfNeeded: number))
            case .declined(_, let text): (outcome, reason, reference) = ("declined", text, nil)
            }
            let refunded = refunds.reduce(Int64(0)) { $0 + $1.amount.minorUnits }
            return TransactionJSON(
                paymentId: result.paymentID.bytes.hexString,
                transactionType: TransactionKindName.name(result.transactionType),
                outcome: outcome, reason: reason, reference: reference, amount: JSONMoney(result.amount),
                tip: JSONMoney(result.tip),
                refunded: JSONMoney(minorUnits: refunded, currency: result.amount.currency.code),
                refunds: refunds.map { refund in
                    JSONRefund(
                        refundId: refund.refundID.rawValue, paymentId: refund.paymentID.bytes.hexString,
                        amount: JSONMoney(refund.amount), destination: refund.destination.rawValue,
                        bonusPointsReversed: refund.bonusPointsReversed, createdAt: refund.createdAt)
                }, walletId: transaction.walletID?.rawValue, terminalKeyId: transaction.terminalKeyID.bytes.hexString,
                registerUser: transaction.registerUser, settledAt: result.settledAt)
        }
        if json {
            try console.json(TransactionListJSON(transactions: lines))
            return
        }
        if lines.isEmpty { console.line("No transactions yet.") }
        for line in lines {
            let outcome = line.reference.map { "approved #\($0)" } ?? "declined (\(line.reason ?? ""))"
            console.line(
                "\(dateText(line.settledAt))  \(outcome)  \(line.amount.formatted) + tip \(line.tip.formatted)  payment \(line.paymentId.prefix(8))…  wallet \(line.walletId ?? "-")  terminal \(line.terminalKeyId)"
            )
            for refund in line.refunds {
                console.line(
                    "    refunded \(refund.amount.formatted) on \(dateText(refund.createdAt)) to the \(refund.destination.replacingOccurrences(of: "_", with: " "))  refund \(refund.refundId)"
                )
            }
        }
    }

    struct TransactionListJSON: Encodable {
        let transactions: [TransactionJSON]
    }

    struct TransactionJSON: Encodable {
        let paymentId: String
        let transactionType: String
        let outcome: String
        let reason: String?
        let reference: Int64?
        let amount: JSONMoney
        let tip: JSONMoney
        /// What was given back so far, and each refund.
        let refunded: JSONMoney
        let refunds: [JSONRefund]
        let walletId: String?
        let terminalKeyId: String
        let registerUser: String
        let settledAt: Int64
    }
}
