import Crypto
import Foundation
import HorizonLedger
import HorizonServiceClients
import HummingbirdTesting
import Testing

/// `WalletClient` against a server listening on a port: the reference's card
/// calls, the 3-D Secure wait, and the card it gives `PaymentClient` to pay with.
@Suite("WalletClient")
struct WalletClientTests {
    /// A wallet client signing with a registered wallet's key, against `server` listening at `port`.
    static func walletClient(_ server: TestServer, port: Int?) async throws -> WalletClient {
        let device = WalletDevice()
        _ = try await server.ledger.createWallet(name: "Alice", publicKey: device.publicKeyBytes)
        let port = try #require(port, "the server is not listening on a port")
        let url = try #require(URL(string: "http://127.0.0.1:\(port)"))
        let clock = server.clock
        return WalletClient(server: HorizonServerClient(serverURL: url, signingKey: device.key, clock: { clock.now }))
    }

    @Test func addListSelectUpdateRemove() async throws {
        let server = try await TestServer()
        try await server.withLiveServer { client in
            let wallet = try await Self.walletClient(server, port: client.port)
            #expect(try await wallet.getWallet() == [])
            guard
                case .added(let card) = try await wallet.addPaymentCard(
                    cardholder: "Alice Smith", cardNumber: "4242 4242 4242 4242", cvc: "123", expDate: "12/30",
                    name: "Everyday")
            else {
                Issue.record("a card without 3-D Secure was not added at once")
                return
            }
            #expect(card.brand == .visa && card.lastFour == "4242" && card.name == "Everyday" && card.canPay)
            #expect(try await wallet.getWallet() == [card])

            // The payment card id provider: the account balance (nil) unless a payable card is chosen.
            #expect(wallet.paymentCardID == nil)
            wallet.selectPaymentCard(id: card.id)
            #expect(wallet.paymentCardID == card.id)
            let off = try await wallet.updateCard(card, status: false, cardName: "Old")
            #expect(!off.isActive && off.name == "Old")
            #expect(wallet.paymentCardID == nil, "an inactive card was offered to pay")
            _ = try await wallet.updateCard(off, status: true, cardName: "Old")
            #expect(wallet.paymentCardID == card.id)

            try await wallet.removeCard(id: card.id)
            #expect(wallet.paymentCardID == nil)
            #expect(try await wallet.getWallet() == [])
            await #expect(throws: ServiceClientError.self) { try await wallet.removeCard(id: card.id) }
            do throws(ServiceClientError) {
                _ = try await wallet.addPaymentCard(
                    cardholder: "Alice", cardNumber: "4242 4242 4242 4241", cvc: "123", expDate: "12/30")
                Issue.record("a wrong check digit was accepted")
            } catch {
                #expect(error.code == "card_number_invalid", "\(error)")
            }
            wallet.selectPaymentCard(id: "c_unknown")
            wallet.reset()
            #expect(wallet.cards == [] && wallet.paymentCardID == nil)
        }
    }

    @Test func threeDSecureIsAwaitedAndCompleted() async throws {
        let server = try await TestServer()
        try await server.withLiveServer { client in
            let wallet = try await Self.walletClient(server, port: client.port)
            func addThreeDSCard() async throws -> (HorizonServiceClients.PaymentCard, PaymentDetails) {
                let result = try await wallet.addPaymentCard(
                    cardholder: "Alice Smith", cardNumber: "4000 0000 0000 3220", cvc: "123", expDate: "12/30")
                guard case .challengeRequired(let card, let details) = result else {
                    throw CardTestFailure("no challenge for the 3-D Secure test card")
                }
                return (card, details)
            }
            let (pending, details) = try await addThreeDSCard()
            #expect(!pending.canPay && !pending.isReady)
            #expect(
                details.redirectionURL.absoluteString
                    == "http://127.0.0.1:\(client.port ?? 0)/v1/cards/3ds/challenge?MD=\(details.md)")
            #expect(details.postDataTermURL.absoluteString == "http://127.0.0.1:\(client.port ?? 0)/v1/cards/3ds/term")
            #expect(try await wallet.challengeState(of: details) == .open)

            // The person answers while the client waits.
            let waiting = Task {
                try await wallet.waitForChallenge(details, timeout: .seconds(30), pollInterval: .milliseconds(50))
            }
            try await Task.sleep(for: .milliseconds(200))
            let answer = try await client.postForm(
                "/v1/cards/3ds/challenge/answer", ["MD": details.md, "decision": "approve"])
            #expect(answer.status == .ok)
            let card = try await waiting.value
            #expect(card.id == pending.id && card.canPay)
            #expect(try await wallet.challengeState(of: details) == .completed)
            wallet.selectPaymentCard(id: card.id)
            #expect(wallet.paymentCardID == card.id)

            // Nobody answers: the wait ends; a failed challenge is said as such.
            let (_, unanswered) = try await addThreeDSCard()
            await #expect(throws: WalletClientError.self) {
                _ = try await wallet.waitForChallenge(
                    unanswered, timeout: .milliseconds(200), pollInterval: .milliseconds(50))
            }
            let (_, failing) = try await addThreeDSCard()
            _ = try await client.postForm("/v1/cards/3ds/challenge/answer", ["MD": failing.md, "decision": "fail"])
            await #expect(throws: WalletClientError.challengeFailed) {
                _ = try await wallet.waitForChallenge(failing, timeout: .seconds(5), pollInterval: .milliseconds(50))
            }
            // The reference's explicit completion, with a PaRes that is not the challenge's.
            let (_, explicit) = try await addThreeDSCard()
            _ = try await client.postForm("/v1/cards/3ds/challenge/answer", ["MD": explicit.md, "decision": "approve"])
            do throws(ServiceClientError) {
                _ = try await wallet.executeAddPaymentCard(
                    paymentDetails: explicit, md: explicit.md, paRes: "pares_wrong")
                Issue.record("a wrong PaRes completed a card")
            } catch {
                #expect(error.code == "card_pares_invalid", "\(error)")
            }
            guard case .approved(let paRes) = try await wallet.challengeState(of: explicit) else {
                Issue.record("an approved challenge is not reported so")
                return
            }
            let completed = try await wallet.executeAddPaymentCard(
                paymentDetails: explicit, md: explicit.md, paRes: paRes)
            #expect(completed.canPay)
        }
    }
}

struct CardTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
