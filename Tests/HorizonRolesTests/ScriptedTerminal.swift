import Crypto
import HorizonCore
import HorizonLedgerTestSupport
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonTestSupport
import Synchronization

/// A terminal with a real credential from the world's anchor that answers the wallet message by
/// message from a script: what a dishonest (or buggy) terminal can do with a valid identity.
final class ScriptedTerminal: Sendable {
    /// One accepted connection, as the script sees it.
    struct Connection: Sendable {
        let link: SecureLink
        let identity: TerminalIdentity

        func send(_ message: SessionMessage) { try? link.send(message.encoded()) }

        /// `offer` signed with the terminal's key.
        func signed(_ offer: Offer) -> Offer {
            offer.withSignature(sign(offer.signedBytes, with: identity.signingKey))
        }

        func signed(_ receipt: Receipt) -> Receipt {
            receipt.withSignature(sign(receipt.signedBytes, with: identity.signingKey))
        }
    }

    let device: SimulatedDevice
    let identity: TerminalIdentity
    let sessionID: SessionID
    /// Every message wallets sent, decoded.
    let received = Recorder<SessionMessage>()
    private let links = Mutex<[SecureLink]>([])
    private let advertising = Mutex<(any AdvertisingSet)?>(nil)

    init(
        world: World, name: String, at position: Position, sessionID: SessionID, merchantID: String = "m-scripted",
        script: @escaping @Sendable (Connection, SessionMessage) -> Void
    ) throws {
        device = try world.simulation.addDevice(name: name, configuration: DeviceConfiguration(position: position))
        let key = P256.Signing.PrivateKey()
        identity = try TerminalIdentity(
            signingKey: key,
            credential: TerminalCredential.issue(
                by: world.anchorKey, merchantID: merchantID, merchantName: "Scripted Café",
                terminalKey: key.publicKey, notBefore: World.wallClock - 60, expiresAt: World.wallClock + 86_400))
        self.sessionID = sessionID
        let identity = identity
        device.setConnectionHandler { [self, device] link in
            guard let messageLink = try? MessageLink(link: link, scheduler: device.scheduler) else { return }
            let box = Mutex<SecureLink?>(nil)
            let secure = SecureLink.accept(
                over: messageLink, identity: identity,
                handler: SecureLinkHandler(
                    onEstablished: { _ in },
                    onMessage: { [self] bytes in
                        guard let message = try? SessionMessage.decode(bytes), let link = box.withLock({ $0 }) else {
                            return
                        }
                        received.append(message)
                        script(Connection(link: link, identity: identity), message)
                    }, onEnd: { _ in }))
            box.withLock { $0 = secure }
            links.withLock { $0.append(secure) }
        }
        try startAdvertising()
    }

    func startAdvertising() throws {
        let keyID = try TerminalKeyID(bytes: identity.keyID)
        let set = try device.startAdvertising(
            HorizonAdvertisement(transactionType: .payment, sessionID: sessionID, terminalKeyID: keyID)
                .advertisingData(), interval: .milliseconds(100))
        advertising.withLock { $0 = set }
    }

    func stopAdvertising() { advertising.withLock { $0 }?.stop() }

    /// `offer` signed with this terminal's key.
    func signed(_ offer: Offer) -> Offer { offer.withSignature(sign(offer.signedBytes, with: identity.signingKey)) }

    /// The Hellos wallets sent, in order.
    var hellos: [Hello] { received.values.compactMap { if case .hello(let hello) = $0 { hello } else { nil } } }
    var confirms: [Confirm] {
        received.values.compactMap { if case .confirm(let confirm) = $0 { confirm } else { nil } }
    }

    /// An offer for this terminal's session.
    func offer(_ cents: Int64) throws -> Offer {
        var random = SystemRandomNumberGenerator()
        return try Offer(
            sessionID: sessionID, transactionType: .payment, amount: euros(cents), registerUser: "Ana",
            merchantPrograms: .none, offerNonce: Nonce.random(using: &random), expiresAt: World.wallClock + 600)
    }
}

/// A value shared between a test and the callbacks it scripts.
final class Shared<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    init(_ value: Value) { storage = Mutex(value) }
    var value: Value {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
