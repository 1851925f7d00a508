import Crypto
import Foundation
import HorizonCore
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio

/// A central with a dongle and a script, loose in the shop during the seeded runs: when a
/// terminal opens a session it sometimes connects, completes the real handshake and says Hello
/// with a fresh session key and a valid proof; then it declines at once, or sends a Confirm signed
/// by that key (which no wallet registered: a stranger's refusal), or neither; and it holds the
/// link a while, sometimes past its decision time (a squatter). Whatever it does, it must not end,
/// time out, take or block a session, nor leave a row in any ledger (checked by `violations` after
/// the run).
///
/// It stands still between the terminals (in range of all) and is never crashed: the attack is
/// the same whatever state the shop is in. Its choices come from its own seeded generator, so
/// adding it leaves every other actor's draws as they were. Only touched on the simulation's
/// thread.
final class RogueCentralActor: @unchecked Sendable {
    /// One Hello the rogue said, as the terminal's notices will name it (by its code).
    struct Visit {
        let terminal: Int
        let sessionID: SessionID
        let code: ConfirmationCode
    }

    /// A session as the terminal's register saw it: when each wallet (by code) was shown the
    /// offer, and how and when it ended.
    struct Session {
        var offers: [(at: Instant, code: ConfirmationCode)] = []
        var ended: (at: Instant, outcome: String)?
    }

    let device: SimulatedDevice
    unowned let run: FaultSimulation
    private var random: SeededRandom
    /// The share of sessions the rogue visits in this run.
    let visitRate: Double
    private(set) var visits: [Visit] = []
    /// Every session key it said Hello with: none may ever appear as a paying wallet.
    private(set) var sessionKeys: Set<[UInt8]> = []
    private(set) var sessions: [SessionKey: Session] = [:]
    /// Links held open, so they live until the rogue closes them.
    private var links: [Int: SecureLink] = [:]
    /// The visit behind each link that sends a Confirm once it has the offer: the key it said
    /// Hello with and the terminal whose offer it confirms.
    private var confirming: [Int: (key: P256.Signing.PrivateKey, terminal: TerminalIdentity)] = [:]
    private var nextLink = 0

    struct SessionKey: Hashable {
        let terminal: Int
        let sessionID: SessionID
    }

    init(device: SimulatedDevice, run: FaultSimulation) {
        self.device = device
        self.run = run
        random = SeededRandom(seed: run.configuration.seed, label: "rogue")
        // About one session in ten, more in some runs, none in a calm run.
        visitRate =
            run.configuration.faultScale > 0
            ? min(0.1 * run.configuration.faultScale, 1) * (0.5 + random.nextUnit()) : 0
    }

    // MARK: What the terminals report

    /// A terminal opened `sessionID`: the rogue may come by a little later.
    func sessionOpened(by terminal: TerminalActor, sessionID: SessionID, type: TransactionType) {
        sessions[SessionKey(terminal: terminal.index, sessionID: sessionID)] = Session()
        guard !run.draining, random.chance(visitRate) else { return }
        let delay = Duration.milliseconds(Int64(50 + random.nextUnit() * 4_000))
        let declines = random.chance(0.5)
        let hold = Duration.milliseconds(Int64(200 + random.nextUnit() * 6_000))
        // Drawn after the draws above, so those stay what they were for every seed.
        let confirms = !declines && type == .payment && random.chance(0.5)
        let squats = random.chance(0.25)
        let held = squats ? TerminalActor.decisionTimeout + hold : hold
        run.simulation.schedule(after: delay) { [weak self, weak terminal] in
            guard let self, let terminal, !self.run.draining, terminal.currentSessionID == sessionID else { return }
            self.attack(
                terminal, sessionID: sessionID, type: type, declines: declines, confirms: confirms, hold: held)
        }
    }

    /// The register heard that a wallet was shown the offer of `sessionID`.
    func offered(at terminal: Int, sessionID: SessionID, code: ConfirmationCode) {
        sessions[SessionKey(terminal: terminal, sessionID: sessionID)]?.offers.append((run.simulation.now, code))
    }

    /// The register saw `sessionID` end.
    func ended(at terminal: Int, sessionID: SessionID, outcome: String) {
        sessions[SessionKey(terminal: terminal, sessionID: sessionID)]?.ended = (run.simulation.now, outcome)
    }

    // MARK: The attack

    private func attack(
        _ terminal: TerminalActor, sessionID: SessionID, type: TransactionType, declines: Bool, confirms: Bool,
        hold: Duration
    ) {
        run.tally.rogue.visits += 1
        if hold > TerminalActor.decisionTimeout { run.tally.rogue.squats += 1 }
        let id = nextLink
        nextLink += 1
        let anchors = run.anchors
        let context = (0..<8).map { UInt8(truncatingIfNeeded: sessionID.rawValue >> (56 - 8 * $0)) }
        device.connect(to: terminal.device.address, timeout: .seconds(2)) { [weak self] result in
            guard let self, case .success(let link) = result,
                let messageLink = try? MessageLink(link: link, scheduler: self.device.scheduler)
            else { return }
            let secure = try? SecureLink.initiate(
                over: messageLink, trustAnchors: anchors, expectedTerminalKeyID: nil, context: context,
                handler: SecureLinkHandler(
                    onEstablished: { [weak self] info in
                        self?.established(
                            link: id, terminal: terminal, sessionID: sessionID, type: type,
                            transcriptHash: info.transcriptHash, code: info.confirmationCode, declines: declines,
                            confirms: confirms)
                    },
                    onMessage: { [weak self] bytes in
                        guard let self, let message = try? SessionMessage.decode(bytes) else { return }
                        self.received(message, on: id)
                    },
                    onEnd: { [weak self] _ in
                        self?.links[id] = nil
                        self?.confirming[id] = nil
                    }))
            guard let secure else {
                link.close()
                return
            }
            self.links[id] = secure
            self.run.simulation.schedule(after: hold) { [weak self] in self?.links[id]?.close() }
        }
    }

    /// Hello with a key made for this visit and a valid proof over this connection, then perhaps
    /// a Cancel: everything an honest wallet that walks away does, from anyone in range. A visit
    /// that confirms sends its Confirm when the offer comes (`received`).
    private func established(
        link id: Int, terminal actor: TerminalActor, sessionID: SessionID, type: TransactionType,
        transcriptHash: [UInt8], code: ConfirmationCode, declines: Bool, confirms: Bool
    ) {
        let terminal = actor.index
        guard let link = links[id] else { return }
        let key = P256.Signing.PrivateKey()
        let keyBytes = WalletIdentity(signingKey: key).publicKey
        let unsigned = Hello(sessionID: sessionID, transactionType: type, sessionKey: keyBytes)
        guard
            let signature = try? SignatureBytes(
                bytes: Array(key.signature(for: unsigned.proofBytes(transcriptHash: transcriptHash)).rawRepresentation))
        else { return }
        sessionKeys.insert(keyBytes.bytes)
        visits.append(
            Visit(terminal: terminal, sessionID: sessionID, code: code))
        run.tally.rogue.hellos += 1
        if confirms { confirming[id] = (key, actor.identity) }
        try? link.send(SessionMessage.hello(unsigned.withProof(signature)).encoded())
        if declines {
            run.tally.rogue.cancels += 1
            try? link.send(SessionMessage.cancel(Cancel(sessionID: sessionID, reason: .userDeclined)).encoded())
        }
    }

    /// What the terminal answered on link `id`: an offer (confirmed at once by a confirming
    /// visit, with the key it said Hello with), a receipt, a cancel.
    private func received(_ message: SessionMessage, on id: Int) {
        switch message {
        case .offer(let offer):
            run.tally.rogue.offers += 1
            guard let (key, identity) = confirming.removeValue(forKey: id), let link = links[id],
                let confirm = Self.confirm(offer, terminal: identity, by: key)
            else { return }
            run.tally.rogue.confirms += 1
            try? link.send(SessionMessage.confirm(confirm).encoded())
        case .receipt(let receipt):
            if case .declined = receipt.outcome { run.tally.rogue.declinedConfirms += 1 }
        case .cancel(let cancel) where cancel.reason == .timedOut: run.tally.rogue.timedOut += 1
        default: break
        }
    }

    /// A Confirm of `offer` signed by `key`, which no wallet registered.
    private static func confirm(_ offer: Offer, terminal: TerminalIdentity, by key: P256.Signing.PrivateKey)
        -> Confirm?
    {
        var random = SystemRandomNumberGenerator()
        guard let terminalKeyDigest = try? DigestBytes(bytes: terminal.keyDigest),
            let offerDigest = try? DigestBytes(bytes: Array(SHA256.hash(data: SessionMessage.offer(offer).encoded()))),
            let unsigned = try? Confirm(
                sessionID: offer.sessionID, terminalKeyDigest: terminalKeyDigest,
                walletKey: WalletIdentity(signingKey: key).publicKey, offerDigest: offerDigest, amount: offer.amount,
                tip: .zero(offer.amount.currency), paymentID: PaymentID.random(using: &random),
                walletNonce: Nonce.random(using: &random), expiresAt: offer.expiresAt),
            let signature = try? SignatureBytes(
                bytes: Array(key.signature(for: unsigned.signedBytes).rawRepresentation))
        else { return nil }
        return unsigned.withSignature(signature)
    }

    // MARK: The invariant

    /// The rogue left no row in any ledger (nothing executed for a key it said Hello with, and
    /// its declined Confirms stored nowhere a merchant sees), and ended or timed out no session:
    /// no session it visited ended by a decision time running out or by a decline or refusal
    /// (those end one wallet's attempt, never the sale). Completed sessions, the cashier's
    /// cancels and crashes are others' doing.
    func violations(walletKeys rows: [[UInt8]]) -> (ended: [String], executed: [String]) {
        var executed: [String] = []
        for key in rows where sessionKeys.contains(key) {
            executed.append("a ledger row names a session key the rogue said Hello with")
        }
        var ended: [String] = []
        var reported: Set<SessionKey> = []
        for visit in visits {
            let key = SessionKey(terminal: visit.terminal, sessionID: visit.sessionID)
            guard !reported.contains(key), let end = sessions[key]?.ended,
                end.outcome == "decision timed out" || end.outcome.hasPrefix("declined")
                    || end.outcome == "processor failure"
            else { continue }
            reported.insert(key)
            ended.append(
                "terminal-\(visit.terminal)'s session \(visit.sessionID), which the rogue visited, ended: \(end.outcome)"
            )
        }
        return (ended, executed)
    }
}

/// What the rogue did in a run, for the report.
struct RogueTally: Sendable {
    var visits = 0
    var hellos = 0
    var offers = 0
    var cancels = 0
    /// Confirms signed by keys nobody registered, and how many of them came back declined.
    var confirms = 0
    var declinedConfirms = 0
    /// Visits that held the link past the decision time, and the timed-out notices it got.
    var squats = 0
    var timedOut = 0
    /// Sessions the rogue ended or timed out, by the invariant (each one is a violation).
    var endedSessions = 0

    mutating func add(_ other: RogueTally) {
        visits += other.visits
        hellos += other.hellos
        offers += other.offers
        cancels += other.cancels
        confirms += other.confirms
        declinedConfirms += other.declinedConfirms
        squats += other.squats
        timedOut += other.timedOut
        endedSessions += other.endedSessions
    }
}
