import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRoles
import HorizonServerClient
import Logging
import ServiceLifecycle
import Synchronization

/// Server-driven collection in `serve`: the terminal keeps one connection to its server, and each
/// payment intent the server pushes is claimed (`collecting`), then sold at the till as a
/// register's `pay` would, under the intent's id, one at a time and after any sale already
/// running. An intent canceled at the POS stops its sale unless a wallet's confirmation is
/// already executing (then the server decides: a payment it settled first stands, and one that
/// comes after the cancel is refused unexecuted).
struct IntentCollectionService: Service {
    let connection: TerminalIntentConnection
    let server: HorizonServerClient
    let controller: PaymentController
    let console: Console
    let logger: Logger

    func run() async throws {
        let (queue, enqueue) = AsyncStream.makeStream(of: PushedPaymentIntent.self)
        let ended = EndedIntents()
        let (controller, console, logger) = (self.controller, self.console, self.logger)
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { [connection] in
                    await connection.run { action in
                        switch action {
                        case .collect(let intent): enqueue.yield(intent)
                        case .stop(let id):
                            ended.insert(id)
                            if let paymentID = Self.paymentID(id), controller.stopIntent(paymentID) {
                                console.line("payment intent \(id) ended at the server: its sale is stopped")
                            }
                        }
                    }
                    enqueue.finish()
                }
                group.addTask {
                    for await intent in queue { await collect(intent, ended: ended) }
                }
            }
        }
        _ = logger
    }

    private func collect(_ intent: PushedPaymentIntent, ended: EndedIntents) async {
        guard let id = Self.paymentID(intent.id), let currency = try? Currency(code: intent.currency),
            let amount = try? Money(minorUnits: intent.amount, currency: currency)
        else {
            logger.warning("a pushed payment intent is not readable: \(intent.id.sanitizedForDisplay)")
            return
        }
        // After the sale that runs now, if any.
        while !controller.claimTill(forIntent: id) {
            if Task.isCancelled || ended.contains(intent.id) { return }
            try? await Task.sleep(for: .milliseconds(100))
        }
        if ended.contains(intent.id) {
            controller.releaseIntent()
            return
        }
        do {
            _ = try await server.collectPaymentIntent(id: intent.id)
        } catch {
            controller.releaseIntent()
            console.line("payment intent \(intent.id) not collected: \(error)")
            return
        }
        let reference = intent.reference.sanitizedForDisplay
        console.line("collecting payment intent \(intent.id) for order \(reference): \(amount.formattedAmount)")
        logger.info("collecting payment intent", metadata: ["intent": "\(intent.id)", "order": "\(reference)"])
        // Not a child task: a shutdown must not break off a sale a wallet has joined (the control
        // socket's shutdown cancels one that no wallet has joined).
        let sale = Task { await controller.collectIntent(id, amount: amount, reference: intent.reference) }
        // An end pushed while the sale was opening stops it as soon as it is open.
        for _ in 0..<200 where !controller.intentSaleStarted(id) && !ended.contains(intent.id) {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if ended.contains(intent.id) { controller.stopIntent(id) }
        switch await sale.value {
        case .success(let order):
            console.line(
                "payment intent \(intent.id) paid: \(order.total.formattedAmount) for order \(reference), reference \(order.reference)"
            )
        case .failure(let error):
            console.line("payment intent \(intent.id) not paid: \(error.cliMessage(noun: "payment"))")
        }
    }

    static func paymentID(_ text: String) -> PaymentID? {
        guard let bytes = [UInt8](hexString: text.lowercased()) else { return nil }
        return try? PaymentID(bytes: bytes)
    }
}

/// Intents the server said ended (bounded: the oldest are forgotten).
final class EndedIntents: Sendable {
    private let ids = Mutex<[String]>([])

    func insert(_ id: String) {
        ids.withLock { ids in
            ids.append(id)
            if ids.count > 1024 { ids.removeFirst() }
        }
    }

    func contains(_ id: String) -> Bool { ids.withLock { $0.contains(id) } }
}
