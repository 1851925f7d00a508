import Foundation
import HTTPTypes
import HorizonAPI
import HorizonLedger
import Hummingbird
import NIOCore

/// Every failure the API reports, in the one error envelope of `openapi.yaml`
/// (`{"error": {"code", "message", "requestId"}}`). Codes are stable: clients branch on them;
/// messages are for people and may change.
public struct APIError: Error, Sendable, Equatable {
    public enum Code: String, Sendable, CaseIterable {
        case invalidRequest = "invalid_request"
        case malformedJSON = "malformed_json"
        case unsupportedMediaType = "unsupported_media_type"
        case payloadTooLarge = "payload_too_large"
        case notFound = "not_found"
        case methodNotAllowed = "method_not_allowed"
        case rateLimited = "rate_limited"
        case unauthenticated = "unauthenticated"
        case signatureInvalid = "signature_invalid"
        case requestExpired = "request_expired"
        case requestReplayed = "request_replayed"
        case invalidCredentials = "invalid_credentials"
        case accountLocked = "account_locked"
        case forbidden = "forbidden"
        /// A terminal's key asked for what only the merchant's admin may do (refunds, revocations).
        case adminRequired = "admin_required"
        case terminalUnknown = "terminal_unknown"
        case terminalRevoked = "terminal_revoked"
        case alreadyExists = "already_exists"
        case paymentConflict = "payment_conflict"
        case paymentNotFound = "payment_not_found"
        case walletSignatureInvalid = "wallet_signature_invalid"
        case termsMismatch = "terms_mismatch"
        case databaseUnavailable = "database_unavailable"
        case internalError = "internal_error"
        // Wallet registration and restoration (one-time codes).
        case registrationNotFound = "registration_not_found"
        case registrationCodeInvalid = "registration_code_invalid"
        case registrationExpired = "registration_expired"
        case registrationUsed = "registration_used"
        case registrationLocked = "registration_locked"
        // The wallet PIN counted by the server.
        case pinNotSet = "pin_not_set"
        // Invitation codes (registration with an invitation).
        case invitationRequired = "invitation_required"
        case invitationUnknown = "invitation_unknown"
        case invitationSpent = "invitation_spent"
        case invitationRevoked = "invitation_revoked"
        // Cards and 3-D Secure.
        case cardNumberInvalid = "card_number_invalid"
        case cardBrandUnsupported = "card_brand_unsupported"
        case cardExpiryInvalid = "card_expiry_invalid"
        case cardExpired = "card_expired"
        case cardCVCInvalid = "card_cvc_invalid"
        case cardNotAccepted = "card_not_accepted"
        case cardProcessorUnavailable = "card_processor_unavailable"
        case cardNotFound = "card_not_found"
        case cardChallengeNotFound = "card_challenge_not_found"
        case cardChallengePending = "card_challenge_pending"
        case cardChallengeExpired = "card_challenge_expired"
        case cardChallengeFailed = "card_challenge_failed"
        case cardPaResInvalid = "card_pares_invalid"
        // Refunds (the codes of `RefundRefusal`)
        case refundIDInvalid = "refund_id_invalid"
        case refundAmountInvalid = "refund_amount_invalid"
        case paymentNotRefundable = "payment_not_refundable"
        case currencyMismatch = "currency_mismatch"
        case refundExceedsRemaining = "refund_exceeds_remaining"
        case idempotencyConflict = "idempotency_conflict"
        // Wallet services.
        case walletUnknown = "wallet_unknown"
        case walletKeyRevoked = "wallet_key_revoked"
        case invalidCursor = "invalid_cursor"
        case transactionNotFound = "transaction_not_found"
        // Merchant service
        case registerUserIDInvalid = "register_user_id_invalid"
        case registerUserNameInvalid = "register_user_name_invalid"
        case registerUserExists = "register_user_exists"
        case registerUserNotFound = "register_user_not_found"
        case terminalNotFound = "terminal_not_found"
        // Gateway
        case gatewayRequestInvalid = "gateway_request_invalid"
        case gatewayRequestReplayed = "gateway_request_replayed"
        case gatewayRequestExpired = "gateway_request_expired"
        case gatewayResponseTooLarge = "gateway_response_too_large"
        case gatewayBusy = "gateway_busy"
        // Offline settlement (the daily token a forwarded offline payment was accepted under)
        case dailyTokenUnknown = "daily_token_unknown"
        case dailyTokenOtherWallet = "daily_token_other_wallet"
        case dailyTokenExpired = "daily_token_expired"
        case dailyTokenNotYetValid = "daily_token_not_yet_valid"
        case acceptedAtInFuture = "accepted_at_in_future"
        case offlineAmountExceedsToken = "offline_amount_exceeds_token"
        /// The stated acceptance time is outside the wallet-signed confirmation's window.
        case acceptedAtOutsideConfirmation = "accepted_at_outside_confirmation"
        /// Forwarded later than the token's expiry plus the forwarding grace.
        case offlineForwardTooLate = "offline_forward_too_late"
        /// A payment submitted later than its confirmation's expiry plus the recovery grace.
        case confirmationExpired = "confirmation_expired"
        // API keys and payment intents
        /// An API key whose scopes do not cover the operation.
        case insufficientScope = "insufficient_scope"
        case apiKeyNotFound = "api_key_not_found"
        case paymentIntentNotFound = "payment_intent_not_found"
        case webhookEndpointNotFound = "webhook_endpoint_not_found"
        case webhookDeliveryNotFound = "webhook_delivery_not_found"
        /// The intent was collected, canceled or expired.
        case paymentIntentNotCancelable = "payment_intent_not_cancelable"
        /// The intent is not waiting for collection (canceled, expired, collected) or is another terminal's.
        case paymentIntentNotCollectable = "payment_intent_not_collectable"
        /// The terminal an intent is addressed to keeps no connection to the server now.
        case terminalOffline = "terminal_offline"
        /// A receipt by e-mail was asked for a declined payment or a redemption.
        case receiptUnavailable = "receipt_unavailable"
        /// A wallet asked for a receipt by e-mail but registered no e-mail address.
        case receiptEmailMissing = "receipt_email_missing"

        public var status: HTTPResponse.Status {
            switch self {
            case .invalidRequest, .malformedJSON: .badRequest
            case .unsupportedMediaType: .unsupportedMediaType
            case .payloadTooLarge: .contentTooLarge
            case .notFound: .notFound
            case .methodNotAllowed: .methodNotAllowed
            case .rateLimited: .tooManyRequests
            case .unauthenticated, .signatureInvalid, .requestExpired, .requestReplayed, .invalidCredentials:
                .unauthorized
            case .accountLocked: .tooManyRequests
            case .forbidden, .adminRequired, .terminalUnknown, .terminalRevoked: .forbidden
            case .alreadyExists, .paymentConflict: .conflict
            case .paymentNotFound: .notFound
            case .walletSignatureInvalid, .termsMismatch: .unprocessableContent
            case .databaseUnavailable: .serviceUnavailable
            case .internalError: .internalServerError
            case .registrationNotFound: .notFound
            case .registrationCodeInvalid: .badRequest
            case .registrationExpired: .gone
            case .registrationUsed: .conflict
            case .registrationLocked: .forbidden
            case .invitationRequired: .forbidden
            case .pinNotSet: .notFound
            case .invitationUnknown: .unprocessableContent
            case .invitationSpent, .invitationRevoked: .gone
            case .cardNumberInvalid, .cardBrandUnsupported, .cardExpiryInvalid, .cardExpired, .cardCVCInvalid:
                .badRequest
            case .cardNotAccepted, .cardChallengeFailed, .cardPaResInvalid: .unprocessableContent
            case .cardProcessorUnavailable: .serviceUnavailable
            case .cardNotFound, .cardChallengeNotFound: .notFound
            case .cardChallengePending: .conflict
            case .cardChallengeExpired: .gone
            case .refundIDInvalid, .refundAmountInvalid: .badRequest
            case .paymentNotRefundable, .refundExceedsRemaining, .idempotencyConflict: .conflict
            case .currencyMismatch: .unprocessableContent
            case .walletUnknown: .forbidden
            // 401: the identity the app holds is no longer valid (the reference's "identity invalidated").
            case .walletKeyRevoked: .unauthorized
            case .invalidCursor: .badRequest
            case .transactionNotFound: .notFound
            case .registerUserIDInvalid, .registerUserNameInvalid: .badRequest
            case .registerUserExists: .conflict
            case .registerUserNotFound, .terminalNotFound: .notFound
            case .gatewayRequestInvalid, .gatewayRequestExpired: .badRequest
            case .gatewayRequestReplayed: .conflict
            case .gatewayResponseTooLarge: .contentTooLarge
            case .gatewayBusy: .serviceUnavailable
            case .dailyTokenUnknown, .dailyTokenOtherWallet, .dailyTokenExpired, .dailyTokenNotYetValid,
                .acceptedAtInFuture, .offlineAmountExceedsToken, .acceptedAtOutsideConfirmation,
                .offlineForwardTooLate, .confirmationExpired:
                .unprocessableContent
            case .insufficientScope: .forbidden
            case .apiKeyNotFound, .paymentIntentNotFound, .webhookEndpointNotFound, .webhookDeliveryNotFound: .notFound
            case .paymentIntentNotCancelable, .paymentIntentNotCollectable, .terminalOffline: .conflict
            case .receiptUnavailable, .receiptEmailMissing: .conflict
            }
        }
    }

    public let code: Code
    public let message: String
    /// Extra response headers (`Retry-After`, `Allow`, `WWW-Authenticate`).
    public var headers: HTTPFields
    /// The issuer key's signature over a refusal the client must be able to trust over a hostile
    /// network (a refused offline forward), sent in the envelope.
    public var signature: String? = nil

    public init(_ code: Code, _ message: String, headers: HTTPFields = [:]) {
        self.code = code
        self.message = message
        self.headers = headers
    }

    public var status: HTTPResponse.Status { code.status }

    /// The envelope as the API sends it.
    public func envelope(requestID: String) -> Components.Schemas.ErrorEnvelope {
        .init(error: .init(code: code.rawValue, message: message, requestId: requestID, signature: signature))
    }

    /// The envelope as a response, with the error's own headers and the request's id.
    public func response(requestID: String) -> Response {
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.requestID] = requestID
        return Response(
            status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: jsonBody(requestID: requestID)))
        )
    }

    public func jsonBody(requestID: String) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // The envelope is three strings: encoding cannot fail, but a fallback keeps it total.
        return (try? Array(encoder.encode(envelope(requestID: requestID))))
            ?? Array(#"{"error":{"code":"internal_error","message":"","requestId":""}}"#.utf8)
    }
}

/// Hummingbird's error protocol: wherever an `APIError` is caught by Hummingbird itself (a
/// router's responder, a request's body decoding), it becomes the same envelope the boundary
/// middleware writes, never Hummingbird's own error body.
extension APIError: HTTPResponseError {
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        response(requestID: RequestScope.current?.id ?? BoundaryMiddleware.requestID(from: request))
    }
}

extension APIError {
    /// What a ledger failure means to an API client. Details of database trouble stay in the
    /// server's log; the client learns that it may retry. Not "nothing was changed": a connection
    /// lost during COMMIT leaves that unknown (the commit may have reached the database, or a
    /// promoted standby), and the retry with the same id is what makes it come out right.
    init(_ error: LedgerError) {
        switch error {
        case .notFound(let what): self.init(.notFound, "\(what) does not exist")
        case .alreadyExists(let what): self.init(.alreadyExists, "\(what) already exists")
        case .invalidArgument(let reason): self.init(.invalidRequest, reason)
        case .unavailable, .contention:
            self.init(
                .databaseUnavailable,
                "the server's database is unavailable; retry shortly with the same request (one that carries an id, such as a payment or a refund, takes effect once)",
                headers: [.retryAfter: "1"])
        case .refundRefused(let refusal):
            let code: Code =
                switch refusal {
                case .invalidRefundID: .refundIDInvalid
                case .invalidAmount: .refundAmountInvalid
                case .paymentNotFound: .paymentNotFound
                case .notRefundable: .paymentNotRefundable
                case .currencyMismatch: .currencyMismatch
                case .exceedsRemaining: .refundExceedsRemaining
                case .idempotencyConflict: .idempotencyConflict
                }
            self.init(code, refusal.description)
        case .conflictingRetry, .schemaTooNew, .migrationFailed, .corruptRow, .database, .invalidConfiguration:
            self.init(
                .internalError, "the server could not complete the request; the request id identifies it in the log")
        }
    }
}
