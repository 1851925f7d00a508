import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import Logging

@main
enum Main {
    static func main() async { await CommandRunner.main(HorizonWallet.self) }
}

struct HorizonWallet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "horizon-wallet",
        abstract: "A Bluetooth LE wallet: find the nearest terminal, check its offer, pay it with a tip.",
        discussion: """
            Start with `horizon-wallet init --trust <terminal data dir>/anchor.pub`, then `horizon-wallet pay`. \
            The wallet trusts only terminals whose credential is signed by an anchor it was given.
            """,
        subcommands: [
            Init.self, Scan.self, Pay.self, Redeem.self, History.self, Balance.self, Coupons.self, Memberships.self,
            Points.self, RadioCommand.self,
        ])
}

extension GlobalOptions {
    var walletFiles: WalletFiles { WalletFiles(directory: DataDirectory(explicit: dataDir, role: "wallet")) }
}

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the wallet's key and store, and choose which terminal issuers to trust.",
        discussion: """
            Without --trust, the wallet trusts the sandbox anchor of a terminal initialised on this machine \
            (~/.local/share/horizon/terminal/anchor.pub), if there is one. The wallet is enrolled in a sandbox \
            ledger on its first payment there.
            """)

    @Option(help: "A terminal issuer's public key (PEM) to trust; repeat for several.") var trust: [String] = []
    @Flag(help: "Replace an existing wallet key.") var force = false
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() throws {
        var anchors = trust.map { URL(fileURLWithPath: $0) }
        var note = ""
        if anchors.isEmpty {
            let local = DataDirectory(explicit: nil, role: "terminal").file(TerminalFiles.anchorPublicKey)
            if FileManager.default.fileExists(atPath: local.path) {
                anchors = [local]
                note = " (the sandbox terminal on this machine)"
            }
        }
        let files = global.walletFiles
        _ = try files.initialize(trusting: anchors, force: force)
        let identity = try files.loadIdentity()
        if json {
            try Console().json([
                "dataDirectory": files.directory.path, "walletKey": identity.publicKey.bytes.hexString,
                "trusted": anchors.map(\.path).joined(separator: ","),
            ])
            return
        }
        print("Wallet ready in \(files.directory.path)")
        print("  wallet key  \(identity.publicKey.bytes.prefix(8).hexString)…")
        if anchors.isEmpty {
            print("  trusts      nothing yet: run again with --force --trust <terminal data dir>/anchor.pub")
        } else {
            for anchor in anchors { print("  trusts      \(anchor.path)\(note)") }
        }
    }
}

struct Scan: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the terminals heard nearby, nearest first, refreshing in place.")

    @Option(help: "Seconds to scan (0: until Ctrl-C).") var seconds = 10
    @Flag(help: "Print the final list as JSON.") var json = false
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func validate() throws {
        guard (0...3600).contains(seconds) else { throw ValidationError("--seconds must be 0 to 3600") }
    }

    func run() throws {
        let logger = Logs.logger("horizon.wallet", verbose: global.verbose)
        let device = try radio.open(name: "wallet-scan", defaultPosition: Position(x: 0.3, y: 0), logger: logger)
        defer { device.shutdown() }
        let tracker = FusionTracker(
            scanner: SightingHub(radio: device), transactionTypes: Set(TransactionType.allCases))
        try tracker.start()
        let console = Console()
        let stop = DispatchSemaphore(value: 0)
        let interrupt = InterruptHandler(queue: DispatchQueue(label: "horizon.wallet.signals")) { _ in stop.signal() }
        let deadline: DispatchTime = seconds == 0 ? .distantFuture : .now() + .seconds(seconds)
        var shown = 0
        repeat {
            if !json {
                let lines = Self.table(tracker.trackings)
                console.redraw(lines, previousLineCount: console.isTerminal ? shown : 0)
                shown = lines.count
            }
        } while stop.wait(timeout: min(deadline, .now() + .milliseconds(console.isTerminal ? 500 : 2000))) == .timedOut
            && DispatchTime.now() < deadline
        withExtendedLifetime(interrupt) {}
        if json {
            try console.json(
                tracker.trackings.enumerated().map { rank, tracking in
                    ScanRow(
                        rank: rank + 1, sessionID: tracking.peripheralMetaData.sessionID.description,
                        transactionType: tracking.peripheralMetaData.transactionType.description,
                        smoothedRSSI: tracking.smoothedRSSI.map { ($0 * 10).rounded() / 10 },
                        terminalKeyID: tracking.peripheralMetaData.terminalKeyID.description,
                        address: tracking.peripheralMetaData.address.rawValue)
                })
        }
    }

    static func table(_ trackings: [PeripheralTracking]) -> [String] {
        var lines = ["rank  session           type               RSSI      terminal key"]
        for (rank, tracking) in trackings.enumerated() {
            let meta = tracking.peripheralMetaData
            let rssi = tracking.smoothedRSSI.map { String(format: "%5.1f dBm", $0) } ?? "  unknown"
            lines.append(
                String(format: "%4d  ", rank + 1) + meta.sessionID.description + "  "
                    + meta.transactionType.description.padding(toLength: 17, withPad: " ", startingAt: 0) + "  " + rssi
                    + "  " + meta.terminalKeyID.description)
        }
        if trackings.isEmpty { lines.append("      (no terminal heard yet)") }
        return lines
    }
}

struct ScanRow: Encodable {
    let rank: Int
    let sessionID: String
    let transactionType: String
    let smoothedRSSI: Double?
    let terminalKeyID: String
    let address: String
}

struct Pay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pay the nearest terminal: show its verified offer, confirm, add a tip.",
        discussion: """
            Ctrl-C before confirming declines the offer. Ctrl-C after confirming leaves the payment pending: \
            it is kept in the wallet store and asked for again by the next `horizon-wallet pay`, and \
            `horizon-wallet history` lists it meanwhile. Exit code 0 only when the payment completed.
            """)

    @Option(help: "The tip to add, e.g. 1.50 (in the offer's currency).") var tip = "0"
    @OptionGroup var options: ConfirmOptions

    func run() throws {
        let wallet = try options.openWallet()
        defer { wallet.radio.shutdown() }
        let client = PaymentClient(
            radio: wallet.radio, identity: wallet.identity, trustAnchors: wallet.anchors,
            pendingStore: wallet.pendingStore)
        let flow = try wallet.flow(clients: [client], decider: client.manualConnectionDecider)
        let tipText = tip
        try flow.run(
            timeout: options.timeout,
            script: ConfirmationScript(
                describe: { offer in "asks \(offer.amount)" },
                question: { offer, _ in
                    let tip: Money
                    do {
                        tip = try Money.parse(tipText, currency: offer.amount.currency)
                    } catch {
                        throw CLIError("--tip: \(error)")
                    }
                    let total = (try? offer.amount.adding(tip)) ?? offer.amount
                    return "Pay \(offer.amount) + tip \(tip) = \(total)?"
                },
                confirm: { client, offer in
                    guard let payment = client as? PaymentClient,
                        let tip = try? Money.parse(tipText, currency: offer.amount.currency)
                    else { return }
                    payment.setOrderConfirmedByUser(true, tip: tip, for: offer)
                },
                success: { receipt in
                    [
                        "Paid \(receipt.merchantName): \(receipt.amount) + tip \(receipt.tip) = \(receipt.total)",
                        "  payment \(receipt.paymentID)  reference \(receipt.reference)  bonus points +\(receipt.bonusPointsEarned) (now \(receipt.bonusPointsBalance))",
                    ]
                }))
    }
}

/// Options `pay` and `redeem` share.
struct ConfirmOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Confirm without asking.") var yes = false
    @Option(help: "Seconds to wait for a terminal.") var timeout = 60
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func validate() throws {
        guard (1...3600).contains(timeout) else { throw ValidationError("--timeout must be 1 to 3600 seconds") }
    }

    /// The wallet's identity, trust, durable store and radio, ready for a flow.
    func openWallet() throws -> OpenWallet {
        try CrashInjection.validate(for: "wallet")
        let logger = Logs.logger("horizon.wallet", verbose: global.verbose)
        let files = global.walletFiles
        let identity = try files.loadIdentity()
        let anchors = try files.loadTrustAnchors()
        let store = try files.openStore()
        let radio = try self.radio.open(name: "wallet", defaultPosition: Position(x: 0.3, y: 0), logger: logger)
        return OpenWallet(
            identity: identity, anchors: anchors, store: store,
            pendingStore: CrashInjection.pendingStore(wrapping: SQLitePendingPaymentStore(store: store)),
            radio: radio, logger: logger, options: self)
    }
}

struct OpenWallet {
    let identity: WalletIdentity
    let anchors: [TrustAnchor]
    let store: WalletStore
    let pendingStore: any PendingPaymentStore
    let radio: any DeviceRadio
    let logger: Logger
    let options: ConfirmOptions

    /// Starts `clients` and first asks again for whatever an earlier run left pending.
    func flow(clients: [TransactionClient], decider: any ManualConnectionDeciderProtocol) throws -> ConfirmFlow {
        let flow = ConfirmFlow(
            clients: clients, decider: decider, console: Console(), store: store, json: options.json, yes: options.yes,
            logger: logger)
        for client in clients { try client.start() }
        try flow.resolvePending(try pendingStore.all())
        return flow
    }
}

/// What differs between paying and redeeming in the interactive flow.
struct ConfirmationScript {
    /// What the verified offer asks for, after the merchant's name ("asks 12.50 EUR").
    let describe: (PaymentOffer) -> String
    /// The question to ask about the verified offer (may refuse bad input such as a tip).
    let question: (PaymentOffer, TransactionType) throws -> String
    /// Sends the person's yes, once the terminal is connected.
    let confirm: @Sendable (TransactionClient, PaymentOffer) -> Void
    /// What the finished receipt says, a line each.
    let success: (PaymentReceipt) -> [String]
}

/// The interactive payment or redemption, step by step: the nearest candidate, its verified
/// offer, the person's answer, the receipt — or a pending request kept for the next run.
final class ConfirmFlow: @unchecked Sendable {
    let clients: [TransactionClient]
    let decider: any ManualConnectionDeciderProtocol
    let console: Console
    let store: WalletStore
    let json: Bool
    let yes: Bool
    let logger: Logger
    private let changed = DispatchSemaphore(value: 0)
    private var interrupted = false
    /// Set once the person said yes: from then on Ctrl-C leaves the request pending.
    private var confirmed = false
    private let lock = NSLock()

    init(
        clients: [TransactionClient], decider: any ManualConnectionDeciderProtocol, console: Console,
        store: WalletStore, json: Bool, yes: Bool, logger: Logger
    ) {
        self.clients = clients
        self.decider = decider
        self.console = console
        self.store = store
        self.json = json
        self.yes = yes
        self.logger = logger
        for client in clients {
            client.observeState { [weak self] state in
                self?.logger.debug("wallet state: \(state)")
                self?.changed.signal()
            }
        }
        decider.observeState { [weak self] _ in self?.changed.signal() }
    }

    private func wait(until condition: () -> Bool, seconds: Int) -> Bool {
        let deadline = DispatchTime.now() + .seconds(seconds)
        while !condition() {
            if isInterrupted { return false }
            if changed.wait(timeout: min(deadline, .now() + .milliseconds(200))) == .timedOut,
                DispatchTime.now() >= deadline
            {
                return condition()
            }
        }
        return true
    }

    var isInterrupted: Bool {
        lock.lock()
        defer { lock.unlock() }
        return interrupted
    }

    /// Requests an earlier run sent without an answer: asked for again first, each by the client
    /// of its kind.
    func resolvePending(_ pending: [PendingPayment]) throws {
        for request in pending {
            let type = request.redeem?.transactionType ?? .payment
            guard let client = clients.first(where: { $0.transactionType == type }) else { continue }
            if !json { console.line("Asking \(request.merchantName) about pending request \(request.paymentID)…") }
            guard client.resume(request) else { continue }
            _ = wait(until: { client.state.isFinished }, seconds: 15)
            switch client.state {
            case .completed:
                if let receipt = client.receipt { try save(receipt) }
                if !json { console.line("  it went through: \(client.receipt.map { "\($0.total)" } ?? "")") }
            case .completedWithError:
                if !json { console.line("  it was not executed: \(client.humanizedError ?? "")") }
            default:
                if !json { console.line("  the terminal is not reachable; it stays pending") }
            }
            client.restart()
        }
    }

    func run(timeout: Int, script: ConfirmationScript) throws {
        let interrupt = InterruptHandler(queue: DispatchQueue(label: "horizon.wallet.signals")) { [weak self] _ in
            guard let self else { return }
            self.lock.lock()
            self.interrupted = true
            let confirmed = self.confirmed
            self.lock.unlock()
            guard confirmed else {
                // Before confirming nothing can be executed: decline (the terminal is told at once,
                // the frames are on their way when this returns) and stop, even at the y/N prompt.
                let declined = self.decider.decideAgainstCandidate()
                self.console.line()
                FileHandle.standardError.write(
                    Data("error: \(declined ? "declined" : "stopped"); nothing was charged\n".utf8))
                exit(1)
            }
            self.changed.signal()
        }
        defer { withExtendedLifetime(interrupt) {} }
        if !json { console.status("Looking for the nearest terminal…") }
        guard wait(until: { decider.state == .candidateAvailable }, seconds: timeout) else {
            throw CommandFailure(
                isInterrupted ? "stopped before a terminal was found" : "no terminal found nearby within \(timeout) s")
        }
        decider.startDeciding()
        guard let client = clients.first(where: { $0.manualConnectionDecider.state == .deciding }) else {
            throw CommandFailure("the candidate went away")
        }
        if !json { console.status("Fetching the offer…") }
        guard wait(until: { client.state == .offerReceived || client.state.isFinished }, seconds: 15),
            let offer = client.offer
        else {
            if isInterrupted { decider.decideAgainstCandidate() }
            throw CommandFailure(client.humanizedError ?? "the terminal did not send an offer")
        }
        let question: String
        do {
            question = try script.question(offer, client.transactionType)
        } catch {
            decider.decideAgainstCandidate()
            throw error
        }
        if !json {
            let cashier = offer.registerUser.isEmpty ? "" : " (cashier \(offer.registerUser))"
            console.line("\(offer.merchantName) \(script.describe(offer))\(cashier)")
            console.line(
                "  \(offer.terminalLabel), terminal \(offer.terminalKeyID), merchant \(offer.merchantID), vouched for by \(offer.vouchedBy)"
            )
            console.line("  confirmation code \(offer.confirmationCode): the register shows the same")
        }
        guard !isInterrupted, yes || console.confirm(question) else {
            decider.decideAgainstCandidate()
            _ = wait(until: { client.state == .idle }, seconds: 2)
            throw CommandFailure("declined; nothing was charged")
        }
        lock.lock()
        confirmed = true
        lock.unlock()
        decider.decideForCandidate()
        let confirm = script.confirm
        client.onHostConnected = { [client] in confirm(client, offer) }
        client.connectToSession()
        if !json { console.status("Sending…") }
        _ = wait(until: { client.state.isFinished }, seconds: 30)
        if client.state == .paymentPending || client.state == .acquiringPaymentExecution {
            let id = client.pendingRequest?.paymentID.description ?? "?"
            throw CommandFailure(
                "request \(id) is pending: the terminal may have executed it. It is kept and asked for again by the next `horizon-wallet pay` or `redeem`; `horizon-wallet history` lists it."
            )
        }
        guard client.state == .completed, let receipt = client.receipt else {
            throw CommandFailure(client.humanizedError ?? "it did not complete")
        }
        try save(receipt)
        if json {
            try console.json(StoredReceipt(recording: receipt))
        } else {
            for line in script.success(receipt) { console.line(line) }
        }
    }

    private func save(_ receipt: PaymentReceipt) throws {
        do {
            try store.saveReceipt(StoredReceipt(recording: receipt))
        } catch {
            throw CLIError("it completed but its receipt could not be stored: \(error)")
        }
    }
}

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List this wallet's receipts and pending payments.")

    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let files = global.walletFiles
        _ = try files.loadIdentity()
        let store = try files.openStore()
        let receipts = try store.receipts()
        let pending = try SQLitePendingPaymentStore(store: store).all()
        if json {
            try Console().json(
                HistoryReport(
                    receipts: receipts,
                    pending: pending.map(PendingRow.init)))
            return
        }
        if receipts.isEmpty, pending.isEmpty { print("no payments yet") }
        for payment in pending {
            print("PENDING   \(payment.merchantName)  \(PendingRow(payment).what)  id \(payment.paymentID)")
        }
        for receipt in receipts {
            let currency = (try? Currency(code: receipt.currency)) ?? .eur
            let amount = (try? Money(minorUnits: receipt.amountMinorUnits, currency: currency)) ?? .zero(currency)
            let tip = (try? Money(minorUnits: receipt.tipMinorUnits, currency: currency)) ?? .zero(currency)
            let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(receipt.settledAt)))
            print("\(time)  \(receipt.merchantName)  \(amount) + tip \(tip)  payment \(receipt.paymentID)")
        }
    }
}

struct HistoryReport: Encodable {
    let receipts: [StoredReceipt]
    let pending: [PendingRow]
}

struct PendingRow: Encodable {
    let paymentID: String
    let kind: String
    let merchantName: String
    /// "12.50 + tip 1.50 EUR" for a payment, the coupon or reward for a redemption.
    let what: String
    let createdAt: Int64

    init(_ pending: PendingPayment) {
        paymentID = pending.paymentID.description
        merchantName = pending.merchantName
        createdAt = pending.createdAt
        if let confirm = pending.confirm {
            kind = "payment"
            what = "\(confirm.amount) + tip \(confirm.tip)"
        } else if let redeem = pending.redeem {
            kind = redeem.transactionType.description
            what = redeem.quantity > 0 ? "\(redeem.item) for \(redeem.quantity) points" : redeem.item
        } else {
            kind = "request"
            what = ""
        }
    }
}

struct Balance: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show bonus points per merchant and, in the sandbox, the balance the ledger holds.",
        discussion: """
            Bonus points come from this wallet's receipts. The money balance lives in the terminal's sandbox \
            ledger: given with --ledger, or found in a terminal data directory on this machine.
            """)

    @OptionGroup var ledger: LedgerChoice
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let files = global.walletFiles
        let identity = try files.loadIdentity()
        let receipts = try files.openStore().receipts()
        var points: [String: Int64] = [:]
        for receipt in receipts.reversed() { points[receipt.merchantName] = receipt.bonusPointsBalance }
        let sandbox = try ledger.open()
        let balance = try sandbox.map {
            try $0.account(for: identity.publicKey).map { "\($0.balance)" } ?? "not enrolled yet"
        }
        if json {
            try Console().json(
                BalanceReport(balance: balance, ledger: sandbox == nil ? nil : ledger.path, bonusPoints: points))
            return
        }
        print("balance       \(balance ?? "unknown (no sandbox ledger on this machine; pass --ledger)")")
        if points.isEmpty { print("bonus points  none yet") }
        for (merchant, value) in points.sorted(by: { $0.key < $1.key }) {
            print("bonus points  \(value) at \(merchant)")
        }
    }
}

struct BalanceReport: Encodable {
    let balance: String?
    let ledger: String?
    let bonusPoints: [String: Int64]
}
