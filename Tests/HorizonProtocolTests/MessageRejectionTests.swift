import HorizonCore
import HorizonProtocol
import HorizonTestSupport
import Testing

/// Every way a session message can be refused, each with the exact error.
@Suite("Session message rejections", .offTheCooperativePool)
struct MessageRejectionTests {
    let f: Fixtures
    let samples: [String: Sample]

    init() throws {
        f = try Fixtures()
        samples = Dictionary(uniqueKeysWithValues: try f.samples().map { ($0.name, $0) })
    }

    func sample(_ name: String) throws -> Sample { try #require(samples[name]) }

    func expectRefused(_ bytes: [UInt8], _ error: WireError, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(throws: error, sourceLocation: sourceLocation) { try SessionMessage.decode(bytes) }
    }

    // MARK: Envelope

    @Test func emptyInputIsTruncatedInVersion() {
        expectRefused([], .truncated(field: "version"))
    }

    @Test func oversizedInputIsRefusedBeforeAnythingElse() throws {
        expectRefused([UInt8](repeating: 0xFF, count: 8193), .oversized(size: 8193, maximum: 8192))
        let valid = try sample("proxy request").encoded
        expectRefused(valid + [UInt8](repeating: 0, count: 8193 - valid.count), .oversized(size: 8193, maximum: 8192))
        // At the limit the size check passes and the strict decoder takes over.
        expectRefused(
            valid + [UInt8](repeating: 0, count: 8192 - valid.count), .trailingBytes(count: 8192 - valid.count))
    }

    @Test func unknownTypeTags() {
        expectRefused([0x02, 0x00], .unknownType(0x00))
        expectRefused([0x02, 0x0F], .unknownType(0x0F))
        expectRefused([0x02, 0xFF, 0x00, 0x00], .unknownType(0xFF))
    }

    @Test func unknownVersions() throws {
        // Version 1 (before the per-attempt Hello) is refused outright, never half understood.
        var bytes = try sample("hello").encoded
        bytes[0] = 1
        expectRefused(bytes, .unsupportedVersion(1))
        bytes[0] = 3
        expectRefused(bytes, .unsupportedVersion(3))
        expectRefused([0x00], .unsupportedVersion(0))
        expectRefused([0xFF, 0x01], .unsupportedVersion(0xFF))
    }

    @Test("trailing bytes after any message", arguments: try Fixtures().samples())
    func trailingBytes(sample: Sample) {
        expectRefused(sample.encoded + [0x00], .trailingBytes(count: 1))
        expectRefused(sample.encoded + [0x01, 0x02, 0x03], .trailingBytes(count: 3))
    }

    // MARK: Payment method

    @Test func aConfirmNamesAKnownPaymentMethodAndAPrintableCardID() throws {
        let confirm = try sample("confirm")
        expectRefused(
            confirm.bytes(replacing: ["paymentMethod": [2]]),
            .invalidValue(field: "paymentMethod", reason: "unknown payment method 2"))
        let card = try sample("confirm with a card")
        expectRefused(
            card.bytes(replacing: ["paymentMethod card id": Array("c card".utf8)]),
            .invalidValue(field: "paymentMethod", reason: "a card id is printable ASCII without spaces"))
        expectRefused(
            card.bytes(replacing: ["paymentMethod card id length": [0, 65]]),
            .fieldTooLong(field: "paymentMethod card id", length: 65, maximum: 64))
        // The balance's encoding with a card's bytes after it: trailing bytes, not a card.
        expectRefused(card.bytes(replacing: ["paymentMethod": [0]]), .trailingBytes(count: 8))
    }

    // MARK: Money

    @Test func negativeAmounts() throws {
        let offer = try sample("offer")
        expectRefused(offer.bytes(replacing: ["amount": bigEndian(Int64(-1))]), .negativeAmount(field: "amount"))
        expectRefused(offer.bytes(replacing: ["amount": bigEndian(Int64.min)]), .negativeAmount(field: "amount"))
        let confirm = try sample("confirm")
        expectRefused(confirm.bytes(replacing: ["tip": bigEndian(Int64(-200))]), .negativeAmount(field: "tip"))
        let receipt = try sample("receipt approved")
        expectRefused(receipt.bytes(replacing: ["amount": bigEndian(Int64(-5))]), .negativeAmount(field: "amount"))
    }

    @Test func amountsAboveTheMaximum() throws {
        let tooMuch = bigEndian(Money.maximumMinorUnits + 1)
        let offer = try sample("offer")
        expectRefused(offer.bytes(replacing: ["amount": tooMuch]), .amountOutOfRange(field: "amount"))
        expectRefused(offer.bytes(replacing: ["amount": bigEndian(Int64.max)]), .amountOutOfRange(field: "amount"))
        let confirm = try sample("confirm")
        expectRefused(confirm.bytes(replacing: ["amount": tooMuch]), .amountOutOfRange(field: "amount"))
        expectRefused(confirm.bytes(replacing: ["tip": tooMuch]), .amountOutOfRange(field: "tip"))
        // At the maximum itself the offer is fine.
        let atMaximum = offer.bytes(replacing: ["amount": bigEndian(Money.maximumMinorUnits)])
        guard case .offer(let decoded) = try SessionMessage.decode(atMaximum) else {
            Issue.record("not an offer")
            return
        }
        #expect(decoded.amount.minorUnits == Money.maximumMinorUnits)
    }

    @Test func amountPlusTipAboveTheMaximum() throws {
        let maximum = bigEndian(Money.maximumMinorUnits)
        for name in ["confirm", "receipt approved", "receipt declined"] {
            let message = try sample(name)
            expectRefused(
                message.bytes(replacing: ["amount": maximum, "tip": bigEndian(Int64(1))]),
                .amountOutOfRange(field: "tip"))
            expectRefused(
                message.bytes(replacing: ["amount": maximum, "tip": maximum]), .amountOutOfRange(field: "tip"))
        }
        // Exactly the maximum together is allowed.
        let confirm = try sample("confirm")
        let split = confirm.bytes(replacing: [
            "amount": bigEndian(Money.maximumMinorUnits - 1), "tip": bigEndian(Int64(1)),
        ])
        #expect(throws: Never.self) { try SessionMessage.decode(split) }
    }

    @Test func tipInAnotherCurrency() throws {
        let mismatch = WireError.invalidValue(field: "tip", reason: "currency USD differs from the amount's EUR")
        expectRefused(try sample("confirm").bytes(replacing: ["tip currency": Array("USD".utf8)]), mismatch)
        expectRefused(try sample("receipt approved").bytes(replacing: ["tip currency": Array("USD".utf8)]), mismatch)
    }

    @Test func unsupportedCurrencyCodes() throws {
        let offer = try sample("offer")
        let cases: [([UInt8], String)] = [
            (Array("XYZ".utf8), "XYZ"),
            (Array("eur".utf8), "eur"),
            (Array("E1R".utf8), "E1R"),
            ([0x00, 0x41, 0xFF], "\\x00A\\xff"),
            ([0x0A, 0x1B, 0x7F], "\\x0a\\x1b\\x7f"),
            ([0x5C, 0x22, 0x20], "\\x5c\" "),
            ([0xC3, 0xA9, 0x41], "\\xc3\\xa9A"),
        ]
        for (code, text) in cases {
            expectRefused(offer.bytes(replacing: ["amount currency": code]), .unsupportedCurrency(text))
        }
        expectRefused(
            try sample("confirm").bytes(replacing: ["tip currency": Array("ABC".utf8)]), .unsupportedCurrency("ABC"))
    }

    // MARK: Strings and byte strings

    @Test func invalidUTF8() throws {
        expectRefused(
            try sample("offer").bytes(replacing: ["registerUser": [0x41, 0xC3, 0x28, 0x41]]),
            .invalidUTF8(field: "registerUser"))
        expectRefused(
            try sample("redeem").bytes(replacing: ["item length": [0, 1], "item": [0xFF]]),
            .invalidUTF8(field: "item"))
        expectRefused(
            try sample("cancel").bytes(replacing: ["message length": [0, 2], "message": [0xED, 0xA0]]),
            .invalidUTF8(field: "message"))
        // An encoded surrogate (U+D800) is not UTF-8 either.
        expectRefused(
            try sample("error without payment id").bytes(replacing: [
                "message length": [0, 3], "message": [0xED, 0xA0, 0x80],
            ]), .invalidUTF8(field: "message"))
    }

    @Test func stringsOverTheirLimits() throws {
        expectRefused(
            try sample("offer").bytes(replacing: [
                "registerUser length": [0, 65], "registerUser": [UInt8](repeating: 0x41, count: 65),
            ]), .fieldTooLong(field: "registerUser", length: 65, maximum: 64))
        expectRefused(
            try sample("redeem").bytes(replacing: [
                "item length": [0, 65], "item": [UInt8](repeating: 0x41, count: 65),
            ]), .fieldTooLong(field: "item", length: 65, maximum: 64))
        expectRefused(
            try sample("cancel").bytes(replacing: [
                "message length": [1, 1], "message": [UInt8](repeating: 0x41, count: 257),
            ]), .fieldTooLong(field: "message", length: 257, maximum: 256))
        expectRefused(
            try sample("error with payment id").bytes(replacing: ["message length": [0xFF, 0xFF]]),
            .fieldTooLong(field: "message", length: 65535, maximum: 256))
        expectRefused(
            try sample("proxy request").bytes(replacing: [
                "sealed length": [0x10, 0x01], "sealed": [UInt8](repeating: 0, count: 4097),
            ]), .fieldTooLong(field: "sealed", length: 4097, maximum: 4096))
    }

    @Test func lengthsClaimingMoreThanIsThere() throws {
        expectRefused(
            try sample("cancel").bytes(replacing: ["message length": [0, 16]]), .truncated(field: "message"))
        expectRefused(
            Array(try sample("offer").bytes(replacing: ["registerUser length": [0, 64]]).prefix(30)),
            .truncated(field: "registerUser"))
        expectRefused(
            try sample("proxy response").bytes(replacing: ["sealed length": [0, 1]]), .truncated(field: "sealed"))
    }

    // MARK: Enumerations, flags and identifiers

    @Test func badMerchantProgramFlags() throws {
        let offer = try sample("offer")
        expectRefused(
            offer.bytes(replacing: ["merchantPrograms": [0x08]]),
            .invalidValue(field: "merchantPrograms", reason: "unknown flag bits 08"))
        expectRefused(
            offer.bytes(replacing: ["merchantPrograms": [0xFF]]),
            .invalidValue(field: "merchantPrograms", reason: "unknown flag bits f8"))
    }

    @Test func badCancelReasons() throws {
        let cancel = try sample("cancel")
        for raw: UInt8 in [0, 5, 0xFF] {
            expectRefused(
                cancel.bytes(replacing: ["reason": [raw]]),
                .invalidValue(field: "reason", reason: "unknown cancel reason \(raw)"))
        }
    }

    @Test func badOptionalFlags() throws {
        for raw: UInt8 in [2, 0x80, 0xFF] {
            expectRefused(
                try sample("error without payment id").bytes(replacing: ["paymentID flag": [raw]]),
                .invalidValue(field: "paymentID", reason: "presence flag \(raw), expected 0 or 1"))
        }
        // A flag of 1 with no identifier after it is truncated; 0 followed by one is trailing.
        expectRefused(
            try sample("error without payment id").bytes(replacing: ["paymentID flag": [1]]),
            .truncated(field: "paymentID"))
        expectRefused(
            try sample("error with payment id").bytes(replacing: ["paymentID flag": [0]]),
            .trailingBytes(count: 16))
    }

    @Test func helloKeyMustBeAnUncompressedPoint() throws {
        let hello = try sample("hello")
        for prefix: UInt8 in [0x00, 0x02, 0x03, 0x05] {
            expectRefused(
                hello.bytes(replacing: ["sessionKey": [prefix] + counting(64, from: 0x10)]),
                .invalidValue(
                    field: "sessionKey",
                    reason: "not an uncompressed P-256 point (first byte \(hexByte(prefix)), expected 04)"))
        }
    }

    @Test func unknownTransactionTypes() throws {
        for name in ["hello", "offer", "receipt approved", "redeem"] {
            for raw: UInt8 in [0, 5, 0xFF] {
                expectRefused(
                    try sample(name).bytes(replacing: ["transactionType": [raw]]),
                    .invalidValue(field: "transactionType", reason: "unknown transaction type \(raw)"))
            }
        }
    }

    @Test func redeemMustBeARedemption() throws {
        expectRefused(
            try sample("redeem").bytes(replacing: ["transactionType": [1]]),
            .invalidValue(field: "transactionType", reason: "payment is not a redemption"))
    }

    @Test func zeroSessionIDs() throws {
        for name in ["hello", "offer", "confirm", "receipt approved", "redeem", "cancel"] {
            expectRefused(
                try sample(name).bytes(replacing: ["sessionID": [UInt8](repeating: 0, count: 8)]),
                .invalidValue(field: "sessionID", reason: "must not be zero"))
        }
    }

    @Test func negativeCountsAndPoints() throws {
        expectRefused(
            try sample("redeem").bytes(replacing: ["quantity": bigEndian(Int64(-1))]),
            .negativeAmount(field: "quantity"))
        let receipt = try sample("receipt approved")
        expectRefused(
            receipt.bytes(replacing: ["bonusPointsEarned": bigEndian(Int64.min)]),
            .negativeAmount(field: "bonusPointsEarned"))
        expectRefused(
            receipt.bytes(replacing: ["bonusPointsBalance": bigEndian(Int64(-1))]),
            .negativeAmount(field: "bonusPointsBalance"))
    }

    @Test func unknownReceiptOutcomes() throws {
        for raw: UInt8 in [0, 4, 0xFF] {
            expectRefused(
                try sample("receipt approved").bytes(replacing: ["outcome": [raw]]),
                .invalidValue(field: "outcome", reason: "unknown outcome \(raw)"))
        }
    }

    @Test func unknownErrorCodesAreKept() throws {
        let bytes = try sample("error without payment id").bytes(replacing: ["code": [0x12, 0x34]])
        guard case .error(let error) = try SessionMessage.decode(bytes) else {
            Issue.record("not an error message")
            return
        }
        #expect(error.code == ErrorCode(rawValue: 0x1234))
        #expect(error.code.name == nil)
        #expect(error.code.description == "error 4660")
        #expect(ErrorCode.alreadyRedeemed.description == "alreadyRedeemed")
    }
}

func hexByte(_ byte: UInt8) -> String {
    let digits = String(byte, radix: 16)
    return digits.count == 1 ? "0" + digits : digits
}

/// The initialisers refuse what the decoder refuses, so no value encodes to undecodable bytes.
@Suite("Message initialisers", .offTheCooperativePool)
struct MessageInitialiserTests {
    @Test func initialisersEnforceTheWireLimits() throws {
        let f = try Fixtures()
        #expect(throws: WireError.fieldTooLong(field: "registerUser", length: 65, maximum: 64)) {
            try f.offer(registerUser: String(repeating: "x", count: 65))
        }
        #expect(throws: WireError.fieldTooLong(field: "item", length: 66, maximum: 64)) {
            try f.redeem(item: String(repeating: "é", count: 33))
        }
        #expect(throws: WireError.invalidValue(field: "tip", reason: "currency USD differs from the amount's EUR")) {
            try f.confirm(tip: Money.zero(.usd))
        }
        let maximum = try Money(minorUnits: Money.maximumMinorUnits, currency: .eur)
        #expect(throws: WireError.amountOutOfRange(field: "tip")) { try f.confirm(amount: maximum) }
        #expect(throws: WireError.invalidValue(field: "transactionType", reason: "payment is not a redemption")) {
            try Redeem(
                sessionID: f.sessionID, transactionType: .payment, terminalKeyDigest: f.terminalKeyDigest,
                walletKey: f.walletKey, offerDigest: f.offerDigest, redemptionID: f.paymentID, item: "",
                quantity: 1, walletNonce: f.walletNonce, expiresAt: 0)
        }
        #expect(throws: WireError.negativeAmount(field: "quantity")) {
            try Redeem(
                sessionID: f.sessionID, transactionType: .bonusRedemption, terminalKeyDigest: f.terminalKeyDigest,
                walletKey: f.walletKey, offerDigest: f.offerDigest, redemptionID: f.paymentID, item: "",
                quantity: -1, walletNonce: f.walletNonce, expiresAt: 0)
        }
        #expect(throws: WireError.negativeAmount(field: "bonusPointsBalance")) {
            try Receipt(
                sessionID: f.sessionID, transactionType: .payment, paymentID: f.paymentID, outcome: .approved,
                amount: f.amount, tip: f.tip, transactionReference: 1, settledAt: 0, bonusPointsEarned: 0,
                bonusPointsBalance: -1)
        }
        #expect(throws: WireError.fieldTooLong(field: "sealed", length: 4097, maximum: 4096)) {
            try ProxyEnvelope(requestID: 1, sealed: [UInt8](repeating: 0, count: 4097))
        }
    }

    @Test func longDiagnosticTextIsShortenedAtACharacterBoundary() throws {
        let f = try Fixtures()
        // 100 three-byte characters: 300 bytes; 85 of them (255 bytes) fit in 256.
        let cancel = Cancel(sessionID: f.sessionID, reason: .timedOut, message: String(repeating: "€", count: 100))
        #expect(cancel.message == String(repeating: "€", count: 85))
        let error = ErrorMessage(code: .internalError, message: String(repeating: "a", count: 300))
        #expect(error.message.utf8.count == 256)
        #expect(try SessionMessage.decode(SessionMessage.cancel(cancel).encoded()) == .cancel(cancel))
        let exact = String(repeating: "b", count: 256)
        #expect(ErrorMessage(code: .declined, message: exact).message == exact)
    }
}
