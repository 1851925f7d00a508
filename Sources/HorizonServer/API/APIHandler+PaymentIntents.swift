import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol

/// Payment intents: a payment the merchant's own system asks for, with its order reference,
/// under an idempotency key. The intent's id is the payment id a terminal settles it under, so
/// the ledger's exactly-once rule for that id holds from the POS's create to the receipt.
extension APIHandler {
    /// The bounds of an intent's terms (Stripe's metadata bounds).
    enum IntentLimits {
        static let defaultLifetime: Int64 = 15 * 60
        static let maximumReferenceCharacters = 100
        static let maximumMetadataKeys = 20
        static let maximumMetadataKeyCharacters = 40
        static let maximumMetadataValueCharacters = 500
        static let maximumIdempotencyKeyBytes = 255
    }

    func createPaymentIntent(_ input: Operations.CreatePaymentIntent.Input) async throws
        -> Operations.CreatePaymentIntent.Output
    {
        guard case .json(let body) = input.body else { throw APIError(.unsupportedMediaType, "the body must be JSON") }
        let caller = try await merchantCaller(keyScopes: [.intentsWrite])
        let key = input.headers.idempotencyKey
        guard !key.isEmpty, key.utf8.count <= IntentLimits.maximumIdempotencyKeyBytes,
            !key.containsControlOrFormatCharacters
        else {
            throw APIError(
                .invalidRequest, "Idempotency-Key must be 1 to \(IntentLimits.maximumIdempotencyKeyBytes) bytes of printable text")
        }
        let merchant = try await ledger.merchant(caller.merchantID)
        let currency: Currency
        do { currency = try Currency(code: body.currency.uppercased()) } catch {
            throw APIError(.invalidRequest, "currency \(body.currency) is not a supported ISO 4217 code")
        }
        guard currency == merchant.currency else {
            throw APIError(.invalidRequest, "this merchant settles in \(merchant.currency.code), not \(currency.code)")
        }
        let amount: Money
        do { amount = try Money(minorUnits: body.amount, currency: currency) } catch {
            throw APIError(.invalidRequest, "amount must be 1 to 10^15 minor units")
        }
        guard body.amount > 0 else { throw APIError(.invalidRequest, "amount must be more than zero") }
        let reference = try Self.checkReference(body.reference)
        let metadata = try Self.checkMetadata(body.metadata?.additionalProperties ?? [:])
        let lifetime = body.expiresInSeconds ?? IntentLimits.defaultLifetime
        guard (60...86_400).contains(lifetime) else {
            throw APIError(.invalidRequest, "expiresInSeconds must be 60 to 86400, not \(lifetime)")
        }
        let terminal = body.terminalId.map(TerminalID.init(rawValue:))
        // The terms as sent: a retry with the same key must send the same ones.
        let terms = [
            "horizon/payment-intent/v1", String(amount.minorUnits), currency.code, reference, metadata,
            terminal?.rawValue ?? "", body.expiresInSeconds.map(String.init) ?? "",
        ].joined(separator: "\n")
        var generator = SystemRandomNumberGenerator()
        let paymentID = try PaymentID(bytes: (0..<PaymentID.byteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let time = now()
        try await checkTerminalConnected(terminal, idempotencyKey: key, merchant: caller.merchantID, at: time)
        let intent = NewPaymentIntent(
            paymentID: paymentID, idempotencyKey: key, requestDigest: Array(SHA256.hash(data: Data(terms.utf8))),
            orderReference: reference, amount: amount, metadata: metadata, terminalID: terminal,
            expiresAt: time + lifetime)
        switch try await ledger.createPaymentIntent(intent, merchant: caller.merchantID, at: time) {
        case .success((let stored, let replayed)):
            let answer = try Self.paymentIntent(stored)
            if replayed { return .ok(.init(headers: .init(idempotentReplayed: ._true), body: .json(answer))) }
            metrics.record(event: "payment_intent_created")
            // Its terminal's stream, if connected to this process, gets it now.
            if stored.terminalID != nil { intentHub.wakeUp() }
            RequestScope.current?.logger.info(
                "payment intent created", metadata: ["intent": "\(stored.paymentID)", "by": "\(caller)"])
            return .created(.init(body: .json(answer)))
        case .failure(.idempotencyConflict):
            throw APIError(
                .idempotencyConflict,
                "this Idempotency-Key was used for a payment intent with other terms; use a new key for a new intent")
        case .failure(.unknownTerminal):
            throw APIError(.terminalNotFound, "this merchant has no active terminal \(terminal?.rawValue ?? "")")
        case .failure(.notCancelable):
            throw APIError(.internalError, "the payment intent could not be created")
        }
    }

    func listPaymentIntents(_ input: Operations.ListPaymentIntents.Input) async throws
        -> Operations.ListPaymentIntents.Output
    {
        let caller = try await merchantCaller(keyScopes: [.intentsWrite, .transactionsRead])
        let reference = try Self.checkReference(input.query.reference)
        let intents = try await ledger.paymentIntents(reference: reference, of: caller.merchantID, at: now())
        return .ok(.init(body: .json(.init(paymentIntents: try intents.map(Self.paymentIntent)))))
    }

    func getPaymentIntent(_ input: Operations.GetPaymentIntent.Input) async throws -> Operations.GetPaymentIntent.Output {
        let caller = try await merchantCaller(keyScopes: [.intentsWrite, .transactionsRead])
        let id = try Self.intentID(input.path.intentId)
        guard let intent = try await ledger.paymentIntent(id, of: caller.merchantID, at: now()) else {
            throw Self.noIntent(id)
        }
        return .ok(.init(body: .json(try Self.paymentIntent(intent))))
    }

    func cancelPaymentIntent(_ input: Operations.CancelPaymentIntent.Input) async throws
        -> Operations.CancelPaymentIntent.Output
    {
        let caller = try await merchantCaller(keyScopes: [.intentsWrite])
        let id = try Self.intentID(input.path.intentId)
        switch try await ledger.cancelPaymentIntent(id, of: caller.merchantID, at: now()) {
        case nil: throw Self.noIntent(id)
        case .success(let intent)?:
            // A terminal collecting it here stops its sale now.
            intentHub.wakeUp()
            RequestScope.current?.logger.info(
                "payment intent canceled", metadata: ["intent": "\(intent.paymentID)", "by": "\(caller)"])
            return .ok(.init(body: .json(try Self.paymentIntent(intent))))
        case .failure(.notCancelable(let intent))?:
            throw APIError(
                .paymentIntentNotCancelable,
                "payment intent \(id.bytes.hexString) is \(intent.status.rawValue); only one not yet collected can be canceled"
            )
        case .failure?: throw APIError(.internalError, "the payment intent could not be canceled")
        }
    }

    static func intentID(_ text: String) throws -> PaymentID {
        guard let bytes = [UInt8](hexString: text.lowercased()), let id = try? PaymentID(bytes: bytes) else {
            throw APIError(.invalidRequest, "intentId must be 32 hex digits")
        }
        return id
    }

    static func noIntent(_ id: PaymentID) -> APIError {
        APIError(.paymentIntentNotFound, "this merchant has no payment intent \(id.bytes.hexString)")
    }

    static func checkReference(_ text: String) throws -> String {
        guard !text.isEmpty, text.unicodeScalars.count <= IntentLimits.maximumReferenceCharacters,
            !text.containsControlOrFormatCharacters, text.trimmingCharacters(in: .whitespaces) == text
        else {
            throw APIError(
                .invalidRequest,
                "reference must be 1 to \(IntentLimits.maximumReferenceCharacters) characters of printable text, without spaces at either end"
            )
        }
        return text
    }

    /// The metadata as one JSON object with sorted keys (so equal metadata is equal text).
    static func checkMetadata(_ metadata: [String: String]) throws -> String {
        guard metadata.count <= IntentLimits.maximumMetadataKeys else {
            throw APIError(.invalidRequest, "metadata holds at most \(IntentLimits.maximumMetadataKeys) keys")
        }
        for (key, value) in metadata {
            guard !key.isEmpty, key.unicodeScalars.count <= IntentLimits.maximumMetadataKeyCharacters,
                !key.containsControlOrFormatCharacters,
                value.unicodeScalars.count <= IntentLimits.maximumMetadataValueCharacters,
                !value.containsControlOrFormatCharacters
            else {
                throw APIError(
                    .invalidRequest,
                    "metadata keys are 1 to \(IntentLimits.maximumMetadataKeyCharacters) characters and values at most \(IntentLimits.maximumMetadataValueCharacters), printable text"
                )
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do { return String(decoding: try encoder.encode(metadata), as: UTF8.self) } catch {
            throw APIError(.invalidRequest, "metadata cannot be stored")
        }
    }

    static func paymentIntent(_ intent: PaymentIntent) throws -> Components.Schemas.PaymentIntent {
        let metadata: [String: String]
        do { metadata = try JSONDecoder().decode([String: String].self, from: Data(intent.metadata.utf8)) } catch {
            throw APIError(.internalError, "a stored payment intent's metadata cannot be read")
        }
        var refunded = Money.zero(intent.amount.currency)
        if let payment = intent.transaction {
            refunded = (try? Money(minorUnits: intent.refunded, currency: payment.result.amount.currency)) ?? refunded
        }
        return .init(
            id: intent.paymentID.bytes.hexString, status: .init(rawValue: intent.status.rawValue) ?? .collecting,
            amount: intent.amount.minorUnits, currency: intent.amount.currency.code, reference: intent.orderReference,
            metadata: .init(additionalProperties: metadata), terminalId: intent.terminalID?.rawValue,
            createdAt: intent.createdAt, expiresAt: intent.expiresAt, canceledAt: intent.canceledAt,
            amountRefunded: intent.refunded,
            payment: intent.transaction.map { merchantTransaction($0, refunded) })
    }
}
