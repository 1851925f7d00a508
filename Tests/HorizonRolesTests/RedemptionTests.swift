import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

/// A terminal with one redemption host, and wallets with the full coordinator.
struct RedemptionBench {
    let world: World
    let terminal: TerminalRig
    let host: RedemptionHost

    init(_ type: TransactionType, seed: UInt64 = 11, at position: Position = .origin, name: String = "terminal") throws
    {
        world = try World(seed: seed)
        terminal = try world.terminal(name, at: position)
        host = try requireValue(
            RedemptionHost.redemptionHost(
                transactionType: type, service: terminal.service, processor: terminal.ledger))
    }

    func wallet(_ name: String = "wallet", at position: Position = Position(x: 0.3, y: 0)) throws
        -> WalletCoordinatorRig
    {
        try WalletCoordinatorRig(world: world, name: name, position: position)
    }
}

struct WalletCoordinatorRig {
    let device: SimulatedDevice
    let identity: WalletIdentity
    let coordinator: PaymentAndRedemptionClientCoordinator

    init(world: World, name: String, position: Position, identity: WalletIdentity = WalletIdentity()) throws {
        device = try world.simulation.addDevice(name: name, configuration: DeviceConfiguration(position: position))
        self.identity = identity
        coordinator = PaymentAndRedemptionClientCoordinator(
            radio: device, identity: identity, trustAnchors: world.anchors)
        try coordinator.start()
    }

    /// The reference app's redemption screen, scripted: take the nearest candidate of any kind,
    /// accept, confirm (naming `coupon` for coupon redemptions).
    @discardableResult
    func acceptEverything(coupon: String? = nil, tip: Int64 = 0) -> WalletAutopilot {
        WalletAutopilot(coordinator: coordinator) { _, type in
            type == .payment ? .pay(tip: euros(tip)) : .redeem(coupon: coupon)
        }
    }
}

@Suite("Redemptions on the simulated radio", .offTheCooperativePool)
struct RedemptionTests {
    @Test func aBonusRedemptionSpendsExactlyThePointsOffered() throws {
        let bench = try RedemptionBench(.bonusRedemption)
        let wallet = try bench.wallet()
        try bench.terminal.ledger.addBonusPoints(250, for: wallet.identity.publicKey)
        wallet.acceptEverything()
        #expect(bench.host.start(RedemptionOffer(item: "Free coffee", points: 100, value: euros(320))))
        let client = wallet.coordinator.bonusRedemptionClient
        #expect(bench.world.run(until: { client.state.isFinished && bench.host.state.isFinished }))
        #expect(client.state == .completed)
        #expect(client.offer?.item == "Free coffee")
        #expect(client.offer?.quantity == 100)
        #expect(client.receipt?.transactionType == .bonusRedemption)
        #expect(client.receipt?.quantity == 100)
        #expect(client.receipt?.bonusPointsBalance == 150)
        #expect(client.bonusProgramMembership?.points == 150)
        #expect(bench.host.finalRedemption?.quantity == 100)
        #expect(try bench.terminal.ledger.account(for: wallet.identity.publicKey)?.bonusPoints == 150)
        // No money moves in a redemption.
        #expect(try bench.terminal.ledger.merchantBalance() == euros(0))
    }

    @Test func aGoldBenefitOncePerPeriod() throws {
        let bench = try RedemptionBench(.goldRedemption)
        let wallet = try bench.wallet()
        let now = World.wallClock
        try bench.terminal.ledger.grantGoldMembership(
            to: wallet.identity.publicKey, tier: "Gold", validFrom: now - 100, validUntil: now + 86_400 * 365,
            benefitPeriod: 86_400 * 30)
        wallet.acceptEverything()
        let client = wallet.coordinator.goldRedemptionClient
        #expect(bench.host.start(RedemptionOffer(item: "Free dessert", value: euros(600))))
        #expect(bench.world.run(until: { client.state.isFinished }))
        #expect(client.state == .completed)
        #expect(try bench.terminal.ledger.goldMembership(for: wallet.identity.publicKey)?.lastBenefitPeriod == 0)

        // The same period again: refused, nothing changed.
        wallet.coordinator.restart()
        #expect(bench.host.stop())
        #expect(bench.host.start(RedemptionOffer(item: "Free dessert", value: euros(600))))
        #expect(
            bench.world.run(until: { client.state.isFinished && requestDecline(bench.host.lastWalletNotice) != nil }))
        #expect(client.error == .declined(code: .alreadyRedeemed, reason: "it was already redeemed"))
        // The register hears of it; the session stays open (a decline ends one wallet's attempt).
        #expect(requestDecline(bench.host.lastWalletNotice)?.code == .alreadyRedeemed)
        #expect(requestDecline(bench.host.lastWalletNotice)?.reason == "the gold benefit was already used this period")
        #expect(bench.host.error == nil)
    }

    @Test func aCouponIsRedeemedOnceAndRefusedWhenUsedExpiredOrUnknown() throws {
        let bench = try RedemptionBench(.couponRedemption)
        let wallet = try bench.wallet()
        let now = World.wallClock
        try bench.terminal.ledger.issueCoupon(
            code: "SUMMER-24", to: wallet.identity.publicKey, description: "5 EUR off", value: euros(500),
            expiresAt: now + 3600)
        try bench.terminal.ledger.issueCoupon(
            code: "OLD-1", to: wallet.identity.publicKey, description: "expired", value: euros(100), expiresAt: now - 1)
        let client = wallet.coordinator.couponRedemptionClient
        // One person throughout, naming another coupon each time.
        let choice = Recorder<String>()
        let autopilot = WalletAutopilot(coordinator: wallet.coordinator) { _, _ in .redeem(coupon: choice.last) }

        func redeem(_ code: String) throws -> PaymentClientError? {
            wallet.coordinator.restart()
            _ = bench.host.stop()
            choice.append(code)
            #expect(bench.host.start(RedemptionOffer(item: "any coupon", value: euros(0))))
            // A decline leaves the session open: the wallet's answer is what counts here.
            #expect(
                bench.world.run(until: {
                    client.state.isFinished
                        && (bench.host.state.isFinished || requestDecline(bench.host.lastWalletNotice) != nil)
                }))
            return client.error
        }
        #expect(try redeem("SUMMER-24") == nil)
        #expect(client.receipt?.item == "SUMMER-24")
        #expect(try redeem("SUMMER-24") == .declined(code: .alreadyRedeemed, reason: "it was already redeemed"))
        #expect(try redeem("OLD-1") == .declined(code: .expired, reason: "it expired"))
        #expect(try redeem("NOPE") == .declined(code: .notFound, reason: "it was not found"))
        let coupons = try bench.terminal.ledger.coupons(for: wallet.identity.publicKey)
        #expect(coupons.filter { $0.redeemedAt != nil }.map(\.code) == ["SUMMER-24"])
        withExtendedLifetime(autopilot) {}
    }

    @Test func redeemingMorePointsThanHeldIsRefusedAndChangesNothing() throws {
        let bench = try RedemptionBench(.bonusRedemption)
        let wallet = try bench.wallet()
        try bench.terminal.ledger.addBonusPoints(40, for: wallet.identity.publicKey)
        wallet.acceptEverything()
        #expect(bench.host.start(RedemptionOffer(item: "Free lunch", points: 100, value: euros(1200))))
        let client = wallet.coordinator.bonusRedemptionClient
        #expect(
            bench.world.run(until: { client.state.isFinished && requestDecline(bench.host.lastWalletNotice) != nil }))
        #expect(client.error == .declined(code: .insufficientPoints, reason: "there are not enough bonus points"))
        #expect(requestDecline(bench.host.lastWalletNotice)?.code == .insufficientPoints)
        #expect(requestDecline(bench.host.lastWalletNotice)?.reason == "not enough bonus points: 100 needed, 40 held")
        #expect(bench.host.error == nil)
        #expect(try bench.terminal.ledger.account(for: wallet.identity.publicKey)?.bonusPoints == 40)
    }

    @Test func oneCouponFromTwoWalletsOrTwiceAtOnceIsRedeemedExactlyOnce() throws {
        // Two wallets of the same person's key (a copied wallet) race for one coupon at two
        // terminals sharing one ledger.
        let world = try World(seed: 21)
        let shop = try world.terminal("left", at: Position(x: -3, y: 0))
        let secondDevice = try world.simulation.addDevice(
            name: "right", configuration: DeviceConfiguration(position: Position(x: 3, y: 0)))
        let secondService = TerminalRadioService(
            radio: secondDevice, identity: shop.identity, processor: shop.ledger, journal: shop.journal)
        let hosts = try [
            requireValue(
                RedemptionHost.redemptionHost(
                    transactionType: .couponRedemption, service: shop.service, processor: shop.ledger)),
            requireValue(
                RedemptionHost.redemptionHost(
                    transactionType: .couponRedemption, service: secondService, processor: shop.ledger)),
        ]
        let identity = WalletIdentity()
        try shop.ledger.issueCoupon(
            code: "ONCE", to: identity.publicKey, description: "one use", value: euros(300),
            expiresAt: World.wallClock + 3600)
        var clients: [RedemptionClient] = []
        for (index, x) in [-2.8, 2.8].enumerated() {
            let rig = try WalletCoordinatorRig(
                world: world, name: "wallet\(index)", position: Position(x: x, y: 0), identity: identity)
            rig.acceptEverything(coupon: "ONCE")
            clients.append(rig.coordinator.couponRedemptionClient)
        }
        for host in hosts { #expect(host.start(RedemptionOffer(item: "coupon", value: euros(0)))) }
        #expect(world.run(until: { clients.allSatisfy { $0.state.isFinished } }))
        #expect(clients.filter { $0.state == .completed }.count == 1)
        #expect(clients.compactMap(\.error) == [.declined(code: .alreadyRedeemed, reason: "it was already redeemed")])
        let redeemed = try shop.ledger.transactions().filter {
            $0.transactionType == .couponRedemption && $0.outcome.isApproved
        }
        #expect(redeemed.count == 1)
    }

    @Test(arguments: [TransactionType.bonusRedemption, .couponRedemption])
    func cuttingTheLinkAtEveryFrameNeverRedeemsTwice(type: TransactionType) throws {
        var frameIndex = 0
        var completed = 0
        while frameIndex < 100 {
            let bench = try RedemptionBench(type, seed: UInt64(500 + frameIndex))
            let wallet = try bench.wallet()
            try bench.terminal.ledger.addBonusPoints(300, for: wallet.identity.publicKey)
            try bench.terminal.ledger.issueCoupon(
                code: "CUT", to: wallet.identity.publicKey, description: "", value: euros(100),
                expiresAt: World.wallClock + 86_400)
            wallet.acceptEverything(coupon: "CUT")
            bench.world.simulation.injectFaultOnNextLink(.cut, atFrame: frameIndex)
            let offer =
                type == .bonusRedemption
                ? RedemptionOffer(item: "Mug", points: 100, value: euros(900))
                : RedemptionOffer(item: "coupon", value: euros(0))
            #expect(bench.host.start(offer))
            let client = try requireValue(wallet.coordinator.redemptionClient(for: type))
            bench.world.run(until: { client.state.isFinished || client.state == .paymentPending })
            bench.world.run(until: { bench.host.state.isFinished }, timeout: .seconds(90))
            if client.state == .paymentPending {
                _ = bench.host.stop()
                #expect(bench.host.start(offer))
                bench.world.run(until: { client.state.isFinished }, timeout: .seconds(60))
            }
            let applied = try bench.terminal.ledger.transactions().filter { $0.outcome.isApproved }
            #expect(applied.count <= 1, "frame \(frameIndex)")
            #expect(client.state.isFinished, "frame \(frameIndex): \(client.state)")
            let points = try bench.terminal.ledger.account(for: wallet.identity.publicKey)?.bonusPoints
            if client.state == .completed {
                completed += 1
                #expect(applied.count == 1, "frame \(frameIndex)")
                if type == .bonusRedemption { #expect(points == 200, "frame \(frameIndex)") }
            } else {
                #expect(applied.isEmpty, "frame \(frameIndex): the wallet reported failure for an applied redemption")
                #expect(points == 300, "frame \(frameIndex)")
            }
            guard bench.world.simulation.appliedFaults.contains(where: { $0.fault == .cut }) else { break }
            frameIndex += 1
        }
        #expect(frameIndex > 5)
        #expect(completed >= 1)
    }

    @Test func aPaymentTerminalAndACouponTerminalSideBySideAreOfferedNearestFirst() throws {
        let world = try World(seed: 41)
        let payment = try world.terminal("pay", at: Position(x: 0.3, y: 0))
        let couponTerminal = try world.terminal("coupon", at: Position(x: 1.5, y: 0))
        let couponHost = try requireValue(
            RedemptionHost.redemptionHost(
                transactionType: .couponRedemption, service: couponTerminal.service, processor: couponTerminal.ledger))
        let wallet = try WalletCoordinatorRig(world: world, name: "wallet", position: .origin)
        try couponTerminal.ledger.issueCoupon(
            code: "NEAR", to: wallet.identity.publicKey, description: "", value: euros(100),
            expiresAt: World.wallClock + 3600)
        #expect(payment.host.start(amount: euros(700)))
        #expect(couponHost.start(RedemptionOffer(item: "coupon", value: euros(0))))
        let collection = wallet.coordinator.manualConnectionDecider
        #expect(world.run(until: { collection.state == .candidateAvailable }))
        // Both are candidates of their own deciders; the collection shows the nearer: the payment.
        #expect(collection.candidate?.peripheralMetaData.transactionType == .payment)
        wallet.acceptEverything(coupon: "NEAR")
        #expect(world.run(until: { wallet.coordinator.paymentClient.state == .completed }))
        // After it, the other one.
        wallet.coordinator.restart()
        #expect(world.run(until: { wallet.coordinator.couponRedemptionClient.state == .completed }))
        #expect(try couponTerminal.ledger.coupons(for: wallet.identity.publicKey).first?.redeemedAt != nil)
        #expect(try payment.ledger.merchantBalance() == euros(700))
    }

    @Test func redemptionsAreAnnouncedOnBothSides() async throws {
        let bench = try RedemptionBench(.bonusRedemption)
        let wallet = try bench.wallet()
        try bench.terminal.ledger.addBonusPoints(10, for: wallet.identity.publicKey)
        let hostEvents = bench.host.finishedRedemptions()
        let walletEvents = wallet.coordinator.bonusRedemptionClient.finishedRedemptions()
        let notified = Recorder<String>()
        let observer = NotificationCenter.default.addObserver(
            forName: .redemptionClientFinishedARedemption, object: nil, queue: nil
        ) { note in
            if note.userInfo?["finishedRedemption"] is WalletFinishedPayment { notified.append("wallet") }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        wallet.acceptEverything()
        #expect(bench.host.start(RedemptionOffer(item: "Sticker", points: 10, value: euros(50))))
        // Awaiting the streams below is safe only once both sides have completed: the virtual
        // clock does not move while the test awaits.
        let client = wallet.coordinator.bonusRedemptionClient
        try #require(bench.world.run(until: { bench.host.state == .completed && client.state == .completed }))
        var hostIterator = hostEvents.makeAsyncIterator()
        let hostEvent = try #require(await hostIterator.next())
        #expect(hostEvent.transactionType == .bonusRedemption)
        #expect(hostEvent.result?.quantity == 10)
        var walletIterator = walletEvents.makeAsyncIterator()
        let walletEvent = try #require(await walletIterator.next())
        #expect(walletEvent.receipt?.item == "Sticker")
        #expect(notified.count >= 1)
    }

    @Test func theLedgerSaysWhichProgramsTheMerchantRunsAndOffersCarryIt() throws {
        let bench = try RedemptionBench(.couponRedemption)
        let ledger = bench.terminal.ledger
        let wallet = try bench.wallet()
        #expect(try ledger.merchantPrograms() == MerchantPrograms(hasBonusProgram: true))
        try ledger.issueCoupon(
            code: "C", to: wallet.identity.publicKey, description: "", value: euros(0), expiresAt: World.wallClock + 99)
        try ledger.grantGoldMembership(
            to: wallet.identity.publicKey, tier: "Gold", validFrom: World.wallClock, validUntil: World.wallClock + 99)
        let all = MerchantPrograms(hasBonusProgram: true, hasGoldProgram: true, hasCouponProgram: true)
        #expect(try ledger.merchantPrograms() == all)
        let noBonus = try BlockingLedger(
            path: bench.world.directory.appendingPathComponent("nobonus.sqlite").path,
            configuration: InProcessLedgerConfiguration(bonusPointsPerMajorUnit: 0))
        #expect(try noBonus.merchantPrograms() == .none)
        // A host configured with the ledger's programs advertises them in its signed offer.
        let host = try requireValue(
            RedemptionHost.redemptionHost(
                transactionType: .goldRedemption, service: bench.terminal.service, processor: ledger,
                configuration: PaymentHostConfiguration(merchantPrograms: try ledger.merchantPrograms())))
        let client = wallet.coordinator.goldRedemptionClient
        #expect(host.start(RedemptionOffer(item: "Lounge", value: euros(0))))
        #expect(bench.world.run(until: { client.manualConnectionDecider.state == .candidateAvailable }))
        client.manualConnectionDecider.startDeciding()
        #expect(bench.world.run(until: { client.offer != nil }))
        #expect(client.offer?.merchantPrograms == all)
    }

    @Test func invalidRedemptionOffersCannotStart() throws {
        let bench = try RedemptionBench(.bonusRedemption)
        #expect(!bench.host.start(RedemptionOffer(item: "Free", points: 0, value: euros(0))))
        #expect(bench.host.error == .invalidRedemption("a bonus redemption must cost at least one point"))
        #expect(
            RedemptionHost.redemptionHost(
                transactionType: .payment, service: bench.terminal.service, processor: bench.terminal.ledger) == nil)
        let coupon = try requireValue(
            RedemptionHost.redemptionHost(
                transactionType: .couponRedemption, service: bench.terminal.service, processor: bench.terminal.ledger))
        #expect(!coupon.start(RedemptionOffer(item: "x", points: 5, value: euros(0))))
        #expect(coupon.error == .invalidRedemption("only bonus redemptions cost points"))
    }
}
