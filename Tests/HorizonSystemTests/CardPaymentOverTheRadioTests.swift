import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRoles
import HorizonServiceClients
import HorizonSimulatedRadio
import HorizonStores
import Testing

/// A card payment end to end: the wallet's `WalletClient` adds a card on the server and is
/// `PaymentClient`'s `paymentCardIDProvider`; the payment over the simulated radio names the
/// card in the signed confirmation; the terminal settles through the server, which charges the
/// card through the sandbox processor once.
@Suite struct CardPaymentOverTheRadioTests {
    @Test func aPaymentOverTheRadioWithACardIsChargedToTheCardOnce() async throws {
        let server = try await ServerRig.start()
        defer { Task { await server.stop() } }
        let identity = try await server.activateTerminal()
        let (walletKey, walletID) = try await server.registerWallet(balance: 100_00)
        let wallet = WalletClient(server: server.client(signingWith: walletKey))
        guard
            case .added(let card) = try await wallet.addPaymentCard(
                cardholder: "Alex Doe", cardNumber: "4242 4242 4242 4242", cvc: "123", expDate: "12/30")
        else { throw RigError("the approving test card needed a challenge") }
        wallet.selectPaymentCard(id: card.id)

        let processor = ServerPaymentProcessor(
            client: server.client(signingWith: identity.signingKey), anchor: server.issuer.signingKey.publicKey)
        let simulation = RadioSimulation(seed: 5, wallClockAtStart: Ledger.now())
        let service = TerminalRadioService(
            radio: try simulation.addDevice(name: "terminal"), identity: identity, processor: processor,
            journal: try SQLiteTerminalJournal(path: server.directory.appendingPathComponent("journal.sqlite").path))
        let host = PaymentHost(service: service, processor: processor)
        let client = PaymentClient(
            radio: try simulation.addDevice(name: "wallet", configuration: .init(position: .init(x: 0.3, y: 0))),
            identity: WalletIdentity(signingKey: walletKey), trustAnchors: [server.issuer.anchor],
            paymentCardIDProvider: wallet)
        try client.start()

        let (order, receipt) = try await simulation.live(speed: 2) {
            let sale = Task { try await host.collect(try Money.parse("12.50", currency: .eur)) }
            for await candidate in client.candidates() {
                let offer = try await client.fetchOffer(candidate)
                let receipt = try await client.pay(offer, tip: try Money.parse("1.50", currency: .eur))
                return (try await sale.value, receipt)
            }
            throw CancellationError()
        }
        #expect(order.paymentID == receipt.paymentID)
        #expect(receipt.total == (try Money.parse("14.00", currency: .eur)))
        // The card paid: the balance is untouched, the merchant got the money, one charge.
        #expect(
            try await server.ledger.balance(of: walletID, in: .eur) == (try Money(minorUnits: 100_00, currency: .eur)))
        #expect(
            try await server.ledger.balance(of: server.merchant.id) == (try Money(minorUnits: 14_00, currency: .eur)))
        #expect(try await server.ledger.cardOfPayment(receipt.paymentID) == PaymentCardID(rawValue: card.id))
        #expect(try await server.ledger.executionCount(of: receipt.paymentID) == 1)
        let charges = try await server.ledger.store.transaction { db in
            try await db.query(
                "SELECT amount FROM sandbox_card_charges WHERE idempotency_key = ? AND outcome = 'charged'",
                [.text(receipt.paymentID.bytes.hexString)]
            ).map { try $0.integer("amount") }
        }
        #expect(charges == [14_00])
        let stored = try #require(try await server.ledger.transaction(for: receipt.paymentID))
        #expect(stored.walletID == walletID)
        #expect(try await LedgerAudit.violations(in: server.ledger.store).isEmpty)
    }
}
