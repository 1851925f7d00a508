import Crypto
import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

/// Each test performs one attack from radio range with a scripted central or terminal on the
/// simulated radio, and checks that the rule it tries to break still holds (`docs/guarantees.md`,
/// "Nobody in radio range can end, time out, hide or relay a sale").
@Suite("Attacks from radio range", .offTheCooperativePool)
struct AttackTests {
    static let connectionInterval = LinkParameters().connectionInterval

    // MARK: Only a proven wallet owns a session

    /// Rogue centrals complete the handshake and say hello with a fresh key each, declining at
    /// once in one variant, before the customer's wallet arrives: the honest wallet still pays in
    /// its normal time, and the journal holds one `offered` row.
    @Test(arguments: [false, true])
    func rogueHellosWithFreshKeysNeitherTakeNorEndNorBlockTheSession(declining: Bool) throws {
        let normal = try FloodLimitTests.honestPaymentAlone()
        let world = try World(seed: 71)
        let terminal = try world.terminal()
        #expect(terminal.host.start(amount: euros(1250)))
        let session = try #require(terminal.host.sessionID)
        var rogues: [ScriptedCentral] = []
        for index in 0..<3 {
            rogues.append(
                try ScriptedCentral(
                    world: world, name: "rogue-\(index)", at: Position(x: -0.5, y: Double(index) * 0.1),
                    terminal: terminal.device.address, session: session
                ) { connection in
                    connection.send(.hello(connection.hello()))
                    if declining {
                        connection.send(.cancel(Cancel(sessionID: connection.sessionID, reason: .userDeclined)))
                    }
                })
        }
        world.run(for: FloodLimitTests.walletArrives)
        #expect(rogues.allSatisfy { $0.offers.count == 1 }, "every proven hello is shown the offer")
        #expect(terminal.host.state == (declining ? .waitingForWallet : .awaitingUserDecision))
        #expect(!terminal.host.state.isFinished)

        let wallet = try world.wallet()
        let watch = Stopwatch(wallet.client, simulation: world.simulation)
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 100))
        _ = app
        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
        let attacked = try #require(watch.acceptanceToReceipt)
        #expect(attacked <= normal + Self.connectionInterval, "alone \(normal), with rogues \(attacked)")
        #expect(try terminal.ledger.transactions().count == 1)
        #expect(try terminal.ledger.merchantBalance() == euros(1350))
        #expect(try terminal.journal.history().filter { $0.step == .offered }.count == 1)
    }

    /// A rogue's Hello (declining at once in one variant) must not start the clock on the
    /// customer's decision: the customer's wallet arrives 7 s into a 10 s decision timeout
    /// counted from the rogue's Hello, takes 5 s to decide (within its own 10 s), and pays.
    @Test(arguments: [false, true])
    func aRoguesHelloDoesNotStartTheClockOnTheCustomersDecision(declining: Bool) throws {
        let timeout = Duration.seconds(10)
        let world = try World(seed: 73)
        let terminal = try world.terminal(host: PaymentHostConfiguration(userDecisionTimeout: timeout))
        #expect(terminal.host.start(amount: euros(800)))
        let rogue = try ScriptedCentral(
            world: world, name: "rogue", at: Position(x: -0.5, y: 0), terminal: terminal.device.address,
            session: try #require(terminal.host.sessionID)
        ) { connection in
            connection.send(.hello(connection.hello()))
            if declining {
                connection.send(.cancel(Cancel(sessionID: connection.sessionID, reason: .userDeclined)))
            }
        }
        #expect(world.run(until: { rogue.offers.count == 1 }))
        world.run(for: timeout - .seconds(3))

        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(world.run(until: { wallet.client.state == .offerReceived }, timeout: .seconds(2)))
        world.run(for: .seconds(5))  // the person reads the offer
        wallet.client.onHostConnected = { [client = wallet.client] in
            client.setOrderConfirmedByUser(true, tip: euros(0))
        }
        wallet.decider.decideForCandidate()
        wallet.client.connectToPaymentSession()
        #expect(world.run(until: { wallet.client.state.isFinished && terminal.host.state.isFinished }))
        // Each offer starts the decision time afresh: the customer's 10 s run from its own offer.
        #expect(wallet.client.state == .completed, "wallet: \(String(describing: wallet.client.error))")
        #expect(terminal.host.state == .completed, "terminal: \(String(describing: terminal.host.error))")
        #expect(try terminal.ledger.merchantBalance() == euros(800))
    }

    /// A Hello whose key is off the curve, whose proof another key made, or whose proof was made
    /// on another connection gets no offer and its connection is closed.
    @Test func hellosWithoutProofOfTheirKeyGetNoOffer() throws {
        let world = try World()
        let terminal = try world.terminal()
        #expect(terminal.host.start(amount: euros(500)))
        let session = try #require(terminal.host.sessionID)
        let offCurve = try PublicKeyBytes(bytes: [0x04] + [UInt8](repeating: 0x01, count: 64))
        let other = P256.Signing.PrivateKey()
        let foreignTranscript = [UInt8](repeating: 0xAB, count: 32)
        let forgeries: [@Sendable (ScriptedCentral.Connection) -> Hello] = [
            { Hello(sessionID: $0.sessionID, transactionType: .payment, sessionKey: offCurve) },
            { connection in
                let unsigned = Hello(
                    sessionID: connection.sessionID, transactionType: .payment,
                    sessionKey: publicKey(P256.Signing.PrivateKey()))
                return unsigned.withProof(
                    sign(unsigned.proofBytes(transcriptHash: connection.transcriptHash), with: other))
            },
            { connection in
                let key = P256.Signing.PrivateKey()
                let unsigned = Hello(
                    sessionID: connection.sessionID, transactionType: .payment, sessionKey: publicKey(key))
                return unsigned.withProof(sign(unsigned.proofBytes(transcriptHash: foreignTranscript), with: key))
            },
        ]
        var centrals: [ScriptedCentral] = []
        for (index, forge) in forgeries.enumerated() {
            centrals.append(
                try ScriptedCentral(
                    world: world, name: "forger-\(index)", terminal: terminal.device.address, session: session
                ) { connection in connection.send(.hello(forge(connection))) })
        }
        world.run(for: .seconds(2))
        for central in centrals {
            #expect(central.offers.isEmpty)
            #expect(central.errors.map(\.code) == [.badSignature])
            #expect(central.hasEnded)
        }
        #expect(terminal.service.refusedHelloCount == 3)
        #expect(terminal.host.state == .waitingForWallet)
        #expect(try terminal.journal.history().isEmpty)
    }

    // MARK: What the person saw is what is signed

    /// A terminal that shows 1.00 EUR and then sends a 100.00 EUR offer on the same connection
    /// ends the attempt: nothing is signed, and the app cannot confirm anymore.
    @Test func aSecondDifferentOfferEndsTheAttemptBeforeAnythingIsSigned() throws {
        let world = try World()
        var random = SystemRandomNumberGenerator()
        let session = SessionID.random(using: &random)
        let cheap = Shared<Offer?>(nil)
        let scripted = try ScriptedTerminal(world: world, name: "repricer", at: .origin, sessionID: session) {
            connection, message in
            guard case .hello = message, let first = cheap.value else { return }
            connection.send(.offer(first))
            connection.send(.offer(first))  // the same one again is harmless
            var random = SystemRandomNumberGenerator()
            if let dear = try? Offer(
                sessionID: first.sessionID, transactionType: .payment, amount: euros(10_000), registerUser: "Ana",
                merchantPrograms: .none, offerNonce: Nonce.random(using: &random), expiresAt: first.expiresAt)
            {
                world.simulation.schedule(after: .milliseconds(300)) {
                    connection.send(.offer(connection.signed(dear)))
                }
            }
        }
        cheap.value = scripted.signed(try scripted.offer(100))
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        #expect(wallet.client.offer?.amount == euros(100))
        #expect(world.run(until: { wallet.client.state.isFinished }))
        guard case .invalidOffer(let reason)? = wallet.client.error else {
            Issue.record("expected invalidOffer, got \(String(describing: wallet.client.error))")
            return
        }
        #expect(reason.contains("the amount changed from 1.00 EUR to 100.00 EUR"), "\(reason)")
        wallet.decider.decideForCandidate()
        #expect(!wallet.client.setOrderConfirmedByUser(true, tip: euros(0)))
        world.run(for: .seconds(1))
        #expect(scripted.confirms.isEmpty)
        #expect(wallet.client.pendingPayment == nil)
    }

    /// The app confirms naming the offer it displayed: an offer from another attempt is refused,
    /// the one on screen is paid.
    @Test func aConfirmationNamingAnotherOfferThanTheOneShownIsRefused() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(100)))
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        let earlier = try #require(wallet.client.offer)
        wallet.decider.decideAgainstCandidate()
        world.run(for: .seconds(1))
        #expect(terminal.host.stop())
        wallet.client.restart()
        wallet.decider.restart()

        #expect(terminal.host.start(amount: euros(9_900)))
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        let shown = try #require(wallet.client.offer)
        #expect(shown.digest != earlier.digest)
        wallet.decider.decideForCandidate()
        wallet.client.connectToPaymentSession()
        #expect(!wallet.client.setOrderConfirmedByUser(true, tip: euros(0), for: earlier))
        guard case .invalidOffer? = wallet.client.error else {
            Issue.record("expected invalidOffer, got \(String(describing: wallet.client.error))")
            return
        }
        #expect(wallet.client.pendingPayment == nil)
        #expect(wallet.client.setOrderConfirmedByUser(true, tip: euros(0), for: shown))
        #expect(world.run(until: { wallet.client.state == .completed }))
        #expect(try terminal.ledger.merchantBalance() == euros(9_900))
    }

    /// A receipt for the right payment id but another amount is not stored: the payment stays
    /// pending, to be asked for again, and the wallet says why.
    @Test func aReceiptThatDoesNotMatchTheConfirmationIsNotStored() throws {
        let world = try World()
        var random = SystemRandomNumberGenerator()
        let session = SessionID.random(using: &random)
        let offer = Shared<Offer?>(nil)
        let scripted = try ScriptedTerminal(world: world, name: "liar", at: .origin, sessionID: session) {
            connection, message in
            switch message {
            case .hello: if let offer = offer.value { connection.send(.offer(offer)) }
            case .confirm(let confirm):
                if let receipt = try? Receipt(
                    sessionID: confirm.sessionID, transactionType: .payment, paymentID: confirm.paymentID,
                    outcome: .approved, amount: euros(50_000), tip: confirm.tip, transactionReference: 1,
                    settledAt: World.wallClock, bonusPointsEarned: 0, bonusPointsBalance: 0)
                {
                    connection.send(.receipt(connection.signed(receipt)))
                }
            default: break
            }
        }
        offer.value = scripted.signed(try scripted.offer(500))
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app
        #expect(world.run(until: { wallet.client.error != nil }))
        #expect(wallet.client.error == .receiptMismatch("amount 500.00 EUR, confirmed 5.00 EUR"))
        #expect(wallet.client.receipt == nil)
        #expect(wallet.client.pendingPayment != nil, "still pending, never 'paid 500'")
        #expect(wallet.client.state != .completed)
    }

    // MARK: Repeated or flooding messages cost nothing durable

    /// 10,000 Hellos on one connection: with the message rate limit the connection is closed
    /// after the first few; without it, repeats are ignored (one offer). Either way one
    /// `offered` row, and the honest wallet pays in its normal time.
    @Test(arguments: [20, 1_000_000])
    func tenThousandHellosOnOneConnectionLeaveOneRow(messageLimit: Int) throws {
        let normal = try FloodLimitTests.honestPaymentAlone()
        let world = try World(seed: 71)
        let terminal = try world.terminal(service: TerminalServiceConfiguration(maximumMessagesPerWindow: messageLimit))
        #expect(terminal.host.start(amount: euros(1250)))
        let rogue = try ScriptedCentral(
            world: world, name: "hello-flood", at: Position(x: -0.5, y: 0), terminal: terminal.device.address,
            session: try #require(terminal.host.sessionID)
        ) { connection in
            let hello = SessionMessage.hello(connection.hello())
            for _ in 0..<10_000 { connection.send(hello) }
        }
        world.run(for: FloodLimitTests.walletArrives)
        let wallet = try world.wallet()
        let watch = Stopwatch(wallet.client, simulation: world.simulation)
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 100))
        _ = app
        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
        let flooded = try #require(watch.acceptanceToReceipt)
        #expect(flooded <= normal + Self.connectionInterval, "alone \(normal), flooded \(flooded)")
        #expect(rogue.offers.count <= 1)
        if messageLimit == 20 {
            #expect(terminal.service.messageRateClosureCount == 1)
            #expect(rogue.hasEnded)
        }
        #expect(try terminal.journal.history().filter { $0.step == .offered }.count == 1)
        #expect(try terminal.journal.history().count == 4, "offered, confirmed, submitted, result")
    }

    // MARK: A clone does not block the real terminal

    /// A clone of the real advertisement stands nearer; the wallet tries it first, the handshake
    /// refuses it, and the real terminal's session (the same session id) is then offered and paid.
    @Test func aNearerCloneRefusedAtTheHandshakeDoesNotHideTheRealTerminal() throws {
        let world = try World()
        let real = try world.terminal("real", at: Position(x: 1.2, y: 0))
        let wallet = try world.wallet(at: .origin)
        #expect(real.host.start(amount: euros(1000)))
        let sessionID = try #require(real.host.sessionID)
        let keyID = try #require(real.service.terminalKeyID)
        let clone = try world.simulation.addDevice(
            name: "clone", configuration: DeviceConfiguration(position: Position(x: 0.1, y: 0)))
        // It answers the handshake with a credential of its own, which the wallet cannot trust
        // for this terminal's key id.
        let cloneKey = P256.Signing.PrivateKey()
        let cloneService = TerminalRadioService(
            radio: clone,
            identity: try TerminalIdentity(
                signingKey: cloneKey,
                credential: TerminalCredential.issue(
                    by: P256.Signing.PrivateKey(), merchantID: "m-real", merchantName: "Café Horizon",
                    terminalKey: cloneKey.publicKey, notBefore: World.wallClock - 10, expiresAt: World.wallClock + 1000)
            ),
            processor: try InProcessLedgerFactory.make(in: world), journal: try SQLiteTerminalJournal(path: ":memory:"))
        _ = cloneService
        _ = try clone.startAdvertising(
            HorizonAdvertisement(transactionType: .payment, sessionID: sessionID, terminalKeyID: keyID)
                .advertisingData(), interval: .milliseconds(50))
        #expect(world.run(until: { wallet.decider.candidate?.peripheralMetaData.address == clone.address }))
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app
        #expect(world.run(until: { wallet.client.state.isFinished }))
        guard case .terminalNotTrusted = wallet.client.error else {
            Issue.record("expected the clone refused, got \(String(describing: wallet.client.error))")
            return
        }
        // The app starts over, as after any error: the real terminal is offered and paid.
        wallet.client.restart()
        wallet.decider.restart()
        #expect(world.run(until: { wallet.client.state == .completed }))
        #expect(wallet.client.receipt?.sessionID == sessionID)
        #expect(try real.ledger.merchantBalance() == euros(1000))
    }

    // MARK: Relay and look-alike terminals

    /// The wallet shows the terminal's label and the anchor that vouched, and the same six
    /// digits as the register; the next session shows another code.
    @Test func theWalletShowsTheLabelTheAnchorAndTheRegistersCodeWhichDiffersPerSession() throws {
        let world = try World()
        let terminal = try world.terminal(label: "Till 2, Market St")
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        var codes: [ConfirmationCode] = []
        for cents: Int64 in [100, 200] {
            #expect(terminal.host.start(amount: euros(cents)))
            #expect(world.run(until: { wallet.client.state == .offerReceived }))
            let offer = try #require(wallet.client.offer)
            #expect(offer.terminalLabel == "Till 2, Market St")
            #expect(offer.merchantName == "Café Horizon")
            #expect(offer.vouchedBy == "Horizon")
            #expect(offer.confirmationCode.digits.count == 6)
            #expect(terminal.host.lastWalletNotice == .offered(offer.confirmationCode))
            codes.append(offer.confirmationCode)
            wallet.decider.decideAgainstCandidate()
            world.run(for: .seconds(1))
            #expect(terminal.host.stop())
            wallet.client.restart()
            wallet.decider.restart()
        }
        #expect(codes[0] != codes[1])
    }

    /// An anchor limited to other merchant ids cannot vouch for this terminal; limited to its
    /// merchant id, it can.
    @Test func anAnchorScopedToOtherMerchantsIsRefused() throws {
        let world = try World()
        let terminal = try world.terminal()  // merchant id "m-terminal"
        let scoped = TrustAnchor(publicKey: world.anchorKey.publicKey, name: "Acme", merchantIDs: ["m-acme"])
        let wallet = try world.wallet(anchors: [scoped])
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app
        #expect(terminal.host.start(amount: euros(300)))
        #expect(world.run(until: { wallet.client.state.isFinished }))
        #expect(wallet.client.error == .terminalNotTrusted("trust anchor Acme may not vouch for merchant m-terminal"))
        #expect(try terminal.ledger.transactions().isEmpty)

        let allowed = TrustAnchor(publicKey: world.anchorKey.publicKey, name: "Acme", merchantIDs: ["m-terminal"])
        let second = try world.wallet("second", anchors: [allowed])
        let secondApp = ScriptedWalletApp(second, decision: .accept(tip: 0))
        _ = secondApp
        #expect(world.run(until: { second.client.state == .completed }))
        #expect(second.client.offer?.vouchedBy == "Acme")
    }

    // MARK: No tracking

    /// One wallet says hello to two terminals: the two Hellos share no 8-byte run outside the
    /// envelope, and neither carries the wallet's long-term key.
    @Test func hellosToTwoTerminalsShareNoStableBytes() throws {
        let world = try World()
        var random = SystemRandomNumberGenerator()
        let wallet = try world.wallet(at: .origin)
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        var terminals: [ScriptedTerminal] = []
        for (index, x) in [0.3, -0.3].enumerated() {
            let offer = Shared<Offer?>(nil)
            let terminal = try ScriptedTerminal(
                world: world, name: "shop-\(index)", at: Position(x: x, y: 0),
                sessionID: SessionID.random(using: &random)
            ) { connection, message in
                if case .hello = message, let offer = offer.value { connection.send(.offer(offer)) }
            }
            offer.value = terminal.signed(try terminal.offer(100))
            terminals.append(terminal)
        }
        // The first terminal alone, then the second alone.
        terminals[1].stopAdvertising()
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        wallet.decider.decideAgainstCandidate()
        world.run(for: .seconds(1))
        terminals[0].stopAdvertising()
        try terminals[1].startAdvertising()
        wallet.client.restart()
        wallet.decider.restart()
        #expect(world.run(until: { wallet.client.state == .offerReceived }))

        let hellos = terminals.compactMap(\.hellos.first)
        #expect(hellos.count == 2)
        func windows(_ bytes: [UInt8]) -> Set<[UInt8]> {
            Set((0...(bytes.count - 8)).map { Array(bytes[$0..<($0 + 8)]) })
        }
        let bodies = hellos.map { $0.sessionKey.bytes + $0.proof.bytes }
        #expect(windows(bodies[0]).isDisjoint(with: windows(bodies[1])))
        let longTerm = windows(wallet.identity.publicKey.bytes)
        for hello in hellos {
            #expect(windows(SessionMessage.hello(hello).encoded()).isDisjoint(with: longTerm))
        }
    }

    // MARK: Bindings are complete

    /// After a payment, a confirmation reusing its id with another tip (signed by the same
    /// wallet) is refused as a conflict: no receipt, nothing charged again.
    @Test func aRetryOfAPaidIdWithOtherTermsIsAConflictNotTheOldReceipt() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 100))
        _ = app
        #expect(terminal.host.start(amount: euros(700)))
        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
        let paid = try #require(wallet.client.receipt)
        #expect(terminal.host.stop())
        wallet.client.stop()
        #expect(terminal.host.start(amount: euros(700)))
        let session = try #require(terminal.host.sessionID)
        let identity = wallet.identity
        let keyDigest = try DigestBytes(bytes: terminal.identity.keyDigest)
        let central = try ScriptedCentral(
            world: world, name: "replayer", terminal: terminal.device.address, session: session
        ) { connection in
            connection.send(.hello(connection.hello()))
            var random = SystemRandomNumberGenerator()
            guard
                let confirm = try? Confirm(
                    sessionID: paid.sessionID, terminalKeyDigest: keyDigest, walletKey: identity.publicKey,
                    offerDigest: DigestBytes(bytes: [UInt8](repeating: 1, count: 32)), amount: euros(700),
                    tip: euros(900), paymentID: paid.paymentID, walletNonce: Nonce.random(using: &random),
                    expiresAt: World.wallClock + 600)
            else { return }
            connection.send(.confirm(confirm.withSignature(sign(confirm.signedBytes, with: identity.signingKey))))
        }
        world.run(for: .seconds(2))
        #expect(central.receipts.isEmpty)
        #expect(central.errors.contains { $0.code == .duplicatePaymentConflict && $0.paymentID == paid.paymentID })
        #expect(try terminal.ledger.executionCount(of: paid.paymentID) == 1)
        #expect(try terminal.ledger.merchantBalance() == euros(800))
    }

    /// A confirmation that binds another terminal's key (full digest) is refused naming its id;
    /// the same confirmation binding this terminal's key is executed.
    @Test func aConfirmationBindingAnotherTerminalsKeyIsRefused() throws {
        let world = try World()
        let terminal = try world.terminal()
        #expect(terminal.host.start(amount: euros(400)))
        let walletKey = P256.Signing.PrivateKey()
        let right = try DigestBytes(bytes: terminal.identity.keyDigest)
        let wrong = try DigestBytes(
            bytes: Array(SHA256.hash(data: P256.Signing.PrivateKey().publicKey.x963Representation)))
        let central = try ScriptedCentral(
            world: world, name: "binder", terminal: terminal.device.address,
            session: try #require(terminal.host.sessionID)
        ) { connection in connection.send(.hello(connection.hello())) }
        #expect(world.run(until: { central.offers.count == 1 }))
        let offer = try #require(central.offers.first)
        let offerDigest = try DigestBytes(bytes: Array(SHA256.hash(data: SessionMessage.offer(offer).encoded())))
        var random = SystemRandomNumberGenerator()
        func confirm(binding digest: DigestBytes) throws -> SessionMessage {
            let unsigned = try Confirm(
                sessionID: offer.sessionID, terminalKeyDigest: digest, walletKey: publicKey(walletKey),
                offerDigest: offerDigest, amount: offer.amount, tip: euros(0),
                paymentID: PaymentID.random(using: &random), walletNonce: Nonce.random(using: &random),
                expiresAt: World.wallClock + 600)
            return .confirm(unsigned.withSignature(sign(unsigned.signedBytes, with: walletKey)))
        }
        let link = try #require(central.connection)
        link.send(try confirm(binding: wrong))
        world.run(for: .seconds(1))
        #expect(central.errors.map(\.message) == ["the confirmation names another terminal"])
        #expect(try terminal.ledger.transactions().isEmpty)
        link.send(try confirm(binding: right))
        #expect(world.run(until: { central.receipts.count == 1 }))
        #expect(try terminal.ledger.merchantBalance() == euros(400))
    }

    /// A payment intent's sale: the signed offer carries the intent's id, and a confirmation
    /// under any other payment id is refused unexecuted (the intent's id is the payment's
    /// idempotency key end to end, so a wallet cannot pay it twice or under a fresh id); the
    /// confirmation under the offer's id is executed, under that id.
    @Test func aConfirmationUnderAnotherPaymentIDThanTheIntentsOfferIsRefused() throws {
        let world = try World()
        let terminal = try world.terminal()
        var random = SystemRandomNumberGenerator()
        let intentID = PaymentID.random(using: &random)
        #expect(terminal.host.start(amount: euros(700), paymentID: intentID, orderReference: "ORDER-1"))
        let walletKey = P256.Signing.PrivateKey()
        let central = try ScriptedCentral(
            world: world, name: "other-id", terminal: terminal.device.address,
            session: try #require(terminal.host.sessionID)
        ) { connection in connection.send(.hello(connection.hello())) }
        #expect(world.run(until: { central.offers.count == 1 }))
        let offer = try #require(central.offers.first)
        #expect(offer.paymentID == intentID, "the offer names the intent's id")
        let offerDigest = try DigestBytes(bytes: Array(SHA256.hash(data: SessionMessage.offer(offer).encoded())))
        func confirm(under paymentID: PaymentID) throws -> SessionMessage {
            let unsigned = try Confirm(
                sessionID: offer.sessionID, terminalKeyDigest: try DigestBytes(bytes: terminal.identity.keyDigest),
                walletKey: publicKey(walletKey), offerDigest: offerDigest, amount: offer.amount, tip: euros(0),
                paymentID: paymentID, walletNonce: Nonce.random(using: &random), expiresAt: World.wallClock + 600)
            return .confirm(unsigned.withSignature(sign(unsigned.signedBytes, with: walletKey)))
        }
        let link = try #require(central.connection)
        let other = PaymentID.random(using: &random)
        link.send(try confirm(under: other))
        world.run(for: .seconds(1))
        #expect(central.errors.map(\.code) == [.protocolViolation])
        #expect(central.errors.map(\.paymentID) == [other])
        #expect(central.errors.map(\.message) == ["the confirmation's payment id is not the one the offer asked for"])
        #expect(central.receipts.isEmpty)
        #expect(try terminal.ledger.transactions().isEmpty, "nothing executed")
        link.send(try confirm(under: intentID))
        #expect(world.run(until: { central.receipts.count == 1 }))
        #expect(central.receipts.first?.paymentID == intentID)
        #expect(try terminal.ledger.transactions().map(\.paymentID) == [intentID])
        #expect(try terminal.ledger.merchantBalance() == euros(700))
    }

    // MARK: Text from the other side

    /// A terminal whose credential and offer carry terminal escape sequences and a bidi override
    /// reaches the app with them replaced; so does a terminal's error text.
    @Test func textFromTheTerminalIsSanitisedBeforeTheAppShowsIt() throws {
        let world = try World()
        let terminal = try world.terminal(merchantName: "Caf\u{1B}[2Jé", label: "Till \u{202E}2")
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(100), registerUser: RegisterUser(name: "An\u{7}a")))
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        let offer = try #require(wallet.client.offer)
        #expect(offer.merchantName == "Caf\u{FFFD}[2Jé")
        #expect(offer.terminalLabel == "Till \u{FFFD}2")
        #expect(offer.registerUser == "An\u{FFFD}a")

        var random = SystemRandomNumberGenerator()
        let scripted = try ScriptedTerminal(
            world: world, name: "shouter", at: Position(x: 5, y: 5), sessionID: SessionID.random(using: &random)
        ) { connection, message in
            guard case .hello = message else { return }
            connection.send(.error(ErrorMessage(code: .sessionNotFound, message: "gone\u{1B}]0;pwned\u{7}")))
        }
        _ = scripted
        let other = try world.wallet("other", at: Position(x: 5.2, y: 5))
        let otherApp = ScriptedWalletApp(other, decision: .ignore)
        _ = otherApp
        #expect(world.run(until: { other.client.state.isFinished }))
        #expect(other.client.error == .sessionUnavailable("gone\u{FFFD}]0;pwned\u{FFFD}"))
    }
}
