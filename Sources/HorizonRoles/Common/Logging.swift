import HorizonCore
import HorizonProtocol
import Logging

extension Logger {
    /// What a library logs through when the app gives it no logger: nothing. Libraries never
    /// print; the app chooses levels and where lines go (swift-log's bootstrap).
    public static let silent = Logger(label: "horizon.silent") { _ in SwiftLogNoOpLogHandler() }

    /// This logger with the session's id on every line.
    func with(session: SessionID?) -> Logger {
        var logger = self
        if let session { logger[metadataKey: "session"] = "\(session)" }
        return logger
    }

    /// This logger with the payment (or redemption) id on every line.
    func with(payment: PaymentID?) -> Logger {
        var logger = self
        if let payment { logger[metadataKey: "payment"] = "\(payment)" }
        return logger
    }
}

extension Logger {
    /// This logger with the kind of session (payment, bonus redemption, …) on every line.
    func with(transactionType: TransactionType) -> Logger {
        var logger = self
        logger[metadataKey: "type"] = "\(transactionType)"
        return logger
    }
}
