import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

/// The README's example (also shown in docs/api.md), verbatim apart from the paths and the
/// assertions: if this stops compiling or paying, the README is wrong.
/// `theReadmeShowsThisExampleAsItIsCompiled` keeps the two texts the same.
@Test func readmeExamplePays() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let ledgerPath = directory.appendingPathComponent("ledger.sqlite").path
    let journalPath = directory.appendingPathComponent("journal.sqlite").path

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
    let ledger = try await InProcessLedger.open(path: ledgerPath)
    let service = TerminalRadioService(
        radio: try simulation.addDevice(name: "terminal"), identity: identity, processor: ledger,
        journal: try SQLiteTerminalJournal(path: journalPath))
    let host = PaymentHost(service: service, processor: ledger)

    // The wallet, 30 cm away, trusting the anchor.
    let client = PaymentClient(
        radio: try simulation.addDevice(name: "wallet", configuration: .init(position: .init(x: 0.3, y: 0))),
        identity: WalletIdentity(), trustAnchors: [TrustAnchor(publicKey: anchor.publicKey)])
    try client.start()

    let (order, receipt) = try await simulation.live(speed: 10) {
        // The register: one await per sale; cancelling the task cancels the sale.
        let sale = Task { try await host.collect(try Money.parse("12.50", currency: .eur)) }
        // The wallet: the nearest terminal, its verified offer, the person's answer.
        for await candidate in client.candidates() {
            let offer = try await client.fetchOffer(candidate)
            print("\(offer.merchantName): \(offer.amount), code \(offer.confirmationCode)")
            let receipt = try await client.pay(offer, tip: try Money.parse("1.50", currency: .eur))
            return (try await sale.value, receipt)
        }
        throw CancellationError()
    }
    print(receipt.total, order.total)  // 14.00 EUR 14.00 EUR
    // --- README example ends ---

    #expect(receipt.total == (try Money.parse("14.00", currency: .eur)))
    #expect(order.total == (try Money.parse("14.00", currency: .eur)))
    #expect(order.paymentID == receipt.paymentID)
    #expect(host.state == .idle)
    #expect(client.state == .idle)
    #expect(try await ledger.transactions(limit: 10).count == 1)
}

/// The example as the README must show it: the imports of this file that the example needs, then
/// the lines between the markers, indented as in the README, with the paths the README uses.
private func exampleAsPublished() throws -> String {
    let source = try String(contentsOfFile: #filePath, encoding: .utf8)
    let lines = source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    guard let start = lines.firstIndex(of: "    // --- README example starts ---"),
        let end = lines.firstIndex(of: "    // --- README example ends ---"), start < end
    else { throw ExampleMarkersMissing() }
    let body = lines[(start + 1)..<end].map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : $0 }
        .joined(separator: "\n")
        .replacingOccurrences(of: "path: ledgerPath", with: "path: \"/tmp/ledger.sqlite\"")
        .replacingOccurrences(of: "path: journalPath", with: "path: \"/tmp/journal.sqlite\"")
    let testOnly = ["import Foundation", "import HorizonTestSupport", "import Testing"]
    let imports = lines.filter { $0.hasPrefix("import ") && !testOnly.contains($0) }
    return imports.joined(separator: "\n") + "\n\n" + body
}

private struct ExampleMarkersMissing: Error {}

/// The Swift code blocks of a Markdown text.
private func swiftBlocks(in text: String) -> [String] {
    var blocks: [String] = []
    var current: [String]?
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
        if current == nil, line == "```swift" {
            current = []
        } else if let block = current, line == "```" {
            blocks.append(block.joined(separator: "\n"))
            current = nil
        } else {
            current?.append(line)
        }
    }
    return blocks
}

@Test(arguments: ["README.md", "docs/api.md"])
func theReadmeShowsThisExampleAsItIsCompiled(page: String) throws {
    let expected = try exampleAsPublished()
    let shown = swiftBlocks(in: try RepositoryFile.text(page)).first { $0.contains("RadioSimulation(seed:") }
    #expect(shown == expected, "\(page) must show the example of ReadmeExampleTests.swift exactly:\n\(expected)")
}
