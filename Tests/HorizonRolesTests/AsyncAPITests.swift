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

/// The roles' async API (candidates → fetchOffer → pay/decline, collect) on the simulated radio
/// run in step with the clock: what each call promises when the person, the cashier or the
/// radio does something else than pay.
@Suite("The async API")
struct AsyncAPITests {
    /// Virtual seconds per real second: fast, yet slow enough that a busy machine cannot let a
    /// timeout pass between two awaits.
    static let speed = 3.0

    @Test func cancellingCollectCancelsTheSaleAndTheWalletIsTold() async throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let (saleError, walletError) = try await world.simulation.live(speed: Self.speed) {
            let sale = Task { try await terminal.host.collect(euros(500)) }
            let candidate = try #require(await first(wallet.client.candidates()))
            _ = try await wallet.client.fetchOffer(candidate)
            sale.cancel()
            let saleError = await #expect(throws: HostError.self) { try await sale.value }
            // The offer the person is looking at is withdrawn: the wallet ends the attempt.
            _ = await firstState(of: wallet.client, where: \.isFinished)
            return (saleError, wallet.client.error)
        }
        #expect(saleError == .cancelled)
        #expect(walletError == .cancelledByTerminal)
        #expect(try terminal.ledger.transactions(limit: 10).isEmpty)
        #expect(terminal.host.state == .idle)
    }

    /// A payment intent's sale: the offer names the intent's id and the wallet pays under it, so
    /// the payment settled is the intent's (its idempotency key end to end).
    @Test func aSaleWithAPaymentIDIsPaidUnderThatID() async throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        var random = SystemRandomNumberGenerator()
        let intentID = PaymentID.random(using: &random)
        let (order, receipt) = try await world.simulation.live(speed: Self.speed) {
            let sale = Task { try await terminal.host.collect(euros(500), paymentID: intentID) }
            let candidate = try #require(await first(wallet.client.candidates()))
            let offer = try await wallet.client.fetchOffer(candidate)
            let receipt = try await wallet.client.pay(offer, tip: euros(0))
            return (try await sale.value, receipt)
        }
        #expect(order.paymentID == intentID)
        #expect(receipt.paymentID == intentID)
        #expect(try terminal.ledger.transactions(limit: 10).map(\.paymentID) == [intentID])
    }

    @Test func declineTellsTheRegisterSignsNothingAndTheSaleStaysOpen() async throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let notices = Recorder<WalletNotice>()
        terminal.host.observeWallets { notices.append($0) }
        let saleError = try await world.simulation.live(speed: Self.speed) {
            let sale = Task { try await terminal.host.collect(euros(500)) }
            let candidate = try #require(await first(wallet.client.candidates()))
            let offer = try await wallet.client.fetchOffer(candidate)
            await wallet.client.decline(offer)
            try await waitUntil { notices.values.contains { if case .declined = $0 { true } else { false } } }
            // Any central could decline: the register's sale is still open until the cashier ends it.
            #expect(terminal.host.state != .idle && !terminal.host.state.isFinished)
            sale.cancel()
            return await #expect(throws: HostError.self) { try await sale.value }
        }
        #expect(saleError == .cancelled)
        #expect(wallet.client.state == .idle)
        #expect(wallet.client.pendingRequest == nil)
        #expect(try terminal.ledger.transactions(limit: 10).isEmpty)
    }

    /// A terminal that re-prices behind the person's back ends the attempt before anything is
    /// signed; the person who then confirms is told what changed, not that there was no offer.
    @Test func aRepricedOfferIsExplainedWhenThePersonConfirms() async throws {
        let world = try World()
        var random = SystemRandomNumberGenerator()
        let cheap = Shared<Offer?>(nil)
        let scripted = try ScriptedTerminal(
            world: world, name: "repricer", at: .origin, sessionID: SessionID.random(using: &random)
        ) { connection, message in
            guard case .hello = message, let first = cheap.value else { return }
            connection.send(.offer(first))
            var random = SystemRandomNumberGenerator()
            if let dear = try? Offer(
                sessionID: first.sessionID, transactionType: .payment, amount: euros(10_000), registerUser: "Ana",
                merchantPrograms: .none, offerNonce: Nonce.random(using: &random), expiresAt: first.expiresAt)
            {
                // Long after the first offer reached the app, even on a busy machine.
                world.simulation.schedule(after: .seconds(3)) {
                    connection.send(.offer(connection.signed(dear)))
                }
            }
        }
        cheap.value = scripted.signed(try scripted.offer(100))
        let wallet = try world.wallet()
        let error = try await world.simulation.live(speed: Self.speed) { () async throws -> PaymentClientError? in
            let candidate = try #require(await first(wallet.client.candidates()))
            let offer: PaymentOffer
            do throws(PaymentClientError) {
                offer = try await wallet.client.fetchOffer(candidate)
            } catch {
                // A machine so busy that the app saw the second offer first: the same explanation.
                return error
            }
            _ = await firstState(of: wallet.client, where: \.isFinished)
            return await #expect(throws: PaymentClientError.self) {
                try await wallet.client.pay(offer, tip: euros(0))
            }
        }
        guard case .invalidOffer(let reason)? = error else {
            Issue.record("expected invalidOffer, got \(String(describing: error))")
            return
        }
        #expect(
            reason.contains("changed its offer after showing it (the amount changed from 1.00 EUR to 100.00 EUR)"),
            "\(reason)")
        #expect(reason.contains("nothing was signed or charged"))
        #expect(scripted.confirms.isEmpty)
    }

    @Test func aTerminalNoAnchorVouchesForIsRefusedWithItsCause() async throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet(anchors: [TrustAnchor(publicKey: P256.Signing.PrivateKey().publicKey)])
        let error = try await world.simulation.live(speed: Self.speed) {
            let sale = Task { try await terminal.host.collect(euros(500)) }
            defer { sale.cancel() }
            let candidate = try #require(await first(wallet.client.candidates()))
            return await #expect(throws: PaymentClientError.self) { try await wallet.client.fetchOffer(candidate) }
        }
        guard case .terminalNotTrusted? = error else {
            Issue.record("expected terminalNotTrusted, got \(String(describing: error))")
            return
        }
        #expect(wallet.client.state == .idle)
    }

    @Test func aTipInAnotherCurrencyIsRefusedBeforeAnythingIsSigned() async throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let error = try await world.simulation.live(speed: Self.speed) {
            let sale = Task { try await terminal.host.collect(euros(500)) }
            defer { sale.cancel() }
            let candidate = try #require(await first(wallet.client.candidates()))
            let offer = try await wallet.client.fetchOffer(candidate)
            let error = await #expect(throws: PaymentClientError.self) {
                try await wallet.client.pay(offer, tip: try Money(minorUnits: 100, currency: .usd))
            }
            #expect(wallet.client.pendingRequest == nil)
            await wallet.client.decline(offer)
            return error
        }
        #expect(error == .invalidTip("the tip must be in EUR"))
        #expect(try terminal.ledger.transactions(limit: 10).isEmpty)
    }

    @Test func payingAnOfferTheClientNeverReceivedIsRefused() async throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        // Another shop far away, whose offer another wallet fetches.
        let elsewhere = try world.terminal("elsewhere", at: Position(x: 40, y: 0))
        let other = try world.wallet("other", at: Position(x: 40.3, y: 0))
        let error = try await world.simulation.live(speed: Self.speed) {
            let sale = Task { try await terminal.host.collect(euros(500)) }
            let saleElsewhere = Task { try await elsewhere.host.collect(euros(90_000)) }
            defer {
                sale.cancel()
                saleElsewhere.cancel()
            }
            let candidate = try #require(await first(wallet.client.candidates()))
            let offer = try await wallet.client.fetchOffer(candidate)
            let otherCandidate = try #require(await first(other.client.candidates()))
            let otherOffer = try await other.client.fetchOffer(otherCandidate)
            #expect(otherOffer.digest != offer.digest)
            let error = await #expect(throws: PaymentClientError.self) {
                try await wallet.client.pay(otherOffer, tip: euros(0))
            }
            #expect(wallet.client.pendingRequest == nil)
            await wallet.client.decline(offer)
            await other.client.decline(otherOffer)
            return error
        }
        #expect(error == .invalidOffer("it is not the offer this client received; nothing was signed"))
        #expect(try terminal.ledger.transactions(limit: 10).isEmpty)
        #expect(try elsewhere.ledger.transactions(limit: 10).isEmpty)
    }

    @Test func cancellingPayAfterTheRequestLeftReportsItPendingNeverFailed() async throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        // The wallet walks away the moment its confirmation leaves: the answer cannot reach it.
        let device = wallet.device
        wallet.client.observeState { state in
            if state == .acquiringPaymentExecution { device.move(to: Position(x: 500, y: 0)) }
        }
        let (payError, paymentID) = try await world.simulation.live(speed: Self.speed) {
            let sale = Task { try await terminal.host.collect(euros(500)) }
            let candidate = try #require(await first(wallet.client.candidates()))
            let offer = try await wallet.client.fetchOffer(candidate)
            let payment = Task { try await wallet.client.pay(offer, tip: euros(50)) }
            _ = await firstState(of: wallet.client, where: { $0 == .paymentPending })
            payment.cancel()
            let error = await #expect(throws: PaymentClientError.self) { try await payment.value }
            let paymentID = wallet.client.pendingRequest?.paymentID
            // Back in range: the client keeps asking and hears the answer.
            device.move(to: Position(x: 0.3, y: 0))
            _ = await firstState(of: wallet.client, where: \.isFinished)
            _ = await sale.result
            return (error, paymentID)
        }
        let id = try #require(paymentID)
        #expect(payError == .stillPending(id))
        #expect(wallet.client.state == .completed)
        #expect(wallet.client.receipt?.paymentID == id)
        let rows = try terminal.ledger.transactions(limit: 10)
        #expect(rows.map(\.paymentID) == [id])
    }

    @Test func aRedemptionHostCollectsAndTheCoordinatorRedeems() async throws {
        let bench = try RedemptionBench(.bonusRedemption)
        let wallet = try bench.wallet()
        try bench.terminal.ledger.addBonusPoints(150, for: wallet.identity.publicKey)
        let (result, receipt) = try await bench.world.simulation.live(speed: Self.speed) {
            let sale = Task {
                try await bench.host.collect(RedemptionOffer(item: "Free coffee", points: 100, value: euros(320)))
            }
            let candidate = try #require(await first(wallet.coordinator.candidates()))
            #expect(candidate.peripheralMetaData.transactionType == .bonusRedemption)
            let offer = try await wallet.coordinator.fetchOffer(candidate)
            #expect(offer.quantity == 100)
            let receipt = try await wallet.coordinator.bonusRedemptionClient.redeem(offer)
            return (try await sale.value, receipt)
        }
        #expect(result.paymentID == receipt.paymentID)
        #expect(receipt.item == "Free coffee")
        #expect(try bench.terminal.ledger.account(for: wallet.identity.publicKey)?.bonusPoints == 50)
    }
}

/// The first element of `stream`, or nil if it ends (or the task is cancelled) first.
func first<Element: Sendable>(_ stream: AsyncStream<Element>) async -> Element? {
    for await element in stream { return element }
    return nil
}

/// The first state of `client` (the current one included) that satisfies `predicate`.
@discardableResult
func firstState(of client: TransactionClient, where predicate: (PaymentClientState) -> Bool) async
    -> PaymentClientState?
{
    for await state in client.states() where predicate(state) { return state }
    return nil
}

/// Polls `condition` until it holds; fails the test after `timeout` of real time.
func waitUntil(timeout: Duration = .seconds(10), _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { throw AsyncTestTimeout() }
        try await Task.sleep(for: .milliseconds(5))
    }
}

struct AsyncTestTimeout: Error {}
