import Crypto
import HorizonCore
import HorizonLink
import HorizonRadio
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonTestSupport
import Testing

@Suite("Secure link over the simulated radio", .offTheCooperativePool)
struct SecureLinkTests {
    @Test(arguments: [23, 185, 247, 517])
    func handshakeAndMessagesBothWays(mtu: Int) throws {
        let bench = try SecureLinkBench(mtu: mtu)
        let wallet = SecureLinkObserver()
        let link = try bench.connectWallet()
        let secure = try SecureLink.initiate(
            over: link, trustAnchors: bench.anchors, expectedTerminalKeyID: bench.identity.keyID, context: [0xAB],
            handler: wallet.handler(clock: bench.wallet.scheduler))
        bench.simulation.run(until: { secure.isEstablished }, timeout: .seconds(2))
        #expect(wallet.established.last?.terminalCredential?.merchantName == "Bench Bakery")
        #expect(bench.terminalSide.established.last?.context == [0xAB])

        let big = (0..<2000).map { UInt8($0 % 251) }
        try secure.send(big)
        bench.simulation.run(until: { bench.terminalSide.messages.count == 1 }, timeout: .seconds(5))
        #expect(bench.terminalSide.messages.last == big)
        let terminalLink = try requireValue(bench.terminalLinks.last)
        try terminalLink.send([1, 2, 3])
        bench.simulation.run(until: { wallet.messages.count == 1 }, timeout: .seconds(2))
        #expect(wallet.messages.last == [1, 2, 3])
    }

    @Test func handshakeThatNeverFinishesIsCutAtTheDeadline() throws {
        let bench = try SecureLinkBench()
        let link = try bench.connectWallet()
        let walletEnds = Recorder<MessageLinkEnd>()
        link.start(MessageLinkHandler(onMessage: { _ in }, onEnd: { walletEnds.append($0) }))
        let linkUp = bench.simulation.now
        // The wallet says nothing. The terminal gives up after its 5 s handshake timeout.
        bench.simulation.run(for: .seconds(10))
        let (end, at) = try requireValue(bench.terminalSide.ends.last)
        #expect(end == .rejected(.handshakeTimedOut))
        #expect(at == linkUp + .seconds(5))
        #expect(walletEnds.values == [.closed(.closedByPeer)])
        #expect(bench.terminalSide.established.count == 0)
    }

    @Test func walletRefusesATerminalFromAnUnknownAnchorAndCloses() throws {
        let bench = try SecureLinkBench()
        let wallet = SecureLinkObserver()
        let strangerAnchor = P256.Signing.PrivateKey()
        let secure = try SecureLink.initiate(
            over: try bench.connectWallet(), trustAnchors: [TrustAnchor(publicKey: strangerAnchor.publicKey)],
            expectedTerminalKeyID: nil, context: [], handler: wallet.handler(clock: bench.wallet.scheduler))
        bench.simulation.run(for: .seconds(1))
        let anchorID = bench.identity.credential.anchorKeyID.hexString
        #expect(wallet.ends.values.map(\.0) == [.rejected(.unknownTrustAnchor(keyID: anchorID))])
        #expect(!secure.isEstablished)
        #expect(wallet.established.count == 0)
        #expect(bench.terminalSide.ends.values.map(\.0) == [.closed(.closedByPeer)])
        #expect(throws: SecureLinkSendError.ended) { try secure.send([1]) }
    }

    @Test func garbageRecordsAreDroppedAndAFloodEndsTheLink() throws {
        let bench = try SecureLinkBench()
        let (link, secure, wallet) = try bench.establish()
        let terminalLink = try requireValue(bench.terminalLinks.last)

        // A few forged records: dropped, counted, the link survives and still carries real ones.
        for counter in 1...3 {
            try link.send(
                [SecureFrameType.record] + [0, 0, 0, 0, 0, 0, 0, UInt8(counter)] + [UInt8](repeating: 9, count: 20))
        }
        try secure.send([42])
        bench.simulation.run(until: { bench.terminalSide.messages.count == 1 }, timeout: .seconds(2))
        #expect(bench.terminalSide.messages.values == [[42]])
        #expect(terminalLink.rejectedRecordCount == 3)
        #expect(bench.terminalSide.ends.count == 0)

        // A flood ends it once the limit (8) is reached.
        for _ in 0..<10 { try link.send([SecureFrameType.record] + [UInt8](repeating: 0xEE, count: 40)) }
        bench.simulation.run(for: .seconds(2))
        #expect(terminalLink.rejectedRecordCount == 8)
        #expect(bench.terminalSide.ends.values.map(\.0) == [.rejected(.authenticationFailed)])
        #expect(wallet.ends.values.map(\.0) == [.closed(.closedByPeer)])
    }

    @Test func replayedRecordOnTheLinkIsDropped() throws {
        let bench = try SecureLinkBench()
        let (link, secure, _) = try bench.establish()
        // The radio repeats the next frame the wallet sends: a replay of a real record.
        bench.simulation.injectFault(
            .duplicate, atFrame: bench.simulation.framesSent(on: try linkEndpoint(link)), on: try linkEndpoint(link))
        try secure.send([5])
        bench.simulation.run(for: .seconds(1))
        let terminalLink = try requireValue(bench.terminalLinks.last)
        // The duplicated frame repeats the link-layer sequence number, so the link layer itself
        // refuses it before the record layer sees it: a replay never reaches the application.
        #expect(bench.terminalSide.messages.values == [[5]])
        #expect(terminalLink.rejectedRecordCount == 0)
        #expect(bench.terminalSide.ends.values.map(\.0) == [.linkFailed(.outOfSequence(expected: 2, received: 1))])
    }

    @Test func clientHelloFromAWalletThatIsNotOneIsRefused() throws {
        let bench = try SecureLinkBench()
        let link = try bench.connectWallet()
        link.start(MessageLinkHandler(onMessage: { _ in }, onEnd: { _ in }))
        try link.send([SecureFrameType.record, 1, 2, 3])
        bench.simulation.run(for: .seconds(1))
        #expect(
            bench.terminalSide.ends.values.map(\.0) == [
                .rejected(.unexpectedMessage(expected: "ClientHello", received: SecureFrameType.record))
            ])
    }
}

func linkEndpoint(_ link: MessageLink) throws -> SimulatedLinkEndpoint {
    try requireValue(link.link as? SimulatedLinkEndpoint)
}
