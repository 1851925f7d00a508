import HorizonAPI
import HorizonServerClient
import Testing

/// The terminal's connection for payment intents, without I/O: exponential back-off with jitter,
/// reset by a connection that worked; each pushed intent collected once; the stream's format.
@Suite("The terminal's intent connection")
struct IntentConnectionMachineTests {
    static func intent(_ id: String) -> TerminalIntentEvents.Event {
        .intent(.init(id: id, amount: 1250, currency: "EUR", reference: "ORDER-7", expiresAt: 2000))
    }

    @Test func failuresInARowDoubleTheWaitUpToTheCeilingWithJitterInTheUpperHalf() {
        var machine = IntentConnectionMachine(initialDelay: .milliseconds(250), maximumDelay: .seconds(4))
        machine.connecting()
        #expect(machine.state == .connecting(attempt: 1))
        #expect(machine.dropped(jitter: 0) == .milliseconds(125))
        #expect(machine.state == .backingOff(attempt: 2, delay: .milliseconds(125)))
        machine.connecting()
        #expect(machine.state == .connecting(attempt: 2))
        #expect(machine.dropped(jitter: 1) == .milliseconds(500))
        #expect(machine.dropped(jitter: 0.5) == .milliseconds(750))
        #expect(machine.dropped(jitter: 1) == .seconds(2))
        #expect(machine.dropped(jitter: 1) == .seconds(4))
        // The ceiling holds however long the server stays away.
        for _ in 0..<50 { #expect(machine.dropped(jitter: 1) == .seconds(4)) }
        #expect(machine.dropped(jitter: 0) == .seconds(2))
    }

    @Test func aConnectionThatWorkedStartsTheBackOffOver() {
        var machine = IntentConnectionMachine(initialDelay: .milliseconds(250), maximumDelay: .seconds(30))
        for _ in 0..<6 { _ = machine.dropped(jitter: 1) }
        #expect(machine.failures == 6)
        machine.connecting()
        machine.connected()
        #expect(machine.state == .connected && machine.failures == 0)
        #expect(machine.dropped(jitter: 1) == .milliseconds(250))
    }

    @Test func anIntentPushedTwiceOrAgainAfterAReconnectionIsCollectedOnce() {
        var machine = IntentConnectionMachine()
        machine.connected()
        let first = machine.received(Self.intent("aa"))
        #expect(
            first == [.collect(.init(id: "aa", amount: 1250, currency: "EUR", reference: "ORDER-7", expiresAt: 2000))])
        #expect(machine.received(Self.intent("aa")).isEmpty)
        _ = machine.dropped(jitter: 0)
        machine.connecting()
        machine.connected()
        #expect(machine.received(Self.intent("aa")).isEmpty)
        #expect(machine.received(Self.intent("bb")).count == 1)
        #expect(machine.received(.ended(id: "aa")) == [.stop(intentID: "aa")])
        #expect(machine.received(.keepAlive).isEmpty && machine.received(.ready(terminalID: "t")).isEmpty)
    }

    @Test func theRememberedIntentsAreBounded() {
        var machine = IntentConnectionMachine(rememberedIntents: 2)
        _ = machine.received(Self.intent("a"))
        _ = machine.received(Self.intent("b"))
        _ = machine.received(Self.intent("c"))
        // The oldest is forgotten; the server's claim (collect once) still refuses it.
        #expect(machine.received(Self.intent("a")).count == 1)
        #expect(machine.received(Self.intent("c")).isEmpty)
    }

    @Test func theStreamIsReadWhateverHowItIsSplit() throws {
        let intent = TerminalIntentEvents.Intent(
            id: "0123", amount: 1250, currency: "EUR", reference: "ORDER 7: café", expiresAt: 2000)
        let text =
            TerminalIntentEvents.encode(.ready(terminalID: "t_1")) + TerminalIntentEvents.encode(.keepAlive)
            + TerminalIntentEvents.encode(.intent(intent)) + "event: unknown\ndata: {}\n\n"
            + TerminalIntentEvents.encode(.ended(id: "0123"))
        let bytes = Array(text.utf8)
        for size in [1, 2, 7, bytes.count] {
            var parser = TerminalIntentEvents.Parser()
            var events: [TerminalIntentEvents.Event] = []
            var index = 0
            while index < bytes.count {
                events += try parser.feed(bytes[index..<min(index + size, bytes.count)])
                index += size
            }
            #expect(events == [.ready(terminalID: "t_1"), .keepAlive, .intent(intent), .ended(id: "0123")])
        }
        var parser = TerminalIntentEvents.Parser()
        #expect(throws: TerminalIntentEvents.Parser.ParseError.lineTooLong) {
            try parser.feed([UInt8](repeating: 0x61, count: TerminalIntentEvents.Parser.maximumLineBytes + 1))
        }
    }
}
