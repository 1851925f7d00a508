import HorizonCore
import HorizonProtocol

/// A person answering from code, on the radio's scheduler: takes each candidate, looks at the
/// verified offer, answers, and confirms once the terminal is connected. It is the reference's
/// callback chain (startDeciding → offer → decideForCandidate → connectToSession →
/// onHostConnected → confirm) written once, for the code that needs every step on the
/// simulation's own clock: the role tests, the fault simulation and the benchmarks replay a seed
/// step for step, which the async API cannot promise (its calls hop through tasks, whose timing
/// the machine decides). Apps use the async API.
public final class WalletAutopilot: Sendable {
    /// What the person says to an offer.
    public enum Answer: Sendable, Equatable {
        /// Accept and pay with this tip (payment terminals).
        case pay(tip: Money)
        /// Accept and redeem what the offer asks, or this coupon (redemption terminals).
        case redeem(coupon: String?)
        /// Say no: the terminal is told, the session is not offered again.
        case decline
        /// Say nothing: the terminal's decision timeout ends it.
        case ignore
    }

    /// Moments a harness may want to stamp (benchmarks measure between them). Each runs on the
    /// radio's scheduler, before the autopilot acts on it.
    public struct Hooks: Sendable {
        public var candidateTaken: (@Sendable (PeripheralTracking) -> Void)?
        public var accepted: (@Sendable (PaymentOffer) -> Void)?
        public var confirming: (@Sendable (PaymentOffer) -> Void)?

        public init(
            candidateTaken: (@Sendable (PeripheralTracking) -> Void)? = nil,
            accepted: (@Sendable (PaymentOffer) -> Void)? = nil, confirming: (@Sendable (PaymentOffer) -> Void)? = nil
        ) {
            self.candidateTaken = candidateTaken
            self.accepted = accepted
            self.confirming = confirming
        }
    }

    public let decider: any ManualConnectionDeciderProtocol
    public let clients: [TransactionClient]

    /// Answers for `client` alone; `answer` sees each verified offer once.
    public convenience init(
        client: TransactionClient, hooks: Hooks = Hooks(), answer: @escaping @Sendable (PaymentOffer) -> Answer
    ) {
        self.init(clients: [client], decider: client.manualConnectionDecider, hooks: hooks) { offer, _ in
            answer(offer)
        }
    }

    /// Answers for every client of `coordinator`, one candidate at a time (its merged decider).
    public convenience init(
        coordinator: PaymentAndRedemptionClientCoordinator, hooks: Hooks = Hooks(),
        answer: @escaping @Sendable (PaymentOffer, TransactionType) -> Answer
    ) {
        self.init(
            clients: [
                coordinator.paymentClient, coordinator.bonusRedemptionClient, coordinator.goldRedemptionClient,
                coordinator.couponRedemptionClient,
            ], decider: coordinator.manualConnectionDecider, hooks: hooks, answer: answer)
    }

    /// Answers for `clients`, whose candidates `decider` offers (a client's own decider, or a
    /// collection of theirs).
    public init(
        clients: [TransactionClient], decider: any ManualConnectionDeciderProtocol, hooks: Hooks = Hooks(),
        answer: @escaping @Sendable (PaymentOffer, TransactionType) -> Answer
    ) {
        self.decider = decider
        self.clients = clients
        decider.observeState { [decider] state in
            guard state == .candidateAvailable, let candidate = decider.candidate else { return }
            hooks.candidateTaken?(candidate)
            decider.startDeciding()
        }
        for client in clients {
            let type = client.transactionType
            let ownDecider = client.manualConnectionDecider
            client.observeState { [weak client] state in
                guard state == .offerReceived, let client, let offer = client.offer else { return }
                switch answer(offer, type) {
                case .pay(let tip) where type == .payment:
                    Self.accept(client, offer, hooks) {
                        ($0 as? PaymentClient)?.setOrderConfirmedByUser(true, tip: tip, for: offer)
                    }
                case .redeem(let coupon) where type.isRedemption:
                    Self.accept(client, offer, hooks) {
                        ($0 as? RedemptionClient)?.setRedemptionConfirmedByUser(true, coupon: coupon, for: offer)
                    }
                case .decline, .pay, .redeem:
                    ownDecider.decideAgainstCandidate()
                case .ignore:
                    break
                }
            }
        }
        if decider.state == .candidateAvailable, let candidate = decider.candidate {
            hooks.candidateTaken?(candidate)
            decider.startDeciding()
        }
    }

    /// The person said yes: accept, connect, and confirm once the terminal is connected.
    private static func accept(
        _ client: TransactionClient, _ offer: PaymentOffer, _ hooks: Hooks,
        confirm: @escaping @Sendable (TransactionClient) -> Void
    ) {
        // Only the autopilot whose yes took effect confirms (another may share the client).
        guard client.manualConnectionDecider.decideForCandidate() else { return }
        client.onHostConnected = { [weak client] in
            guard let client else { return }
            hooks.confirming?(offer)
            confirm(client)
        }
        hooks.accepted?(offer)
        client.connectToSession()
    }
}
