import HorizonCore
import HorizonTestSupport
import Testing

@testable import HorizonSecureChannel

@Suite("Records and replay window", .offTheCooperativePool)
struct RecordTests {
    @Test func tamperedCiphertextTagOrHeaderFailsAuthentication() throws {
        var (wallet, terminal) = try PKI().establish()
        let record = try wallet.seal(Array("pay 12.50 EUR".utf8))
        for index in [SecureChannel.headerSize, record.count - 1, record.count - SecureChannel.tagSize - 1] {
            var tampered = record
            tampered[index] ^= 0x01
            #expect(throws: SecureChannelError.authenticationFailed) { try terminal.open(tampered) }
        }
        // Changing the counter in the header changes the nonce and the authenticated data.
        var renumbered = record
        renumbered[8] = 2
        #expect(throws: SecureChannelError.authenticationFailed) { try terminal.open(renumbered) }
        // The untouched record still opens: failed attempts did not move the window.
        #expect(try terminal.open(record) == Array("pay 12.50 EUR".utf8))
    }

    @Test func replayedRecordIsRefused() throws {
        var (wallet, terminal) = try PKI().establish()
        let record = try wallet.seal([1])
        _ = try terminal.open(record)
        #expect(throws: SecureChannelError.replayed(counter: 1)) { try terminal.open(record) }
    }

    @Test func olderRecordIsRefusedByTheStrictDefaultWindow() throws {
        var (wallet, terminal) = try PKI().establish()
        let first = try wallet.seal([1])
        let second = try wallet.seal([2])
        _ = try terminal.open(second)
        #expect(throws: SecureChannelError.outsideReplayWindow(counter: 1, highest: 2)) { try terminal.open(first) }
    }

    @Test func reorderingWithinAWiderWindowIsAcceptedAndBeyondItRefused() throws {
        var (wallet, established) = try PKI().establish()
        var terminal = established.withReplayWindow(size: 4)
        let records = try (1...8).map { try wallet.seal([UInt8($0)]) }
        #expect(try terminal.open(records[5]) == [6])  // counter 6
        #expect(try terminal.open(records[3]) == [4])  // 6 - 4 = 2 < 4: late but unseen
        #expect(throws: SecureChannelError.replayed(counter: 4)) { try terminal.open(records[3]) }
        #expect(try terminal.open(records[2]) == [3])  // offset 3: the edge of the window
        #expect(throws: SecureChannelError.outsideReplayWindow(counter: 2, highest: 6)) {
            try terminal.open(records[1])
        }
        #expect(try terminal.open(records[7]) == [8])
        #expect(throws: SecureChannelError.outsideReplayWindow(counter: 4, highest: 8)) {
            try terminal.open(records[3])
        }
    }

    @Test func aRecordCannotBeReflectedBackToItsSender() throws {
        var (wallet, _) = try PKI().establish()
        let record = try wallet.seal([7])
        #expect(throws: SecureChannelError.authenticationFailed) { try wallet.open(record) }
    }

    @Test func recordsFromAnotherSessionDoNotOpen() throws {
        let pki = try PKI()
        var (wallet, _) = try pki.establish()
        var (_, otherTerminal) = try pki.establish()
        #expect(throws: SecureChannelError.authenticationFailed) { try otherTerminal.open(try wallet.seal([7])) }
    }

    @Test func truncatedAndMistypedRecordsAreRefused() throws {
        var (wallet, terminal) = try PKI().establish()
        let record = try wallet.seal([])
        #expect(record.count == SecureChannel.overhead)
        #expect(throws: SecureChannelError.malformed(.truncated(field: "record tag"))) {
            try terminal.open(Array(record.dropLast()))
        }
        #expect(throws: SecureChannelError.malformed(.truncated(field: "record header"))) {
            try terminal.open([SecureFrameType.record, 0, 0])
        }
        var mistyped = record
        mistyped[0] = SecureFrameType.clientHello
        #expect(throws: SecureChannelError.unexpectedMessage(expected: "record", received: 0x01)) {
            try terminal.open(mistyped)
        }
    }

    @Test func counterZeroIsNeverAccepted() throws {
        let window = ReplayWindow(size: 8)
        #expect(throws: SecureChannelError.outsideReplayWindow(counter: 0, highest: 0)) { try window.check(0) }
    }

    @Test func windowSlidesFarAhead() throws {
        var window = ReplayWindow(size: 64)
        window.accept(1)
        window.accept(1000)
        #expect(throws: SecureChannelError.outsideReplayWindow(counter: 1, highest: 1000)) { try window.check(1) }
        try window.check(999)
        #expect(throws: SecureChannelError.replayed(counter: 1000)) { try window.check(1000) }
        #expect(ReplayWindow(size: 0).size == 1)
        #expect(ReplayWindow(size: 500).size == 64)
    }
}
