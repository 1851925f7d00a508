import Crypto
import HorizonCore
import HorizonLink
import HorizonRadio
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonTestSupport
import Synchronization

/// What one side of a secure link saw, with the virtual time of each event.
final class SecureLinkObserver: Sendable {
    let established = Recorder<SecureLinkEstablished>()
    let messages = Recorder<[UInt8]>()
    let ends = Recorder<(SecureLinkEnd, Instant)>()

    func handler(clock: any Scheduler) -> SecureLinkHandler {
        SecureLinkHandler(
            onEstablished: { [established] in established.append($0) },
            onMessage: { [messages] in messages.append($0) },
            onEnd: { [ends] end in ends.append((end, clock.now)) })
    }
}

/// A terminal device that accepts secure links, and a wallet device near it.
struct SecureLinkBench {
    static let wallClock: UnixTime = 1_800_000_000
    let simulation: RadioSimulation
    let terminal: SimulatedDevice
    let wallet: SimulatedDevice
    let anchorKey = P256.Signing.PrivateKey()
    let identity: TerminalIdentity
    let terminalSide = SecureLinkObserver()
    let terminalLinks = Recorder<SecureLink>()

    init(seed: UInt64 = 1, mtu: Int = 247, identity: TerminalIdentity? = nil) throws {
        simulation = RadioSimulation(seed: seed, wallClockAtStart: Self.wallClock)
        let parameters = LinkParameters(attMTU: mtu)
        terminal = try simulation.addDevice(
            name: "terminal", configuration: DeviceConfiguration(position: .origin, link: parameters))
        wallet = try simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: Position(x: 0.5, y: 0), link: parameters))
        let terminalKey = P256.Signing.PrivateKey()
        self.identity =
            try identity
            ?? TerminalIdentity(
                signingKey: terminalKey,
                credential: TerminalCredential.issue(
                    by: anchorKey, merchantID: "m-1", merchantName: "Bench Bakery", terminalKey: terminalKey.publicKey,
                    notBefore: Self.wallClock - 60, expiresAt: Self.wallClock + 3600))
        let accepted = self.identity
        let clock = terminal.scheduler
        let observer = terminalSide
        let links = terminalLinks
        terminal.setConnectionHandler { link in
            guard let messageLink = try? MessageLink(link: link, scheduler: clock) else { return }
            links.append(
                SecureLink.accept(over: messageLink, identity: accepted, handler: observer.handler(clock: clock)))
        }
        _ = try terminal.startAdvertising(
            try AdvertisingData(structures: [AdvertisingData.flagsStructure]).encoded(), interval: .milliseconds(100))
    }

    var anchors: [TrustAnchor] { [TrustAnchor(publicKey: anchorKey.publicKey)] }

    /// Connects the wallet and completes the handshake; returns the raw link, the secure link and
    /// what the wallet's side observed.
    func establish() throws -> (MessageLink, SecureLink, SecureLinkObserver) {
        let wallet = SecureLinkObserver()
        let link = try connectWallet()
        let secure = try SecureLink.initiate(
            over: link, trustAnchors: anchors, expectedTerminalKeyID: nil, context: [],
            handler: wallet.handler(clock: self.wallet.scheduler))
        simulation.run(until: { secure.isEstablished }, timeout: .seconds(2))
        return (link, secure, wallet)
    }

    /// Connects the wallet and returns its raw message link once the radio link is up.
    func connectWallet() throws -> MessageLink {
        let result = Recorder<Result<any ByteLink, RadioError>>()
        wallet.connect(to: terminal.address, timeout: .seconds(2)) { result.append($0) }
        simulation.run(until: { result.count > 0 }, timeout: .seconds(3))
        let link = try requireValue(result.last).get()
        return try MessageLink(link: link, scheduler: wallet.scheduler)
    }
}

struct MissingValue: Error {}

/// `#require` for use outside a test function body.
func requireValue<T>(_ value: T?) throws -> T {
    guard let value else { throw MissingValue() }
    return value
}
