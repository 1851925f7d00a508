import Foundation
import HorizonAPI
import HorizonProtocol
import Synchronization

/// A card as the wallet app shows it (the reference's `PaymentCard`). The server keeps no
/// number: only what a person needs to recognise the card.
public struct PaymentCard: Sendable, Equatable, Codable {
    public enum Brand: String, Sendable, Codable {
        case visa, mastercard, amex
    }

    public let id: String
    public let brand: Brand
    public let lastFour: String
    public let expiryMonth: Int
    public let expiryYear: Int
    public let cardholder: String
    /// The person's own name for the card.
    public let name: String
    /// Switched on by the person (`updateCard`).
    public let isActive: Bool
    /// False while its 3-D Secure challenge is not completed.
    public let isReady: Bool

    /// Whether a payment may name it.
    public var canPay: Bool { isActive && isReady }

    init(_ card: Components.Schemas.PaymentCard) {
        id = card.id
        brand = Brand(rawValue: card.brand.rawValue) ?? .visa
        lastFour = card.lastFour
        expiryMonth = Int(card.expiryMonth)
        expiryYear = Int(card.expiryYear)
        cardholder = card.cardholder
        name = card.name
        isActive = card.active
        isReady = card.state == .ready
    }
}

/// What a card that needs 3-D Secure comes back with (the reference's `PaymentDetails`): open
/// `redirectionURL` in a browser (or a web view); the challenge page posts `MD` and `PaRes` to
/// `postDataTermURL`; complete with `executeAddPaymentCard(paymentDetails:md:paRes:)`.
public struct PaymentDetails: Sendable, Equatable, Codable {
    public let cardID: String
    /// The reference's `MD`.
    public let md: String
    public let redirectionURL: URL
    public let postDataTermURL: URL
    /// Unix seconds: the challenge cannot be completed after.
    public let expiresAt: Int64
    /// The reference's flag: false, this card is enrolled and needs the challenge.
    public let card3DSNotEnrolled: Bool
}

/// What adding a card answered.
public enum AddPaymentCardResult: Sendable, Equatable {
    /// The card can pay now.
    case added(PaymentCard)
    /// The card waits for its 3-D Secure challenge; it cannot pay until it is completed.
    case challengeRequired(PaymentCard, PaymentDetails)
}

/// Where a 3-D Secure challenge stands, as the server knows it.
public enum CardChallengeState: Sendable, Equatable {
    /// Not answered yet.
    case open
    /// The person approved it; complete with this PaRes.
    case approved(paRes: String)
    /// The person (the issuer) failed it.
    case failed
    /// Not answered in time.
    case expired
    /// The card was completed with it.
    case completed
}

/// Why `waitForChallenge` gave no card.
public enum WalletClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server refused or could not be asked, or the identity is not ready.
    case server(ServiceClientError)
    /// Nobody answered the challenge within the wait.
    case challengeNotAnswered(waited: Duration)
    case challengeFailed
    case challengeExpired

    public var description: String {
        switch self {
        case .server(let error): error.description
        case .challengeNotAnswered(let waited):
            "the 3-D Secure challenge was not answered within \(waited.components.seconds) s; open its link and answer it, or add the card again"
        case .challengeFailed: "the 3-D Secure challenge failed, so the card cannot pay; remove it and add it again"
        case .challengeExpired: "the 3-D Secure challenge expired; remove the card and add it again"
        }
    }
}

/// The wallet's payment methods (the reference's `WalletClient`): get the wallet's cards, add a
/// card (with its 3-D Secure round trip), update and remove cards. It is what `PaymentClient`
/// asks for the card to pay with (the reference's `paymentCardIDProvider`): the selected card
/// if it can pay, else none (the account balance pays).
///
/// Every call is signed with the wallet's key. Built on an `IdentityClient` (the reference's
/// way) it follows the identity as an `IdentityObserver`: before the identity is ready every call
/// is refused with `identityNotReady` and nothing is sent; when it is invalidated the cards and
/// the selection are forgotten (and calls refused with `identityInvalidated`); once a key is ready
/// again, calls go on with it. Built on a `HorizonServerClient`, it signs with that client's key.
public final class WalletClient: PaymentCardIDProvider, IdentityObserver, Sendable {
    private enum Signer {
        case server(HorizonServerClient)
        case identity(IdentityClient)
    }
    private let signer: Signer
    private let state = Mutex<State>(State())

    private struct State {
        var cards: [PaymentCard] = []
        var selectedCardID: String?
    }

    public init(server: HorizonServerClient) { signer = .server(server) }

    /// A wallet client that signs with `identityClient`'s key and follows its state.
    public init(identityClient: IdentityClient) {
        signer = .identity(identityClient)
        identityClient.addObserver(self)
    }

    /// The server the client talks to.
    public var serverURL: URL {
        switch signer {
        case .server(let server): server.serverURL
        case .identity(let identity): identity.serverURL
        }
    }

    /// Runs one request with the current key: an identity not ready refuses it before anything is sent.
    private func request<T: Sendable>(_ body: (HorizonServerClient) async throws(ServerClientError) -> T)
        async throws(ServiceClientError) -> T
    {
        switch signer {
        case .server(let server):
            do { return try await body(server) } catch { throw .server(error) }
        case .identity(let identity):
            return try await identity.perform(body)
        }
    }

    /// The wallet's cards, oldest first (the reference's `getWallet`); kept as the last known.
    public func getWallet() async throws(ServiceClientError) -> [PaymentCard] {
        let cards = try await request { server throws(ServerClientError) in try await server.paymentCards() }.map(
            PaymentCard.init)
        state.withLock { $0.cards = cards }
        return cards
    }

    /// The cards the last `getWallet` (or change) returned.
    public var cards: [PaymentCard] { state.withLock { $0.cards } }

    /// Adds a card (the reference's `addPaymentCard`): the server checks it and keeps only a
    /// token, the brand and the last four digits. `expDate` is MM/YY.
    public func addPaymentCard(
        cardholder: String, cardNumber: String, cvc: String, expDate: String, name: String? = nil
    )
        async throws(ServiceClientError) -> AddPaymentCardResult
    {
        let result = try await request { server throws(ServerClientError) in
            try await server.addPaymentCard(
                .init(cardholder: cardholder, cardNumber: cardNumber, expiry: expDate, cvc: cvc, name: name))
        }
        let card = PaymentCard(result.card)
        remember(card)
        guard let details = result.paymentDetails else { return .added(card) }
        return .challengeRequired(
            card,
            PaymentDetails(
                cardID: card.id, md: details.md, redirectionURL: resolve(details.redirectionUrl),
                postDataTermURL: resolve(details.postDataTermUrl), expiresAt: details.expiresAt,
                card3DSNotEnrolled: details.card3DSNotEnrolled))
    }

    /// Completes adding a card with the `MD` and `PaRes` the term page received (the
    /// reference's `executeAddPaymentCard`).
    public func executeAddPaymentCard(paymentDetails: PaymentDetails, md: String, paRes: String)
        async throws(ServiceClientError) -> PaymentCard
    {
        let card = PaymentCard(
            try await request { server throws(ServerClientError) in
                try await server.executeAddPaymentCard(cardID: paymentDetails.cardID, md: md, paRes: paRes)
            })
        remember(card)
        return card
    }

    /// Where the challenge stands, for an app that cannot read the browser's term page.
    public func challengeState(of paymentDetails: PaymentDetails) async throws(ServiceClientError)
        -> CardChallengeState
    {
        let status = try await request { server throws(ServerClientError) in
            try await server.cardChallenge(md: paymentDetails.md)
        }
        switch status.state {
        case .open: return .open
        case .approved:
            guard let paRes = status.paRes else {
                throw .server(.invalidResponse("an approved challenge came without its PaRes"))
            }
            return .approved(paRes: paRes)
        case .failed: return .failed
        case .expired: return .expired
        case .completed: return .completed
        }
    }

    /// Waits until the person answers the challenge in a browser (asking the server every
    /// `pollInterval`, telling `progress` how long it has waited), then completes the card.
    public func waitForChallenge(
        _ paymentDetails: PaymentDetails, timeout: Duration, pollInterval: Duration = .seconds(1),
        progress: @Sendable (Duration) -> Void = { _ in }
    ) async throws(WalletClientError) -> PaymentCard {
        let start = ContinuousClock.now
        while true {
            let state: CardChallengeState
            do { state = try await challengeState(of: paymentDetails) } catch { throw .server(error) }
            switch state {
            case .approved(let paRes):
                do {
                    return try await executeAddPaymentCard(
                        paymentDetails: paymentDetails, md: paymentDetails.md, paRes: paRes)
                } catch { throw .server(error) }
            case .completed:
                do {
                    guard let card = try await getWallet().first(where: { $0.id == paymentDetails.cardID }) else {
                        throw WalletClientError.server(
                            .server(.invalidResponse("the completed card is not in the wallet")))
                    }
                    return card
                } catch let error as WalletClientError {
                    throw error
                } catch let error as ServiceClientError {
                    throw .server(error)
                } catch {
                    throw .server(.server(.invalidResponse("\(error)")))
                }
            case .failed: throw .challengeFailed
            case .expired: throw .challengeExpired
            case .open: break
            }
            let waited = ContinuousClock.now - start
            guard waited < timeout else { throw .challengeNotAnswered(waited: waited) }
            progress(waited)
            do { try await Task.sleep(for: pollInterval) } catch { throw .server(.server(.cancelled)) }
        }
    }

    /// Switches a card on or off and renames it (the reference's `updateCard(_:withStatus:cardName:)`).
    public func updateCard(_ card: PaymentCard, status: Bool, cardName: String) async throws(ServiceClientError)
        -> PaymentCard
    {
        let updated = PaymentCard(
            try await request { server throws(ServerClientError) in
                try await server.updatePaymentCard(cardID: card.id, active: status, name: cardName)
            })
        remember(updated)
        return updated
    }

    /// Removes a card (the reference's `removeCard(withID:)`); it can no longer pay.
    public func removeCard(id: String) async throws(ServiceClientError) {
        try await request { server throws(ServerClientError) in try await server.removePaymentCard(cardID: id) }
        state.withLock { state in
            state.cards.removeAll { $0.id == id }
            if state.selectedCardID == id { state.selectedCardID = nil }
        }
    }

    // MARK: Payment card id provider

    /// The card the person chose to pay with; nil pays from the account balance (the default).
    public func selectPaymentCard(id: String?) { state.withLock { $0.selectedCardID = id } }

    /// What `PaymentClient` signs as the payment method: the selected card while it is known
    /// and can pay, else nil (the account balance).
    public var paymentCardID: String? {
        state.withLock { state in
            guard let id = state.selectedCardID, state.cards.contains(where: { $0.id == id && $0.canPay }) else {
                return nil
            }
            return id
        }
    }

    /// Forgets the cards and the selection: called by the identity when it is invalidated (as
    /// `IdentityObserver`), so an invalidated identity's cards are never shown or offered again.
    public func reset() { state.withLock { $0 = State() } }

    // MARK: Helpers

    private func remember(_ card: PaymentCard) {
        state.withLock { state in
            if let index = state.cards.firstIndex(where: { $0.id == card.id }) {
                state.cards[index] = card
            } else {
                state.cards.append(card)
            }
        }
    }

    /// The server's relative challenge URLs, made absolute against the server's base URL.
    private func resolve(_ relative: String) -> URL {
        URL(string: relative, relativeTo: serverURL)?.absoluteURL ?? serverURL
    }
}
