import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRoles
import HorizonServerClient
import HorizonStores
import HorizonUnixSocket
import Logging
import ServiceLifecycle
import Synchronization

/// The control socket of `serve`: each client is a child task of one task group (no thread per
/// client), bounded in number, with a deadline for its request line.
struct ControlSocketService: Service {
    struct Limits: Sendable {
        /// Clients served at once; one more is refused with an error line.
        let connections: Int
        /// How long a client may take to send its request line.
        let readTimeout: Duration
    }

    let listener: UnixListener
    let controller: PaymentController
    let console: Console
    let limits: Limits
    /// Waits (briefly) for wallets still on the radio to read the last message and hang up.
    let lingerWhileWalletsConnected: @Sendable () async -> Void

    func run() async throws {
        let (listener, console) = (self.listener, self.console)
        let active = ClientCount()
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await connection in listener.connections() {
                    guard active.enter(limit: limits.connections) else {
                        await connection.send(
                            line: "error too many control connections (\(limits.connections)); try again")
                        connection.close()
                        continue
                    }
                    group.addTask { [controller, limits] in
                        await controller.serve(connection, readTimeout: limits.readTimeout)
                        connection.close()
                        active.leave()
                    }
                }
                // The listener is closed; the group ends when the clients still served have had
                // their answers: a sale a wallet has joined finishes first (see below).
            }
        } onGracefulShutdown: { [controller] in
            listener.close()
            switch controller.stopForShutdown() {
            case .nothingRunning:
                console.line("terminal service shutting down: control socket closed")
            case .cancelledBeforeAWalletJoined:
                console.line(
                    "terminal service shutting down: control socket closed, the payment no wallet had joined is cancelled"
                )
            case .finishingTheJoinedSale:
                console.line(
                    "terminal service shutting down: control socket closed, finishing the payment in progress first")
            }
        }
        // A cancelled group (another part failed) ends here too; the socket file goes either way.
        listener.close()
        // A sale that finished during the shutdown: its wallet reads the receipt before the radio
        // goes off.
        await lingerWhileWalletsConnected()
    }
}

/// Control clients being served now, bounded.
final class ClientCount: Sendable {
    private let count = Mutex(0)

    func enter(limit: Int) -> Bool {
        count.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
    }

    func leave() { count.withLock { $0 -= 1 } }
}

/// Runs one payment at a time for the control socket's clients.
final class PaymentController: Sendable {
    let host: PaymentHost
    let ledger: InProcessLedger
    let observer: BluetoothConflictObserver
    /// Where each payment or redemption confirmed here stands, for `status ID|REF`.
    let journal: SQLiteTerminalJournal
    /// An activated terminal's server: `status ID|REF` asks it what the journal does not know,
    /// and confirms the final state of what it does.
    let server: HorizonServerClient?
    let logger: Logger
    /// Why an amount may not be taken here (the terminal's maximum per payment), or nil.
    let refusal: @Sendable (Money) -> String?
    /// The bonus, gold and coupon redemption hosts (on the same radio service).
    let redemptionHosts: [RedemptionTerms.Kind: RedemptionHost]
    /// Whether a client's payment or redemption is running (one at a time; another client is told so).
    private let busy = Mutex(false)
    /// The redemption running now, if the running session is one.
    private let runningRedemption = Mutex<RedemptionHost?>(nil)
    /// The payment intent whose sale runs now (or is about to start), if the session is one.
    private let runningIntent = Mutex<PaymentID?>(nil)
    /// The order reference of the register's sale running now, if it has one.
    private let runningReference = Mutex<String?>(nil)

    init(
        host: PaymentHost, redemptionHosts: [RedemptionTerms.Kind: RedemptionHost] = [:], ledger: InProcessLedger,
        observer: BluetoothConflictObserver, journal: SQLiteTerminalJournal, server: HorizonServerClient? = nil,
        logger: Logger, refusal: @escaping @Sendable (Money) -> String? = { _ in nil }
    ) {
        self.host = host
        self.redemptionHosts = redemptionHosts
        self.ledger = ledger
        self.observer = observer
        self.journal = journal
        self.server = server
        self.logger = logger
        self.refusal = refusal
    }

    enum ShutdownStep: Equatable {
        case nothingRunning
        case cancelledBeforeAWalletJoined
        case finishingTheJoinedSale
    }

    /// What a shutdown (a restart included) does to the running sale: one no wallet has joined
    /// is cancelled at the register, since nothing is at stake yet; one a wallet has joined is
    /// left to finish (its customer's decision is bounded by the decision timeout, its
    /// execution by the settlement's), so stopping or restarting the service never breaks off a
    /// customer mid-payment.
    func stopForShutdown() -> ShutdownStep {
        // A redemption follows the same rule as a payment.
        let redemption = runningRedemption.withLock { $0 }
        switch redemption?.state ?? host.state {
        case .waitingForWallet:
            if let redemption { redemption.cancel() } else { host.cancel() }
            return .cancelledBeforeAWalletJoined
        case .walletConnected, .awaitingUserDecision, .acquiringPaymentExecution:
            return .finishingTheJoinedSale
        case .idle, .completed, .completedWithError:
            return .nothingRunning
        }
    }

    /// Takes the till for a payment intent's sale; false while a payment or redemption runs.
    /// Release it with `collectIntent` or `releaseIntent`.
    func claimTill(forIntent id: PaymentID) -> Bool {
        let claimed = busy.withLock { busy in
            defer { busy = true }
            return !busy
        }
        if claimed { runningIntent.withLock { $0 = id } }
        return claimed
    }

    /// Gives the till back without a sale (the server did not let the intent be collected).
    func releaseIntent() {
        runningIntent.withLock { $0 = nil }
        busy.withLock { $0 = false }
    }

    /// Runs the sale of a payment intent (the till claimed with `claimTill`): its amount, with its
    /// id as the payment id, as a register's `pay` would; releases the till when it ends.
    /// The intent's reference is journaled with the payment, so `status REF` finds it here too.
    func collectIntent(_ id: PaymentID, amount: Money, reference: String = "") async -> Result<PaymentOrder, HostError>
    {
        defer { releaseIntent() }
        do throws(HostError) {
            return .success(
                try await host.collect(
                    amount, registerUser: nil, paymentID: id,
                    orderReference: OrderReference.isValid(reference) ? reference : ""))
        } catch {
            return .failure(error)
        }
    }

    /// Stops the sale of payment intent `id` at the till if it runs and no wallet's confirmation
    /// is executing (the POS canceled it, or it ended otherwise); true if it was stopped.
    @discardableResult
    func stopIntent(_ id: PaymentID) -> Bool {
        guard runningIntent.withLock({ $0 }) == id else { return false }
        let state = host.state
        guard !state.isFinished, state != .idle, state != .acquiringPaymentExecution else { return false }
        host.cancel()
        return true
    }

    /// Whether the running intent's sale has opened (advertising or further).
    func intentSaleStarted(_ id: PaymentID) -> Bool {
        runningIntent.withLock { $0 } == id && host.state != .idle
    }

    /// Control requests are short: a longer line is refused rather than buffered.
    static let maximumLineLength = 1024

    /// Reads one request line (within `readTimeout`) and answers it.
    func serve(_ connection: UnixConnection, readTimeout: Duration) async {
        let line: String
        switch await Self.requestLine(connection, within: readTimeout) {
        case .line(let text)?: line = text
        case .tooLong?:
            await connection.send(line: "error request longer than \(Self.maximumLineLength) bytes")
            return
        case .end?, nil:
            return  // gone, or silent past the read timeout: closed without an answer
        }
        let request = line.trimmingCharacters(in: .whitespaces)
        let words = request.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        logger.info("control request: \(request.sanitizedForDisplay)")
        switch words.first {
        case "pay"?:
            switch PayRequest.parse(Array(words.dropFirst())) {
            case .success(let request): await pay(request, connection)
            case .failure(let usage): await connection.send(line: "failed \(usage.message)")
            }
        case "redeem"?:
            await redeem(Array(words.dropFirst()), connection)
        case "cancel"?:
            let redemption = runningRedemption.withLock { $0 }
            let state = redemption?.state ?? host.state
            let running = !state.isFinished && state != .idle
            if running {
                if let redemption { redemption.cancel() } else { host.cancel() }
            }
            await connection.send(line: running ? "ok" : "idle")
        case "status"? where words.count == 2:
            for line in await statusLines(of: words[1]) { await connection.send(line: line) }
        case "status"? where words.count == 1:
            await connection.send(line: "adapter \(observer.availability)")
            await connection.send(line: "conflict \(observer.state) \(observer.conflictCount)")
            await connection.send(line: "payment \(runningRedemption.withLock { $0 }?.state ?? host.state)")
        default:
            await connection.send(
                line:
                    "error unknown command; use pay AMOUNT [--reference REF] [REGISTER USER], redeem KIND [OPTIONS], cancel, status or status ID|REF"
            )
        }
    }

    /// `status ID|REF` (see `PaymentStatus`).
    func statusLines(of text: String) async -> [String] {
        await PaymentStatus.lines(of: text, journal: journal, server: server)
    }

    /// The first line, or nil when none came within `timeout` (a task-group timeout: the read
    /// is cancelled, which stops its read source).
    private static func requestLine(_ connection: UnixConnection, within timeout: Duration) async -> LineRead? {
        await value(within: timeout) {
            var reader = connection.lines(maximumLength: maximumLineLength)
            return await reader.next()
        }
    }

    /// `redeem bonus|gold|coupon [--points N] [--reward R] [--benefit B] [--value V] [--register USER]`:
    /// the arguments of `horizon-terminal redeem`, checked by the same parser; bad ones get one
    /// `error` line and nothing is advertised.
    private func redeem(_ arguments: [String], _ connection: UnixConnection) async {
        let terms: RedemptionTerms
        let offer: RedemptionOffer
        do {
            terms = try RedemptionTerms.parse(arguments)
            offer = try terms.offer(in: ledger.currency)
        } catch {
            let reason = RedemptionTerms.message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            await connection.send(line: "error \(reason)")
            return
        }
        guard let redemptionHost = redemptionHosts[terms.kind] else {
            await connection.send(line: "error \(terms.kind) redemptions are not offered here")
            return
        }
        let claimed = busy.withLock { busy in
            defer { busy = true }
            return !busy
        }
        guard claimed else {
            await connection.send(line: "failed a payment or redemption is already in progress")
            return
        }
        runningRedemption.withLock { $0 = redemptionHost }
        defer {
            runningRedemption.withLock { $0 = nil }
            busy.withLock { $0 = false }
        }
        let cashier = terms.registerUser.map(RegisterUser.init(name:))
        let redemption = { @Sendable () async throws(HostError) in
            try await redemptionHost.collect(offer, registerUser: cashier)
        }
        let outcome = await StateRelay.collect(
            states: redemptionHost.states(), show: { state in await connection.send(line: "state \(state)") },
            redemption)
        switch outcome.result {
        case .success(let result):
            await connection.send(
                line: "redeemed \(result.paymentID) \(terms.kind) \(result.quantity) \(result.item.sanitizedForDisplay)"
            )
        case .failure(let error):
            await connection.send(line: "failed \(error.cliMessage(noun: redemptionHost.transactionType.description))")
        }
    }

    private func pay(_ request: PayRequest, _ connection: UnixConnection) async {
        let claimed = busy.withLock { busy in
            defer { busy = true }
            return !busy
        }
        guard claimed else {
            // The register retrying a sale that is still running is told so by its reference.
            if let reference = request.reference, runningReference.withLock({ $0 }) == reference {
                await connection.send(
                    line: "failed a sale with reference \(reference) is already in progress (status \(reference))")
            } else {
                await connection.send(line: "failed a payment or redemption is already in progress")
            }
            return
        }
        runningReference.withLock { $0 = request.reference }
        defer {
            runningReference.withLock { $0 = nil }
            busy.withLock { $0 = false }
        }
        let amount: Money
        do {
            amount = try Money.parse(request.amount, currency: ledger.currency)
        } catch {
            await connection.send(line: "failed \(error)")
            return
        }
        // The shop's sanity limit holds for the register's socket as for `pay`.
        if let refused = refusal(amount) {
            await connection.send(line: "failed \(refused)")
            return
        }
        if let reference = request.reference, let refused = PaymentStatus.referenceRefusal(reference, journal: journal)
        {
            await connection.send(line: "failed \(refused)")
            return
        }
        let registerUser = request.registerUser
        let orderReference = request.reference ?? ""
        let (host, cashier) = (self.host, registerUser.map(RegisterUser.init(name:)))
        // Every state from the start to the end of the session, then the answer.
        let sale = { @Sendable () async throws(HostError) in
            try await host.collect(amount, registerUser: cashier, orderReference: orderReference)
        }
        let outcome = await StateRelay.collect(
            states: host.states(), show: { state in await connection.send(line: "state \(state)") }, sale)
        switch outcome.result {
        case .success(let order):
            await connection.send(
                line:
                    "paid \(order.paymentID) \(order.amount.formattedAmount) \(order.tip.formattedAmount) \(order.total.formattedAmount) \(order.reference)"
                    + (order.acceptedOffline ? " offline" : " online") + " \(order.currency.code) \(order.sessionID)"
                    + " \(order.amount.minorUnits) \(order.tip.minorUnits) \(order.total.minorUnits)"
                    + (order.orderReference.isEmpty ? "" : " \(order.orderReference)")
            )
        case .failure(let error):
            await connection.send(line: "failed \(error.cliMessage(noun: "payment"))")
        }
    }
}

/// `pay AMOUNT [--reference REF] [REGISTER USER]` on the register socket.
struct PayRequest: Equatable {
    let amount: String
    let reference: String?
    let registerUser: String?

    struct Usage: Error {
        let message: String
    }

    static let usage = "usage: pay AMOUNT [--reference REF] [REGISTER USER]"

    static func parse(_ words: [String]) -> Result<PayRequest, Usage> {
        guard let amount = words.first, !amount.hasPrefix("--") else { return .failure(Usage(message: usage)) }
        var reference: String?
        var rest: [String] = []
        var index = 1
        while index < words.count {
            if words[index] == "--reference" {
                guard reference == nil, index + 1 < words.count else { return .failure(Usage(message: usage)) }
                let text = words[index + 1]
                guard OrderReference.isValid(text) else {
                    return .failure(Usage(message: "not an order reference: \(OrderReference.rule)"))
                }
                reference = text
                index += 2
            } else {
                rest.append(words[index])
                index += 1
            }
        }
        return .success(
            PayRequest(
                amount: amount, reference: reference, registerUser: rest.isEmpty ? nil : rest.joined(separator: " ")))
    }
}
