import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonServerClient
import HorizonSettlement
import HorizonStores

/// What `status` looks up: a payment id, or the merchant's order reference.
enum StatusKey: Sendable {
    /// 32 hexadecimal digits are read as a payment id.
    case id(PaymentID)
    case reference(String)
}

/// `status ID|REF`: where a payment or redemption stands, for the register socket and the command.
enum PaymentStatus {
    /// `status ID|REF`: a payment or redemption by its id, or the newest payment with the
    /// merchant's order reference REF, one field a line (`id`, `type`, `step`, `reference` when
    /// it has one, `register` when a register user rang it up, then `result paid AMOUNT TIP
    /// TOTAL`, `result accepted-offline AMOUNT TIP TOTAL`, `result declined REASON`, `result
    /// failed REASON` or `result pending`), from the journal; an activated terminal's server
    /// answers (`source server`) what the journal does not know, and adds `server STATE` to a
    /// journaled payment. One `error` line for an id or reference that is malformed or unknown.
    static func lines(of text: String, journal: SQLiteTerminalJournal, server: HorizonServerClient?) async -> [String] {
        let key: StatusKey
        if let bytes = [UInt8](hexString: text), let id = try? PaymentID(bytes: bytes) {
            key = .id(id)
        } else if OrderReference.isValid(text) {
            key = .reference(text)
        } else {
            return [
                "error not a payment id (\(PaymentID.byteCount * 2) hexadecimal digits) nor an order reference (\(OrderReference.rule))"
            ]
        }
        let record: JournalRecord?
        do {
            switch key {
            case .id(let id): record = try journal.record(for: id)
            case .reference(let reference): record = try journal.records(orderReference: reference, limit: 1).first
            }
        } catch {
            return ["error \(error)"]
        }
        guard let record else {
            var unanswered = ""
            if let server {
                switch await ServerStatus.ask(key, server) {
                case .found(let payment): return ServerStatus.lines(payment)
                case .unknown: unanswered = " nor at the server"
                case .unanswered(let reason): unanswered = " (the server was not asked: \(reason))"
                }
            }
            switch key {
            case .id(let id):
                return ["error unknown payment id \(id): no payment or redemption with it here\(unanswered)"]
            case .reference(let reference):
                return [
                    "error unknown order reference \(reference.sanitizedForDisplay): no payment with it here\(unanswered)"
                ]
            }
        }
        var lines = journalLines(record)
        // The server's word on a payment it settled: its final state, a refund since included.
        if let server, case .payment = record.request,
            case .found(let payment) = await ServerStatus.ask(.id(record.request.id), server)
        {
            lines.append("server \(payment.state)")
        }
        return lines
    }

    /// A journal record as `status` lines.
    static func journalLines(_ record: JournalRecord) -> [String] {
        let result: String
        switch record.answer {
        case .receipt(let receipt)?:
            let total = (try? receipt.amount.adding(receipt.tip))?.formattedAmount ?? "?"
            let amounts = "\(receipt.amount.formattedAmount) \(receipt.tip.formattedAmount) \(total)"
            switch receipt.outcome {
            case .approved: result = "paid \(amounts)"
            case .acceptedOffline: result = "accepted-offline \(amounts)"
            case .declined(let code): result = "declined \(code)"
            }
        case .error(let error)?:
            result = "failed \(error.code)" + (error.message.isEmpty ? "" : " \(error.message.sanitizedForDisplay)")
        default: result = "pending"
        }
        var lines = ["id \(record.request.id)", "type \(record.request.transactionType)", "step \(record.step)"]
        let (reference, registerUser) =
            switch record.request {
            case .payment(let payment): (payment.orderReference, payment.registerUser)
            case .redemption(let redemption): ("", redemption.registerUser)
            }
        if !reference.isEmpty { lines.append("reference \(reference.sanitizedForDisplay)") }
        if !registerUser.isEmpty { lines.append("register \(registerUser.sanitizedForDisplay)") }
        return lines + ["source journal", "result \(result)"]
    }

}

/// What an activated terminal's server says of a payment, for `status ID|REF`: a payment intent
/// (by its id or order reference) or a settled payment (by its id).
enum ServerStatus {
    enum Answer {
        case found(ServerPaymentState)
        case unknown
        case unanswered(String)
    }

    static func ask(_ key: StatusKey, _ server: HorizonServerClient) async -> Answer {
        do throws(ServerClientError) {
            let state =
                switch key {
                case .id(let id): try await server.paymentState(id: id.description)
                case .reference(let reference): try await server.paymentState(orderReference: reference)
                }
            return state.map(Answer.found) ?? .unknown
        } catch {
            return .unanswered("\(error)")
        }
    }

    /// `status` lines for a payment the journal does not know, marked `source server`, with
    /// `result` the server's state (`ServerPaymentState.state`).
    static func lines(_ payment: ServerPaymentState) -> [String] {
        var lines = ["id \(payment.id)", "type \(payment.transactionType)"]
        if let reference = payment.orderReference { lines.append("reference \(reference)") }
        if !payment.registerUser.isEmpty { lines.append("register \(payment.registerUser)") }
        lines.append("amount \(Transactions.amount(payment.amount, payment.currency)) \(payment.currency)")
        return (lines + ["source server", "result \(payment.state)"]).map(\.sanitizedForDisplay)
    }
}

extension PaymentStatus {
    /// Why a new sale may not take `reference`: a sale with it that a crash left owed an
    /// execution, or one already paid (the register would charge the order twice). A reference
    /// whose sale was declined or failed may be used again.
    static func referenceRefusal(_ reference: String, journal: SQLiteTerminalJournal) -> String? {
        let records: [JournalRecord]
        do { records = try journal.records(orderReference: reference, limit: 1) } catch { return "\(error)" }
        guard let latest = records.first else { return nil }
        switch latest.answer {
        case nil:
            return "a sale with reference \(reference) is already in progress (payment \(latest.request.id))"
        case .receipt(let receipt)?:
            if case .declined = receipt.outcome { return nil }
            return "reference \(reference) was already paid (payment \(latest.request.id)); see status \(reference)"
        default:
            return nil
        }
    }
}
