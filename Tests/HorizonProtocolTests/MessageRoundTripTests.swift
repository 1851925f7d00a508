import HorizonCore
import HorizonProtocol
import HorizonTestSupport
import Testing

@Suite("Session message round trips and wire layout", .offTheCooperativePool)
struct MessageRoundTripTests {
    @Test("every sample decodes back to itself", arguments: try Fixtures().samples())
    func roundTrip(sample: Sample) throws {
        let bytes = sample.encoded
        #expect(try SessionMessage.decode(bytes) == sample.message)
        #expect(bytes.count == sample.layout.reduce(0) { $0 + $1.size }, "layout documents every byte")
        #expect(bytes[0] == 2)
        #expect(bytes[1] == sample.message.type.rawValue)
    }

    @Test("every proper prefix is refused as truncated in the right field", arguments: try Fixtures().samples())
    func everyPrefixIsTruncated(sample: Sample) throws {
        let bytes = sample.encoded
        for length in 0..<bytes.count {
            let field = try #require(sample.truncatedField(atLength: length))
            #expect(throws: WireError.truncated(field: field), "prefix of \(length) bytes") {
                try SessionMessage.decode(Array(bytes.prefix(length)))
            }
        }
    }

    @Test func typeTagsAreTheDocumentedOnes() {
        let tags = SessionMessageType.allCases.map(\.rawValue)
        #expect(tags == [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E])
    }

    @Test func offerBytesAreTheDocumentedLayout() throws {
        let f = try Fixtures()
        let expected: [UInt8] =
            [0x02, 0x02] + counting(8, from: 0x01) + [0x01] + Array("EUR".utf8) + bigEndian(Int64(1250))
            + [0x00, 0x04] + Array("Anna".utf8) + [0x00, 0x0B] + Array("Free coffee".utf8) + bigEndian(Int64(100))
            + [0x05] + counting(16, from: 0x40) + bigEndian(Int64(1_750_000_000))
            + counting(64, from: 0x50)
        #expect(SessionMessage.offer(try f.offer()).encoded() == expected)
    }

    @Test func anOfferForAPaymentIntentCarriesItsPaymentIDBeforeTheSignatureAndIsSignedOverIt() throws {
        let f = try Fixtures()
        let plain = try f.offer()
        let intent = try Offer(
            sessionID: plain.sessionID, transactionType: .payment, amount: plain.amount, registerUser: "Anna",
            item: "Free coffee", quantity: 100, merchantPrograms: plain.merchantPrograms, offerNonce: plain.offerNonce,
            expiresAt: plain.expiresAt, paymentID: f.paymentID, signature: f.signature)
        let bytes = SessionMessage.offer(intent).encoded()
        let plainBytes = SessionMessage.offer(plain).encoded()
        // The id sits between expiresAt and the signature; an offer without one is unchanged.
        #expect(bytes == Array(plainBytes.dropLast(64)) + f.paymentID.bytes + counting(64, from: 0x50))
        #expect(try SessionMessage.decode(bytes) == .offer(intent))
        #expect(try SessionMessage.decode(plainBytes) == .offer(plain))
        #expect(intent.signedBytes == plain.signedBytes + f.paymentID.bytes)
        // Part of an id is neither an offer with one nor one without.
        #expect(throws: WireError.self) { try SessionMessage.decode(Array(plainBytes.dropLast(64)) + [1, 2, 3] + counting(64, from: 0x50)) }
    }

    @Test func edgeValuesRoundTrip() throws {
        let f = try Fixtures()
        let maximum = try Money(minorUnits: Money.maximumMinorUnits, currency: .jpy)
        let zeroYen = Money.zero(.jpy)
        let maxSession = try #require(SessionID(rawValue: .max))
        let longUser = String(repeating: "é", count: 32)  // 64 UTF-8 bytes
        #expect(longUser.utf8.count == MessageLimits.shortText)
        let longMessage = String(repeating: "ab", count: 128)
        var messages: [SessionMessage] = []
        for type in TransactionType.allCases {
            messages.append(.hello(Hello(sessionID: maxSession, transactionType: type, sessionKey: f.walletKey)))
        }
        for bits in 0..<8 {
            let programs = MerchantPrograms(
                hasBonusProgram: bits & 1 != 0, hasGoldProgram: bits & 2 != 0, hasCouponProgram: bits & 4 != 0)
            messages.append(
                .offer(
                    try Offer(
                        sessionID: f.sessionID, transactionType: .payment, amount: maximum, registerUser: "",
                        merchantPrograms: programs, offerNonce: f.offerNonce, expiresAt: .min)))
        }
        messages.append(
            .offer(
                try Offer(
                    sessionID: f.sessionID, transactionType: .goldRedemption, amount: zeroYen,
                    registerUser: longUser, merchantPrograms: .none, offerNonce: f.offerNonce, expiresAt: .max,
                    signature: f.signature)))
        messages.append(.confirm(try f.confirm(amount: maximum, tip: zeroYen)))
        messages.append(.confirm(try f.confirm(amount: zeroYen, tip: maximum)))
        let half = try Money(minorUnits: Money.maximumMinorUnits / 2, currency: .usd)
        messages.append(.confirm(try f.confirm(amount: half, tip: half)))
        messages.append(
            .receipt(
                try Receipt(
                    sessionID: maxSession, transactionType: .bonusRedemption, paymentID: f.paymentID,
                    outcome: .declined(ErrorCode(rawValue: .max)), amount: maximum, tip: zeroYen,
                    transactionReference: .max, settledAt: .min, bonusPointsEarned: .max, bonusPointsBalance: 0)))
        messages.append(
            .receipt(
                try Receipt(
                    sessionID: f.sessionID, transactionType: .payment, paymentID: f.paymentID, outcome: .approved,
                    amount: zeroYen, tip: zeroYen, transactionReference: 0, settledAt: .max, bonusPointsEarned: 0,
                    bonusPointsBalance: .max)))
        for type in TransactionType.allCases where type.isRedemption {
            messages.append(
                .redeem(
                    try Redeem(
                        sessionID: f.sessionID, transactionType: type, terminalKeyDigest: f.terminalKeyDigest,
                        walletKey: f.walletKey, offerDigest: f.offerDigest, redemptionID: f.paymentID, item: "",
                        quantity: 0, walletNonce: f.walletNonce, expiresAt: 0)))
        }
        messages.append(.redeem(try f.redeem(item: longUser)))
        for reason in CancelReason.allCases {
            messages.append(.cancel(Cancel(sessionID: f.sessionID, reason: reason)))
        }
        messages.append(.cancel(Cancel(sessionID: f.sessionID, reason: .superseded, message: longMessage)))
        messages.append(.error(ErrorMessage(code: ErrorCode(rawValue: 0), message: longMessage, paymentID: nil)))
        messages.append(.error(ErrorMessage(code: .expired, message: "", paymentID: f.paymentID)))
        messages.append(.error(ErrorMessage(code: ErrorCode(rawValue: 999), message: "日本語 ✓")))
        messages.append(.proxyRequest(try ProxyEnvelope(requestID: 0, sealed: [])))
        messages.append(
            .proxyResponse(try ProxyEnvelope(requestID: .max, sealed: counting(MessageLimits.sealedPayload, from: 0))))
        messages.append(.proxyError(ProxyError(requestID: .max, code: .gatewayUnreachable, message: longMessage)))
        messages.append(.proxyError(ProxyError(requestID: 0, code: ErrorCode(rawValue: 999))))

        for message in messages {
            let bytes = message.encoded()
            #expect(bytes.count <= SessionMessage.maximumEncodedSize)
            #expect(try SessionMessage.decode(bytes) == message)
        }
    }

    @Test func sessionIDOfMessages() throws {
        let f = try Fixtures()
        for sample in try f.samples() {
            switch sample.message.type {
            case .error, .paymentStatusQuery, .proxyRequest, .proxyResponse, .receiptAcknowledgement, .proxyError:
                #expect(sample.message.sessionID == nil)
            default: #expect(sample.message.sessionID == f.sessionID)
            }
        }
    }
}

@Suite("Signed bytes", .offTheCooperativePool)
struct SignedBytesTests {
    @Test func signedBytesAreDomainPlusBodyWithoutSignature() throws {
        let f = try Fixtures()
        let cases: [(domain: [UInt8], signed: [UInt8], message: SessionMessage)] = [
            (Offer.signatureDomain, try f.offer().signedBytes, .offer(try f.offer())),
            (Confirm.signatureDomain, try f.confirm().signedBytes, .confirm(try f.confirm())),
            (Receipt.signatureDomain, try f.receipt().signedBytes, .receipt(try f.receipt())),
            (Redeem.signatureDomain, try f.redeem().signedBytes, .redeem(try f.redeem())),
        ]
        for (domain, signed, message) in cases {
            let body = Array(message.encoded().dropFirst(2).dropLast(SignatureBytes.byteCount))
            #expect(signed == domain + body)
        }
    }

    @Test func domainsAreDistinctAndNoneIsAPrefixOfAnother() {
        let domains = [
            Offer.signatureDomain, Confirm.signatureDomain, Receipt.signatureDomain, Redeem.signatureDomain,
            Hello.proofDomain, PaymentStatusQuery.proofDomain,
        ]
        #expect(Offer.signatureDomain == Array("horizon/offer/v2".utf8))
        for (i, a) in domains.enumerated() {
            for (j, b) in domains.enumerated() where i != j {
                #expect(!b.starts(with: a))
            }
        }
    }

    @Test func signatureDoesNotEnterSignedBytesButEveryFieldDoes() throws {
        let f = try Fixtures()
        let offer = try f.offer()
        let unsigned = try Offer(
            sessionID: offer.sessionID, transactionType: offer.transactionType, amount: offer.amount,
            registerUser: offer.registerUser, item: offer.item, quantity: offer.quantity,
            merchantPrograms: offer.merchantPrograms, offerNonce: offer.offerNonce, expiresAt: offer.expiresAt)
        #expect(unsigned.signature == .unsigned)
        #expect(unsigned.signedBytes == offer.signedBytes)
        #expect(unsigned.withSignature(f.signature) == offer)

        let confirm = try f.confirm()
        #expect(confirm.withSignature(.unsigned).signedBytes == confirm.signedBytes)
        #expect(confirm.withSignature(.unsigned).withSignature(f.signature) == confirm)
        let biggerTip = try f.confirm(tip: try Money(minorUnits: 201, currency: .eur))
        #expect(biggerTip.signedBytes != confirm.signedBytes)

        let receipt = try f.receipt()
        #expect(receipt.withSignature(.unsigned).signedBytes == receipt.signedBytes)
        #expect(try f.receipt(outcome: .declined(.declined)).signedBytes != receipt.signedBytes)

        let redeem = try f.redeem()
        #expect(redeem.withSignature(.unsigned).signedBytes == redeem.signedBytes)
        #expect(try f.redeem(item: "WINTER-24").signedBytes != redeem.signedBytes)
    }
}

@Suite("Redemption offers", .offTheCooperativePool)
struct RedemptionOfferTests {
    @Test func itemAndQuantityAreSignedAndCheckedLikeEveryField() throws {
        let f = try Fixtures()
        let offer = try f.offer()
        #expect(offer.item == "Free coffee")
        #expect(offer.quantity == 100)
        let cheaper = try Offer(
            sessionID: offer.sessionID, transactionType: .bonusRedemption, amount: offer.amount,
            registerUser: offer.registerUser, item: offer.item, quantity: 99, merchantPrograms: offer.merchantPrograms,
            offerNonce: offer.offerNonce, expiresAt: offer.expiresAt)
        #expect(cheaper.signedBytes != offer.withSignature(.unsigned).signedBytes)
        #expect(throws: WireError.negativeAmount(field: "quantity")) {
            try Offer(
                sessionID: offer.sessionID, transactionType: .bonusRedemption, amount: offer.amount, registerUser: "",
                quantity: -1, merchantPrograms: .none, offerNonce: offer.offerNonce, expiresAt: 0)
        }
        #expect(throws: WireError.fieldTooLong(field: "item", length: 65, maximum: 64)) {
            try Offer(
                sessionID: offer.sessionID, transactionType: .couponRedemption, amount: offer.amount, registerUser: "",
                item: String(repeating: "x", count: 65), merchantPrograms: .none, offerNonce: offer.offerNonce,
                expiresAt: 0)
        }
        // A negative quantity on the wire is refused by the decoder too.
        var bytes = SessionMessage.offer(offer).encoded()
        let quantityAt = 2 + 8 + 1 + 3 + 8 + 2 + 4 + 2 + 11
        bytes[quantityAt] = 0xFF
        #expect(throws: WireError.negativeAmount(field: "quantity")) { try SessionMessage.decode(bytes) }
    }
}
