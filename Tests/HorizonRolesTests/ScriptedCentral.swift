import Crypto
import HorizonCore
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonTestSupport
import Synchronization

/// A central that speaks the protocol message by message, as an attacker with a dongle and a
/// script would: it completes the real handshake for a session, then `script` decides what to
/// send. What the terminal answers is recorded, decoded.
final class ScriptedCentral: Sendable {
    /// The established connection, as the script sees it.
    struct Connection: Sendable {
        let link: SecureLink
        let sessionID: SessionID
        let transcriptHash: [UInt8]

        func send(_ message: SessionMessage) { try? link.send(message.encoded()) }

        /// A Hello with `key` (fresh by default) and a valid proof over this connection.
        func hello(key: P256.Signing.PrivateKey = P256.Signing.PrivateKey(), type: TransactionType = .payment)
            -> Hello
        {
            let unsigned = Hello(sessionID: sessionID, transactionType: type, sessionKey: publicKey(key))
            return unsigned.withProof(sign(unsigned.proofBytes(transcriptHash: transcriptHash), with: key))
        }

        /// A status query for `id` signed by `key` over this connection.
        func statusQuery(_ id: PaymentID, signedBy key: P256.Signing.PrivateKey) -> PaymentStatusQuery {
            let unsigned = PaymentStatusQuery(paymentID: id, walletKey: publicKey(key))
            return unsigned.withProof(sign(unsigned.proofBytes(transcriptHash: transcriptHash), with: key))
        }
    }

    let device: SimulatedDevice
    let received = Recorder<SessionMessage>()
    private let ended = Mutex(false)
    private let held = Mutex<SecureLink?>(nil)
    private let established = Mutex<Connection?>(nil)

    /// Connects to `terminal` naming `session` and runs `script` once the handshake is done.
    init(
        world: World, name: String, at position: Position = Position(x: 0.2, y: 0.1), terminal: PeerAddress,
        session: SessionID, script: @escaping @Sendable (Connection) -> Void
    ) throws {
        device = try world.simulation.addDevice(name: name, configuration: DeviceConfiguration(position: position))
        let context = (0..<8).map { UInt8(truncatingIfNeeded: session.rawValue >> (56 - 8 * $0)) }
        let anchors = world.anchors
        device.connect(to: terminal, timeout: .seconds(2)) { [self, device] result in
            guard case .success(let link) = result,
                let messageLink = try? MessageLink(link: link, scheduler: device.scheduler)
            else { return }
            let secure = try? SecureLink.initiate(
                over: messageLink, trustAnchors: anchors, expectedTerminalKeyID: nil, context: context,
                handler: SecureLinkHandler(
                    onEstablished: { [self] info in
                        guard let link = held.withLock({ $0 }) else { return }
                        let connection = Connection(link: link, sessionID: session, transcriptHash: info.transcriptHash)
                        established.withLock { $0 = connection }
                        script(connection)
                    },
                    onMessage: { [self] bytes in
                        if let message = try? SessionMessage.decode(bytes) { received.append(message) }
                    },
                    onEnd: { [self] _ in ended.withLock { $0 = true } }))
            held.withLock { $0 = secure }
        }
    }

    var isEstablished: Bool { connection != nil }
    /// The established connection, for tests that send more after the script.
    var connection: Connection? { established.withLock { $0 } }
    var hasEnded: Bool { ended.withLock { $0 } }

    func close() { held.withLock { $0 }?.close() }

    /// The offers the terminal sent this central.
    var offers: [Offer] { received.values.compactMap { if case .offer(let offer) = $0 { offer } else { nil } } }
    var errors: [ErrorMessage] { received.values.compactMap { if case .error(let error) = $0 { error } else { nil } } }
    var receipts: [Receipt] {
        received.values.compactMap { if case .receipt(let receipt) = $0 { receipt } else { nil } }
    }
}

func publicKey(_ key: P256.Signing.PrivateKey) -> PublicKeyBytes {
    WalletIdentity(signingKey: key).publicKey
}

func sign(_ bytes: [UInt8], with key: P256.Signing.PrivateKey) -> SignatureBytes {
    (try? SignatureBytes(bytes: Array(key.signature(for: bytes).rawRepresentation))) ?? .unsigned
}
