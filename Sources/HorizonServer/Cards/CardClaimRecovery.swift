import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import Logging
import ServiceLifecycle

/// Resolves card payments that were claimed and never settled: the server stopped between the
/// processor's charge and the ledger's commit, or the terminal gave up and never retried.
///
/// A claim older than `grace` with no transaction is taken (so that a late execution cannot
/// approve it any more), and the processor is asked what happened under its payment id. A
/// charge is refunded through the processor with an idempotency key of its own
/// (`recovery-<payment id>`, so a second run or a second process refunds nothing more) and a
/// decline is stored for the payment id: every later retry gets that decline. Nothing charged:
/// the claim is closed, and only the same Confirm may claim the id again. When the processor
/// does not answer, the claim waits for the next run.
public struct CardClaimRecovery: Sendable {
    /// How long a card claim may stay unsettled before recovery resolves it, in seconds: far
    /// longer than a charge with its retry takes, and than a terminal's retries of a payment
    /// whose answer was lost.
    public static let grace: Int64 = 15 * 60

    public struct Report: Sendable, Equatable {
        public var refunded: [PaymentID] = []
        public var closed: [PaymentID] = []
        /// Taken, but the processor did not answer: tried again on the next run.
        public var left: [PaymentID] = []

        public init(refunded: [PaymentID] = [], closed: [PaymentID] = [], left: [PaymentID] = []) {
            self.refunded = refunded
            self.closed = closed
            self.left = left
        }
    }

    let ledger: Ledger
    let cards: any CardProcessor
    let grace: Int64

    public init(ledger: Ledger, cards: any CardProcessor, grace: Int64 = CardClaimRecovery.grace) {
        self.ledger = ledger
        self.cards = cards
        self.grace = grace
    }

    /// One pass over the abandoned claims at `time`.
    public func run(at time: UnixTime, logger: Logger? = nil) async throws(LedgerError) -> Report {
        var report = Report()
        for abandoned in try await ledger.abandonedCardClaims(at: time, grace: grace) {
            guard let claim = try await ledger.beginRecovery(of: abandoned.paymentID, at: time, grace: grace) else {
                continue
            }
            let id = claim.paymentID
            let key = id.bytes.hexString
            // What the processor did under the payment id, and its refund if it charged.
            let refunded: Bool
            do throws(CardProcessorError) {
                if let charge = try await cards.lookup(idempotencyKey: key), charge.outcome == .charged {
                    _ = try await cards.refund(
                        chargeKey: key, amount: charge.amount, idempotencyKey: "recovery-" + key, at: time)
                    refunded = true
                } else {
                    refunded = false
                }
            } catch {
                try await ledger.releaseRecoveredClaim(id, at: time)
                report.left.append(id)
                logger?.warning(
                    "card processor did not answer during recovery; trying again later",
                    metadata: ["payment": "\(key)", "error": "\(error)"])
                continue
            }
            if refunded {
                _ = try await ledger.storeRecoveredDecline(
                    id,
                    reason:
                        "the card was charged but the payment was not completed within \(grace / 60) minutes; the charge was refunded",
                    at: time)
                report.refunded.append(id)
                logger?.notice("abandoned card charge refunded", metadata: ["payment": "\(key)"])
            } else {
                try await ledger.closeRecoveredClaim(id, at: time)
                report.closed.append(id)
            }
        }
        return report
    }
}

/// The server's periodic housekeeping, run beside the HTTP server: card claim recovery and the
/// gateway's replay window pruned by age. Every process may run it; each step is safe to run
/// concurrently on one database.
struct ServerMaintenance: Service {
    let recovery: CardClaimRecovery
    let ledger: Ledger
    let now: @Sendable () -> UnixTime
    let logger: Logger
    var interval: Duration = .seconds(60)

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await runOnce()
                try? await Task.sleep(for: interval)
            }
        }
    }

    func runOnce() async {
        let time = now()
        do { _ = try await recovery.run(at: time, logger: logger) } catch {
            logger.warning("card claim recovery failed; trying again later", metadata: ["error": "\(error)"])
        }
        do { try await ledger.pruneGatewayReplays(at: time) } catch {
            logger.warning("pruning the gateway's replay window failed", metadata: ["error": "\(error)"])
        }
        // Request windows are a few seconds long; a day without failures forgets a back-off.
        do {
            try await ledger.pruneRequestWindows(before: time - 3600)
            try await ledger.pruneSignInBackoff(before: time - 24 * 3600, at: time)
        } catch {
            logger.warning("pruning the request limits failed", metadata: ["error": "\(error)"])
        }
        do { try await ledger.purgeExpiredOutbox(at: time) } catch {
            logger.warning("purging expired one-time codes failed", metadata: ["error": "\(error)"])
        }
        do { try await ledger.pruneWebhookHistory(before: time - Ledger.webhookHistoryRetention) } catch {
            logger.warning("pruning old webhook deliveries failed", metadata: ["error": "\(error)"])
        }
    }
}
