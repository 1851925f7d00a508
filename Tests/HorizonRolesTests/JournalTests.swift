import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSettlement
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Synchronization
import Testing

/// A journal over SQLite that logs each write to a shared event list and, once told to, fails
/// every write of one step (a full disk, a dying SSD) until healed.
final class FaultyJournal: TerminalJournal {
    let journal: SQLiteTerminalJournal
    let events: EventLog
    private let failing = Mutex<JournalStep?>(nil)
    /// When set, the failing write reaches the file before the error (a commit or sync that
    /// reports failure after writing): what makes a storage error ambiguous.
    private let failAfterWriting = Mutex(false)

    init(path: String, events: EventLog) throws {
        journal = try SQLiteTerminalJournal(path: path)
        self.events = events
    }

    func fail(at step: JournalStep?, afterWriting: Bool = false) {
        failing.withLock { $0 = step }
        failAfterWriting.withLock { $0 = afterWriting }
    }

    func write(_ writes: [JournalWrite], at time: UnixTime) throws(JournalError) {
        if let failing = failing.withLock({ $0 }), writes.contains(where: { $0.step == failing }) {
            events.append("journal \(failing) failed")
            if failAfterWriting.withLock({ $0 }) { try journal.write(writes, at: time) }
            throw JournalError("disk full (test)")
        }
        try journal.write(writes, at: time)
        for write in writes { events.append("journal \(write.step)") }
    }

    func record(for id: PaymentID) throws(JournalError) -> JournalRecord? { try journal.record(for: id) }
    func unsettled() throws(JournalError) -> [JournalRecord] { try journal.unsettled() }
    func unreadable() throws(JournalError) -> [UnreadableRequest] { try journal.unreadable() }
}

final class EventLog: Sendable {
    private let events = Mutex<[String]>([])
    func append(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.withLock { $0 } }

    /// Where `event` first happened; fails the test if it never did.
    func index(of event: String, sourceLocation: SourceLocation = #_sourceLocation) -> Int {
        guard let index = all.firstIndex(of: event) else {
            Issue.record("\(event) never happened; events: \(all)", sourceLocation: sourceLocation)
            return Int.max
        }
        return index
    }
}

/// The ledger, logging each settlement to the shared event list.
struct LoggingProcessor: PaymentProcessor {
    let ledger: BlockingLedger
    let events: EventLog

    func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult {
        let result = try await ledger.settle(request, at: time)
        events.append("ledger settled")
        return result
    }

    func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult? {
        try await ledger.result(for: paymentID)
    }
}

/// One terminal program over a ledger and a journal file; a new one over the same files is the
/// program after a restart.
struct TerminalProgram {
    let service: TerminalRadioService
    let host: PaymentHost
    let journal: FaultyJournal

    init(world: World, rig: TerminalRig, events: EventLog) throws {
        journal = try FaultyJournal(
            path: world.directory.appendingPathComponent("journal-under-test.sqlite").path, events: events)
        let processor = LoggingProcessor(ledger: rig.ledger, events: events)
        service = TerminalRadioService(radio: rig.radio, identity: rig.identity, processor: processor, journal: journal)
        host = PaymentHost(service: service, processor: processor)
    }
}

@Suite("Terminal journal: every step on record before the next message, recovery after a crash", .offTheCooperativePool)
struct JournalTests {
    @Test func eachStepIsJournaledBeforeWhatFollowsItAndTheWalletAcknowledges() throws {
        let world = try World(seed: 41)
        let rig = try world.terminal()
        rig.host.stop()
        let events = EventLog()
        let terminal = try TerminalProgram(world: world, rig: rig, events: events)
        let wallet = try world.wallet()
        wallet.client.observeState { state in events.append("wallet \(state)") }
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 75))
        _ = app
        #expect(terminal.host.start(amount: euros(1_250)))
        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
        world.run(for: .seconds(2))

        // The offer cannot reach the wallet before it is on record, nor the receipt before the
        // result; the ledger is asked only after the request was confirmed and submitted.
        #expect(events.index(of: "journal offered") < events.index(of: "wallet offer received"))
        #expect(events.index(of: "journal confirmed") < events.index(of: "journal submitted"))
        #expect(events.index(of: "journal submitted") < events.index(of: "ledger settled"))
        #expect(events.index(of: "ledger settled") < events.index(of: "journal result"))
        #expect(events.index(of: "journal result") < events.index(of: "wallet completed"))
        #expect(events.index(of: "wallet completed") < events.index(of: "journal acknowledged"))
        let receipt = try #require(wallet.client.receipt)
        let record = try #require(try terminal.journal.record(for: receipt.paymentID))
        #expect(record.step == .acknowledged)
        guard case .receipt(let stored)? = record.answer else {
            Issue.record("the journal keeps no receipt: \(String(describing: record.answer))")
            return
        }
        #expect(stored.paymentID == receipt.paymentID)
        #expect(stored.tip == euros(75))
        #expect(try terminal.journal.unsettled().isEmpty)
    }

    /// A journal write that fails stops what follows it: no offer, no execution, or no receipt,
    /// and never an answer that would tell the wallet "not charged" for something that may be.
    @Test(arguments: [JournalStep.offered, .confirmed, .submitted, .result, .acknowledged])
    func aFailedJournalWriteStopsWhatFollowsAndARestartSettlesWhatWasOwed(step: JournalStep) async throws {
        let world = try World(seed: 50 + UInt64(JournalStep.allCases.firstIndex(of: step) ?? 0))
        let rig = try world.terminal()
        rig.host.stop()
        let events = EventLog()
        let first = try TerminalProgram(world: world, rig: rig, events: events)
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app
        first.journal.fail(at: step)
        #expect(first.host.start(amount: euros(400)))
        world.run(until: { wallet.client.state.isFinished || wallet.client.state == .paymentPending })
        world.run(until: { first.host.state.isFinished }, timeout: .seconds(40))
        let charged = { try rig.ledger.transactions().filter { $0.outcome.isApproved }.count }

        switch step {
        case .offered:
            #expect(wallet.client.state != .completed)
            #expect(wallet.client.offer == nil, "an offer left without being on record")
            #expect(try charged() == 0)
            return
        case .confirmed, .submitted:
            // One write holds both: not on record, so never executed; a final "not charged" is
            // true and allowed.
            #expect(wallet.client.state == .completedWithError)
            #expect(try charged() == 0)
            #expect(try first.journal.unsettled().isEmpty)
            // Refused with nothing executed: that wallet's attempt ends, the sale stays open.
            #expect(first.host.error == nil)
            #expect(requestDecline(first.host.lastWalletNotice)?.reason == "the terminal journal: disk full (test)")
            return
        case .acknowledged:
            #expect(wallet.client.state == .completed)
            #expect(try charged() == 1)
            return
        case .result:
            #expect(try charged() == 1)  // charged, but the receipt may not leave unrecorded
        }
        // The outcome is not on record: the wallet must not show failure.
        #expect(wallet.client.state == .paymentPending)
        guard case .outcomeUnknown? = first.host.error else {
            Issue.record("the register was told \(String(describing: first.host.error))")
            return
        }
        let pendingID = try #require(wallet.client.pendingPayment?.paymentID)
        #expect(try first.journal.unsettled().map(\.request.id) == [pendingID])

        // The program restarts over the same files: recovery settles the request once.
        first.host.stop()
        let second = try TerminalProgram(world: world, rig: rig, events: events)
        let report = try await second.service.recoverJournal(redemptions: nil)
        #expect(report.settled == [pendingID])
        #expect(try rig.ledger.executionCount(of: pendingID) == 1)
        #expect(try second.journal.unsettled().isEmpty)
        #expect(try await second.service.recoverJournal(redemptions: nil) == JournalRecoveryReport())

        // The wallet finds the terminal's next session and gets its receipt from the journal.
        #expect(second.host.start(amount: euros(1)))
        #expect(world.run(until: { wallet.client.state.isFinished }, timeout: .seconds(90)))
        #expect(wallet.client.state == .completed)
        #expect(wallet.client.receipt?.paymentID == pendingID)
        #expect(try rig.ledger.executionCount(of: pendingID) == 1)
        #expect(try charged() == 1)
    }

    @Test func recoverySettlesARedemptionConfirmedBeforeACrash() async throws {
        let world = try World(seed: 61)
        let rig = try world.terminal()
        let walletKey = WalletIdentity().publicKey
        try rig.ledger.addBonusPoints(100, for: walletKey)
        let redemption = RedemptionRequest(
            redemptionID: try PaymentID(bytes: [UInt8](repeating: 9, count: 16)), sessionID: SessionID(rawValue: 77)!,
            walletKey: walletKey,
            terminalKeyID: try TerminalKeyID(bytes: rig.identity.keyID), transactionType: .bonusRedemption,
            item: "Free coffee", quantity: 40, value: euros(320), contentDigest: [UInt8](repeating: 7, count: 32))
        try rig.journal.write(.confirmed(.redemption(redemption)), at: World.wallClock)

        // Without a redemption processor it stays owed, and says so.
        let report = try await rig.service.recoverJournal(redemptions: nil)
        #expect(report.unresolved.map(\.id) == [redemption.redemptionID])
        #expect(try rig.journal.unsettled().count == 1)

        let settled = try await rig.service.recoverJournal(redemptions: rig.ledger)
        #expect(settled.settled == [redemption.redemptionID])
        #expect(try rig.ledger.account(for: walletKey)?.bonusPoints == 60)
        #expect(try rig.journal.record(for: redemption.redemptionID)?.step == .result)
    }

    /// The async form (what `serve` and `pay` use) settles the same way, off the caller's thread.
    @Test func asyncRecoverySettlesARedemptionConfirmedBeforeACrash() async throws {
        let world = try World(seed: 63)
        let rig = try world.terminal()
        let walletKey = WalletIdentity().publicKey
        try rig.ledger.addBonusPoints(100, for: walletKey)
        let redemption = RedemptionRequest(
            redemptionID: try PaymentID(bytes: [UInt8](repeating: 8, count: 16)), sessionID: SessionID(rawValue: 78)!,
            walletKey: walletKey,
            terminalKeyID: try TerminalKeyID(bytes: rig.identity.keyID), transactionType: .bonusRedemption,
            item: "Free coffee", quantity: 40, value: euros(320), contentDigest: [UInt8](repeating: 6, count: 32))
        try rig.journal.write(.confirmed(.redemption(redemption)), at: World.wallClock)

        let unresolved = try await rig.service.recoverJournal(redemptions: nil)
        #expect(unresolved.unresolved.map(\.id) == [redemption.redemptionID])
        let settled = try await rig.service.recoverJournal(redemptions: rig.ledger)
        #expect(settled.settled == [redemption.redemptionID])
        #expect(try rig.ledger.account(for: walletKey)?.bonusPoints == 60)
        #expect(try rig.journal.record(for: redemption.redemptionID)?.step == .result)
        #expect(try await rig.service.recoverJournal(redemptions: rig.ledger) == JournalRecoveryReport())
    }

    /// The durability rule, counted: a payment makes one synced commit in the journal (the
    /// confirmed request, with its submission) and one in the ledger (the execution); the offer,
    /// the result and the acknowledgement are committed in order but not synced, since the
    /// ledger answers them again by payment id.
    @Test func aPaymentMakesOneSyncedCommitInTheJournalAndOneInTheLedger() throws {
        let world = try World(seed: 63)
        let rig = try world.terminal()
        rig.host.stop()
        let terminal = try TerminalProgram(world: world, rig: rig, events: EventLog())
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 50))
        _ = app
        let journalPath = world.directory.appendingPathComponent("journal-under-test.sqlite").path
        let ledgerPath = world.directory.appendingPathComponent("terminal.sqlite").path
        var receipts: [PaymentID] = []
        var counts: [(journal: Int, ledger: Int)] = []
        // The first payment also enrols the sandbox's new wallet; the second is a payment alone.
        for (index, amount) in [euros(700), euros(300)].enumerated() {
            if index > 0 {
                #expect(terminal.host.stop())
                wallet.client.restart()
                wallet.decider.restart()
            }
            let before = (SyncedCommits.count(at: journalPath), SyncedCommits.count(at: ledgerPath))
            #expect(terminal.host.start(amount: amount))
            #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
            let id = try #require(wallet.client.receipt?.paymentID)
            #expect(world.run(until: { (try? terminal.journal.record(for: id)?.step) == .acknowledged }))
            receipts.append(id)
            counts.append(
                (SyncedCommits.count(at: journalPath) - before.0, SyncedCommits.count(at: ledgerPath) - before.1))
        }
        #expect(Set(receipts).count == 2)
        #expect(counts[1].journal == 1, "journal: \(counts)")
        #expect(counts[1].ledger == 1, "ledger: \(counts)")
    }

    @Test func onlyTheWalletThatPaidCanMarkItsReceiptAcknowledged() throws {
        let world = try World(seed: 62)
        let rig = try world.terminal()
        rig.host.stop()
        let events = EventLog()
        let terminal = try TerminalProgram(world: world, rig: rig, events: events)
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app
        // The wallet's own acknowledgement is lost (the write fails), so the id stays at `result`.
        terminal.journal.fail(at: .acknowledged)
        #expect(terminal.host.start(amount: euros(200)))
        #expect(world.run(until: { wallet.client.state == .completed }))
        world.run(for: .seconds(2))
        terminal.journal.fail(at: nil)
        let id = try #require(wallet.client.receipt?.paymentID)
        #expect(try terminal.journal.record(for: id)?.step == .result)

        /// A raw connection that says hello, proves `key` with a status query for `id`, and
        /// acknowledges `id`; returns what the terminal answered.
        func acknowledge(as key: P256.Signing.PrivateKey, name: String) throws -> [SessionMessage] {
            let central = try ScriptedCentral(
                world: world, name: name, terminal: rig.device.address, session: try #require(terminal.host.sessionID)
            ) { connection in
                connection.send(.hello(connection.hello()))
                connection.send(.paymentStatusQuery(connection.statusQuery(id, signedBy: key)))
                connection.send(.receiptAcknowledgement(ReceiptAcknowledgement(paymentID: id)))
            }
            world.run(for: .seconds(3))
            central.close()
            return central.received.values
        }

        #expect(terminal.host.start(amount: euros(1)))  // a session to connect through
        let strangerHeard = try acknowledge(as: P256.Signing.PrivateKey(), name: "stranger")
        #expect(try terminal.journal.record(for: id)?.step == .result)
        #expect(!strangerHeard.contains { if case .receipt = $0 { true } else { false } }, "no receipt for a stranger")
        let walletHeard = try acknowledge(as: wallet.identity.signingKey, name: "the wallet again")
        #expect(walletHeard.contains { if case .receipt(let receipt) = $0 { receipt.paymentID == id } else { false } })
        #expect(try terminal.journal.record(for: id)?.step == .acknowledged)
    }

    /// A confirmation whose journal write reported failure *after* reaching the
    /// file is not answered "nothing was charged": the terminal re-reads, finds it on record, and
    /// answers without the id (the wallet keeps it pending); recovery settles it once.
    @Test func aWriteThatFailedAfterReachingTheDiskIsNeverAnsweredAsNotCharged() async throws {
        let world = try World(seed: 58)
        let rig = try world.terminal()
        rig.host.stop()
        let events = EventLog()
        let first = try TerminalProgram(world: world, rig: rig, events: events)
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app
        first.journal.fail(at: .confirmed, afterWriting: true)
        #expect(first.host.start(amount: euros(400)))
        #expect(world.run(until: { first.host.state.isFinished }))
        guard case .outcomeUnknown? = first.host.error else {
            Issue.record("the register was told \(String(describing: first.host.error))")
            return
        }
        // The error without the id settles nothing: the wallet waits out its receipt timeout and
        // keeps the request pending.
        #expect(world.run(until: { wallet.client.state == .paymentPending }, timeout: .seconds(15)))
        #expect(wallet.client.error == nil, "no final 'not charged' for a request on record")
        let pendingID = try #require(wallet.client.pendingPayment?.paymentID)
        #expect(try first.journal.unsettled().map(\.request.id) == [pendingID])
        first.journal.fail(at: nil)
        let report = try await first.service.recoverJournal(redemptions: nil)
        #expect(report.settled == [pendingID])
        #expect(try rig.ledger.executionCount(of: pendingID) == 1)
    }

    /// Recovery reports a confirmed request whose row cannot be decoded instead of skipping it.
    @Test func recoveryReportsARowItCannotDecode() async throws {
        let world = try World(seed: 59)
        let rig = try world.terminal()
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app
        #expect(rig.host.start(amount: euros(300)))
        #expect(world.run(until: { wallet.client.state == .completed }))
        let id = try #require(wallet.client.receipt?.paymentID)
        try rig.journal.database.execute("UPDATE steps SET currency = 'X!' WHERE step = 'confirmed'")
        let report = try await rig.service.recoverJournal(redemptions: nil)
        #expect(
            report.unreadable == [
                UnreadableRequest(id: id.description, reason: "its confirmed terms cannot be decoded")
            ])
        #expect(!report.isEmpty)
        #expect(report.description.contains("journal.sqlite is damaged"))
    }
}
