import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import HummingbirdTesting
import NIOCore
import Testing

/// A wallet's cards over the API: the server's checks, each refusal with its
/// exact code, list / update / remove, and the 3-D Secure round trip through the pages the
/// server serves, driven with plain form posts.
@Suite("Cards and 3-D Secure")
struct CardTests {
    /// A server with one registered wallet (and a second one, to show isolation).
    struct Setup {
        let server: TestServer
        let alice: WalletDevice
        let aliceWallet: Wallet
        let bob: WalletDevice

        static func make() async throws -> Setup {
            let server = try await TestServer()
            let alice = WalletDevice()
            let bob = WalletDevice()
            let aliceWallet = try await server.ledger.createWallet(name: "Alice", publicKey: alice.publicKeyBytes)
            _ = try await server.ledger.createWallet(name: "Bob", publicKey: bob.publicKeyBytes)
            return Setup(server: server, alice: alice, aliceWallet: aliceWallet, bob: bob)
        }
    }

    static func addCard(
        number: String = "4242 4242 4242 4242", expiry: String = "12/30", cvc: String = "123",
        cardholder: String = "Alice Smith", name: String? = nil
    ) -> String {
        var fields = ["cardholder": cardholder, "cardNumber": number, "expiry": expiry, "cvc": cvc]
        if let name { fields["name"] = name }
        return String(decoding: try! JSONEncoder().encode(fields), as: UTF8.self)
    }

    @Test func badCardsAreRefusedWithTheirOwnCode() async throws {
        let setup = try await Setup.make()
        let cases: [(String, HTTPResponse.Status, String, String)] = [
            (
                Self.addCard(number: "4242 4242 4242 4241"), .badRequest, "card_number_invalid",
                "its check digit is wrong"
            ),
            (Self.addCard(number: "4242 4242"), .badRequest, "card_number_invalid", "must be 13 to 19 digits (got 8)"),
            (Self.addCard(number: "4242-4242-4242-424x"), .badRequest, "card_number_invalid", "only digits"),
            // The contract's 32 characters: 16 digits with 17 separators is over.
            (
                Self.addCard(number: "4242 4242 4242 4242" + String(repeating: " ", count: 14)), .badRequest,
                "card_number_invalid", "at most 32 characters"
            ),
            (
                Self.addCard(number: "6011 1111 1111 1117"), .badRequest, "card_brand_unsupported",
                "only Visa, Mastercard and American Express"
            ),
            (Self.addCard(expiry: "1230"), .badRequest, "card_expiry_invalid", "the expiry must be MM/YY"),
            (Self.addCard(expiry: "13/30"), .badRequest, "card_expiry_invalid", "month must be 01 to 12 (got 13)"),
            // The test clock is June 2025: May 2025 is past, June 2025 still valid.
            (Self.addCard(expiry: "05/25"), .badRequest, "card_expired", "the card expired at the end of 05/25"),
            (Self.addCard(expiry: "01/46"), .badRequest, "card_expiry_invalid", "more than 20 years ahead"),
            (Self.addCard(cvc: "12"), .badRequest, "card_cvc_invalid", "the 3 digits printed on the back"),
            (Self.addCard(cvc: "12a"), .badRequest, "card_cvc_invalid", "the 3 digits printed on the back"),
            (
                Self.addCard(number: "3782 822463 10005", cvc: "123"), .badRequest, "card_cvc_invalid",
                "the 4 digits printed on its front"
            ),
            (
                Self.addCard(number: "4111 1111 1111 1111"), .unprocessableContent, "card_not_accepted",
                "accepts only its test card numbers"
            ),
            (Self.addCard(cardholder: "  "), .badRequest, "invalid_request", "cardholder must be the name on the card"),
        ]
        try await setup.server.withClient { client in
            for (body, status, code, message) in cases {
                let response = try await client.sendSigned(
                    .post, "/v1/wallet/cards", json: body, by: setup.alice.key, time: setup.server.clock.now)
                let error = try expectError(response, status, code, message)
                // No refusal repeats the number or the CVC it was sent.
                let sent = try JSONDecoder().decode([String: String].self, from: Data(body.utf8))
                let number = (sent["cardNumber"] ?? "").filter(\.isNumber)
                #expect(!error.message.filter(\.isNumber).contains(number), "\(error.message)")
                #expect(!error.message.contains(sent["cvc"] ?? "-"), "\(error.message)")
            }
            // Valid through the end of its month; MM/YYYY and Amex's 4-digit CVC accepted.
            for body in [
                Self.addCard(expiry: "06/25"), Self.addCard(number: "5555555555554444", expiry: "06/2030"),
                Self.addCard(number: "378282246310005", cvc: "1234"),
            ] {
                let response = try await client.sendSigned(
                    .post, "/v1/wallet/cards", json: body, by: setup.alice.key, time: setup.server.clock.now)
                #expect(response.status == .created, "\(body): \(response.text)")
            }
            // Unsigned, and signed by a key that is no wallet's.
            try expectError(
                try await client.send(.post, "/v1/wallet/cards", json: Self.addCard()), .unauthorized,
                "unauthenticated", "signed with the wallet's key")
            try expectError(
                try await client.sendSigned(
                    .post, "/v1/wallet/cards", json: Self.addCard(), by: P256.Signing.PrivateKey(),
                    time: setup.server.clock.now), .forbidden, "wallet_unknown", "not a registered wallet")
        }
        let cards = try await setup.server.ledger.paymentCards(of: setup.aliceWallet.id)
        #expect(Set(cards.map(\.brand)) == [.visa, .mastercard, .amex])
        #expect(Set(cards.map(\.lastFour)) == ["4242", "4444", "0005"])
    }

    @Test func addListUpdateRemove() async throws {
        let setup = try await Setup.make()
        let key = setup.alice.key
        try await setup.server.withClient { client in
            let now = setup.server.clock.now
            let added = try await client.sendSigned(
                .post, "/v1/wallet/cards", json: Self.addCard(name: "Everyday"), by: key, time: now)
            #expect(added.status == .created, "\(added.text)")
            let result = try JSONDecoder().decode(Components.Schemas.AddPaymentCardResult.self, from: added.data)
            #expect(result.paymentDetails == nil)
            let card = result.card
            #expect(card.brand == .visa && card.lastFour == "4242" && card.expiryMonth == 12 && card.expiryYear == 2030)
            #expect(card.name == "Everyday" && card.cardholder == "Alice Smith" && card.active && card.state == .ready)
            // Nothing but these fields: no number, no CVC, no token.
            let object = try #require(try JSONSerialization.jsonObject(with: added.data) as? [String: [String: Any]])
            #expect(
                object["card"]?.keys.sorted()
                    == [
                        "active", "brand", "cardholder", "expiryMonth", "expiryYear", "id", "lastFour", "name", "state",
                    ])

            let listed = try await client.sendSigned(.get, "/v1/wallet/cards", by: key, time: now)
            #expect(
                try JSONDecoder().decode(Components.Schemas.PaymentCardList.self, from: listed.data).cards == [card])

            let updated = try await client.sendSigned(
                .patch, "/v1/wallet/cards/\(card.id)", json: #"{"active": false, "name": "Old card"}"#, by: key,
                time: now)
            #expect(updated.status == .ok, "\(updated.text)")
            let off = try JSONDecoder().decode(Components.Schemas.PaymentCard.self, from: updated.data)
            #expect(!off.active && off.name == "Old card")
            try expectError(
                try await client.sendSigned(
                    .patch, "/v1/wallet/cards/\(card.id)", json: #"{"name": ""}"#, by: key, time: now), .badRequest,
                "invalid_request", "the card's name must be 1 to 64 bytes")

            let removed = try await client.sendSigned(.delete, "/v1/wallet/cards/\(card.id)", by: key, time: now)
            #expect(removed.status == .noContent, "\(removed.text)")
            let empty = try await client.sendSigned(.get, "/v1/wallet/cards", by: key, time: now)
            #expect(try JSONDecoder().decode(Components.Schemas.PaymentCardList.self, from: empty.data).cards == [])
            try expectError(
                try await client.sendSigned(.delete, "/v1/wallet/cards/\(card.id)", by: key, time: now), .notFound,
                "card_not_found", "this wallet has no such card")
            // A removed card cannot pay.
            #expect(
                try await setup.server.ledger.payableCard(PaymentCardID(rawValue: card.id), of: setup.aliceWallet.id)
                    == nil)
        }
    }

    /// The reference's flow, with the browser's part as plain form posts.
    @Test func threeDSecureRoundTripThroughThePages() async throws {
        let setup = try await Setup.make()
        let key = setup.alice.key
        try await setup.server.withClient { client in
            let now = setup.server.clock.now
            let added = try await client.sendSigned(
                .post, "/v1/wallet/cards", json: Self.addCard(number: "4000 0000 0000 3220"), by: key, time: now)
            #expect(added.status == .accepted, "\(added.text)")
            let result = try JSONDecoder().decode(Components.Schemas.AddPaymentCardResult.self, from: added.data)
            let details = try #require(result.paymentDetails)
            #expect(result.card.state == .challengeRequired)
            #expect(details.redirectionUrl == "/v1/cards/3ds/challenge?MD=\(details.md)")
            #expect(details.postDataTermUrl == "/v1/cards/3ds/term")
            #expect(details.expiresAt == now + 600 && !details.card3DSNotEnrolled)
            let cardID = PaymentCardID(rawValue: result.card.id)
            #expect(try await setup.server.ledger.payableCard(cardID, of: setup.aliceWallet.id) == nil)

            // Completing before the person answered.
            try expectError(
                try await client.sendSigned(
                    .post, "/v1/wallet/cards/\(cardID)/3ds", json: #"{"md": "\#(details.md)", "paRes": "pares_0"}"#,
                    by: key, time: now), .conflict, "card_challenge_pending", "has not been answered yet")
            let open = try await client.sendSigned(.get, "/v1/wallet/card-challenges/\(details.md)", by: key, time: now)
            let openStatus = try JSONDecoder().decode(Components.Schemas.CardChallengeStatus.self, from: open.data)
            #expect(openStatus.state == .open && openStatus.paRes == nil)

            // The challenge page, by GET (a browser) and by POST with MD (the reference's web view).
            let page = try await client.send(.get, details.redirectionUrl)
            #expect(page.status == .ok)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            #expect(page.text.contains(#"id="approve""#) && page.text.contains(#"id="fail""#), "\(page.text)")
            #expect(page.text.contains(#"action="/v1/cards/3ds/challenge/answer""#))
            let posted = try await client.postForm("/v1/cards/3ds/challenge", ["MD": details.md])
            #expect(posted.status == .ok && posted.text.contains(#"id="approve""#), "\(posted.text)")

            // The person approves: the answer page posts MD and PaRes to the term URL.
            let answer = try await client.postForm(
                "/v1/cards/3ds/challenge/answer", ["MD": details.md, "decision": "approve"])
            #expect(answer.status == .ok, "\(answer.text)")
            #expect(answer.text.contains(#"action="/v1/cards/3ds/term""#) && answer.text.contains(#"id="continue""#))
            let paRes = try #require(Self.value(of: "PaRes", in: answer.text), "\(answer.text)")
            #expect(Self.value(of: "MD", in: answer.text) == details.md)
            let term = try await client.postForm("/v1/cards/3ds/term", ["MD": details.md, "PaRes": paRes])
            #expect(term.status == .ok)
            #expect(term.text.contains(#"id="MD" name="MD" value="\#(details.md)""#), "\(term.text)")
            #expect(term.text.contains(#"id="PaRes" name="PaRes" value="\#(paRes)""#), "\(term.text)")
            // Answered once: the page does not offer it again.
            #expect(try await client.send(.get, details.redirectionUrl).status == .conflict)

            // What a waiting wallet sees; Bob sees nothing.
            let polled = try await client.sendSigned(
                .get, "/v1/wallet/card-challenges/\(details.md)", by: key, time: now)
            let status = try JSONDecoder().decode(Components.Schemas.CardChallengeStatus.self, from: polled.data)
            #expect(status.state == .approved && status.paRes == paRes && status.cardId == cardID.rawValue)
            try expectError(
                try await client.sendSigned(
                    .get, "/v1/wallet/card-challenges/\(details.md)", by: setup.bob.key, time: now), .notFound,
                "card_challenge_not_found", "no 3-D Secure challenge with this MD")

            // A wrong PaRes, then the right one.
            try expectError(
                try await client.sendSigned(
                    .post, "/v1/wallet/cards/\(cardID)/3ds", json: #"{"md": "\#(details.md)", "paRes": "\#(paRes)0"}"#,
                    by: key, time: now), .unprocessableContent, "card_pares_invalid",
                "is not the one this challenge gave")
            #expect(try await setup.server.ledger.payableCard(cardID, of: setup.aliceWallet.id) == nil)
            let completed = try await client.sendSigned(
                .post, "/v1/wallet/cards/\(cardID)/3ds", json: #"{"md": "\#(details.md)", "paRes": "\#(paRes)"}"#,
                by: key, time: now)
            #expect(completed.status == .ok, "\(completed.text)")
            let card = try JSONDecoder().decode(Components.Schemas.PaymentCard.self, from: completed.data)
            #expect(card.state == .ready && card.active)
            #expect(try await setup.server.ledger.payableCard(cardID, of: setup.aliceWallet.id) != nil)
        }
    }

    @Test func failedAbandonedAndCrossedChallengesAreRefused() async throws {
        let setup = try await Setup.make()
        let key = setup.alice.key
        try await setup.server.withClient { client in
            func addThreeDSCard() async throws -> (String, Components.Schemas.PaymentDetails) {
                let added = try await client.sendSigned(
                    .post, "/v1/wallet/cards", json: Self.addCard(number: "4000000000003220"), by: key,
                    time: setup.server.clock.now)
                let result = try JSONDecoder().decode(Components.Schemas.AddPaymentCardResult.self, from: added.data)
                return (result.card.id, try #require(result.paymentDetails))
            }
            func complete(_ card: String, md: String, paRes: String) async throws -> TestResponse {
                try await client.sendSigned(
                    .post, "/v1/wallet/cards/\(card)/3ds", json: #"{"md": "\#(md)", "paRes": "\#(paRes)"}"#, by: key,
                    time: setup.server.clock.now)
            }
            // Failed on the page.
            let (failedCard, failed) = try await addThreeDSCard()
            let failedAnswer = try await client.postForm(
                "/v1/cards/3ds/challenge/answer", ["MD": failed.md, "decision": "fail"])
            #expect(failedAnswer.text.contains(#"<strong id="decision">failed</strong>"#), "\(failedAnswer.text)")
            let failedPaRes = try #require(Self.value(of: "PaRes", in: failedAnswer.text))
            try expectError(
                try await complete(failedCard, md: failed.md, paRes: failedPaRes), .unprocessableContent,
                "card_challenge_failed", "the 3-D Secure challenge failed")

            // Approved, but the PaRes of another challenge (and the MD of another card).
            let (cardA, challengeA) = try await addThreeDSCard()
            let (_, challengeB) = try await addThreeDSCard()
            _ = try await client.postForm(
                "/v1/cards/3ds/challenge/answer", ["MD": challengeA.md, "decision": "approve"])
            let answerB = try await client.postForm(
                "/v1/cards/3ds/challenge/answer", ["MD": challengeB.md, "decision": "approve"])
            let paResB = try #require(Self.value(of: "PaRes", in: answerB.text))
            try expectError(
                try await complete(cardA, md: challengeA.md, paRes: paResB), .unprocessableContent,
                "card_pares_invalid", "is not the one this challenge gave")
            try expectError(
                try await complete(cardA, md: challengeB.md, paRes: paResB), .notFound, "card_challenge_not_found",
                "belongs to this card")

            // Unknown MD on the page; an incomplete answer.
            let unknown = try await client.send(.get, "/v1/cards/3ds/challenge?MD=md_00000000000000000000000000000000")
            #expect(unknown.status == .notFound && unknown.text.contains("No 3-D Secure challenge has this MD"))
            let incomplete = try await client.postForm("/v1/cards/3ds/challenge/answer", ["MD": challengeA.md])
            #expect(incomplete.status == .badRequest)

            // Abandoned: the page and the completion are refused after 10 minutes.
            let (lateCard, late) = try await addThreeDSCard()
            setup.server.clock.advance(600)
            let expiredPage = try await client.send(.get, late.redirectionUrl)
            #expect(expiredPage.status == .gone && expiredPage.text.contains("This challenge expired"))
            let expiredAnswer = try await client.postForm(
                "/v1/cards/3ds/challenge/answer", ["MD": late.md, "decision": "approve"])
            #expect(expiredAnswer.status == .gone)
            try expectError(
                try await complete(lateCard, md: late.md, paRes: "pares_guess"), .gone, "card_challenge_expired",
                "remove the card and add it again")
            let polled = try await client.sendSigned(
                .get, "/v1/wallet/card-challenges/\(late.md)", by: key, time: setup.server.clock.now)
            #expect(
                try JSONDecoder().decode(Components.Schemas.CardChallengeStatus.self, from: polled.data).state
                    == .expired)
        }
        // None of them can pay.
        for card in try await setup.server.ledger.paymentCards(of: setup.aliceWallet.id) {
            #expect(card.state == .challenge && !card.canPay)
        }
    }

    /// The value of the form field `name` in a page (`name="X" value="Y"`).
    static func value(of name: String, in html: String) -> String? {
        guard let range = html.range(of: #"name="\#(name)" value=""#) else { return nil }
        return String(html[range.upperBound...].prefix { $0 != "\"" })
    }
}

extension TestClientProtocol {
    /// Posts an HTML form, as a browser does.
    func postForm(_ uri: String, _ fields: [String: String]) async throws -> TestResponse {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
        let body = fields.sorted { $0.key < $1.key }.map { name, value in
            "\(name)=\(value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
        }.joined(separator: "&")
        return try await executeRequest(
            uri: uri, method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
            body: ByteBuffer(string: body))
    }
}
