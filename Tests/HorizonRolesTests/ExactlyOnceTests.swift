import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

@Suite("Exactly once under link cuts, and many payments in a row", .offTheCooperativePool)
struct ExactlyOnceTests {
    /// Cuts the first link of a payment at frame 0, 1, 2, ... until the cut no longer happens
    /// (the payment needed fewer frames). After every cut: at most one charge; the wallet reports
    /// failure only if nothing was charged; a pending payment resolves to its real outcome on
    /// the wallet's next contact with the terminal.
    @Test(arguments: [23, 247])
    func cuttingTheLinkAtEveryFrameNeverChargesTwiceNorReportsFailureForACharge(mtu: Int) throws {
        var outcomes: [String: Int] = [:]
        var frameIndex = 0
        while frameIndex < 200 {
            let world = try World(seed: UInt64(1000 + frameIndex))
            let terminal = try world.terminal(link: LinkParameters(attMTU: mtu))
            let wallet = try world.wallet(link: LinkParameters(attMTU: mtu))
            let app = ScriptedWalletApp(wallet, decision: .accept(tip: 50))
            _ = app
            world.simulation.injectFaultOnNextLink(.cut, atFrame: frameIndex)
            #expect(terminal.host.start(amount: euros(1000)))
            world.run(until: { wallet.client.state.isFinished || wallet.client.state == .paymentPending })
            world.run(until: { terminal.host.state.isFinished }, timeout: .seconds(90))
            var resolvedLater = false
            if wallet.client.state == .paymentPending {
                // The cashier's next session: the wallet finds the terminal again and asks.
                resolvedLater = true
                terminal.host.stop()
                #expect(terminal.host.start(amount: euros(1)))
                world.run(until: { wallet.client.state.isFinished }, timeout: .seconds(60))
            }
            let cutApplied = world.simulation.appliedFaults.contains { $0.fault == .cut }

            let charged = try terminal.ledger.transactions().filter { $0.outcome.isApproved }
            #expect(charged.count <= 1, "frame \(frameIndex): charged \(charged.count) times")
            #expect(wallet.client.state.isFinished, "frame \(frameIndex): wallet left in \(wallet.client.state)")
            if wallet.client.state == .completed {
                #expect(charged.count == 1, "frame \(frameIndex): the wallet completed but nothing was charged")
                #expect(charged.first?.paymentID == wallet.client.receipt?.paymentID)
                #expect(try terminal.ledger.merchantBalance() == euros(1050))
                outcomes[resolvedLater ? "completed after pending" : "completed", default: 0] += 1
            } else {
                #expect(charged.isEmpty, "frame \(frameIndex): the wallet reported failure for a charged payment")
                #expect(try terminal.ledger.merchantBalance() == euros(0))
                outcomes[resolvedLater ? "failed after pending" : "failed", default: 0] += 1
            }
            guard cutApplied else { break }
            frameIndex += 1
        }
        // The sweep went past the end of a payment, and the cuts produced every kind of outcome.
        #expect(frameIndex > (mtu == 23 ? 30 : 6))
        #expect(frameIndex < 200)
        #expect(outcomes["completed", default: 0] >= 1)
        #expect(outcomes["failed", default: 0] >= 1)
        #expect(outcomes["completed after pending", default: 0] >= 1)
    }

    @Test func aHundredPaymentsInARowWithRestartAllCorrect() throws {
        let world = try World(seed: 5)
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        try terminal.ledger.setBalance(1_000_000, for: wallet.identity.publicKey)
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 10))
        _ = app
        var expectedTotal: Int64 = 0
        var paymentIDs: Set<PaymentID> = []
        for index in 1...100 {
            let amount = Int64(100 + index)
            #expect(terminal.host.start(amount: euros(amount)), "payment \(index)")
            let done = world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed })
            #expect(done, "payment \(index): wallet \(wallet.client.state), terminal \(terminal.host.state)")
            guard done, let receipt = wallet.client.receipt else { break }
            #expect(receipt.amount == euros(amount))
            #expect(terminal.host.finalPaymentState?.paymentOrder.tip == euros(10))
            paymentIDs.insert(receipt.paymentID)
            expectedTotal += amount + 10
            #expect(terminal.host.stop())
            wallet.client.restart()
            wallet.decider.restart()
        }
        #expect(paymentIDs.count == 100)
        #expect(try terminal.ledger.transactions(limit: 1000).count == 100)
        #expect(try terminal.ledger.merchantBalance() == euros(expectedTotal))
        #expect(
            try terminal.ledger.account(for: wallet.identity.publicKey)?.balance == euros(1_000_000 - expectedTotal))
    }
}

@Suite("A pending payment survives the wallet program", .offTheCooperativePool)
struct PendingAcrossRunsTests {
    /// The wallet's share of the durability rule, counted: one synced commit a payment (the
    /// pending request, before the confirmation leaves); the receipt that resolves it, and the
    /// copy `horizon-wallet` keeps after it, are committed without a sync, since the terminal and
    /// the ledger give it again by payment id.
    @Test func aWalletPaymentMakesOneSyncedCommit() throws {
        let world = try World(seed: 33)
        let terminal = try world.terminal()
        let storePath = world.directory.appendingPathComponent("wallet.sqlite").path
        let store = SQLitePendingPaymentStore(store: try WalletStore(path: storePath))
        let device = try world.simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: Position(x: 0.3, y: 0)))
        let client = PaymentClient(
            radio: device, identity: WalletIdentity(), trustAnchors: world.anchors, pendingStore: store)
        try client.start()
        let app = ScriptedWalletApp(client: client, decision: .accept(tip: 0))
        _ = app
        let before = SyncedCommits.count(at: storePath)
        #expect(terminal.host.start(amount: euros(250)))
        #expect(world.run(until: { client.state == .completed }))
        #expect(try store.all().isEmpty, "the pending request is resolved")
        // The program keeps the receipt it shows, as `horizon-wallet pay` does.
        let receipt = try #require(client.receipt)
        try store.store.saveReceipt(StoredReceipt(recording: receipt))
        #expect(try store.store.receipts().map(\.paymentID) == [receipt.paymentID.description])
        #expect(SyncedCommits.count(at: storePath) - before == 1)
    }

    @Test func aNewWalletRunResolvesThePaymentAnEarlierRunLeftPending() throws {
        let world = try World(seed: 31)
        let terminal = try world.terminal()
        let storePath = world.directory.appendingPathComponent("wallet.sqlite").path
        let identity = WalletIdentity()
        let device = try world.simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: Position(x: 0.3, y: 0)))

        // First run: confirms, then the radio contact breaks as the receipt is sent (the 8th of
        // 8 frames at MTU 247: the confirmation takes two since it binds keys and the offer), and the
        // program ends while the payment is pending.
        do {
            let store = SQLitePendingPaymentStore(store: try WalletStore(path: storePath))
            let client = PaymentClient(
                radio: device, identity: identity, trustAnchors: world.anchors, pendingStore: store)
            try client.start()
            let app = ScriptedWalletApp(client: client, decision: .accept(tip: 20))
            _ = app
            world.simulation.injectFaultOnNextLink(.cut, atFrame: 7)
            #expect(terminal.host.start(amount: euros(300)))
            #expect(world.run(until: { client.state == .paymentPending }))
            #expect(terminal.host.state == .completed)  // it was charged
            #expect(try store.all().count == 1)
            client.stop()
        }
        terminal.host.stop()
        device.stopScanning()

        // Second run, a new client on the same store: it asks again and gets the real outcome.
        let store = SQLitePendingPaymentStore(store: try WalletStore(path: storePath))
        let pending = try #require(try store.all().first)
        let client = PaymentClient(radio: device, identity: identity, trustAnchors: world.anchors, pendingStore: store)
        try client.start()
        #expect(terminal.host.start(amount: euros(1)))  // the cashier's next session makes it reachable
        #expect(client.resume(pending))
        #expect(client.state == .paymentPending)
        #expect(!client.resume(pending))  // one at a time
        #expect(world.run(until: { client.state.isFinished }))
        #expect(client.state == .completed)
        #expect(client.receipt?.paymentID == pending.paymentID)
        #expect(client.receipt?.total == euros(320))
        #expect(try store.all().isEmpty)
        #expect(try terminal.ledger.executionCount(of: pending.paymentID) == 1)
        #expect(try terminal.ledger.merchantBalance() == euros(320))
    }
}
