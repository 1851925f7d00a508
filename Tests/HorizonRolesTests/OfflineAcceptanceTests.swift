import Crypto
import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRoles
import HorizonSecureChannel
import HorizonSettlement
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Synchronization
import Testing

// Offline acceptance on the terminal and the wallet, on the simulated radio.

/// A server that cannot be reached: every call fails as a timed-out HTTP call does.
private final class UnreachableServer: PaymentProcessor {
    let asked = Mutex(0)

    func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult {
        asked.withLock { $0 += 1 }
        throw .unavailable("connection refused")
    }

    func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult? {
        throw .unavailable("connection refused")
    }
}

/// The wallet's daily token as `DailyTokenClient` keeps it, in memory.
private final class FakeTokenProvider: OfflineTokenProvider {
    private let state: Mutex<(token: DailyToken?, spent: Int64, presented: Int)>

    init(_ token: DailyToken?) { state = Mutex((token, 0, 0)) }

    var presentableDailyToken: [UInt8]? {
        state.withLock { state in
            state.presented += 1
            return state.token?.encoded()
        }
    }

    func recordOfflineSpending(_ amount: Money) { state.withLock { $0.spent += amount.minorUnits } }

    var remainingAllowance: Money? {
        state.withLock { state in
            state.token.flatMap {
                try? Money(minorUnits: $0.allowance.minorUnits - state.spent, currency: $0.allowance.currency)
            }
        }
    }

    var timesPresented: Int { state.withLock { $0.presented } }
}

/// A terminal cut from its server, with offline acceptance, and a wallet with a daily token.
private struct OfflineShop {
    let world: World
    let terminal: TerminalRig
    let journal: SQLiteTerminalJournal
    let wallet: WalletRig
    let tokens: FakeTokenProvider
    let app: ScriptedWalletApp

    /// `token` makes the wallet's token from its key (nil: the wallet has none).
    init(
        limits: OfflineLimits = .defaults(for: .eur), tip: Int64 = 0,
        processor: (any PaymentProcessor)? = UnreachableServer(),
        token: ((World, P256.Signing.PublicKey) throws -> DailyToken)? = OfflineShop.validToken
    ) throws {
        let world = try World()
        let (terminal, journal) = try Self.offlineTerminal(world, limits: limits, processor: processor)
        self.terminal = terminal
        let device = try world.simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: Position(x: 0.3, y: 0)))
        let identity = WalletIdentity()
        let walletToken = try token?(world, identity.signingKey.publicKey)
        tokens = FakeTokenProvider(walletToken)
        let client = PaymentClient(
            radio: device, identity: identity, trustAnchors: world.anchors, dailyTokenClient: tokens)
        try client.start()
        wallet = WalletRig(device: device, identity: identity, client: client)
        app = ScriptedWalletApp(wallet, decision: .accept(tip: tip))
        self.world = world
        self.journal = journal
    }

    /// A terminal of `world` that settles on `processor` (nil: its own ledger) and accepts
    /// payments offline with `limits`, trusting the world's anchor.
    static func offlineTerminal(
        _ world: World, limits: OfflineLimits = .defaults(for: .eur),
        processor: (any PaymentProcessor)? = UnreachableServer()
    ) throws -> (TerminalRig, SQLiteTerminalJournal) {
        // The rig's own host settles on its ledger; this one's host settles on `processor`.
        let rig = try world.terminal()
        let offline = OfflineAcceptanceConfiguration(limits: limits, trustAnchors: world.anchors, store: rig.journal)
        let host = PaymentHost(
            service: rig.service, processor: processor ?? rig.ledger,
            configuration: PaymentHostConfiguration(offline: offline))
        let terminal = TerminalRig(
            radio: rig.radio, identity: rig.identity, ledger: rig.ledger, journal: rig.journal, service: rig.service,
            host: host, conflicts: rig.conflicts)
        return (terminal, rig.journal)
    }

    static func token(
        _ world: World, for walletKey: P256.Signing.PublicKey, allowance: Int64 = 100_00, currency: Currency = .eur,
        issuer: P256.Signing.PrivateKey? = nil, issuedAt: UnixTime = World.wallClock - 3600,
        expiresAt: UnixTime = World.wallClock + 20 * 3600
    ) throws -> DailyToken {
        try DailyToken.issue(
            by: issuer ?? world.anchorKey, walletKey: walletKey, walletAccountID: "w_test",
            allowance: Money(minorUnits: allowance, currency: currency), issuedAt: issuedAt, expiresAt: expiresAt,
            revocation: DailyToken.RevocationState(revokedKeyIDs: []))
    }

    static func validToken(_ world: World, _ key: P256.Signing.PublicKey) throws -> DailyToken {
        try token(world, for: key)
    }

    /// One sale: the register asks `amount`, the wallet accepts; runs until the terminal (and,
    /// unless the payment stays pending there, the wallet) finished.
    @discardableResult
    func pay(_ amount: Int64, walletFinishes: Bool = true) -> Bool {
        guard terminal.host.start(amount: euros(amount)) else { return false }
        return world.run(
            until: { (!walletFinishes || wallet.client.state.isFinished) && terminal.host.state.isFinished },
            timeout: .seconds(60))
    }

    func nextSale() {
        terminal.host.stop()
        wallet.client.restart()
        wallet.decider.restart()
    }
}

extension PaymentClientState {
    fileprivate var isFinished: Bool { self == .completed || self == .completedWithError }
}

@Suite("Offline acceptance on the simulated radio", .offTheCooperativePool)
struct OfflineAcceptanceRadioTests {
    @Test func threePaymentsAreAcceptedOfflineAndAFourthBeyondTheCountLimitIsRefused() throws {
        var limits = OfflineLimits.defaults(for: .eur)
        limits.maximumStoredCount = 3
        let shop = try OfflineShop(limits: limits, tip: 50)
        var remaining: Int64 = 100_00
        for amount: Int64 in [12_00, 8_00, 20_00] {
            #expect(shop.pay(amount), "payment of \(amount)")
            let receipt = try #require(shop.wallet.client.receipt, "payment of \(amount)")
            // The wallet verified the terminal's signature on it (else no receipt) and shows it
            // as accepted offline, not approved.
            #expect(receipt.acceptedOffline)
            #expect(receipt.total == euros(amount + 50))
            #expect(shop.wallet.client.state == .completed)
            #expect(shop.terminal.host.state == .completed)
            let offline = try #require(shop.terminal.host.acceptedOfflinePayment)
            #expect(offline.paymentID == receipt.paymentID)
            #expect(shop.terminal.host.finalPaymentState == nil, "not settled: no order")
            remaining -= amount + 50
            #expect(shop.tokens.remainingAllowance == euros(remaining))
            // Journaled as stored, with the answer the wallet got.
            let record = try #require(try shop.journal.record(for: receipt.paymentID))
            guard case .receipt(let signed)? = record.answer else {
                Issue.record("no receipt journaled")
                return
            }
            #expect(signed.outcome == .acceptedOffline)
            shop.nextSale()
        }
        let stored = try shop.journal.offlinePayments()
        #expect(stored.map(\.state) == [.stored, .stored, .stored])
        #expect(stored.map(\.record.totalMinorUnits) == [12_50, 8_50, 20_50])
        #expect(stored.allSatisfy { !$0.record.signedConfirmation.isEmpty && !$0.record.dailyToken.isEmpty })

        #expect(shop.pay(5_00, walletFinishes: false))
        #expect(
            shop.terminal.host.error
                == .serverUnreachable(
                    "connection refused; not accepted offline: offline limit reached: 3 payments are stored already (at most 3)"
                ))
        #expect(shop.wallet.client.receipt == nil)
        #expect(try shop.journal.offlinePayments().count == 3)
        #expect(shop.tokens.remainingAllowance == euros(remaining), "nothing recorded for a refused payment")
    }

    /// The whole way on the radio: three payments taken offline, then forwarded when the server
    /// is back; the terminal dies after the server settled the second and before the journal
    /// recorded it, and the restarted terminal (the journal opened again) sends that payment id
    /// once more and the rest once: the server settles each once, the journal ends settled.
    @Test func paymentsTakenOfflineAreForwardedOnceAcrossACrash() async throws {
        let shop = try OfflineShop()
        var ids: [PaymentID] = []
        for amount: Int64 in [5_00, 7_00, 9_00] {
            #expect(shop.pay(amount))
            ids.append(try #require(shop.wallet.client.receipt?.paymentID))
            shop.nextSale()
        }
        #expect(shop.tokens.remainingAllowance == euros(100_00 - 21_00))
        let server = RecordingServer(crashOn: ids[1])
        let first = OfflineForwarding(store: shop.journal, forwarder: server, clock: { World.wallClock + 60 })
        #expect(try await first.forwardStored().settled == [ids[0]])

        let restarted = try SQLiteTerminalJournal(
            path: shop.world.directory.appendingPathComponent("terminal-journal.sqlite").path)
        #expect(try restarted.offlinePayments().map(\.state) == [.settled, .forwarding, .stored])
        let second = OfflineForwarding(store: restarted, forwarder: server, clock: { World.wallClock + 120 })
        #expect(try await second.forwardStored().settled == [ids[1], ids[2]])
        #expect(server.sent == [ids[0], ids[1], ids[1], ids[2]])
        #expect(server.settledCount == 3)
        #expect(try restarted.offlinePayments().map(\.state) == [.settled, .settled, .settled])
        #expect(try restarted.offlinePayments().map(\.record.totalMinorUnits) == [5_00, 7_00, 9_00])
    }

    /// The wallet knows what it spent offline elsewhere too: it does not present a token whose
    /// remaining allowance does not cover the payment.
    @Test func aWalletDoesNotPresentATokenItHasSpent() throws {
        let shop = try OfflineShop(token: { world, key in try OfflineShop.token(world, for: key, allowance: 30_00) })
        #expect(shop.pay(20_00))
        #expect(shop.wallet.client.receipt?.acceptedOffline == true)
        #expect(shop.tokens.remainingAllowance == euros(10_00))
        shop.nextSale()
        #expect(shop.pay(15_00, walletFinishes: false))
        #expect(
            shop.terminal.host.error
                == .serverUnreachable(
                    "connection refused; not accepted offline: offline and no valid daily token: the wallet presented none"
                ))
        #expect(try shop.journal.offlinePayments().count == 1)
        #expect(shop.tokens.remainingAllowance == euros(10_00))
    }

    @Test func aWalletWithoutTokenStaysPendingWithTheReason() throws {
        let shop = try OfflineShop(token: nil)
        #expect(shop.pay(10_00, walletFinishes: false))
        #expect(
            shop.terminal.host.error
                == .serverUnreachable(
                    "connection refused; not accepted offline: offline and no valid daily token: the wallet presented none"
                ))
        #expect(shop.wallet.client.receipt == nil)
        #expect(shop.wallet.client.pendingPayment != nil, "the wallet never says failed while a charge is possible")
        #expect(try shop.journal.offlinePayments().isEmpty)
    }

    @Test func anotherWalletsTokenIsRefused() throws {
        let shop = try OfflineShop(token: { world, _ in
            try OfflineShop.token(world, for: P256.Signing.PrivateKey().publicKey)
        })
        #expect(shop.pay(10_00, walletFinishes: false))
        #expect(
            shop.terminal.host.error
                == .serverUnreachable(
                    "connection refused; not accepted offline: offline and no valid daily token: the daily token belongs to another wallet key"
                ))
        #expect(try shop.journal.offlinePayments().isEmpty)
        #expect(shop.tokens.remainingAllowance == euros(100_00))
    }

    @Test func anExpiredTokenIsRefused() throws {
        let shop = try OfflineShop(token: { world, key in
            try OfflineShop.token(
                world, for: key, issuedAt: World.wallClock - 20 * 3600, expiresAt: World.wallClock - 60)
        })
        #expect(shop.pay(10_00, walletFinishes: false))
        guard case .serverUnreachable(let reason)? = shop.terminal.host.error else {
            Issue.record("expected a pending payment, got \(String(describing: shop.terminal.host.error))")
            return
        }
        #expect(
            reason.hasPrefix(
                "connection refused; not accepted offline: offline and no valid daily token: the daily token expired at"
            ))
        #expect(try shop.journal.offlinePayments().isEmpty)
    }

    /// A decline is not unreachability: the terminal never asks for the token, and the online
    /// payment carries none.
    @Test func aDeclinedOnlinePaymentNeverAsksForTheToken() throws {
        let shop = try OfflineShop(processor: nil)
        // Above the wallet's ledger balance (100.00): declined by the processor. That ends the
        // wallet's attempt; the session stays open for another.
        #expect(shop.terminal.host.start(amount: euros(500_00)))
        #expect(
            shop.world.run(
                until: {
                    shop.wallet.client.state.isFinished && requestDecline(shop.terminal.host.lastWalletNotice) != nil
                },
                timeout: .seconds(60)))
        guard requestDecline(shop.terminal.host.lastWalletNotice) != nil else {
            Issue.record("expected a decline, got \(String(describing: shop.terminal.host.lastWalletNotice))")
            return
        }
        #expect(shop.tokens.timesPresented == 0)
        shop.nextSale()
        #expect(shop.pay(10_00))
        #expect(shop.wallet.client.receipt?.acceptedOffline == false)
        #expect(shop.terminal.host.finalPaymentState != nil)
        #expect(shop.tokens.timesPresented == 0)
        #expect(try shop.journal.offlinePayments().isEmpty)
    }
    /// The token counts only on the connection whose Confirm it is for: another central naming
    /// the same session and payment id (with a valid token of the confirming wallet's key, even)
    /// is ignored; the confirming connection's token is accepted, and the receipt it gets back
    /// is signed by the terminal as accepted offline.
    @Test func onlyTheConfirmingConnectionPresentsTheToken() throws {
        let world = try World()
        let (terminal, journal) = try OfflineShop.offlineTerminal(world)
        #expect(terminal.host.start(amount: euros(9_00)))
        let session = try #require(terminal.host.sessionID)
        let payer = try ScriptedCentral(
            world: world, name: "payer", terminal: terminal.device.address, session: session
        ) { connection in connection.send(.hello(connection.hello())) }
        let rogue = try ScriptedCentral(
            world: world, name: "rogue", at: Position(x: -0.2, y: 0.1), terminal: terminal.device.address,
            session: session
        ) { connection in connection.send(.hello(connection.hello())) }
        #expect(world.run(until: { payer.offers.count == 1 && rogue.offers.count == 1 }))
        let offer = try #require(payer.offers.first)
        let walletKey = P256.Signing.PrivateKey()
        var random = SystemRandomNumberGenerator()
        let id = PaymentID.random(using: &random)
        let unsigned = try Confirm(
            sessionID: session, terminalKeyDigest: try DigestBytes(bytes: terminal.identity.keyDigest),
            walletKey: publicKey(walletKey),
            offerDigest: try DigestBytes(bytes: Array(SHA256.hash(data: SessionMessage.offer(offer).encoded()))),
            amount: offer.amount, tip: euros(0), paymentID: id, walletNonce: Nonce.random(using: &random),
            expiresAt: World.wallClock + 600)
        try #require(payer.connection).send(
            .confirm(unsigned.withSignature(sign(unsigned.signedBytes, with: walletKey))))
        func askedForToken(_ central: ScriptedCentral) -> Bool {
            central.received.values.contains { message in
                if case .offlineTokenRequest(let request) = message { request.paymentID == id } else { false }
            }
        }
        #expect(world.run(until: { askedForToken(payer) }))
        #expect(!askedForToken(rogue))
        let presentation = try OfflineTokenPresentation(
            sessionID: session, paymentID: id,
            token: try OfflineShop.token(world, for: walletKey.publicKey).encoded())
        try #require(rogue.connection).send(.offlineToken(presentation))
        world.run(for: .seconds(1))
        #expect(terminal.host.state == .acquiringPaymentExecution, "a token from another connection is ignored")
        #expect(try journal.offlinePayments().isEmpty)

        try #require(payer.connection).send(.offlineToken(presentation))
        #expect(world.run(until: { payer.receipts.count == 1 }))
        let receipt = try #require(payer.receipts.first)
        #expect(receipt.outcome == .acceptedOffline && receipt.paymentID == id && receipt.amount == euros(9_00))
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: receipt.signature.bytes)
        #expect(terminal.identity.signingKey.publicKey.isValidSignature(signature, for: receipt.signedBytes))
        #expect(try journal.offlinePayments().map(\.record.paymentID) == [id])
        #expect(rogue.receipts.isEmpty)
    }
}

// MARK: - The rules, one by one

@Suite("Offline acceptance rules")
struct OfflineAcceptanceRuleTests {
    let anchor = P256.Signing.PrivateKey()
    let wallet = P256.Signing.PrivateKey()
    let now: UnixTime = 1_800_000_000

    func request(_ amount: Int64, tip: Int64 = 0, currency: Currency = .eur, id: UInt8 = 1) throws
        -> SettlementRequest
    {
        SettlementRequest(
            paymentID: try PaymentID(bytes: [UInt8](repeating: id, count: 16)),
            sessionID: try #require(SessionID(rawValue: 7)),
            walletKey: try PublicKeyBytes(bytes: Array(wallet.publicKey.x963Representation)),
            terminalKeyID: try TerminalKeyID(bytes: [1, 2, 3, 4, 5, 6, 7, 8]),
            amount: try Money(minorUnits: amount, currency: currency),
            tip: try Money(minorUnits: tip, currency: currency), registerUser: "", contentDigest: [1],
            signedConfirmation: [9])
    }

    func token(
        allowance: Int64 = 100_00, currency: Currency = .eur, issuer: P256.Signing.PrivateKey? = nil,
        for key: P256.Signing.PublicKey? = nil, expiresAt: UnixTime? = nil
    ) throws -> [UInt8] {
        try DailyToken.issue(
            by: issuer ?? anchor, walletKey: key ?? wallet.publicKey, walletAccountID: "w_1",
            allowance: Money(minorUnits: allowance, currency: currency), issuedAt: now - 3600,
            expiresAt: expiresAt ?? now + 3600, revocation: DailyToken.RevocationState(revokedKeyIDs: [])
        ).encoded()
    }

    func decide(
        _ request: SettlementRequest, _ token: [UInt8], limits: OfflineLimits = .defaults(for: .eur),
        stored: [StoredOfflinePayment] = [], at time: UnixTime? = nil
    ) -> OfflineDecision {
        OfflineAcceptance.decide(
            request, tokenBytes: token, trustAnchors: [TrustAnchor(publicKey: anchor.publicKey)], limits: limits,
            stored: stored, now: time ?? now)
    }

    func stored(_ request: SettlementRequest, token: [UInt8], state: OfflinePaymentState = .stored, at: UnixTime? = nil)
        throws -> StoredOfflinePayment
    {
        guard case .accept(let record) = decide(request, token, at: at) else {
            throw CancellationError()
        }
        return StoredOfflinePayment(record: record, state: state, updatedAt: now)
    }

    @Test func theDefaultsAreThoseOfTheDocumentation() {
        let limits = OfflineLimits.defaults(for: .eur)
        #expect(limits.perPayment == euros(50_00))
        #expect(limits.totalStored == euros(200_00))
        #expect(limits.maximumStoredCount == 20)
        #expect(limits.maximumAge == 86_400)
        #expect(OfflineLimits.defaults(for: .jpy).perPayment.minorUnits == 50)
    }

    @Test func aValidTokenCoveringThePaymentIsAccepted() throws {
        let token = try token()
        guard case .accept(let record) = decide(try request(40_00, tip: 5_00), token) else {
            Issue.record("refused")
            return
        }
        #expect(record.totalMinorUnits == 45_00)
        #expect(record.dailyToken == token)
        #expect(record.signedConfirmation == [9])
        #expect(record.acceptedAt == now)
    }

    @Test func refusals() throws {
        let eur = try request(10_00)
        #expect(decide(eur, []) == .refuse("offline and no valid daily token: the wallet presented none"))
        #expect(
            decide(eur, try token(for: P256.Signing.PrivateKey().publicKey))
                == .refuse("offline and no valid daily token: the daily token belongs to another wallet key"))
        #expect(
            decide(eur, try token(expiresAt: now - 1))
                == .refuse(
                    "offline and no valid daily token: the daily token expired at \(now - 1) (now \(now)); fetch a new one"
                ))
        let stranger = P256.Signing.PrivateKey()
        guard case .refuse(let reason) = decide(eur, try token(issuer: stranger)) else {
            Issue.record("a token of another issuer was accepted")
            return
        }
        #expect(reason.hasPrefix("offline and no valid daily token: the daily token is signed by issuer"))
        #expect(
            decide(eur, try token(currency: .usd))
                == .refuse("offline and no valid daily token: the token is for USD, the payment in EUR"))
        var altered = try token()
        altered[100] ^= 1
        guard case .refuse = decide(eur, altered) else {
            Issue.record("an altered token was accepted")
            return
        }
    }

    @Test func aCardPaymentIsNotAcceptedOffline() throws {
        var random = SystemRandomNumberGenerator()
        func confirm(_ method: PaymentMethod) throws -> SettlementRequest {
            let confirm = try Confirm(
                sessionID: try #require(SessionID(rawValue: 7)),
                terminalKeyDigest: try DigestBytes(bytes: [UInt8](repeating: 2, count: 32)),
                walletKey: try PublicKeyBytes(bytes: Array(wallet.publicKey.x963Representation)),
                offerDigest: try DigestBytes(bytes: [UInt8](repeating: 3, count: 32)), amount: euros(10_00),
                tip: euros(0), paymentID: PaymentID.random(using: &random), walletNonce: Nonce.random(using: &random),
                expiresAt: now + 600, paymentMethod: method)
            let base = try request(10_00)
            return SettlementRequest(
                paymentID: confirm.paymentID, sessionID: base.sessionID, walletKey: base.walletKey,
                terminalKeyID: base.terminalKeyID, amount: base.amount, tip: base.tip, registerUser: "",
                contentDigest: [1], signedConfirmation: SessionMessage.confirm(confirm).encoded())
        }
        #expect(
            decide(try confirm(.card(id: "card_1")), try token())
                == .refuse("offline: a card payment needs the server; pay from the account balance"))
        guard case .accept = decide(try confirm(.accountBalance), try token()) else {
            Issue.record("an account-balance payment was refused")
            return
        }
    }

    /// The server settles an offline payment only if it was accepted within 600 s before the
    /// expiry the wallet signed, so the terminal does not accept one it would be refused.
    @Test func aConfirmationValidLongerThanTheOfflineWindowIsNotAcceptedOffline() throws {
        var random = SystemRandomNumberGenerator()
        func confirm(expiresAt: UnixTime) throws -> SettlementRequest {
            let confirm = try Confirm(
                sessionID: try #require(SessionID(rawValue: 7)),
                terminalKeyDigest: try DigestBytes(bytes: [UInt8](repeating: 2, count: 32)),
                walletKey: try PublicKeyBytes(bytes: Array(wallet.publicKey.x963Representation)),
                offerDigest: try DigestBytes(bytes: [UInt8](repeating: 3, count: 32)), amount: euros(10_00),
                tip: euros(0), paymentID: PaymentID.random(using: &random), walletNonce: Nonce.random(using: &random),
                expiresAt: expiresAt)
            let base = try request(10_00)
            return SettlementRequest(
                paymentID: confirm.paymentID, sessionID: base.sessionID, walletKey: base.walletKey,
                terminalKeyID: base.terminalKeyID, amount: base.amount, tip: base.tip, registerUser: "",
                contentDigest: [1], signedConfirmation: SessionMessage.confirm(confirm).encoded())
        }
        #expect(
            decide(try confirm(expiresAt: now + 601), try token())
                == .refuse(
                    "offline: the wallet's confirmation is valid until \(now + 601), more than 600 s from now (\(now)); check the wallet's clock"
                ))
        guard case .accept = decide(try confirm(expiresAt: now + 600), try token()) else {
            Issue.record("a confirmation within the window was refused")
            return
        }
    }

    @Test func theTokenBoundsWhatThisTerminalTakesUnderIt() throws {
        let token = try token(allowance: 30_00)
        let first = try stored(try request(20_00, id: 1), token: token)
        #expect(
            decide(try request(15_00, id: 2), token, stored: [first])
                == .refuse(
                    "offline and no valid daily token: the token allows 10.00 EUR more, the payment is 15.00 EUR"))
        guard case .accept = decide(try request(10_00, id: 2), token, stored: [first]) else {
            Issue.record("the rest of the allowance was refused")
            return
        }
        // A payment the server declined does not use the allowance up.
        let declined = try stored(try request(20_00, id: 1), token: token, state: .declined)
        guard case .accept = decide(try request(25_00, id: 3), token, stored: [declined]) else {
            Issue.record("a declined payment still counted")
            return
        }
    }

    @Test func theMerchantsLimits() throws {
        let token = try token(allowance: 1_000_00)
        #expect(
            decide(try request(45_00, tip: 6_00), token)
                == .refuse("offline limit reached: 51.00 EUR is above 50.00 EUR per offline payment"))
        let four = try (1...4).map { try stored(try request(45_00, id: UInt8($0)), token: token) }
        #expect(
            decide(try request(25_00, id: 9), token, stored: four)
                == .refuse("offline limit reached: 180.00 EUR stored and 25.00 EUR more is above 200.00 EUR in total"))
        // Forwarded payments no longer count against the merchant's limits.
        let settled = four.map { StoredOfflinePayment(record: $0.record, state: .settled, updatedAt: now) }
        guard case .accept = decide(try request(25_00, id: 9), token, stored: settled) else {
            Issue.record("settled payments still counted against the total")
            return
        }
        var fewer = OfflineLimits.defaults(for: .eur)
        fewer.maximumStoredCount = 2
        #expect(
            decide(try request(1_00, id: 9), token, limits: fewer, stored: Array(four.prefix(2)))
                == .refuse("offline limit reached: 2 payments are stored already (at most 2)"))
        let old = try stored(try request(1_00, id: 8), token: token, at: now)
        let later = now + 86_400 + 3600
        let laterToken = try DailyToken.issue(
            by: anchor, walletKey: wallet.publicKey, walletAccountID: "w_1",
            allowance: Money(minorUnits: 100_00, currency: .eur), issuedAt: later - 60, expiresAt: later + 3600,
            revocation: DailyToken.RevocationState(revokedKeyIDs: [])
        ).encoded()
        #expect(
            decide(try request(1_00, id: 9), laterToken, stored: [old], at: later)
                == .refuse(
                    "offline limit reached: the oldest stored payment is 25 h old (at most 24 h); forward it first"))
    }
}

// MARK: - Forwarding

/// The server's offline endpoint as a fake: settles each payment id once and answers a repeat as
/// already settled; records every call. `crashOn` makes the call for that id "crash" the terminal
/// after the server settled it (the answer never reaches the journal).
private final class RecordingServer: OfflinePaymentForwarder {
    struct Crash: Error {}
    private let state = Mutex<(sent: [PaymentID], settled: Set<PaymentID>, crashOn: PaymentID?, reachable: Bool)>(
        ([], [], nil, true))

    init(crashOn: PaymentID? = nil, reachable: Bool = true) {
        state.withLock {
            $0.crashOn = crashOn
            $0.reachable = reachable
        }
    }

    func forward(_ payment: OfflinePaymentRecord) async throws -> OfflineForwardOutcome {
        try state.withLock { state in
            guard state.reachable else { throw ProcessorError.unavailable("connection refused") }
            state.sent.append(payment.paymentID)
            let first = state.settled.insert(payment.paymentID).inserted
            if state.crashOn == payment.paymentID {
                state.crashOn = nil
                throw Crash()
            }
            return first ? .settled : .alreadySettled
        }
    }

    var sent: [PaymentID] { state.withLock { $0.sent } }
    var settledCount: Int { state.withLock { $0.settled.count } }
}

@Suite("Forwarding offline payments exactly once", .offTheCooperativePool)
struct OfflineForwardingTests {
    /// A journal holding three offline payments, as the radio test leaves it.
    func journalWithThreePayments(at path: String) throws -> (SQLiteTerminalJournal, [PaymentID]) {
        let journal = try SQLiteTerminalJournal(path: path)
        let rules = OfflineAcceptanceRuleTests()
        let token = try rules.token(allowance: 100_00)
        var ids: [PaymentID] = []
        for index in 1...3 {
            let request = try rules.request(Int64(index) * 10_00, id: UInt8(index))
            guard case .accept(let record) = rules.decide(request, token, at: rules.now + Int64(index)) else {
                throw CancellationError()
            }
            try journal.write([.confirmed(.payment(request)), .submitted(request.paymentID)], at: rules.now)
            let receipt = try Receipt(
                sessionID: request.sessionID, transactionType: .payment, paymentID: request.paymentID,
                outcome: .acceptedOffline, amount: request.amount, tip: request.tip, transactionReference: 0,
                settledAt: rules.now, bonusPointsEarned: 0, bonusPointsBalance: 0)
            try journal.storeOffline(record, answer: .receipt(receipt), at: record.acceptedAt)
            ids.append(request.paymentID)
        }
        return (journal, ids)
    }

    func path() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("offline-\(UUID().uuidString).sqlite").path
    }

    @Test func eachPaymentIsForwardedOnceOldestFirst() async throws {
        let file = path()
        defer { try? FileManager.default.removeItem(atPath: file) }
        let (journal, ids) = try journalWithThreePayments(at: file)
        let server = RecordingServer()
        let forwarding = OfflineForwarding(store: journal, forwarder: server, clock: { 1_800_000_100 })
        let report = try await forwarding.forwardStored()
        #expect(report.settled == ids)
        #expect(report.interruption == nil)
        #expect(server.sent == ids)
        #expect(try journal.offlinePayments().map(\.state) == [.settled, .settled, .settled])
        #expect(try journal.offlinePayments().map(\.forwardAttempts) == [1, 1, 1])
        // A second run has nothing to send.
        let again = try await forwarding.forwardStored()
        #expect(again.settled.isEmpty)
        #expect(server.sent == ids)
        #expect(try !forwarding.hasOutstanding())
    }

    @Test func anUnreachableServerLeavesThePaymentsOwed() async throws {
        let file = path()
        defer { try? FileManager.default.removeItem(atPath: file) }
        let (journal, ids) = try journalWithThreePayments(at: file)
        let forwarding = OfflineForwarding(
            store: journal, forwarder: RecordingServer(reachable: false), clock: { 1_800_000_100 })
        let report = try await forwarding.forwardStored()
        #expect(report.settled.isEmpty)
        #expect(report.outstanding == 3)
        #expect(report.interruption?.contains("unreachable") == true)
        #expect(try journal.offlinePayments().map(\.state) == [.forwarding, .stored, .stored])
        #expect(try forwarding.hasOutstanding())
        _ = ids
    }

    /// The terminal dies after the server settled the second payment and before the answer was
    /// journaled: the journal says `forwarding`; the next run (a new process: the journal opened
    /// again) sends the same payment id again, the server settles it once, the journal ends
    /// settled.
    @Test func aCrashMidForwardResendsTheSameIDAndSettlesOnce() async throws {
        let file = path()
        defer { try? FileManager.default.removeItem(atPath: file) }
        let (journal, ids) = try journalWithThreePayments(at: file)
        let server = RecordingServer(crashOn: ids[1])
        let first = OfflineForwarding(store: journal, forwarder: server, clock: { 1_800_000_100 })
        let interrupted = try await first.forwardStored()
        #expect(interrupted.settled == [ids[0]])
        #expect(try journal.offlinePayments().map(\.state) == [.settled, .forwarding, .stored])

        let reopened = try SQLiteTerminalJournal(path: file)
        let second = OfflineForwarding(store: reopened, forwarder: server, clock: { 1_800_000_200 })
        let report = try await second.forwardStored()
        #expect(report.settled == [ids[1], ids[2]])
        #expect(server.sent == [ids[0], ids[1], ids[1], ids[2]], "the same id again, nothing else twice")
        #expect(server.settledCount == 3)
        #expect(try reopened.offlinePayments().map(\.state) == [.settled, .settled, .settled])
        #expect(try reopened.offlinePayments().map(\.forwardAttempts) == [1, 2, 1])
    }

    @Test func aDeclineIsKeptWithTheServersCodeAndReason() async throws {
        struct Declining: OfflinePaymentForwarder {
            func forward(_ payment: OfflinePaymentRecord) async throws -> OfflineForwardOutcome {
                .declined(code: "offline_allowance_exceeded", reason: "the token's allowance is spent")
            }
        }
        let file = path()
        defer { try? FileManager.default.removeItem(atPath: file) }
        let (journal, _) = try journalWithThreePayments(at: file)
        let report = try await OfflineForwarding(store: journal, forwarder: Declining(), clock: { 1 }).forwardStored()
        #expect(report.declined.count == 3)
        let stored = try journal.offlinePayments()
        #expect(stored.map(\.state) == [.declined, .declined, .declined])
        #expect(stored.first?.declineCode == "offline_allowance_exceeded")
        #expect(stored.first?.declineReason == "the token's allowance is spent")
        // Settled or declined, a payment cannot be forwarded again.
        #expect(throws: JournalError.self) { try journal.markOfflineForwarding(stored[0].record.paymentID, at: 2) }
    }
}
