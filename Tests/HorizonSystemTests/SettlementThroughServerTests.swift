import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRoles
import HorizonSecureChannel
import HorizonServerClient
import HorizonSettlement
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

/// A payment settles on the server, exactly once, on the strength of the
/// wallet's own signature; a terminal cannot charge for anything the wallet did not sign.
// On the cooperative pool, not `.offTheCooperativePool`: the body only awaits (the simulated
// radio's live driver, which waits for the server's answers, has a thread of its own), and it
// races the clock, which behind a blocking test on a shared queue it lost (a redemption's
// decision timed out while the fault simulation held that queue for ten minutes). The simulated
// clock runs at twice real time, not ten times: at ten the wallet's decision window was three
// real seconds, which a loaded machine's first minute of the suite outlasted.
@Suite struct SettlementThroughServerTests {
    @Test func aPaymentOverTheRadioSettlesOnTheServerOnce() async throws {
        let server = try await ServerRig.start()
        defer { Task { await server.stop() } }
        let identity = try await server.activateTerminal()
        let (walletKey, walletID) = try await server.registerWallet(balance: 100_00)
        let processor = ServerPaymentProcessor(
            client: server.client(signingWith: identity.signingKey), anchor: server.issuer.signingKey.publicKey)

        let directory = server.directory
        // The simulation's wall clock starts at the real time: the server issued the credential now.
        let simulation = RadioSimulation(seed: 3, wallClockAtStart: Ledger.now())
        let service = TerminalRadioService(
            radio: try simulation.addDevice(name: "terminal"), identity: identity, processor: processor,
            journal: try SQLiteTerminalJournal(path: directory.appendingPathComponent("journal.sqlite").path))
        let host = PaymentHost(service: service, processor: processor)
        let client = PaymentClient(
            radio: try simulation.addDevice(name: "wallet", configuration: .init(position: .init(x: 0.3, y: 0))),
            identity: WalletIdentity(signingKey: walletKey), trustAnchors: [server.issuer.anchor])
        try client.start()

        let (order, receipt) = try await simulation.live(speed: 2) {
            let sale = Task { try await host.collect(try Money.parse("12.50", currency: .eur)) }
            for await candidate in client.candidates() {
                let offer = try await client.fetchOffer(candidate)
                #expect(offer.merchantName == "Corner Café")
                let receipt = try await client.pay(offer, tip: try Money.parse("1.50", currency: .eur))
                return (try await sale.value, receipt)
            }
            throw CancellationError()
        }
        #expect(receipt.total == (try Money.parse("14.00", currency: .eur)))
        #expect(order.paymentID == receipt.paymentID)
        // The server's ledger moved the money once: the wallet paid, the merchant got it.
        #expect(
            try await server.ledger.balance(of: walletID, in: .eur) == (try Money(minorUnits: 86_00, currency: .eur)))
        #expect(
            try await server.ledger.balance(of: server.merchant.id) == (try Money(minorUnits: 14_00, currency: .eur)))
        #expect(try await server.ledger.executionCount(of: receipt.paymentID) == 1)
        let stored = try #require(try await server.ledger.transaction(for: receipt.paymentID))
        #expect(stored.walletID == walletID)
        #expect(stored.terminalKeyID.bytes == identity.keyID)
        #expect(try await LedgerAudit.violations(in: server.ledger.store).isEmpty)
        // The terminal can read the stored result back (what recovery asks after a crash).
        let replay = try #require(try await processor.result(for: receipt.paymentID))
        #expect(replay.outcome.isApproved)
    }

    @Test func aBonusRedemptionOverTheRadioIsExecutedOnTheServer() async throws {
        let server = try await ServerRig.start()
        defer { Task { await server.stop() } }
        let identity = try await server.activateTerminal()
        let (walletKey, walletID) = try await server.registerWallet(balance: 0)
        try await server.ledger.addBonusPoints(150, to: walletID, at: server.merchant.id)
        let processor = ServerPaymentProcessor(
            client: server.client(signingWith: identity.signingKey), anchor: server.issuer.signingKey.publicKey)
        let simulation = RadioSimulation(seed: 5, wallClockAtStart: Ledger.now())
        let service = TerminalRadioService(
            radio: try simulation.addDevice(name: "terminal"), identity: identity, processor: processor,
            journal: try SQLiteTerminalJournal(path: server.directory.appendingPathComponent("journal.sqlite").path))
        let host = try #require(
            RedemptionHost.redemptionHost(transactionType: .bonusRedemption, service: service, processor: processor))
        let coordinator = PaymentAndRedemptionClientCoordinator(
            radio: try simulation.addDevice(name: "wallet", configuration: .init(position: .init(x: 0.3, y: 0))),
            identity: WalletIdentity(signingKey: walletKey), trustAnchors: [server.issuer.anchor])
        try coordinator.start()
        let (result, receipt) = try await simulation.live(speed: 2) {
            let sale = Task {
                try await host.collect(
                    RedemptionOffer(item: "Free coffee", points: 100, value: try Money(minorUnits: 320, currency: .eur))
                )
            }
            for await candidate in coordinator.candidates() {
                let offer = try await coordinator.fetchOffer(candidate)
                let receipt = try await coordinator.bonusRedemptionClient.redeem(offer)
                return (try await sale.value, receipt)
            }
            throw CancellationError()
        }
        #expect(result.paymentID == receipt.paymentID)
        #expect(receipt.item == "Free coffee")
        #expect(try await server.ledger.bonusPoints(of: walletID, at: server.merchant.id) == 50)
        #expect(try await server.ledger.executionCount(of: receipt.paymentID) == 1)
        let stored = try #require(try await processor.result(for: receipt.paymentID))
        #expect(stored.transactionType == .bonusRedemption)
        #expect(stored.quantity == 100)
    }

    @Test func aTerminalCannotChargeAnythingTheWalletDidNotSign() async throws {
        let server = try await ServerRig.start()
        defer { Task { await server.stop() } }
        let identity = try await server.activateTerminal()
        let (walletKey, walletID) = try await server.registerWallet(balance: 100_00)
        let (otherKey, otherWallet) = try await server.registerWallet(balance: 100_00)
        let terminal = server.client(signingWith: identity.signingKey)
        let signed = try SignedConfirm(wallet: walletKey, terminal: identity, amount: 10_00, tip: 0)

        func expectRefused(_ submission: Components.Schemas.PaymentSubmission, code: String) async {
            await #expect {
                _ = try await terminal.submitPayment(submission)
            } throws: { error in
                (error as? ServerClientError)?.code == code
            }
        }
        // The stated amount, tip, wallet key, payment id or currency differ from the signed ones.
        await expectRefused(signed.submission(amount: 99_00), code: "terms_mismatch")
        await expectRefused(signed.submission(tip: 5_00), code: "terms_mismatch")
        await expectRefused(signed.submission(currency: "USD"), code: "terms_mismatch")
        await expectRefused(
            signed.submission(walletKey: Data(otherKey.publicKey.x963Representation).base64EncodedString()),
            code: "terms_mismatch")
        // The Confirm itself altered (a larger amount inside, the wallet's signature kept).
        let altered = try signed.altered(amount: 99_00)
        await expectRefused(altered.submission(), code: "wallet_signature_invalid")
        // Another wallet's key put into the Confirm with the first wallet's signature.
        let swapped = try signed.altered(walletKey: otherKey)
        await expectRefused(swapped.submission(), code: "wallet_signature_invalid")
        // A confirmation for another terminal, forwarded by this one.
        let elsewhere = try await server.activateTerminal(label: "Till 2")
        let forOther = try SignedConfirm(wallet: walletKey, terminal: elsewhere, amount: 10_00, tip: 0)
        await expectRefused(forOther.submission(), code: "terms_mismatch")

        // Nothing moved, nothing was stored.
        #expect(
            try await server.ledger.balance(of: walletID, in: .eur) == (try Money(minorUnits: 100_00, currency: .eur)))
        #expect(
            try await server.ledger.balance(of: otherWallet, in: .eur)
                == (try Money(minorUnits: 100_00, currency: .eur)))
        #expect(try await server.ledger.balance(of: server.merchant.id) == (try Money(minorUnits: 0, currency: .eur)))
        #expect(try await server.ledger.transaction(for: signed.confirm.paymentID) == nil)

        // The genuine submission then goes through.
        let result = try await terminal.submitPayment(signed.submission())
        #expect(result.outcome == .approved)
        #expect(
            try await server.ledger.balance(of: walletID, in: .eur) == (try Money(minorUnits: 90_00, currency: .eur)))
    }

    @Test func theFirstResultIsReplayedAndOtherTermsWithTheSameIDAreRefused() async throws {
        let server = try await ServerRig.start()
        defer { Task { await server.stop() } }
        let identity = try await server.activateTerminal()
        let (walletKey, walletID) = try await server.registerWallet(balance: 20_00)
        let terminal = server.client(signingWith: identity.signingKey)
        let signed = try SignedConfirm(wallet: walletKey, terminal: identity, amount: 10_00, tip: 1_00)

        // Eight concurrent submissions of one payment: one execution, one result for all.
        let results = try await withThrowingTaskGroup(of: Components.Schemas.PaymentResult.self) { group in
            for _ in 0..<8 { group.addTask { try await terminal.submitPayment(signed.submission()) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 8)
        #expect(Set(results.map(\.reference)).count == 1)
        #expect(results.allSatisfy { $0.outcome == .approved })
        #expect(try await server.ledger.executionCount(of: signed.confirm.paymentID) == 1)
        #expect(
            try await server.ledger.balance(of: walletID, in: .eur) == (try Money(minorUnits: 9_00, currency: .eur)))

        // The same payment id with another tip, genuinely signed by the wallet: refused, nothing moves.
        let other = try SignedConfirm(
            wallet: walletKey, terminal: identity, amount: 10_00, tip: 2_00, paymentID: signed.confirm.paymentID,
            sessionID: signed.confirm.sessionID)
        await #expect {
            _ = try await terminal.submitPayment(other.submission())
        } throws: { error in
            (error as? ServerClientError)?.code == "payment_conflict"
        }
        // A decline is a result too, stored and replayed: not enough money left.
        let tooMuch = try SignedConfirm(wallet: walletKey, terminal: identity, amount: 50_00, tip: 0)
        let declined = try await terminal.submitPayment(tooMuch.submission())
        #expect(declined.outcome == .declined)
        #expect(declined.declineCode == Int32(ErrorCode.insufficientFunds.rawValue))
        try await server.ledger.deposit(try Money(minorUnits: 100_00, currency: .eur), to: walletID)
        let again = try await terminal.submitPayment(tooMuch.submission())
        #expect(again.outcome == .declined)
        #expect(
            try await server.ledger.balance(of: walletID, in: .eur) == (try Money(minorUnits: 109_00, currency: .eur)))
        #expect(try await LedgerAudit.violations(in: server.ledger.store).isEmpty)
    }

    @Test func unknownWalletsAreDeclinedAndRevokedTerminalsRefused() async throws {
        let server = try await ServerRig.start()
        defer { Task { await server.stop() } }
        let identity = try await server.activateTerminal()
        let terminal = server.client(signingWith: identity.signingKey)
        let stranger = P256.Signing.PrivateKey()
        let unknown = try await terminal.submitPayment(
            SignedConfirm(wallet: stranger, terminal: identity, amount: 5_00, tip: 0).submission())
        #expect(unknown.outcome == .declined)
        #expect(unknown.declineCode == Int32(ErrorCode.unknownWallet.rawValue))

        let (walletKey, walletID) = try await server.registerWallet(balance: 50_00)
        let terminals = try await server.ledger.terminals(of: server.merchant.id)
        try await server.ledger.revokeTerminal(try #require(terminals.first).id)
        await #expect {
            _ = try await terminal.submitPayment(
                SignedConfirm(wallet: walletKey, terminal: identity, amount: 5_00, tip: 0).submission())
        } throws: { error in
            (error as? ServerClientError)?.code == "terminal_revoked"
        }
        #expect(
            try await server.ledger.balance(of: walletID, in: .eur) == (try Money(minorUnits: 50_00, currency: .eur)))
        // Another merchant's payment is not visible to this terminal even when the id is known.
        let processor = ServerPaymentProcessor(client: terminal, anchor: server.issuer.signingKey.publicKey)
        await #expect(throws: ProcessorError.self) { _ = try await processor.result(for: unknownID(unknown)) }
    }

    @Test func aServerThatDoesNotAnswerLeavesThePaymentPendingNeverFailed() async throws {
        // Nothing listens on this port: the processor must say "unavailable", which the terminal
        // journals as undecided (the wallet keeps the payment pending), never as a refusal.
        let processor = ServerPaymentProcessor(
            client: HorizonServerClient(
                serverURL: try #require(URL(string: "http://127.0.0.1:9")), signingKey: .init(),
                timeout: .milliseconds(500)), anchor: P256.Signing.PrivateKey().publicKey)
        let identity = try TerminalIdentity.sandbox()
        let signed = try SignedConfirm(wallet: .init(), terminal: identity, amount: 1_00, tip: 0)
        await #expect {
            _ = try await processor.settle(signed.settlementRequest(terminal: identity), at: 0)
        } throws: { error in
            if case .unavailable = error as? ProcessorError { true } else { false }
        }
        await #expect {
            _ = try await processor.result(for: signed.confirm.paymentID)
        } throws: { error in
            if case .unavailable = error as? ProcessorError { true } else { false }
        }
    }

    private func unknownID(_ result: Components.Schemas.PaymentResult) throws -> PaymentID {
        // A syntactically valid id nobody executed for this merchant.
        var bytes = try #require([UInt8](hexString: result.paymentId))
        bytes[0] ^= 0xFF
        return try PaymentID(bytes: bytes)
    }
}

/// A Confirm as a wallet signs it, and the submission a terminal makes of it.
struct SignedConfirm {
    let confirm: Confirm

    init(
        wallet: P256.Signing.PrivateKey, terminal: TerminalIdentity, amount: Int64, tip: Int64,
        paymentID: PaymentID? = nil, sessionID: SessionID? = nil
    ) throws {
        var generator = SystemRandomNumberGenerator()
        let unsigned = try Confirm(
            sessionID: sessionID ?? SessionID(rawValue: UInt64.random(in: 1...UInt64.max)) ?? SessionID(rawValue: 1)!,
            terminalKeyDigest: DigestBytes(bytes: terminal.keyDigest),
            walletKey: PublicKeyBytes(bytes: Array(wallet.publicKey.x963Representation)),
            offerDigest: DigestBytes(bytes: Array(SHA256.hash(data: Data("offer".utf8)))),
            amount: Money(minorUnits: amount, currency: .eur), tip: Money(minorUnits: tip, currency: .eur),
            paymentID: paymentID ?? PaymentID.random(using: &generator),
            walletNonce: Nonce(bytes: (0..<16).map { _ in UInt8.random(in: 0...255) }), expiresAt: 4_000_000_000)
        let signature = try wallet.signature(for: unsigned.signedBytes)
        confirm = unsigned.withSignature(try SignatureBytes(bytes: Array(signature.rawRepresentation)))
    }

    private init(confirm: Confirm) { self.confirm = confirm }

    /// The same signature over other contents: what a dishonest terminal would forward.
    func altered(amount: Int64? = nil, walletKey: P256.Signing.PrivateKey? = nil) throws -> SignedConfirm {
        let changed = try Confirm(
            sessionID: confirm.sessionID, terminalKeyDigest: confirm.terminalKeyDigest,
            walletKey: walletKey.map { try PublicKeyBytes(bytes: Array($0.publicKey.x963Representation)) }
                ?? confirm.walletKey,
            offerDigest: confirm.offerDigest,
            amount: amount.map { try Money(minorUnits: $0, currency: .eur) } ?? confirm.amount, tip: confirm.tip,
            paymentID: confirm.paymentID, walletNonce: confirm.walletNonce, expiresAt: confirm.expiresAt,
            signature: confirm.signature)
        return SignedConfirm(confirm: changed)
    }

    func submission(
        amount: Int64? = nil, tip: Int64? = nil, currency: String = "EUR", walletKey: String? = nil
    ) -> Components.Schemas.PaymentSubmission {
        .init(
            confirmation: Data(SessionMessage.confirm(confirm).encoded()).base64EncodedString(),
            paymentId: confirm.paymentID.bytes.hexString, sessionId: Int64(bitPattern: confirm.sessionID.rawValue),
            walletKey: walletKey ?? Data(confirm.walletKey.bytes).base64EncodedString(),
            amount: amount ?? confirm.amount.minorUnits, tip: tip ?? confirm.tip.minorUnits, currency: currency,
            registerUser: "till-user-1")
    }

    func settlementRequest(terminal: TerminalIdentity) throws -> SettlementRequest {
        SettlementRequest(
            paymentID: confirm.paymentID, sessionID: confirm.sessionID, walletKey: confirm.walletKey,
            terminalKeyID: try TerminalKeyID(bytes: terminal.keyID), amount: confirm.amount, tip: confirm.tip,
            registerUser: "", contentDigest: Array(SHA256.hash(data: confirm.signedBytes)),
            signedConfirmation: SessionMessage.confirm(confirm).encoded())
    }
}

extension TerminalIdentity {
    /// A terminal credentialed by a throw-away anchor, for tests that never reach a wallet.
    static func sandbox() throws -> TerminalIdentity {
        let anchor = P256.Signing.PrivateKey()
        let key = P256.Signing.PrivateKey()
        return try TerminalIdentity(
            signingKey: key,
            credential: .issue(
                by: anchor, merchantID: "m", merchantName: "M", terminalKey: key.publicKey, notBefore: 0,
                expiresAt: 4_000_000_000))
    }
}

/// A redemption a terminal forwards must be the one the wallet signed, like a payment.
// On the cooperative pool, not `.offTheCooperativePool`: the body only awaits (the simulated
// radio's live driver, which waits for the server's answers, has a thread of its own), and it
// races the clock, which behind a blocking test on a shared queue it lost (a redemption's
// decision timed out while the fault simulation held that queue for ten minutes).
@Suite struct RedemptionThroughServerTests {
    @Test func aRedemptionWithOtherTermsThanTheSignedOnesIsRefusedAndNothingIsSpent() async throws {
        let server = try await ServerRig.start()
        defer { Task { await server.stop() } }
        let identity = try await server.activateTerminal()
        let (walletKey, walletID) = try await server.registerWallet(balance: 0)
        try await server.ledger.addBonusPoints(500, to: walletID, at: server.merchant.id)
        var generator = SystemRandomNumberGenerator()
        let unsigned = try Redeem(
            sessionID: try #require(SessionID(rawValue: 42)), transactionType: .bonusRedemption,
            terminalKeyDigest: DigestBytes(bytes: identity.keyDigest),
            walletKey: PublicKeyBytes(bytes: Array(walletKey.publicKey.x963Representation)),
            offerDigest: DigestBytes(bytes: [UInt8](repeating: 7, count: 32)),
            redemptionID: PaymentID.random(using: &generator), item: "Free coffee", quantity: 100,
            walletNonce: Nonce(bytes: [UInt8](repeating: 1, count: 16)), expiresAt: 4_000_000_000)
        let redeem = unsigned.withSignature(
            try SignatureBytes(bytes: Array(try walletKey.signature(for: unsigned.signedBytes).rawRepresentation)))
        func submission(item: String = "Free coffee", quantity: Int64 = 100) -> Components.Schemas.RedemptionSubmission
        {
            .init(
                redemption: Data(SessionMessage.redeem(redeem).encoded()).base64EncodedString(),
                redemptionId: redeem.redemptionID.bytes.hexString, sessionId: 42,
                walletKey: Data(redeem.walletKey.bytes).base64EncodedString(), transactionType: .bonus, item: item,
                quantity: quantity, value: 320, currency: "EUR")
        }
        let terminal = server.client(signingWith: identity.signingKey)
        for altered in [submission(quantity: 1), submission(item: "Free cake")] {
            await #expect {
                _ = try await terminal.submitRedemption(altered)
            } throws: { error in
                (error as? ServerClientError)?.code == "terms_mismatch"
            }
        }
        #expect(try await server.ledger.bonusPoints(of: walletID, at: server.merchant.id) == 500)
        let result = try await terminal.submitRedemption(submission())
        #expect(result.outcome == .approved)
        #expect(result.transactionType == .bonus)
        #expect(try await server.ledger.bonusPoints(of: walletID, at: server.merchant.id) == 400)
    }
}
