import ArgumentParser
import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import Synchronization

/// A terminal and a wallet paying each other over the simulated radio, in one process, with
/// both sides' view and the ledger entry printed as they happen.
@main
struct HorizonDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "horizon-demo",
        abstract: "A terminal and a wallet pay each other over the simulated Bluetooth LE radio.",
        discussion: """
            Everything runs in this process on a deterministic simulated radio: the terminal advertises \
            a payment session, the wallet picks it as the nearest candidate, verifies the terminal's \
            credential and signed offer, confirms with a tip, and both sides show the signed receipt. \
            The ledger is a real SQLite file.
            """,
        version: HorizonVersion.current)

    @Argument(help: "The amount to pay, as a person types it (e.g. 12.50).")
    var amount: String = "12.50"

    @Option(help: "The tip the wallet adds.")
    var tip: String = "1.50"

    @Option(help: "ISO 4217 currency code.")
    var currency: String = "EUR"

    @Option(help: "Seed of the simulated radio (same seed, same run).")
    var seed: UInt64 = 1

    @Option(help: "Distance between wallet and terminal, in metres.")
    var distance: Double = 0.4

    @Option(help: "Virtual seconds of the simulated radio per real second.")
    var speed: Double = 1

    @Option(help: "Directory for the in-process (sandbox) ledger (default: a new temporary directory).")
    var dataDir: String?

    mutating func run() async throws {
        let currency = try parse { try Currency(code: self.currency.uppercased()) }
        let amount = try parse { try Money.parse(self.amount, currency: currency) }
        let tip = try parse { try Money.parse(self.tip, currency: currency) }
        guard distance > 0, distance < 10 else { throw ValidationError("--distance must be between 0 and 10 metres") }
        guard speed >= 0.1, speed <= 1000 else { throw ValidationError("--speed must be between 0.1 and 1000") }

        let directory =
            dataDir.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("horizon-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let ledgerPath = directory.appendingPathComponent("ledger.sqlite").path

        // Trust: a sandbox anchor vouches for the terminal; the wallet trusts that anchor.
        let simulation = RadioSimulation(seed: seed)
        let anchor = P256.Signing.PrivateKey()
        let terminalKey = P256.Signing.PrivateKey()
        let identity = try TerminalIdentity(
            signingKey: terminalKey,
            credential: TerminalCredential.issue(
                by: anchor, merchantID: "demo-001", merchantName: "Horizon Demo Café",
                terminalKey: terminalKey.publicKey, notBefore: simulation.wallClock - 60,
                expiresAt: simulation.wallClock + 86_400))
        // The ledger in process (HorizonLedger, as a server runs it), in sandbox mode: the new
        // wallet is enrolled on first contact with play money.
        let ledger = try await InProcessLedger.open(
            path: ledgerPath,
            configuration: InProcessLedgerConfiguration(
                currency: currency, merchantID: "demo-001", merchantName: "Horizon Demo Café"))
        print("Ledger:           \(ledger.modeDescription)")

        let terminalRadio = try simulation.addDevice(name: "terminal")
        let walletRadio = try simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: Position(x: distance, y: 0)))
        let service = TerminalRadioService(
            radio: terminalRadio, identity: identity, processor: ledger,
            journal: try SQLiteTerminalJournal(path: ":memory:"))
        let host = PaymentHost(
            service: service, processor: ledger, configuration: PaymentHostConfiguration(currency: currency))
        let client = PaymentClient(
            radio: walletRadio, identity: WalletIdentity(), trustAnchors: [TrustAnchor(publicKey: anchor.publicKey)])

        let log = Log(simulation: simulation)
        host.observeState { log.line("terminal", "\($0)") }
        client.observeState { log.line("wallet", "\($0)") }
        try client.start()

        // The roles' async API, on the simulated radio run in step with the real clock.
        let outcome = await simulation.live(speed: speed) {
            () async -> Result<(PaymentOrder, PaymentReceipt), DemoFailure> in
            log.line("terminal", "cashier types \(amount)")
            let sale = Task { try await host.collect(amount, registerUser: RegisterUser(name: "Demo cashier")) }
            let paid: Result<PaymentReceipt, PaymentClientError> = await {
                for await candidate in client.candidates() {
                    let rssi = candidate.smoothedRSSI.map { String(format: "%.0f dBm", $0) } ?? "unknown"
                    log.line("wallet", "nearest terminal: session \(candidate.peripheralMetaData.sessionID), \(rssi)")
                    do throws(PaymentClientError) {
                        let offer = try await client.fetchOffer(candidate)
                        log.line(
                            "wallet",
                            "offer from \(offer.merchantName) (verified): \(offer.amount), register user \(offer.registerUser), code \(offer.confirmationCode)"
                        )
                        log.line("wallet", "the person accepts and adds a tip of \(tip)")
                        return .success(try await client.pay(offer, tip: tip))
                    } catch {
                        return .failure(error)
                    }
                }
                return .failure(.cancelled)
            }()
            // A wallet that gave up leaves nobody to pay this sale: end it at the register.
            if case .failure = paid { sale.cancel() }
            let order = await sale.result
            switch (order, paid) {
            case (.success(let order), .success(let receipt)): return .success((order, receipt))
            case (.failure(let error), _):
                let wallet = (try? paid.get()).map { _ in "paid" } ?? "\(paid)"
                return .failure(DemoFailure("the payment did not complete: terminal \(error), wallet \(wallet)"))
            case (_, .failure(let error)):
                return .failure(DemoFailure("the payment did not complete: wallet \(error)"))
            }
        }
        let (order, receipt) = try outcome.get()

        print("")
        print("Wallet receipt:   \(receipt.merchantName), \(receipt.amount) + tip \(receipt.tip) = \(receipt.total)")
        print("                  payment \(receipt.paymentID), reference \(receipt.reference)")
        print("                  bonus points +\(receipt.bonusPointsEarned), balance \(receipt.bonusPointsBalance)")
        print("Terminal order:   \(order.amount) + tip \(order.tip) = \(order.total), cashier \(order.registerUser)")
        if let entry = try await ledger.transactions(limit: 1).first {
            let outcome: String
            switch entry.outcome {
            case .approved(let reference, _, _): outcome = "approved, reference \(reference)"
            case .declined(let code, let reason): outcome = "declined (\(code)): \(reason)"
            }
            print("Ledger entry:     \(outcome), payment \(entry.paymentID), \(entry.amount) + tip \(entry.tip)")
        }
        print("Merchant balance: \(try await ledger.merchantBalance())")
        print("Ledger file:      \(ledgerPath)")
    }

    private func parse<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw ValidationError("\(error)")
        }
    }
}

struct DemoFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Lines stamped with the simulation's virtual time.
final class Log: Sendable {
    let simulation: RadioSimulation
    init(simulation: RadioSimulation) { self.simulation = simulation }

    func line(_ side: String, _ text: String) {
        let millis = simulation.now.nanoseconds / 1_000_000
        print(String(format: "%6d ms  %-8@ %@", millis, side, text))
    }
}
