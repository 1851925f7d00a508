import Crypto
import Foundation
import HorizonCore
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import Testing

/// The README's "API in five minutes" example, verbatim apart from the assertions: if this
/// stops compiling or paying, the README is wrong.
@Test func readmeExamplePays() throws {
    let ledgerPath = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString).sqlite")
        .path
    let journalPath = ledgerPath + "-journal"
    defer {
        try? FileManager.default.removeItem(atPath: ledgerPath)
        try? FileManager.default.removeItem(atPath: journalPath)
    }

    // --- README example starts ---
    let simulation = RadioSimulation(seed: 1)

    // The terminal: a key, a credential from a trust anchor, a ledger, a payment host.
    let anchor = P256.Signing.PrivateKey()
    let terminalKey = P256.Signing.PrivateKey()
    let identity = try TerminalIdentity(
        signingKey: terminalKey,
        credential: .issue(
            by: anchor, merchantID: "m-1", merchantName: "Corner Café", terminalKey: terminalKey.publicKey,
            notBefore: simulation.wallClock - 60, expiresAt: simulation.wallClock + 86_400))
    let ledger = try SandboxLedger(path: ledgerPath)
    let journal = try SQLiteTerminalJournal(path: journalPath)
    let service = TerminalRadioService(
        radio: try simulation.addDevice(name: "terminal"), identity: identity, processor: ledger, journal: journal)
    let host = PaymentHost(service: service, processor: ledger)

    // The wallet, 30 cm away, trusting the anchor.
    let client = PaymentClient(
        radio: try simulation.addDevice(name: "wallet", configuration: .init(position: .init(x: 0.3, y: 0))),
        identity: WalletIdentity(), trustAnchors: [TrustAnchor(publicKey: anchor.publicKey)])
    let decider = client.fusionTracker.manualConnectionDecider
    let tip = try Money.parse("1.50", currency: .eur)
    decider.observeState { state in
        switch state {
        case .candidateAvailable: decider.startDeciding()  // fetch and verify the offer
        case .accepted: client.connectToPaymentSession()
        default: break
        }
    }
    client.observeState { state in
        if state == .offerReceived { decider.decideForCandidate() }  // the person taps "Pay"
    }
    client.onHostConnected = { client.setOrderConfirmedByUser(true, tip: tip) }
    try client.start()

    host.start(amount: try Money.parse("12.50", currency: .eur), registerUser: RegisterUser(name: "Ana"))
    simulation.run(until: { client.state == .completed }, timeout: .seconds(10))
    print(client.receipt?.total as Any)  // 14.00 EUR
    // --- README example ends ---

    #expect(client.receipt?.total == (try Money.parse("14.00", currency: .eur)))
    #expect(client.offer?.merchantName == "Corner Café")
    #expect(host.state == .completed)
}
