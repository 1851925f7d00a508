import Crypto
import HorizonCore
import HorizonLink
import HorizonSecureChannel
import Synchronization

/// The secure channel's real code on both sides, fed arbitrary bytes. The first input byte picks
/// the mode (modulo 6):
///
/// 0. terminal: `HandshakeResponder` gets the rest as a ClientHello;
/// 1. wallet: `HandshakeInitiator` gets the rest as a ServerHello (a second byte picks the
///    expected terminal key id and the wall clock);
/// 2. terminal: `SecureLink.accept` over a link, the rest as link fragments (chunks), then the
///    handshake deadline passes;
/// 3. wallet: `SecureLink.initiate` over a link, the rest as fragments;
/// 4. a real wallet and terminal handshaking, with the input XOR-ing (and extending) each hello on
///    its way (two chunks), then records (chunks) the terminal must open;
/// 5. `TerminalCredential.decode` and `verify` on the rest.
///
/// Beyond "returns": nobody can sign for the wallet's fresh ClientHello, so a wallet that accepts
/// any ServerHello the input made up is a finding; a handshake whose bytes were changed in
/// transit must fail; records the input made up must never open; a credential that verifies
/// must be the one the anchor issued; a link reports its end once and nothing after it, and is
/// freed once ended.
enum HandshakeFuzz {
    static func run(_ input: [UInt8]) {
        var cursor = InputCursor(input)
        switch cursor.byte() % 6 {
        case 0: responder(cursor.rest())
        case 1: initiator(&cursor)
        case 2: terminalLink(&cursor)
        case 3: walletLink(&cursor)
        case 4: tamperedPair(&cursor)
        default: credential(cursor.rest())
        }
    }

    static var world: FuzzWorld { .shared }

    static func responder(_ hello: [UInt8]) {
        var responder = HandshakeResponder(identity: world.identity, startedAt: .zero)
        do throws(SecureChannelError) {
            let (reply, channel) = try responder.receiveClientHello(hello, now: .zero)
            guard reply.first == SecureFrameType.serverHello, channel.terminalCredential == nil,
                channel.context.count <= HandshakeFormat.maximumContextSize
            else { finding("the responder accepted a ClientHello and answered oddly") }
            do throws(SecureChannelError) {
                _ = try responder.receiveClientHello(hello, now: .zero)
                finding("a responder answered a second ClientHello")
            } catch {
                guard error == .handshakeAlreadyComplete else { finding("second ClientHello: \(error)") }
            }
        } catch {
            _ = error.description
        }
    }

    static func initiator(_ cursor: inout InputCursor) {
        let options = cursor.byte()
        let expected: [UInt8]? =
            switch options % 3 {
            case 0: nil
            case 1: world.identity.keyID
            default: [UInt8](repeating: options, count: 8)
            }
        // The wall clock: inside the credential's validity, or just outside either end.
        let wallClock: UnixTime =
            switch (options / 3) % 3 {
            case 0: FuzzWorld.wallClock
            case 1: FuzzWorld.wallClock + 86_401
            default: FuzzWorld.wallClock - 86_401
            }
        do throws(SecureChannelError) {
            var initiator = try HandshakeInitiator(
                trustAnchors: world.anchors, expectedTerminalKeyID: expected, context: world.context, startedAt: .zero)
            _ = try initiator.receiveServerHello(cursor.rest(), now: .zero, wallClock: wallClock)
            finding("the wallet accepted a ServerHello that cannot have signed its fresh ClientHello")
        } catch {
            _ = error.description
        }
    }

    /// What a secure link reported, for the order checks.
    final class LinkLog: Sendable {
        private struct Entries {
            var established = 0
            var messages = 0
            var ends: [SecureLinkEnd] = []
            var outOfOrder = false
        }

        private let entries = Mutex(Entries())

        var handler: SecureLinkHandler {
            SecureLinkHandler(
                onEstablished: { [self] info in
                    entries.withLock { entries in
                        if entries.established > 0 || !entries.ends.isEmpty { entries.outOfOrder = true }
                        entries.established += 1
                    }
                    if info.context.count > HandshakeFormat.maximumContextSize { finding("an oversized context") }
                },
                onMessage: { [self] _ in
                    entries.withLock { entries in
                        if entries.established == 0 || !entries.ends.isEmpty { entries.outOfOrder = true }
                        entries.messages += 1
                    }
                },
                onEnd: { [self] end in
                    _ = end.description
                    entries.withLock { $0.ends.append(end) }
                })
        }

        var established: Bool { entries.withLock { $0.established > 0 } }
        var messages: Int { entries.withLock { $0.messages } }

        func check() {
            let (ends, outOfOrder) = entries.withLock { ($0.ends, $0.outOfOrder) }
            guard ends.count <= 1 else { finding("a secure link reported its end \(ends.count) times") }
            guard !outOfOrder else { finding("a secure link reported events out of order") }
        }
    }

    static func feed(_ cursor: inout InputCursor, into link: FakeLink, scheduler: ManualScheduler) {
        while !cursor.isAtEnd {
            let fragment = cursor.chunk()
            link.deliver(fragment)
            scheduler.advance(by: .milliseconds(30))
        }
        // The handshake deadline (5 s) and the reassembly timeout (10 s) pass.
        scheduler.advance(by: .seconds(11))
    }

    static func terminalLink(_ cursor: inout InputCursor) {
        weak var weakSecure: SecureLink?
        do {
            let scheduler = ManualScheduler(wallClockAtStart: FuzzWorld.wallClock)
            let link = FakeLink(attMTU: 247)
            guard let messageLink = try? MessageLink(link: link, scheduler: scheduler) else {
                finding("no MessageLink")
            }
            let log = LinkLog()
            let secure = SecureLink.accept(over: messageLink, identity: world.identity, handler: log.handler)
            weakSecure = secure
            feed(&cursor, into: link, scheduler: scheduler)
            log.check()
            // Only the wallet's keys open records for the terminal: made-up records never pass.
            guard log.messages == 0 else { finding("the terminal opened a record the input made up") }
            guard secure.rejectedRecordCount <= secure.configuration.maximumRejectedRecords else {
                finding("the terminal kept a link after \(secure.rejectedRecordCount) bad records")
            }
            // The wallet goes away; the link must end once and then be freed.
            secure.close()
            log.check()
            link.tearDown()
            scheduler.tearDown()
        }
        guard weakSecure == nil else { finding("an ended secure link is never freed (a reference cycle)") }
    }

    static func walletLink(_ cursor: inout InputCursor) {
        weak var weakSecure: SecureLink?
        do {
            let scheduler = ManualScheduler(wallClockAtStart: FuzzWorld.wallClock)
            let link = FakeLink(attMTU: 247)
            guard let messageLink = try? MessageLink(link: link, scheduler: scheduler) else {
                finding("no MessageLink")
            }
            let log = LinkLog()
            let secure: SecureLink
            do {
                secure = try SecureLink.initiate(
                    over: messageLink, trustAnchors: world.anchors, expectedTerminalKeyID: world.identity.keyID,
                    context: world.context, handler: log.handler)
            } catch {
                finding("a wallet could not start a handshake: \(error)")
            }
            weakSecure = secure
            feed(&cursor, into: link, scheduler: scheduler)
            log.check()
            guard !log.established else { finding("the wallet established a channel with a made-up ServerHello") }
            secure.close()
            log.check()
            link.tearDown()
            scheduler.tearDown()
        }
        guard weakSecure == nil else { finding("an ended secure link is never freed (a reference cycle)") }
    }

    /// `bytes` XOR `mask`, extended by the mask's excess; and whether that changed anything.
    static func tamper(_ bytes: [UInt8], with mask: [UInt8]) -> (bytes: [UInt8], changed: Bool) {
        var result = bytes
        var changed = mask.count > bytes.count
        for (index, byte) in mask.enumerated() {
            if index < result.count {
                result[index] ^= byte
                if byte != 0 { changed = true }
            } else {
                result.append(byte)
            }
        }
        return (result, changed)
    }

    static func tamperedPair(_ cursor: inout InputCursor) {
        let clientMask = cursor.chunk()
        let serverMask = cursor.chunk()
        do throws(SecureChannelError) {
            var initiator = try HandshakeInitiator(
                trustAnchors: world.anchors, expectedTerminalKeyID: world.identity.keyID, context: world.context,
                startedAt: .zero)
            var responder = HandshakeResponder(identity: world.identity, startedAt: .zero)
            let clientHello = tamper(initiator.clientHello, with: clientMask)
            let reply: [UInt8]
            var terminal: SecureChannel
            do throws(SecureChannelError) {
                (reply, terminal) = try responder.receiveClientHello(clientHello.bytes, now: .zero)
            } catch {
                guard clientHello.changed else { finding("a terminal refused an untouched ClientHello: \(error)") }
                return
            }
            let serverHello = tamper(reply, with: serverMask)
            var wallet: SecureChannel
            do throws(SecureChannelError) {
                wallet = try initiator.receiveServerHello(
                    serverHello.bytes, now: .zero, wallClock: FuzzWorld.wallClock)
            } catch {
                guard clientHello.changed || serverHello.changed else {
                    finding("a wallet refused an untouched handshake: \(error)")
                }
                return
            }
            guard !clientHello.changed, !serverHello.changed else {
                finding(
                    "a handshake changed in transit was accepted (client \(clientHello.changed), server \(serverHello.changed))"
                )
            }
            guard wallet.transcriptHash == terminal.transcriptHash, terminal.context == world.context else {
                finding("the two sides disagree about the handshake")
            }
            // The real channel works both ways; made-up records never open.
            for plaintext in [[UInt8](), [1, 2, 3], Array(repeating: 0xAB, count: 300)] {
                let record = try wallet.seal(plaintext)
                guard try terminal.open(record) == plaintext else { finding("a record changed on its way") }
                let answer = try terminal.seal(plaintext)
                guard try wallet.open(answer) == plaintext else { finding("an answer changed on its way") }
            }
            while !cursor.isAtEnd {
                let record = cursor.chunk()
                if let opened = try? terminal.open(record) {
                    finding("a made-up record opened (\(opened.count) bytes): \(record.hexString)")
                }
            }
        } catch {
            finding("the real handshake failed without tampering: \(error)")
        }
    }

    static func credential(_ bytes: [UInt8]) {
        let decoded: TerminalCredential
        do throws(SecureChannelError) {
            decoded = try TerminalCredential.decode(bytes)
        } catch {
            _ = error.description
            return
        }
        guard decoded.encoded() == bytes else { finding("a credential re-encodes differently: \(bytes.hexString)") }
        _ = decoded.terminalKeyID
        _ = try? decoded.terminalPublicKey()
        do throws(SecureChannelError) {
            try decoded.verify(trusting: world.anchors, at: FuzzWorld.wallClock)
            // ECDSA signatures are randomised, so the issued fields, not the signature bytes, must match.
            let issued = world.identity.credential
            guard decoded.anchorKeyID == issued.anchorKeyID, decoded.merchantID == issued.merchantID,
                decoded.merchantName == issued.merchantName, decoded.terminalKey == issued.terminalKey,
                decoded.notBefore == issued.notBefore, decoded.expiresAt == issued.expiresAt
            else { finding("a credential the anchor never issued verifies: \(bytes.hexString)") }
        } catch {
            _ = error.description
        }
    }

    static func seeds() -> [[UInt8]] {
        var seeds: [[UInt8]] = []
        guard
            var initiator = try? HandshakeInitiator(
                trustAnchors: world.anchors, expectedTerminalKeyID: world.identity.keyID, context: world.context,
                startedAt: .zero)
        else { return [] }
        var responder = HandshakeResponder(identity: world.identity, startedAt: .zero)
        guard let (serverHello, _) = try? responder.receiveClientHello(initiator.clientHello, now: .zero),
            (try? initiator.receiveServerHello(serverHello, now: .zero, wallClock: FuzzWorld.wallClock)) != nil
        else { return [] }
        let fakeRecord: [UInt8] = [SecureFrameType.record, 0, 0, 0, 0, 0, 0, 0, 1] + Array(repeating: 0x5A, count: 40)
        func fragments(_ messages: [[UInt8]]) -> [[UInt8]] {
            guard var fragmenter = try? Fragmenter(maximumFragmentSize: 244, maximumMessageSize: 8_256) else {
                return []
            }
            return messages.flatMap { (try? fragmenter.fragments(of: $0)) ?? [] }
        }
        seeds.append([0] + initiator.clientHello)
        seeds.append([1, 1] + serverHello)
        seeds.append([1, 4] + serverHello)
        seeds.append([2] + chunked(fragments([initiator.clientHello, fakeRecord, fakeRecord])))
        seeds.append([3] + chunked(fragments([serverHello, fakeRecord])))
        seeds.append([4, 0, 0] + chunked([fakeRecord]))
        seeds.append([4, 1, 0x01, 0])
        seeds.append([4, 0, 2, 0, 0xFF])
        seeds.append([5] + world.identity.credential.encoded())
        return seeds
    }
}
