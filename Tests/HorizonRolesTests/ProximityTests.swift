import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

@Suite("Candidates, conflicts and rogue terminals", .offTheCooperativePool)
struct ProximityTests {
    @Test func aWalletWalkingAwayLosesItsCandidate() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        #expect(terminal.host.start(amount: euros(300)))
        #expect(world.run(until: { wallet.decider.state == .candidateAvailable }))
        let states = Recorder<ManualConnectionDeciderState>()
        wallet.decider.observeState { states.append($0) }
        wallet.device.move(to: Position(x: 40, y: 0))  // far beyond -80 dBm, still within radio range
        #expect(world.run(until: { wallet.decider.state == .waitingForCandidate }, timeout: .seconds(10)))
        #expect(wallet.decider.candidate == nil)
        #expect(states.values == [.waitingForCandidate])
        // Coming back offers it again.
        wallet.device.move(to: Position(x: 0.3, y: 0))
        #expect(world.run(until: { wallet.decider.state == .candidateAvailable }, timeout: .seconds(10)))
    }

    @Test func twoTerminalsEquallyNearGiveNoCandidateUntilOneIsClearlyNearer() throws {
        let world = try World()
        let left = try world.terminal("left", at: Position(x: -1, y: 0))
        let right = try world.terminal("right", at: Position(x: 1, y: 0))
        let wallet = try world.wallet(at: Position(x: 0, y: 0.2))
        try left.conflicts.restart()
        try right.conflicts.restart()
        #expect(left.host.start(amount: euros(100)))
        #expect(right.host.start(amount: euros(200)))

        // Over ten seconds of noisy readings no candidate is offered: a conflict.
        let offered = Recorder<ManualConnectionDeciderState>()
        wallet.decider.observeState { offered.append($0) }
        world.run(for: .seconds(10))
        #expect(offered.values.isEmpty)
        #expect(wallet.decider.state == .waitingForCandidate)
        #expect(wallet.client.fusionTracker.isConflict)
        #expect(wallet.client.fusionTracker.trackings.count == 2)
        // Each terminal's conflict observer hears the other.
        #expect(left.conflicts.state == .conflict)
        #expect(left.conflicts.conflictCount == 1)
        #expect(right.conflicts.state == .conflict)
        #expect(right.conflicts.conflictCount == 1)
        #expect(left.conflicts.availability == .poweredOn)

        // The wallet steps towards the right terminal: it becomes the candidate.
        wallet.device.move(to: Position(x: 0.8, y: 0.1))
        #expect(world.run(until: { wallet.decider.state == .candidateAvailable }, timeout: .seconds(5)))
        let rightSession = try #require(right.host.sessionID)
        #expect(wallet.decider.candidate?.peripheralMetaData.sessionID == rightSession)
        #expect(!wallet.client.fusionTracker.isConflict)

        // Small moves do not flip the candidate (hysteresis)...
        wallet.device.move(to: Position(x: 0.1, y: 0.1))
        world.run(for: .seconds(5))
        #expect(wallet.decider.candidate?.peripheralMetaData.sessionID == rightSession)
        // ...a clearly nearer terminal does.
        wallet.device.move(to: Position(x: -0.8, y: 0.1))
        let leftSession = try #require(left.host.sessionID)
        #expect(
            world.run(
                until: { wallet.decider.candidate?.peripheralMetaData.sessionID == leftSession }, timeout: .seconds(5)))

        // Stopping the other terminal clears the conflict after the window.
        #expect(right.host.stop())
        #expect(world.run(until: { left.conflicts.state == .noConflict }, timeout: .seconds(6)))
        right.conflicts.stop()
        #expect(right.conflicts.state == .stopped)
    }

    /// The second terminal starts a moment after the first: the first reaches its sightings
    /// while the second has been heard only once or twice. It must not win that race: a session
    /// heard at all is a rival, so two equally near terminals stay a conflict.
    @Test(arguments: [30, 60, 90])
    func aTerminalHeardFirstDoesNotWinTheRaceToItsSightings(staggerMilliseconds: Int) throws {
        let world = try World()
        let left = try world.terminal("left", at: Position(x: -1, y: 0))
        let right = try world.terminal("right", at: Position(x: 1, y: 0))
        let wallet = try world.wallet(at: Position(x: 0, y: 0.2))
        let offered = Recorder<ManualConnectionDeciderState>()
        wallet.decider.observeState { offered.append($0) }
        #expect(left.host.start(amount: euros(100)))
        world.run(for: .milliseconds(staggerMilliseconds))
        #expect(right.host.start(amount: euros(200)))
        world.run(for: .seconds(5))
        #expect(offered.values.isEmpty)
        #expect(wallet.client.fusionTracker.isConflict)
    }

    @Test func conflictObserverReportsAdapterAvailability() throws {
        let world = try World()
        let terminal = try world.terminal()
        terminal.device.setAvailability(.unauthorized)
        #expect(terminal.conflicts.availability == .unauthorized)
        #expect(throws: RadioError.adapterUnavailable(.unauthorized)) { try terminal.conflicts.restart() }
        #expect(terminal.conflicts.state == .stopped)
        #expect(!terminal.host.start(amount: euros(100)))
        #expect(terminal.host.error == .radio(.adapterUnavailable(.unauthorized)))
        terminal.device.powerOff()
        #expect(terminal.conflicts.availability == .poweredOff)
    }

    @Test func twoWalletsOnOneSessionExactlyOnePays() throws {
        let world = try World()
        let terminal = try world.terminal()
        let first = try world.wallet("first", at: Position(x: 0.3, y: 0))
        let second = try world.wallet("second", at: Position(x: -0.3, y: 0))
        let apps = [
            ScriptedWalletApp(first, decision: .accept(tip: 0)), ScriptedWalletApp(second, decision: .accept(tip: 0)),
        ]
        _ = apps
        #expect(terminal.host.start(amount: euros(800)))
        #expect(world.run(until: { first.client.state.isFinished && second.client.state.isFinished }))
        let outcomes = [first.client, second.client].map(\.state)
        #expect(outcomes.filter { $0 == .completed }.count == 1)
        #expect(outcomes.filter { $0 == .completedWithError }.count == 1)
        // Both were shown the offer (a Hello takes no session); the first valid confirmation took
        // it, and the other wallet was told the session is over, or that its own confirmation
        // was refused: either way nothing of its was charged.
        let loser = first.client.state == .completed ? second.client : first.client
        switch loser.error {
        case .cancelledByTerminal?: break
        case .declined(let code, _)? where code == .sessionTaken || code == .sessionNotFound: break
        default: Issue.record("expected a clear refusal, got \(String(describing: loser.error))")
        }
        #expect(try terminal.ledger.transactions().count == 1)
        #expect(try terminal.ledger.merchantBalance() == euros(800))
        #expect(terminal.host.state == .completed)
    }

    @Test func aRogueTerminalReplayingARealAdvertisementIsRefusedAtTheHandshake() throws {
        let world = try World()
        // The real terminal is heard, but too weakly (about -85 dBm) to be offered.
        let real = try world.terminal("real", at: Position(x: 20, y: 0))
        let wallet = try world.wallet(at: Position(x: 4.8, y: 0))
        #expect(real.host.start(amount: euros(1000)))
        world.run(for: .seconds(1))
        let sessionID = try #require(real.host.sessionID)
        let keyID = try #require(real.service.terminalKeyID)

        // The rogue copies the advertisement byte for byte and stands right next to the wallet.
        // It has a credential of its own, from an anchor the wallet does not trust.
        let rogueDevice = try world.simulation.addDevice(
            name: "rogue", configuration: DeviceConfiguration(position: Position(x: 4.7, y: 0)))
        let rogueKey = P256.Signing.PrivateKey()
        let rogueAnchor = P256.Signing.PrivateKey()
        let rogueIdentity = try TerminalIdentity(
            signingKey: rogueKey,
            credential: TerminalCredential.issue(
                by: rogueAnchor, merchantID: "evil", merchantName: "Café Horizon", terminalKey: rogueKey.publicKey,
                notBefore: World.wallClock - 10, expiresAt: World.wallClock + 1000))
        let rogueLedger = try InProcessLedgerFactory.make(in: world)
        _ = TerminalRadioService(
            radio: rogueDevice, identity: rogueIdentity, processor: rogueLedger,
            journal: try SQLiteTerminalJournal(path: ":memory:"))
        let copied = try HorizonAdvertisement(transactionType: .payment, sessionID: sessionID, terminalKeyID: keyID)
            .advertisingData()
        _ = try rogueDevice.startAdvertising(copied, interval: .milliseconds(50))
        #expect(world.run(until: { wallet.decider.candidate?.peripheralMetaData.address == rogueDevice.address }))

        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app
        #expect(world.run(until: { wallet.client.state.isFinished }))
        #expect(wallet.client.offer == nil)  // shows nothing
        guard case .terminalNotTrusted = wallet.client.error else {
            Issue.record("expected terminalNotTrusted, got \(String(describing: wallet.client.error))")
            return
        }
        #expect(wallet.client.receipt == nil)
        #expect(try real.ledger.transactions().isEmpty)
        // The rogue's copy is never offered again, however near it stands.
        wallet.client.restart()
        wallet.decider.restart()
        world.run(for: .seconds(2))
        #expect(wallet.decider.candidate?.peripheralMetaData.address != rogueDevice.address)
    }
}

enum InProcessLedgerFactory {
    static func make(in world: World) throws -> BlockingLedger {
        try BlockingLedger(path: world.directory.appendingPathComponent("extra-\(UUID().uuidString).sqlite").path)
    }
}
