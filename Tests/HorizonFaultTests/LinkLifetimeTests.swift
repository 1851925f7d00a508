import Crypto
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonLink
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonStores
import HorizonTestSupport
import Synchronization
import Testing

/// A link that forgets its handler once closed, as a radio forgets a link that went down, so the
/// only references left are the layers' own.
final class ForgetfulLink: ByteLink {
    let peer = PeerAddress("LI:FE:00:00:00:01")
    let attMTU = 247
    private let handler = Mutex<ByteLinkHandler?>(nil)

    func setHandler(_ handler: ByteLinkHandler) { self.handler.withLock { $0 = handler } }
    func send(_ payload: [UInt8]) throws(RadioError) {}
    func close() {
        let handler = self.handler.withLock { handler in
            defer { handler = nil }
            return handler
        }
        handler?.onClose(.closedLocally)
    }
}

/// A scheduler whose timers never fire and are not kept.
final class ForgetfulScheduler: Scheduler {
    var now: Instant { .zero }
    var wallClock: UnixTime { 1_800_000_000 }
    @discardableResult
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        ScheduledAction()
    }
}

/// A peripheral radio that hands the terminal whatever link the test gives it.
final class HandOverRadio: PeripheralRadio {
    let scheduler: any Scheduler = ForgetfulScheduler()
    let availability = AdapterAvailability.poweredOn
    private let handler = Mutex<(@Sendable (any ByteLink) -> Void)?>(nil)

    func startAdvertising(_ advertisingData: [UInt8], interval: Duration) throws(RadioError) -> any AdvertisingSet {
        throw .adapterUnavailable(.unsupported)
    }
    func setConnectionHandler(_ handler: @escaping @Sendable (any ByteLink) -> Void) {
        self.handler.withLock { $0 = handler }
    }
    func connect(_ link: any ByteLink) { handler.withLock { $0 }?(link) }
}

/// Found by fuzzing the handshake: memory grew with every input that opened a secure link. A
/// secure link and its message link held each other (each one's callbacks captured the other), so
/// neither was ever freed, on the terminal for every wallet that ever connected.
@Suite("Link lifetimes", .offTheCooperativePool)
struct LinkLifetimeTests {
    @Test func anEndedSecureLinkAndItsMessageLinkAreFreed() throws {
        weak var weakSecure: SecureLink?
        weak var weakMessage: MessageLink?
        do {
            let key = P256.Signing.PrivateKey()
            let identity = try TerminalIdentity(
                signingKey: key,
                credential: .issue(
                    by: key, merchantID: "m", merchantName: "M", terminalKey: key.publicKey, notBefore: 0,
                    expiresAt: 2_000_000_000))
            let link = ForgetfulLink()
            let message = try MessageLink(link: link, scheduler: ForgetfulScheduler())
            let secure = SecureLink.accept(
                over: message, identity: identity,
                handler: SecureLinkHandler(onEstablished: { _ in }, onMessage: { _ in }, onEnd: { _ in }))
            weakSecure = secure
            weakMessage = message
            secure.close()
        }
        #expect(weakSecure == nil, "the ended secure link is still alive")
        #expect(weakMessage == nil, "the ended message link is still alive")
    }

    /// The same on the terminal: a wallet's connection that ended is freed, down to its radio link.
    @Test func aTerminalForgetsAConnectionThatEnded() throws {
        let key = P256.Signing.PrivateKey()
        let identity = try TerminalIdentity(
            signingKey: key,
            credential: .issue(
                by: key, merchantID: "m", merchantName: "M", terminalKey: key.publicKey, notBefore: 0,
                expiresAt: 2_000_000_000))
        let radio = HandOverRadio()
        let ledger = try BlockingLedger(path: ":memory:")
        let service = TerminalRadioService(
            radio: radio, identity: identity, processor: ledger, journal: try SQLiteTerminalJournal(path: ":memory:"))
        weak var weakLink: ForgetfulLink?
        do {
            let link = ForgetfulLink()
            weakLink = link
            radio.connect(link)
            #expect(service.connectionCount == 1)
            link.close()
        }
        #expect(service.connectionCount == 0)
        #expect(weakLink == nil, "the terminal still holds the ended connection")
    }
}
