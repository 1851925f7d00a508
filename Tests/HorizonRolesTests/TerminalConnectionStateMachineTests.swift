import Crypto
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores
import Testing

@testable import HorizonRoles

/// The rules of one wallet's connection to the terminal without any radio, journal or clock:
/// events in (with the time), actions out, compared with `==`.
@Suite("Terminal connection state machine")
struct TerminalConnectionStateMachineTests {
    typealias Machine = TerminalConnectionStateMachine
    typealias Action = TerminalConnectionAction

    static let start = Instant(nanoseconds: 1_000_000_000_000)
    static let sessionID: SessionID = {
        var generator = SystemRandomNumberGenerator()
        return SessionID(rawValue: 42) ?? SessionID.random(using: &generator)
    }()
    static let transcript = [UInt8](repeating: 5, count: 32)

    /// Three messages a second, a 30-second idle timeout, two sessions a minute per wallet key.
    static let configuration = Machine.Configuration(
        TerminalServiceConfiguration(
            idleTimeout: .seconds(30), maximumSessionsPerWallet: 2, sessionRateWindow: .seconds(60),
            maximumMessagesPerWindow: 3, messageRateWindow: .seconds(1)))

    static func machine(sessionID: SessionID? = sessionID) -> Machine {
        Machine(sessionID: sessionID, transcriptHash: transcript, configuration: configuration, now: start)
    }

    static func at(_ seconds: Double) -> Instant { start + .milliseconds(Int64(seconds * 1000)) }

    // MARK: Establishing and the idle timeout

    @Test func anEstablishedConnectionStartsItsIdleTimer() {
        let machine = Self.machine()
        #expect(machine.startActions == [.armIdleTimer(after: .seconds(30))])
        #expect(machine.state == .open(Machine.Open(lastActivity: Self.start, windowStart: Self.start)))
        #expect(machine.sessionKey == nil)
    }

    @Test func silenceForTheIdleTimeoutClosesTheConnection() {
        var machine = Self.machine()
        #expect(machine.idleTimerFired(now: Self.at(30), sessionAwaitsWallet: false) == [.close(.idle)])
        #expect(machine.state == .closed)
        #expect(machine.idleTimerFired(now: Self.at(60), sessionAwaitsWallet: false).isEmpty)
    }

    @Test func activityEitherWayPushesTheIdleTimeoutBack() throws {
        var machine = Self.machine()
        machine.sent(now: Self.at(10))
        #expect(
            machine.idleTimerFired(now: Self.at(30), sessionAwaitsWallet: false) == [.armIdleTimer(after: .seconds(10))]
        )
        _ = machine.received(try Self.cancelBytes(), now: Self.at(35))
        #expect(
            machine.idleTimerFired(now: Self.at(40), sessionAwaitsWallet: false) == [.armIdleTimer(after: .seconds(25))]
        )
        #expect(machine.idleTimerFired(now: Self.at(65), sessionAwaitsWallet: false) == [.close(.idle)])
    }

    /// The person deciding is not idleness: the count starts afresh when the timer fires.
    @Test func theIdleTimeoutDoesNotRunWhileTheSessionWaitsOnTheWallet() {
        var machine = Self.machine()
        #expect(
            machine.idleTimerFired(now: Self.at(30), sessionAwaitsWallet: true) == [.armIdleTimer(after: .seconds(30))])
        #expect(
            machine.idleTimerFired(now: Self.at(59), sessionAwaitsWallet: false) == [.armIdleTimer(after: .seconds(1))])
        #expect(machine.idleTimerFired(now: Self.at(60), sessionAwaitsWallet: false) == [.close(.idle)])
    }

    // MARK: The message rate

    @Test func oneMessageOverTheRateClosesTheConnection() throws {
        var machine = Self.machine()
        let cancel = try Self.cancelBytes()
        for millisecond in [0, 300, 600] {
            #expect(machine.received(cancel, now: Self.at(Double(millisecond) / 1000)) == [.route(try Self.cancel())])
        }
        #expect(machine.received(cancel, now: Self.at(0.999)) == [.close(.overMessageRate)])
        #expect(machine.state == .closed)
        // Closed: whatever still arrives is ignored.
        #expect(machine.received(cancel, now: Self.at(5)).isEmpty)
    }

    @Test func theRateWindowStartsAfreshOnceItHasPassed() throws {
        var machine = Self.machine()
        let cancel = try Self.cancelBytes()
        for _ in 0..<3 { _ = machine.received(cancel, now: Self.at(0)) }
        // A new window from the first message after one second.
        #expect(machine.received(cancel, now: Self.at(1)) == [.route(try Self.cancel())])
        guard case .open(let open) = machine.state else {
            Issue.record("expected the connection open")
            return
        }
        #expect(open.windowStart == Self.at(1))
        #expect(open.messagesInWindow == 1)
        #expect(open.lastActivity == Self.at(1))
    }

    @Test func anUndecodableMessageIsAnsweredAndCloses() {
        var machine = Self.machine()
        let garbage: [UInt8] = [0xFF, 1, 2]
        var reason = ""
        do { _ = try SessionMessage.decode(garbage) } catch { reason = "\(error)" }
        #expect(!reason.isEmpty)
        #expect(
            machine.received(garbage, now: Self.start) == [
                .send(.error(ErrorMessage(code: .protocolViolation, message: "undecodable message: \(reason)"))),
                .close(.undecodable(reason)),
            ])
        #expect(machine.state == .closed)
    }

    // MARK: Hello

    @Test func aProvenHelloAsksTheSessionRateAndThenReachesTheSession() throws {
        var machine = Self.machine()
        let (hello, key) = try Self.hello()
        #expect(machine.received(try Self.bytes(.hello(hello)), now: Self.start) == [.admitSession(hello)])
        #expect(machine.sessionKey == key)
        #expect(machine.sessionRate(admitted: true, for: hello) == [.route(.hello(hello))])
        // One Hello per connection: a repeat costs nothing.
        #expect(machine.received(try Self.bytes(.hello(hello)), now: Self.start).isEmpty)
    }

    @Test func aHelloOverTheSessionRateIsToldToComeBackLater() throws {
        var machine = Self.machine()
        let (hello, key) = try Self.hello()
        _ = machine.received(try Self.bytes(.hello(hello)), now: Self.start)
        #expect(
            machine.sessionRate(admitted: false, for: hello) == [
                .send(
                    .error(
                        ErrorMessage(
                            code: .rateLimited,
                            message:
                                "this wallet opened 2 sessions in the last \(Duration.seconds(60)); try again later"
                        )))
            ])
        // The connection stays open (it may still ask about its requests) with its proven key.
        #expect(machine.sessionKey == key)
        #expect(machine.received(try Self.bytes(.hello(hello)), now: Self.start).isEmpty)
        #expect(machine.received(try Self.cancelBytes(), now: Self.start) == [.route(try Self.cancel())])
    }

    @Test func aHelloForAnotherSessionIsRefusedAndCloses() throws {
        var machine = Self.machine(sessionID: SessionID(rawValue: 7))
        let (hello, _) = try Self.hello()
        #expect(
            machine.received(try Self.bytes(.hello(hello)), now: Self.start)
                == Self.refusal(.protocolViolation, "hello for another session"))
        #expect(machine.state == .closed)
        #expect(machine.sessionKey == nil)
    }

    @Test func aHelloWithAKeyOffTheCurveIsRefused() throws {
        var machine = Self.machine()
        let offCurve = try PublicKeyBytes(bytes: [0x04] + [UInt8](repeating: 7, count: 64))
        #expect(validatedKey(offCurve) == nil)
        let hello = Hello(sessionID: Self.sessionID, transactionType: .payment, sessionKey: offCurve)
        #expect(
            machine.received(try Self.bytes(.hello(hello)), now: Self.start)
                == Self.refusal(.badSignature, "the session key is not a P-256 point"))
        #expect(machine.state == .closed)
    }

    /// A proof over another connection's transcript (a Hello replayed from elsewhere) or none.
    @Test func aHelloWhoseProofDoesNotSignThisConnectionIsRefused() throws {
        let refusal = Self.refusal(.badSignature, "the hello's proof of key possession does not verify")
        var replayed = Self.machine()
        let (elsewhere, _) = try Self.hello(transcript: [UInt8](repeating: 6, count: 32))
        #expect(replayed.received(try Self.bytes(.hello(elsewhere)), now: Self.start) == refusal)
        var unsigned = Self.machine()
        let key = WalletIdentity.sessionKey().bytes
        let bare = Hello(sessionID: Self.sessionID, transactionType: .payment, sessionKey: key)
        #expect(unsigned.received(try Self.bytes(.hello(bare)), now: Self.start) == refusal)
        #expect(unsigned.state == .closed)
    }

    // MARK: Answers from the journal

    @Test func aRequestIsCheckedAgainstTheJournalFirstAndAnUnknownOneGoesToTheSession() throws {
        var machine = Self.machine()
        let (confirm, _) = try Self.confirm(id: 1)
        #expect(
            machine.received(try Self.bytes(confirm), now: Self.start) == [
                .readJournal(try Self.paymentID(1), for: confirm)
            ])
        #expect(machine.journalRead(nil, for: confirm) == [.route(confirm)])
        #expect(!machine.hasProved(try Self.paymentID(1)))
    }

    @Test func aRetryOfAnAnsweredRequestGetsTheStoredAnswerAndMayAcknowledgeIt() throws {
        var machine = Self.machine()
        let (confirm, key) = try Self.confirm(id: 1)
        let answer = SessionMessage.error(
            ErrorMessage(code: .declined, message: "no", paymentID: try Self.paymentID(1)))
        let record = try Self.record(of: confirm, walletKey: key, answer: answer)
        let acknowledgement = try Self.bytes(
            .receiptAcknowledgement(ReceiptAcknowledgement(paymentID: try Self.paymentID(1))))
        // Not proved yet: an acknowledgement is ignored.
        #expect(machine.received(acknowledgement, now: Self.start).isEmpty)
        #expect(machine.journalRead(record, for: confirm) == [.send(answer)])
        #expect(machine.hasProved(try Self.paymentID(1)))
        #expect(machine.received(acknowledgement, now: Self.start) == [.acknowledge(try Self.paymentID(1))])
    }

    @Test func aRetryOfARequestStillExecutingIsToldToAskAgain() throws {
        var machine = Self.machine()
        let (confirm, key) = try Self.confirm(id: 1)
        #expect(
            machine.journalRead(try Self.record(of: confirm, walletKey: key, answer: nil), for: confirm) == [
                .send(Machine.stillSettling)
            ])
    }

    @Test func theSameIdWithOtherTermsOrAnotherSignerIsAConflict() throws {
        var machine = Self.machine()
        let (first, key) = try Self.confirm(id: 1, tip: 0)
        let (otherTerms, _) = try Self.confirm(id: 1, tip: 100, by: key)
        let (otherSigner, _) = try Self.confirm(id: 1, tip: 0)
        let record = try Self.record(of: first, walletKey: key, answer: nil)
        let conflict = SessionMessage.error(
            ErrorMessage(
                code: .duplicatePaymentConflict,
                message: "this id was already used with other terms; these terms were not executed",
                paymentID: try Self.paymentID(1)))
        #expect(machine.journalRead(record, for: otherTerms) == [.send(conflict)])
        #expect(machine.journalRead(record, for: otherSigner) == [.send(conflict)])
        #expect(!machine.hasProved(try Self.paymentID(1)))
    }

    @Test func aRetryWhoseSignatureDoesNotVerifyIsRefused() throws {
        var machine = Self.machine()
        let (confirm, key) = try Self.confirm(id: 1)
        guard case .confirm(let signed) = confirm else { return }
        let forged = SessionMessage.confirm(
            signed.withSignature(try SignatureBytes(bytes: [UInt8](repeating: 1, count: 64))))
        #expect(
            machine.journalRead(try Self.record(of: confirm, walletKey: key, answer: nil), for: forged) == [
                .send(.error(ErrorMessage(code: .badSignature, message: "the request's signature does not verify")))
            ])
    }

    @Test func anUnreadableJournalIsSaidSo() throws {
        var machine = Self.machine()
        let (confirm, _) = try Self.confirm(id: 1)
        #expect(
            machine.journalUnreadable(for: confirm) == [
                .send(.error(ErrorMessage(code: .internalError, message: "the terminal cannot read its journal now")))
            ])
    }

    @Test func aStatusQueryIsAnsweredOnlyToTheRequestsWalletOverThisConnection() throws {
        let (confirm, walletKey) = try Self.confirm(id: 1)
        let answer = SessionMessage.error(
            ErrorMessage(code: .declined, message: "no", paymentID: try Self.paymentID(1)))
        let record = try Self.record(of: confirm, walletKey: walletKey.bytes, answer: answer)
        let notFound = SessionMessage.error(
            ErrorMessage(
                code: .notFound, message: "no payment with this id was made here by this wallet",
                paymentID: try Self.paymentID(1)))

        var machine = Self.machine()
        let query = try Self.statusQuery(id: 1, signer: walletKey.key)
        #expect(
            machine.received(try Self.bytes(query), now: Self.start) == [
                .readJournal(try Self.paymentID(1), for: query)
            ])
        #expect(machine.journalRead(record, for: query) == [.send(answer)])
        #expect(machine.hasProved(try Self.paymentID(1)))

        // Another wallet's query, or one for an id the journal does not know: the same answer.
        var stranger = Self.machine()
        let strangers = try Self.statusQuery(id: 1, signer: WalletIdentity.sessionKey().key)
        #expect(stranger.journalRead(record, for: strangers) == [.send(notFound)])
        #expect(stranger.journalRead(nil, for: query) == [.send(notFound)])
        #expect(!stranger.hasProved(try Self.paymentID(1)))

        // Signed over another connection's transcript: refused.
        var replay = Self.machine()
        let replayed = try Self.statusQuery(id: 1, signer: walletKey.key, transcript: [UInt8](repeating: 9, count: 32))
        #expect(
            replay.journalRead(record, for: replayed) == [
                .send(.error(ErrorMessage(code: .badSignature, message: "the status query's proof does not verify")))
            ])
    }

    // MARK: Other messages and the end

    @Test func theSessionsOwnMessagesAndProxyRequestsAreHandedOn() throws {
        var machine = Self.machine()
        #expect(machine.received(try Self.cancelBytes(), now: Self.start) == [.route(try Self.cancel())])
        let envelope = try ProxyEnvelope(requestID: 7, sealed: [1, 2, 3])
        #expect(machine.received(try Self.bytes(.proxyRequest(envelope)), now: Self.start) == [.relay(envelope)])
    }

    @Test func aRequestTheSessionExecutesMayBeAcknowledged() throws {
        var machine = Self.machine()
        let id = try Self.paymentID(3)
        machine.proved(id)
        #expect(
            machine.received(
                try Self.bytes(.receiptAcknowledgement(ReceiptAcknowledgement(paymentID: id))), now: Self.start)
                == [.acknowledge(id)])
    }

    @Test func anEndedConnectionIgnoresEverything() throws {
        var machine = Self.machine()
        let (hello, _) = try Self.hello()
        let (confirm, _) = try Self.confirm(id: 1)
        machine.ended()
        #expect(machine.state == .closed)
        #expect(machine.received(try Self.cancelBytes(), now: Self.start).isEmpty)
        #expect(machine.sessionRate(admitted: true, for: hello).isEmpty)
        #expect(machine.journalRead(nil, for: confirm).isEmpty)
        #expect(machine.journalUnreadable(for: confirm).isEmpty)
        #expect(machine.idleTimerFired(now: Self.at(100), sessionAwaitsWallet: false).isEmpty)
        machine.proved(try Self.paymentID(1))
        #expect(!machine.hasProved(try Self.paymentID(1)))
    }

    // MARK: The session rate across connections

    @Test func aWalletKeyOpensAtMostItsSessionsPerWindow() throws {
        var rate = WalletSessionRate(maximumSessions: 2, window: .seconds(60))
        let key = WalletIdentity.sessionKey().bytes
        let other = WalletIdentity.sessionKey().bytes
        let sessions = (1...3).compactMap { SessionID(rawValue: UInt64($0)) }
        #expect(rate.admit(sessions[0], for: key, now: Self.at(0)) == true)
        #expect(rate.admit(sessions[1], for: key, now: Self.at(10)) == true)
        #expect(rate.admit(sessions[2], for: key, now: Self.at(20)) == false)
        // A session it opened already is admitted again; another key has its own count.
        #expect(rate.admit(sessions[1], for: key, now: Self.at(20)) == true)
        #expect(rate.admit(sessions[2], for: other, now: Self.at(20)) == true)
        // The first session leaves the window: room for one more.
        #expect(rate.admit(sessions[2], for: key, now: Self.at(60)) == true)
        #expect(rate.opened[key]?.map(\.session) == [sessions[1], sessions[2]])
        // Everything left the window: the table forgets the keys.
        #expect(rate.admit(sessions[0], for: other, now: Self.at(200)) == true)
        #expect(Array(rate.opened.keys) == [other])
    }

    @Test func anExecutedSessionStopsCounting() {
        var rate = WalletSessionRate(maximumSessions: 1, window: .seconds(60))
        let key = WalletIdentity.sessionKey().bytes
        let sessions = (1...2).compactMap { SessionID(rawValue: UInt64($0)) }
        #expect(rate.admit(sessions[0], for: key, now: Self.at(0)) == true)
        #expect(rate.admit(sessions[1], for: key, now: Self.at(1)) == false)
        rate.executed(sessions[0], by: key)
        #expect(rate.opened.isEmpty)
        #expect(rate.admit(sessions[1], for: key, now: Self.at(2)) == true)
    }

    // MARK: Fixtures

    static func refusal(_ code: ErrorCode, _ text: String) -> [Action] {
        [.send(.error(ErrorMessage(code: code, message: text))), .close(.helloRefused(text))]
    }

    static func bytes(_ message: SessionMessage) throws -> [UInt8] { message.encoded() }

    static func cancel() throws -> SessionMessage { .cancel(Cancel(sessionID: sessionID, reason: .userDeclined)) }

    static func cancelBytes() throws -> [UInt8] { try bytes(cancel()) }

    static func paymentID(_ n: UInt8) throws -> PaymentID { try PaymentID(bytes: [UInt8](repeating: n, count: 16)) }

    /// A Hello proving a fresh session key over `transcript`.
    static func hello(transcript: [UInt8] = transcript) throws -> (Hello, PublicKeyBytes) {
        let (key, bytes) = WalletIdentity.sessionKey()
        let unsigned = Hello(sessionID: sessionID, transactionType: .payment, sessionKey: bytes)
        return (
            unsigned.withProof(try signatureBytes(for: unsigned.proofBytes(transcriptHash: transcript), with: key)),
            bytes
        )
    }

    /// A Confirm for `id` signed by `wallet` (a fresh key by default).
    static func confirm(
        id: UInt8, tip: Int64 = 0,
        by wallet: (key: P256.Signing.PrivateKey, bytes: PublicKeyBytes) = WalletIdentity.sessionKey()
    ) throws -> (SessionMessage, (key: P256.Signing.PrivateKey, bytes: PublicKeyBytes)) {
        var generator = SystemRandomNumberGenerator()
        let digest = try DigestBytes(bytes: [UInt8](repeating: 1, count: 32))
        let unsigned = try Confirm(
            sessionID: sessionID, terminalKeyDigest: digest, walletKey: wallet.bytes, offerDigest: digest,
            amount: euros(12_50), tip: euros(tip), paymentID: try paymentID(id),
            walletNonce: Nonce.random(using: &generator), expiresAt: 1_800_000_000)
        return (
            .confirm(unsigned.withSignature(try signatureBytes(for: unsigned.signedBytes, with: wallet.key))), wallet
        )
    }

    /// The journal's record of `request`, signed by `walletKey`, with its answer (nil: still
    /// executing).
    static func record(of request: SessionMessage, walletKey: PublicKeyBytes, answer: SessionMessage?) throws
        -> JournalRecord
    {
        let signed = try #require(SignedRequest(request))
        let keyID = try TerminalKeyID(bytes: [UInt8](repeating: 3, count: 8))
        return JournalRecord(
            request: .payment(
                SettlementRequest(
                    paymentID: signed.id, sessionID: sessionID, walletKey: walletKey, terminalKeyID: keyID,
                    amount: euros(12_50), tip: euros(0), registerUser: "Ana", contentDigest: signed.contentDigest)),
            step: answer == nil ? .submitted : .result, answer: answer)
    }

    static func record(
        of request: SessionMessage, walletKey: (key: P256.Signing.PrivateKey, bytes: PublicKeyBytes),
        answer: SessionMessage?
    ) throws -> JournalRecord {
        try record(of: request, walletKey: walletKey.bytes, answer: answer)
    }

    static func statusQuery(id: UInt8, signer: P256.Signing.PrivateKey, transcript: [UInt8] = transcript) throws
        -> SessionMessage
    {
        let unsigned = PaymentStatusQuery(
            paymentID: try paymentID(id), walletKey: WalletIdentity(signingKey: signer).publicKey)
        return .paymentStatusQuery(
            unsigned.withProof(try signatureBytes(for: unsigned.proofBytes(transcriptHash: transcript), with: signer)))
    }
}
