import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonRadioCLISupport
import HorizonRoles
import HorizonSecureChannel
import HorizonServiceClients
import HorizonSimulatedRadio
import HorizonStores
import HorizonTracing
import Logging
import Tracing

struct ConfirmOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Confirm without asking.") var yes = false
    @Option(help: "Seconds to wait for a terminal.") var timeout = 60
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions
    @OptionGroup var pin: PINOptions

    func validate() throws {
        guard (1...3600).contains(timeout) else { throw ValidationError("--timeout must be 1 to 3600 seconds") }
    }

    /// The wallet's identity, trust, durable store and radio, ready for a flow.
    func openWallet() async throws -> OpenWallet {
        try CrashInjection.validate(for: "wallet")
        let logger = Logs.logger("horizon.wallet", verbose: global.verbose)
        let files = try global.lockedWalletFiles()
        let identity = WalletIdentity(signingKey: try await WalletKeys.unlock(files, pin: pin.current))
        var anchors = try files.loadTrustAnchors()
        // A registered wallet refuses the terminals its server revoked, as last fetched and
        // confirmed against a signed daily token (`horizon-wallet token`).
        if let session = try WalletSession.open(files, signingKey: identity.signingKey) {
            anchors = RevocationListClient(identityClient: session.identity, cache: session.cache).anchors(anchors)
        }
        let store = try files.openStore()
        let radio = try await self.radio.open(name: "wallet", defaultPosition: Position(x: 0.3, y: 0), logger: logger)
        return OpenWallet(
            identity: identity, anchors: anchors, store: store,
            pendingStore: CrashInjection.pendingStore(wrapping: SQLitePendingPaymentStore(store: store)),
            radio: radio, logger: logger, json: json, yes: yes)
    }
}

struct OpenWallet: Sendable {
    let identity: WalletIdentity
    let anchors: [TrustAnchor]
    let store: WalletStore
    let pendingStore: any PendingPaymentStore
    let radio: any DeviceRadio
    let logger: Logger
    let json: Bool
    let yes: Bool

    /// Starts `clients` and first asks again for whatever an earlier run left pending.
    func flow(clients: [TransactionClient], decider: any ManualConnectionDeciderProtocol) async throws -> ConfirmFlow {
        let flow = ConfirmFlow(
            clients: clients, decider: decider, console: Console(), store: store, json: json, yes: yes,
            logger: logger)
        for client in clients { try client.start() }
        try await flow.resolvePending(try pendingStore.all())
        return flow
    }
}

/// What differs between paying and redeeming in the interactive flow.
struct ConfirmationScript: Sendable {
    /// What the verified offer asks for, after the merchant's name ("asks 12.50 EUR").
    let describe: @Sendable (PaymentOffer) -> String
    /// The question to ask about the verified offer (may refuse bad input such as a tip).
    let question: @Sendable (PaymentOffer, TransactionType) throws -> String
    /// Signs and sends the person's yes; returns the verified receipt (the async API's `pay` or
    /// `redeem`).
    let confirm: @Sendable (TransactionClient, PaymentOffer) async throws(PaymentClientError) -> PaymentReceipt
    /// What the finished receipt says, a line each.
    let success: @Sendable (PaymentReceipt) -> [String]
}

/// The interactive payment or redemption on the roles' async API: the nearest candidate, its
/// verified offer, the person's answer, the receipt — or a pending request kept for the next run.
/// Ctrl-C cancels the task: before the yes it declines (nothing is charged), after it the request
/// stays pending.
struct ConfirmFlow: Sendable {
    let clients: [TransactionClient]
    let decider: any ManualConnectionDeciderProtocol
    let console: Console
    let store: WalletStore
    let json: Bool
    let yes: Bool
    let logger: Logger

    /// How long to wait for the answer to a signed request before leaving it pending.
    static let answerTimeout: Duration = .seconds(30)
    /// How long to ask a terminal about a request an earlier run left pending.
    static let resolveTimeout: Duration = .seconds(15)

    private func client(for type: TransactionType) -> TransactionClient? {
        clients.first { $0.transactionType == type }
    }

    /// Requests an earlier run sent without an answer: asked for again first, each by the client
    /// of its kind.
    func resolvePending(_ pending: [PendingPayment]) async throws {
        for request in pending {
            let type = request.redeem?.transactionType ?? .payment
            guard let client = client(for: type) else { continue }
            if !json { console.line("Asking \(request.merchantName) about pending request \(request.paymentID)…") }
            do {
                let receipt = try await cancelling(after: Self.resolveTimeout) { try await client.resolve(request) }
                try save(receipt)
                if !json { console.line("  it went through: \(receipt.total)") }
            } catch PaymentClientError.stillPending {
                if !json { console.line("  the terminal is not reachable; it stays pending") }
            } catch let error as PaymentClientError {
                if !json { console.line("  it was not executed: \(error.cliMessage)") }
            }
        }
    }

    func run(timeout: Int, script: ConfirmationScript) async throws {
        let (client, offer) = try await nearestOffer(timeout: timeout)
        let question: String
        do {
            question = try script.question(offer, client.transactionType)
        } catch {
            await client.decline(offer)
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
        let accepted = yes ? true : await console.confirm(question)
        guard accepted, !Task.isCancelled else {
            await client.decline(offer)
            throw CommandFailure("declined; nothing was charged")
        }
        if !json { console.status("Sending…") }
        let receipt: PaymentReceipt
        // The confirmation's span: from the yes to the receipt, in the payment's trace.
        let confirmStarted = DefaultTracerClock.now
        var traced: (paymentID: [UInt8]?, outcome: String) = (nil, "failed")
        defer {
            PaymentTrace.recordConfirmation(
                paymentID: traced.paymentID, startedAt: confirmStarted, amountMinorUnits: offer.amount.minorUnits,
                outcome: traced.outcome)
        }
        do {
            receipt = try await cancelling(after: Self.answerTimeout) { try await script.confirm(client, offer) }
        } catch let error as PaymentClientError where error.isStillPending {
            traced.outcome = "pending"
            throw CommandFailure(error.cliMessage)
        } catch PaymentClientError.cancelled {
            throw CommandFailure("declined; nothing was charged")
        } catch let error as PaymentClientError {
            throw CommandFailure(error.cliMessage)
        }
        traced = (receipt.paymentID.bytes, receipt.acceptedOffline ? "accepted offline" : "approved")
        try save(receipt)
        if json {
            try console.json(ReceiptJSON(StoredReceipt(recording: receipt)))
        } else {
            for line in script.success(receipt) { console.line(line) }
        }
    }

    /// The nearest terminal's verified offer. A terminal refused at the handshake, or whose offer
    /// is invalid, or that cannot be reached, is passed over (the library never offers that one
    /// again) and the next nearest is tried, until `timeout`: a nearer clone refused at every
    /// handshake must not keep the wallet from the real terminal.
    private func nearestOffer(timeout: Int) async throws -> (TransactionClient, PaymentOffer) {
        let deadline = ContinuousClock.now + .seconds(timeout)
        let candidates = decider.candidates()
        var passedOver: [String] = []
        while true {
            if !json { console.status("Looking for the nearest terminal…") }
            let remaining = deadline - ContinuousClock.now
            let found =
                remaining > .zero
                ? try await cancelling(after: remaining) { () async -> PeripheralTracking? in
                    for await candidate in candidates { return candidate }
                    return nil
                } : nil
            guard let candidate = found else {
                if Task.isCancelled { throw CommandFailure("stopped before a terminal was found") }
                let refused = passedOver.isEmpty ? "" : " (passed over: \(passedOver.joined(separator: "; ")))"
                throw CommandFailure("no terminal found nearby within \(timeout) s\(refused)")
            }
            logger.debug("candidate: session \(candidate.peripheralMetaData.sessionID)")
            guard let client = client(for: candidate.peripheralMetaData.transactionType) else {
                throw CommandFailure("the candidate went away")
            }
            if !json { console.status("Fetching the offer…") }
            do {
                return (client, try await client.fetchOffer(candidate))
            } catch .cancelled {
                throw CommandFailure("stopped; nothing was charged")
            } catch  where error.passesOverTheTerminal {
                let address = candidate.peripheralMetaData.address
                logger.notice("passed over terminal \(address): \(error.cliMessage)")
                if !json { console.line("Passed over a terminal at \(address): \(error.cliMessage)") }
                passedOver.append(error.cliMessage)
            } catch {
                throw CommandFailure(error.cliMessage)
            }
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

extension PaymentClientError {
    /// Whether the attempt failed at this terminal before anything was shown or signed, so the
    /// next nearest terminal may be tried: it could not prove who it is, its offer was invalid,
    /// or it could not be reached.
    var passesOverTheTerminal: Bool {
        switch self {
        case .terminalNotTrusted, .invalidOffer, .connectionFailed, .connectionLost, .sessionUnavailable: true
        default: false
        }
    }
}
