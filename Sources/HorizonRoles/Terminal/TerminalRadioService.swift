import HorizonCore
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonStores
import Synchronization

/// One wallet's secure connection to the terminal.
public final class TerminalConnection: Sendable {
    public let id: Int
    /// The session the wallet bound into its handshake (nil: none, e.g. a status query).
    public let sessionID: SessionID?
    let secureLink: SecureLink

    init(id: Int, sessionID: SessionID?, secureLink: SecureLink) {
        self.id = id
        self.sessionID = sessionID
        self.secureLink = secureLink
    }

    public var peer: PeerAddress { secureLink.link.peer }

    /// Sends a message; a failure means the link is gone, which its end callback reports.
    func send(_ message: SessionMessage) {
        try? secureLink.send(message.encoded())
    }

    func close() { secureLink.close() }
}

/// What a host (payment or redemption) hears about connections for its session.
protocol TerminalSessionHandler: AnyObject, Sendable {
    func connection(_ connection: TerminalConnection, received message: SessionMessage)
    func connectionEnded(_ connection: TerminalConnection)
}

/// Limits the terminal enforces on wallets' connections.
public struct TerminalServiceConfiguration: Sendable {
    public var secureLink: SecureLinkConfiguration
    public var linkLimits: LinkLimits
    public var advertisingInterval: Duration

    public init(
        secureLink: SecureLinkConfiguration = SecureLinkConfiguration(), linkLimits: LinkLimits = LinkLimits(),
        advertisingInterval: Duration = .milliseconds(100)
    ) {
        self.secureLink = secureLink
        self.linkLimits = linkLimits
        self.advertisingInterval = advertisingInterval
    }
}

/// The terminal's radio side, shared by its payment host and redemption hosts: advertises their
/// sessions, accepts wallets, runs the secure handshake, and routes each connection to the host
/// whose session the wallet named. It also answers a wallet that retries a payment already
/// settled, whatever session it connects through, so a receipt is never lost with a link.
public final class TerminalRadioService: Sendable {
    public let radio: any PeripheralRadio
    public let identity: TerminalIdentity
    /// Where stored results come from, to answer a wallet retrying a request already executed.
    public let processor: any PaymentProcessor
    public let configuration: TerminalServiceConfiguration

    private struct State {
        var handlers: [SessionID: any TerminalSessionHandler] = [:]
        var connections: [Int: TerminalConnection] = [:]
        var nextConnectionID = 0
    }

    private let state = Mutex(State())

    public init(
        radio: any PeripheralRadio, identity: TerminalIdentity, processor: any PaymentProcessor,
        configuration: TerminalServiceConfiguration = TerminalServiceConfiguration()
    ) {
        self.radio = radio
        self.identity = identity
        self.processor = processor
        self.configuration = configuration
        radio.setConnectionHandler { [weak self] link in self?.accept(link) }
    }

    var scheduler: any Scheduler { radio.scheduler }

    public var terminalKeyID: TerminalKeyID? { identity.terminalKeyID }

    /// Connections open now, authenticated or not.
    public var connectionCount: Int { state.withLock { $0.connections.count } }

    func register(_ sessionID: SessionID, handler: any TerminalSessionHandler) {
        state.withLock { $0.handlers[sessionID] = handler }
    }

    func unregister(_ sessionID: SessionID) {
        _ = state.withLock { $0.handlers.removeValue(forKey: sessionID) }
    }

    func advertise(_ advertisement: HorizonAdvertisement) throws(RadioError) -> any AdvertisingSet {
        try radio.startAdvertising(advertisement.advertisingData(), interval: configuration.advertisingInterval)
    }

    private func accept(_ link: any ByteLink) {
        guard let messageLink = try? MessageLink(link: link, scheduler: scheduler, limits: configuration.linkLimits)
        else {
            link.close()
            return
        }
        let id = state.withLock { state in
            defer { state.nextConnectionID += 1 }
            return state.nextConnectionID
        }
        let box = ConnectionBox()
        let secure = SecureLink.accept(
            over: messageLink, identity: identity, configuration: configuration.secureLink,
            handler: SecureLinkHandler(
                onEstablished: { [weak self] info in self?.established(id: id, info: info, box: box) },
                onMessage: { [weak self] bytes in self?.received(bytes, box: box) },
                onEnd: { [weak self] _ in self?.ended(id: id, box: box) }))
        box.secureLink.withLock { $0 = secure }
        state.withLock { $0.connections[id] = TerminalConnection(id: id, sessionID: nil, secureLink: secure) }
    }

    private func established(id: Int, info: SecureLinkEstablished, box: ConnectionBox) {
        guard let secure = box.secureLink.withLock({ $0 }) else { return }
        let sessionID = Self.sessionID(fromContext: info.context)
        let connection = TerminalConnection(id: id, sessionID: sessionID, secureLink: secure)
        box.connection.withLock { $0 = connection }
        state.withLock { $0.connections[id] = connection }
    }

    private func received(_ bytes: [UInt8], box: ConnectionBox) {
        guard let connection = box.connection.withLock({ $0 }) else { return }
        let message: SessionMessage
        do {
            message = try SessionMessage.decode(bytes)
        } catch {
            connection.send(.error(ErrorMessage(code: .protocolViolation, message: "undecodable message: \(error)")))
            connection.close()
            return
        }
        // A retry of a payment that was already settled is answered from the ledger, whichever
        // session the wallet reached us through.
        if let answer = settledAnswer(to: message) {
            connection.send(answer)
            return
        }
        let handler = connection.sessionID.flatMap { id in state.withLock { $0.handlers[id] } }
        guard let handler else {
            // Naming the payment id makes this a definitive answer for a pending confirmation:
            // its session is over, so that payment id can never be executed here.
            let paymentID = SessionHost.requestID(of: message)
            connection.send(
                .error(
                    ErrorMessage(
                        code: .sessionNotFound, message: "this terminal has no such session open; nothing was charged",
                        paymentID: paymentID)))
            return
        }
        handler.connection(connection, received: message)
    }

    private func settledAnswer(to message: SessionMessage) -> SessionMessage? {
        let paymentID: PaymentID
        switch message {
        case .confirm(let confirm): paymentID = confirm.paymentID
        case .redeem(let redeem): paymentID = redeem.redemptionID
        case .paymentStatusQuery(let query): paymentID = query.paymentID
        default: return nil
        }
        guard let result = try? processor.result(for: paymentID) else {
            if case .paymentStatusQuery = message {
                return .error(
                    ErrorMessage(
                        code: .notFound, message: "no payment with this id was executed here", paymentID: paymentID))
            }
            return nil
        }
        return ReceiptFactory.receipt(for: result, identity: identity).map { .receipt($0) }
    }

    private func ended(id: Int, box: ConnectionBox) {
        _ = state.withLock { $0.connections.removeValue(forKey: id) }
        // The box is captured by the secure link's own callbacks and holds that link: emptying it
        // once the link has ended breaks the cycle, so the connection is freed.
        let connection = box.connection.withLock { connection in
            defer { connection = nil }
            return connection
        }
        box.secureLink.withLock { $0 = nil }
        guard let connection, let sessionID = connection.sessionID,
            let handler = state.withLock({ $0.handlers[sessionID] })
        else { return }
        handler.connectionEnded(connection)
    }

    static func sessionID(fromContext context: [UInt8]) -> SessionID? {
        guard context.count == 8 else { return nil }
        var raw: UInt64 = 0
        for byte in context { raw = raw << 8 | UInt64(byte) }
        return SessionID(rawValue: raw)
    }

    static func context(for sessionID: SessionID) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: sessionID.rawValue >> (56 - 8 * $0)) }
    }
}

/// Late-bound references for one connection's callbacks.
private final class ConnectionBox: Sendable {
    let secureLink = Mutex<SecureLink?>(nil)
    let connection = Mutex<TerminalConnection?>(nil)
}

/// Builds the terminal-signed receipt for a stored result.
enum ReceiptFactory {
    static func receipt(for result: SettlementResult, identity: TerminalIdentity) -> Receipt? {
        let outcome: ReceiptOutcome
        var reference: UInt64 = 0
        var earned: Int64 = 0
        var balance: Int64 = 0
        switch result.outcome {
        case .approved(let ref, let bonusEarned, let bonusBalance):
            outcome = .approved
            reference = ref
            earned = bonusEarned
            balance = bonusBalance
        case .declined(let code, _):
            outcome = .declined(code)
        }
        guard
            let unsigned = try? Receipt(
                sessionID: result.sessionID, transactionType: result.transactionType, paymentID: result.paymentID,
                outcome: outcome, amount: result.amount, tip: result.tip, transactionReference: reference,
                settledAt: result.settledAt, bonusPointsEarned: earned, bonusPointsBalance: balance),
            let signature = try? signatureBytes(for: unsigned.signedBytes, with: identity.signingKey)
        else { return nil }
        return unsigned.withSignature(signature)
    }
}
