import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import OpenAPIRuntime

/// Server-driven collection: a terminal keeps one event stream open, the server pushes the
/// payment intents addressed to it, and the terminal claims each one before it starts the sale.
extension APIHandler {
    func streamTerminalPaymentIntents(_ input: Operations.StreamTerminalPaymentIntents.Input) async throws
        -> Operations.StreamTerminalPaymentIntents.Output
    {
        let terminal = try await signingTerminal()
        let seconds = Int(input.query.wait ?? 300)
        guard (1...300).contains(seconds) else { throw APIError(.invalidRequest, "wait must be 1 to 300 seconds") }
        let events = try await intentHub.open(terminal: terminal.id)
        metrics.record(event: "terminal_intent_stream_opened")
        RequestScope.current?.logger.info("terminal intent stream opened", metadata: ["terminal": "\(terminal.id)"])
        let ready = TerminalIntentEvents.encode(.ready(terminalID: terminal.id.rawValue))
        let bytes = AsyncStream<ArraySlice<UInt8>> { continuation in
            continuation.yield(ArraySlice(ready.utf8))
            // Reading `events` ends when the client goes (this stream is terminated, the task
            // cancelled) or the server shuts down (the hub finishes `events`).
            // The stream ends after `wait` seconds: the terminal connects again (to any process).
            let lifetime = Task {
                try? await Task.sleep(for: .seconds(seconds))
                continuation.finish()
            }
            let task = Task {
                for await event in events {
                    let wire: TerminalIntentEvents.Event =
                        switch event {
                        case .collect(let intent):
                            .intent(
                                .init(
                                    id: intent.paymentID.bytes.hexString, amount: intent.amount.minorUnits,
                                    currency: intent.amount.currency.code, reference: intent.orderReference,
                                    expiresAt: intent.expiresAt))
                        case .ended(let id): .ended(id: id.bytes.hexString)
                        case .keepAlive: .keepAlive
                        }
                    continuation.yield(ArraySlice(TerminalIntentEvents.encode(wire).utf8))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in
                task.cancel()
                lifetime.cancel()
            }
        }
        return .ok(
            .init(
                headers: .init(cacheControl: "no-store"),
                body: .textEventStream(HTTPBody(bytes, length: .unknown, iterationBehavior: .single))))
    }

    func collectPaymentIntent(_ input: Operations.CollectPaymentIntent.Input) async throws
        -> Operations.CollectPaymentIntent.Output
    {
        let terminal = try await signingTerminal()
        let id = try Self.intentID(input.path.intentId)
        let time = now()
        guard let intent = try await ledger.paymentIntent(id, of: terminal.merchantID, at: time) else {
            throw Self.noIntent(id)
        }
        guard intent.terminalID == nil || intent.terminalID == terminal.id else {
            throw APIError(
                .paymentIntentNotCollectable, "payment intent \(id.bytes.hexString) is addressed to another terminal")
        }
        // Once only: a second claim (a duplicate push, another terminal) is refused.
        guard try await ledger.startCollecting(id, of: terminal.merchantID, at: time) else {
            throw APIError(
                .paymentIntentNotCollectable,
                "payment intent \(id.bytes.hexString) is \(intent.status.rawValue); only one waiting for collection can be collected"
            )
        }
        metrics.record(event: "payment_intent_collecting")
        RequestScope.current?.logger.info(
            "payment intent collecting", metadata: ["intent": "\(id)", "terminal": "\(terminal.id)"])
        let collecting = try await ledger.paymentIntent(id, of: terminal.merchantID, at: time) ?? intent
        return .ok(.init(body: .json(try Self.paymentIntent(collecting))))
    }

    /// Refuses an intent for a terminal that keeps no connection to any server process now (it
    /// would wait unseen); a retried create answers the intent created before, whatever the
    /// terminal's connection is now, and a terminal that is not the merchant's is left to the
    /// ledger's `terminal_not_found`.
    func checkTerminalConnected(_ terminal: TerminalID?, idempotencyKey: String, merchant: MerchantID, at time: UnixTime)
        async throws
    {
        guard let terminal, !(try await ledger.isTerminalConnected(terminal, at: time)),
            !(try await ledger.paymentIntentExists(idempotencyKey: idempotencyKey, merchant: merchant)),
            let record = try? await ledger.terminal(terminal), record.merchantID == merchant, !record.isRevoked
        else { return }
        throw APIError(
            .terminalOffline,
            "terminal \(terminal) is not connected to the server (it is off, or not running `horizon-terminal serve`); nothing was created: try again once it is, or address the intent to another terminal"
        )
    }
}
