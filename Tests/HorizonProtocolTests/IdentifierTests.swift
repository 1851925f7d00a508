import HorizonCore
import HorizonProtocol
import HorizonTestSupport
import Testing

@Suite("Identifiers", .offTheCooperativePool)
struct IdentifierTests {
    @Test func transactionTypes() {
        #expect(TransactionType.allCases.map(\.rawValue) == [1, 2, 3, 4])
        #expect(!TransactionType.payment.isRedemption)
        #expect(TransactionType.bonusRedemption.isRedemption)
        #expect(TransactionType.goldRedemption.isRedemption)
        #expect(TransactionType.couponRedemption.isRedemption)
        #expect(TransactionType.couponRedemption.description == "coupon redemption")
    }

    @Test func sessionIDs() throws {
        #expect(SessionID(rawValue: 0) == nil)
        let id = try #require(SessionID(rawValue: 0xAB))
        #expect(id.description == "00000000000000ab")
        #expect(try #require(SessionID(rawValue: .max)).description == "ffffffffffffffff")
        var random = SeededRandom(seed: 1)
        var seen = Set<SessionID>()
        for _ in 0..<1000 {
            let next = SessionID.random(using: &random)
            #expect(next.rawValue != 0)
            seen.insert(next)
        }
        #expect(seen.count == 1000)
    }

    /// A generator that only ever returns zero must still not produce the reserved session id.
    @Test func sessionIDFromADegenerateGeneratorIsNotZero() {
        struct Zeros: RandomNumberGenerator { mutating func next() -> UInt64 { 0 } }
        var zeros = Zeros()
        #expect(SessionID.random(using: &zeros).rawValue != 0)
    }

    @Test func fixedSizeIdentifiersCheckTheirLength() throws {
        #expect(throws: WireError.invalidValue(field: "terminalKeyID", reason: "expected 8 bytes, got 7")) {
            try TerminalKeyID(bytes: counting(7, from: 0))
        }
        #expect(throws: WireError.invalidValue(field: "paymentID", reason: "expected 16 bytes, got 17")) {
            try PaymentID(bytes: counting(17, from: 0))
        }
        #expect(throws: WireError.invalidValue(field: "nonce", reason: "expected 16 bytes, got 0")) {
            try Nonce(bytes: [])
        }
        #expect(throws: WireError.invalidValue(field: "signature", reason: "expected 64 bytes, got 65")) {
            try SignatureBytes(bytes: counting(65, from: 0))
        }
        #expect(throws: WireError.invalidValue(field: "publicKey", reason: "expected 65 bytes, got 64")) {
            try PublicKeyBytes(bytes: [0x04] + counting(63, from: 0))
        }
        #expect(
            throws: WireError.invalidValue(
                field: "publicKey", reason: "not an uncompressed P-256 point (first byte 02, expected 04)")
        ) {
            try PublicKeyBytes(bytes: [0x02] + counting(64, from: 0))
        }
    }

    @Test func hexDescriptions() throws {
        #expect(
            try TerminalKeyID(bytes: [0x00, 0x01, 0x0A, 0x10, 0x7F, 0x80, 0xAB, 0xFF]).description == "00010a107f80abff"
        )
        #expect(try PaymentID(bytes: counting(16, from: 0xF8)).description == "f8f9fafbfcfdfeff0001020304050607")
        #expect(SignatureBytes.unsigned.description == String(repeating: "0", count: 128))
    }

    @Test func randomIdentifiersAreFreshAndTheRightSize() {
        var random = SeededRandom(seed: 42)
        let a = PaymentID.random(using: &random)
        let b = PaymentID.random(using: &random)
        #expect(a.bytes.count == 16)
        #expect(a != b)
        let nonce = Nonce.random(using: &random)
        #expect(nonce.bytes.count == 16)
        var again = SeededRandom(seed: 42)
        #expect(PaymentID.random(using: &again) == a, "seeded generation is reproducible")
    }

    @Test func merchantPrograms() {
        #expect(MerchantPrograms.none == MerchantPrograms())
        let all = MerchantPrograms(hasBonusProgram: true, hasGoldProgram: true, hasCouponProgram: true)
        #expect(all.hasGoldProgram)
        #expect(CancelReason.allCases.map(\.rawValue) == [1, 2, 3, 4])
    }

    @Test func errorCodesHaveTheDocumentedValues() {
        let codes: [ErrorCode] = [
            .insufficientFunds, .unknownWallet, .invalidAmount, .unsupportedCurrency, .sessionExpired,
            .sessionNotFound, .sessionTaken, .badSignature, .duplicatePaymentConflict, .declined, .timedOut,
            .cancelled, .protocolViolation, .internalError, .rateLimited, .notFound, .alreadyRedeemed, .expired,
        ]
        #expect(codes.map(\.rawValue) == Array(1...18))
        #expect(codes.allSatisfy { $0.name != nil })
    }
}
