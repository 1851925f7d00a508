import HorizonCore
import HorizonProtocol

/// A person answering from code, on the radio's scheduler: takes each candidate, looks at the
/// verified offer, answers, and confirms once the terminal is connected. It is the reference's
/// callback chain (startDeciding → offer → decideForCandidate → connectToSession →
/// onHostConnected → confirm) written once, for the code that needs every step on the
/// simulation's own clock: the role tests, the fault simulation and the benchmarks replay a seed
/// step for step, which the async API cannot promise (its calls hop through tasks, whose timing
/// the machine decides). Apps use the async API.
///
/// Its policy says when to take a candidate (`takesCandidate`), what to answer to each offer, and
/// for a person who hesitates or changes their mind at the last tap, what that tap is and when it
/// comes (`Answer.decideWhenConnected`).
public final class WalletAutopilot: Sendable {
    /// What the person says to an offer.
    public enum Answer: Sendable {
        /// Accept and pay with this tip (payment terminals) as soon as the terminal is connected.
        case pay(tip: Money)
        /// Accept and redeem what the offer asks, or this coupon (redemption terminals), as soon
        /// as the terminal is connected.
        case redeem(coupon: String?)
        /// Say no: the terminal is told, the session is not offered again.
        case decline
        /// Say nothing: the terminal's decision timeout ends it.
        case ignore
        /// Accept and connect, and leave the last tap to `lastTap`, asked once the terminal is
        /// connected (on the radio's scheduler, with the offer the person accepted).
        case decideWhenConnected(_ lastTap: @Sendable (PaymentOffer) -> LastTap)
    }

    /// The person's last tap once the terminal is connected (`Answer.decideWhenConnected`). It
    /// comes `after` that long on the radio's scheduler, as an event of its own, so whatever is due
    /// meanwhile (a lost link, the terminal's timeout) happens first; if by then the client no
    /// longer waits for the person's word on that offer, there is no tap. A tap of the wrong kind
    /// for the terminal (paying a redemption) is a decline.
    public enum LastTap: Sendable, Equatable {
        /// Pay with this tip.
        case pay(tip: Money, after: Duration)
        /// Redeem what the offer asks, or this coupon.
        case redeem(coupon: String?, after: Duration)
        /// Say no at the last moment: the terminal is told, nothing is signed.
        case decline(after: Duration)

        /// How long the person hesitates before the tap.
        public var hesitation: Duration {
            switch self {
            case .pay(_, let after), .redeem(_, let after), .decline(let after): after
            }
        }
    }

    /// Moments a harness may want to stamp (benchmarks measure between them, the fault simulation
    /// counts declines). Each runs on the radio's scheduler, before the autopilot acts on it.
    public struct Hooks: Sendable {
        public var candidateTaken: (@Sendable (PeripheralTracking) -> Void)?
        public var accepted: (@Sendable (PaymentOffer) -> Void)?
        public var confirming: (@Sendable (PaymentOffer) -> Void)?
        /// The autopilot says no to an offer: at once, or as the last tap.
        public var declining: (@Sendable (PaymentOffer) -> Void)?

        public init(
            candidateTaken: (@Sendable (PeripheralTracking) -> Void)? = nil,
            accepted: (@Sendable (PaymentOffer) -> Void)? = nil, confirming: (@Sendable (PaymentOffer) -> Void)? = nil,
            declining: (@Sendable (PaymentOffer) -> Void)? = nil
        ) {
            self.candidateTaken = candidateTaken
            self.accepted = accepted
            self.confirming = confirming
            self.declining = declining
        }
    }

    public let decider: any ManualConnectionDeciderProtocol
    public let clients: [TransactionClient]
    private let hooks: Hooks
    private let takesCandidate: @Sendable (PeripheralTracking) -> Bool

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
        takesCandidate: @escaping @Sendable (PeripheralTracking) -> Bool = { _ in true },
        answer: @escaping @Sendable (PaymentOffer, TransactionType) -> Answer
    ) {
        self.init(
            clients: [
                coordinator.paymentClient, coordinator.bonusRedemptionClient, coordinator.goldRedemptionClient,
                coordinator.couponRedemptionClient,
            ], decider: coordinator.manualConnectionDecider, hooks: hooks, takesCandidate: takesCandidate,
            answer: answer)
    }

    /// Answers for `clients`, whose candidates `decider` offers (a client's own decider, or a
    /// collection of theirs). A candidate is taken when it becomes available if `takesCandidate`
    /// says so (a person who is not shopping lets it pass; `takeCandidateIfAvailable` asks again).
    public init(
        clients: [TransactionClient], decider: any ManualConnectionDeciderProtocol, hooks: Hooks = Hooks(),
        takesCandidate: @escaping @Sendable (PeripheralTracking) -> Bool = { _ in true },
        answer: @escaping @Sendable (PaymentOffer, TransactionType) -> Answer
    ) {
        self.decider = decider
        self.clients = clients
        self.hooks = hooks
        self.takesCandidate = takesCandidate
        decider.observeState { [decider] state in
            guard state == .candidateAvailable else { return }
            Self.takeCandidate(of: decider, if: takesCandidate, hooks)
        }
        for client in clients {
            let type = client.transactionType
            let ownDecider = client.manualConnectionDecider
            client.observeState { [weak client] state in
                guard state == .offerReceived, let client, let offer = client.offer else { return }
                switch answer(offer, type) {
                case .pay(let tip) where type == .payment:
                    Self.accept(client, offer, hooks) { Self.give(.pay(tip: tip, after: .zero), on: $0, offer, hooks) }
                case .redeem(let coupon) where type.isRedemption:
                    Self.accept(client, offer, hooks) {
                        Self.give(.redeem(coupon: coupon, after: .zero), on: $0, offer, hooks)
                    }
                case .decideWhenConnected(let lastTap):
                    Self.accept(client, offer, hooks) { client in
                        let tap = lastTap(offer)
                        client.scheduler.schedule(after: tap.hesitation) { [weak client] in
                            // The attempt may have ended (or another begun) while the person hesitated.
                            guard let client, client.state == .hostConnected, client.offer?.digest == offer.digest
                            else { return }
                            Self.give(tap, on: client, offer, hooks)
                        }
                    }
                case .decline, .pay, .redeem:
                    hooks.declining?(offer)
                    ownDecider.decideAgainstCandidate()
                case .ignore:
                    break
                }
            }
        }
        takeCandidateIfAvailable()
    }

    /// Takes the decider's candidate now if there is one and `takesCandidate` agrees: for when its
    /// answer may have changed (a person who starts shopping in front of a terminal).
    public func takeCandidateIfAvailable() {
        Self.takeCandidate(of: decider, if: takesCandidate, hooks)
    }

    private static func takeCandidate(
        of decider: any ManualConnectionDeciderProtocol, if takesCandidate: (PeripheralTracking) -> Bool, _ hooks: Hooks
    ) {
        guard decider.state == .candidateAvailable, let candidate = decider.candidate, takesCandidate(candidate)
        else { return }
        hooks.candidateTaken?(candidate)
        decider.startDeciding()
    }

    /// The person said yes: accept, connect, and once the terminal is connected, `whenConnected`.
    private static func accept(
        _ client: TransactionClient, _ offer: PaymentOffer, _ hooks: Hooks,
        whenConnected: @escaping @Sendable (TransactionClient) -> Void
    ) {
        // Only the autopilot whose yes took effect goes on (another may share the client).
        guard client.manualConnectionDecider.decideForCandidate() else { return }
        client.onHostConnected = { [weak client] in
            guard let client else { return }
            whenConnected(client)
        }
        hooks.accepted?(offer)
        client.connectToSession()
    }

    /// The last tap: the request it says (a payment's tip, a redemption's coupon), signed and
    /// sent, or a no.
    private static func give(_ tap: LastTap, on client: TransactionClient, _ offer: PaymentOffer, _ hooks: Hooks) {
        switch (tap, client) {
        case (.pay(let tip, _), let payment as PaymentClient):
            hooks.confirming?(offer)
            payment.setOrderConfirmedByUser(true, tip: tip, for: offer)
        case (.redeem(let coupon, _), let redemption as RedemptionClient):
            hooks.confirming?(offer)
            redemption.setRedemptionConfirmedByUser(true, coupon: coupon, for: offer)
        default:
            hooks.declining?(offer)
            // What `setOrderConfirmedByUser(false, …)` and `setRedemptionConfirmedByUser(false)` do.
            client.core.decline()
        }
    }
}
