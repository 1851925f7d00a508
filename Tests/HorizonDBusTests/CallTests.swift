import Dispatch
import Foundation
@testable import HorizonDBus
import HorizonTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Method calls between two connections on a real private bus: the service exports an object on
/// connection A, the client calls it from connection B.
@Suite("D-Bus method calls")
struct CallTests {
    /// Keeps deferred calls that are never answered alive (a released call is answered `Failed`).
    final class Parked: Sendable {
        let calls = Mutex<[DBusMethodCall]>([])
    }

    /// Holds calls to `Gather` until as many have arrived as each asks for, then answers them all:
    /// a client that held a thread per call in flight would never get that many to the service.
    final class Gathering: Sendable {
        private let calls = Mutex<[DBusMethodCall]>([])

        func add(_ call: DBusMethodCall) {
            let expected = Int(call.arguments.first?.uint32 ?? 0)
            let complete = calls.withLock { calls -> [DBusMethodCall] in
                calls.append(call)
                guard calls.count >= expected else { return [] }
                defer { calls.removeAll() }
                return calls
            }
            for call in complete { call.reply([.uint32(UInt32(complete.count))]) }
        }
    }

    /// A service connection exporting the test object, and a client connection.
    struct Peers {
        let service: DBusConnection
        let client: DBusConnection
        let parked = Parked()
        let gathering = Gathering()

        init(_ bus: TestBus) throws {
            service = try bus.connect()
            client = try bus.connect()
            let parked = parked
            let gathering = gathering
            let methods: [DBusMethod] = [
                DBusMethod("Echo", input: nil, output: nil) { arguments in arguments },
                DBusMethod("Concat", input: "ss", output: "s") { arguments in
                    [.string((arguments[0].string ?? "") + (arguments[1].string ?? ""))]
                },
                DBusMethod("Busy") { _ throws(DBusError) in
                    throw DBusError(name: "org.bluez.Error.InProgress", message: "Operation already in progress")
                },
                DBusMethod("WrongReply", output: "s") { _ in [.uint32(7)] },
                .deferred("Later", input: "u", output: "u") { call in
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) {
                        call.reply([.uint32((call.arguments[0].uint32 ?? 0) + 1)])
                    }
                },
                .deferred("Never") { call in parked.calls.withLock { $0.append(call) } },
                .deferred("Dropped") { _ in },
                .deferred("Gather", input: "u", output: "u") { call in gathering.add(call) },
                .asynchronous("Async", input: "s", output: "s") { call async throws(DBusError) in
                    try? await Task.sleep(for: .milliseconds(20))
                    guard let text = call.arguments.first?.string, !text.isEmpty else {
                        throw DBusError(name: "org.horizon.Error.Empty", message: "nothing to say")
                    }
                    return [.string(text.uppercased())]
                },
                DBusMethod("ReadFrom", input: "h", output: "ay") { arguments throws(DBusError) in
                    guard let descriptor = arguments.first?.fileDescriptor?.rawValue else {
                        throw .invalidArguments("no descriptor")
                    }
                    var buffer = [UInt8](repeating: 0, count: 64)
                    let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                    return [.byteArray(buffer.prefix(max(0, count)))]
                },
            ]
            try service.export(
                path: TestService.path, interfaces: [DBusInterface(TestService.interface, methods: methods)])
        }

        // The default timeout is generous: an asynchronous handler runs on the cooperative pool,
        // which the parallel test run can keep busy for seconds (a 5 s default timed out in CI).
        // The tests of timeouts pass their own.

        /// The blocking variant (chosen here because this function is not async).
        func callBlocking(_ method: String, _ arguments: [DBusValue] = [], timeout: Duration = .seconds(30))
            throws(DBusError) -> [DBusValue]
        {
            try client.call(
                destination: service.uniqueName, path: TestService.path, interface: TestService.interface,
                method: method, arguments: arguments, timeout: timeout)
        }

        func call(_ method: String, _ arguments: [DBusValue] = [], timeout: Duration = .seconds(30))
            async throws(DBusError) -> [DBusValue]
        {
            try await client.call(
                destination: service.uniqueName, path: TestService.path, interface: TestService.interface,
                method: method, arguments: arguments, timeout: timeout)
        }
    }

    static let roundTripValues: [(String, DBusValue)] = [
        ("s", .string("héllo, wörld ✓")),
        ("s", .string("")),
        ("o", .objectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF")),
        ("b", .boolean(true)),
        ("b", .boolean(false)),
        ("y", .byte(0xFF)),
        ("q", .uint16(0xFFFF)),
        ("n", .int16(-32768)),
        ("i", .int32(-2_000_000_000)),
        ("u", .uint32(4_000_000_000)),
        ("x", .int64(Int64.min)),
        ("t", .uint64(UInt64.max)),
        ("d", .double(-1.5e300)),
        ("g", .signature("a{sv}(ii)")),
        ("ay", .byteArray([0, 1, 2, 0xFE, 0xFF])),
        ("ay", .byteArray([])),
        ("as", .stringArray(["a", "bc", ""])),
        ("as", .stringArray([])),
        ("ao", .objectPathArray(["/a", "/a/b"])),
        (
            "a{sv}",
            .stringVariantDictionary([
                "Type": .string("peripheral"), "Powered": .boolean(true), "RSSI": .int16(-60),
                "UUIDs": .stringArray(["0000180d-0000-1000-8000-00805f9b34fb"]),
            ])
        ),
        ("a{sv}", .stringVariantDictionary([:])),
        ("a{qv}", .uint16VariantDictionary([0xFFFF: .byteArray([0x48, 0x5A, 1, 2]), 0x004C: .byteArray([])])),
        (
            "a{oa{sa{sv}}}",
            .managedObjects([
                "/org/bluez/hci0": ["org.bluez.Adapter1": ["Powered": .boolean(true), "Name": .string("hci0")]],
                "/org/bluez/hci0/dev_11": [
                    "org.bluez.Device1": [
                        "RSSI": .int16(-70), "ManufacturerData": .uint16VariantDictionary([1: .byteArray([9])]),
                    ],
                    "org.freedesktop.DBus.Properties": [:],
                ],
            ])
        ),
        ("(ii)", .structure([.int32(1), .int32(-1)])),
        (
            "(sa{sv}(yb))",
            .structure([
                .string("x"), .stringVariantDictionary(["k": .uint64(1)]), .structure([.byte(1), .boolean(false)]),
            ])
        ),
        ("a(oq)", .array(elementSignature: "(oq)", [.structure([.objectPath("/p"), .uint16(23)])])),
        ("v", .variant(.variant(.stringArray(["nested"])))),
        (
            "aai",
            .array(
                elementSignature: "ai",
                [.array(elementSignature: "i", [.int32(1), .int32(2)]), .array(elementSignature: "i", [])])
        ),
        (
            "a{ss}",
            .dictionary(
                keySignature: "s", valueSignature: "s",
                [(key: .string("b"), value: .string("2")), (key: .string("a"), value: .string("1"))])
        ),
    ]

    @Test func everySignatureRoundTripsThroughARealCall() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            for (signature, value) in Self.roundTripValues {
                #expect(value.signature == signature)
                let reply = try await peers.call("Echo", [value])
                #expect(reply == [value], "round trip of \(signature)")
                #expect(reply.map(\.signature) == [signature])
            }
            // All of them at once, as one message, through the blocking call.
            let all = Self.roundTripValues.map(\.1)
            let reply = try peers.callBlocking("Echo", all)
            #expect(reply == all)
        }
    }

    @Test func typedAccessorsReadWhatTheServiceSent() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let reply = try await peers.call(
                "Echo",
                [
                    .byteArray([1, 2, 3]), .uint16VariantDictionary([0xFFFF: .byteArray([7])]),
                    .stringVariantDictionary(["RSSI": .int16(-42)]), .stringArray(["x"]),
                ])
            #expect(reply[0].bytes == [1, 2, 3])
            #expect(reply[1].uint16VariantDictionary?[0xFFFF]?.bytes == [7])
            #expect(reply[2].stringVariantDictionary?["RSSI"]?.int16 == -42)
            #expect(reply[3].strings == ["x"])
            #expect(try await peers.call("Concat", [.string("ab"), .string("cd")]) == [.string("abcd")])
        }
    }

    @Test func aHandlersErrorReachesTheCallerUnchanged() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let error = await dbusError { () async throws(DBusError) in try await peers.call("Busy") }
            #expect(error == DBusError(name: "org.bluez.Error.InProgress", message: "Operation already in progress"))
            let asyncError = await dbusError { () async throws(DBusError) in
                try await peers.call("Async", [.string("")])
            }
            #expect(asyncError == DBusError(name: "org.horizon.Error.Empty", message: "nothing to say"))
            #expect(try await peers.call("Async", [.string("hi")]) == [.string("HI")])
        }
    }

    @Test func unknownMethodInterfaceAndObjectGetTheStandardErrors() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let method = await dbusError { () async throws(DBusError) in try await peers.call("NoSuchMethod") }
            #expect(method?.name == "org.freedesktop.DBus.Error.UnknownMethod")
            let interface = await dbusError { () async throws(DBusError) in
                try await peers.client.call(
                    destination: peers.service.uniqueName, path: TestService.path, interface: "org.horizon.Nothing",
                    method: "Echo")
            }
            #expect(interface?.name == "org.freedesktop.DBus.Error.UnknownInterface")
            let object = await dbusError { () async throws(DBusError) in
                try await peers.client.call(
                    destination: peers.service.uniqueName, path: "/no/such/object", interface: TestService.interface,
                    method: "Echo")
            }
            #expect(object?.name == "org.freedesktop.DBus.Error.UnknownObject")
            // A wrong argument type is refused before the handler runs.
            let arguments = await dbusError { () async throws(DBusError) in try await peers.call("Concat", [.uint32(1)])
            }
            #expect(arguments?.name == "org.freedesktop.DBus.Error.InvalidArgs")
            // A reply that does not match the declared output is turned into Failed, not sent.
            let reply = await dbusError { () async throws(DBusError) in try await peers.call("WrongReply") }
            #expect(reply?.name == "org.freedesktop.DBus.Error.Failed")
            // Without an interface, the method is found by name.
            let found = try await peers.client.call(
                destination: peers.service.uniqueName, path: TestService.path, interface: nil, method: "Concat",
                arguments: [.string("x"), .string("y")])
            #expect(found == [.string("xy")])
        }
    }

    @Test func aDeferredReplyAfterAHundredMillisecondsArrives() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let start = ContinuousClock.now
            let reply = try await peers.call("Later", [.uint32(41)])
            let elapsed = ContinuousClock.now - start
            #expect(reply == [.uint32(42)])
            // The reply itself proves it beat the call's timeout; how fast a loaded machine is, is not asserted.
            #expect(elapsed >= .milliseconds(100))
        }
    }

    @Test func aCallWhoseReplyNeverComesTimesOut() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let start = ContinuousClock.now
            let error = await dbusError { () async throws(DBusError) in
                try await peers.call("Never", timeout: .milliseconds(300))
            }
            let elapsed = ContinuousClock.now - start
            #expect(error?.name == "org.freedesktop.DBus.Error.NoReply")
            #expect(error?.isTimeout == true)
            #expect(elapsed >= .milliseconds(290))
            #expect(elapsed < .seconds(30))  // it fires: no hang
            // The blocking variant times out the same way.
            let blockingStart = ContinuousClock.now
            let blocking = await dbusError { () async throws(DBusError) in
                try peers.callBlocking("Never", timeout: .milliseconds(300))
            }
            #expect(blocking?.name == "org.freedesktop.DBus.Error.NoReply")
            #expect(ContinuousClock.now - blockingStart >= .milliseconds(290))
            #expect(peers.parked.calls.withLock { $0.count } == 2)
        }
    }

    @Test func aDeferredCallReleasedWithoutAnAnswerFails() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let error = await dbusError { () async throws(DBusError) in try await peers.call("Dropped") }
            #expect(error?.name == "org.freedesktop.DBus.Error.Failed")
        }
    }

    // The blocking call waits on a thread of its own; the test itself only awaits (an awaited
    // call holds no thread), so it runs on the cooperative pool.
    @Test func closingTheConnectionFailsPendingCalls() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let client = peers.client
            let destination = peers.service.uniqueName
            let pending = Task { () async -> DBusError? in
                await dbusError { () async throws(DBusError) in
                    try await client.call(
                        destination: destination, path: TestService.path, interface: TestService.interface,
                        method: "Never", timeout: .seconds(120))
                }
            }
            let (blockingResult, blockingDone) = AsyncStream.makeStream(of: DBusError?.self)
            Thread.detachNewThread {
                do throws(DBusError) {
                    _ = try peers.callBlocking("Never", timeout: .seconds(120))
                    blockingDone.yield(nil)
                } catch {
                    blockingDone.yield(error)
                }
                blockingDone.finish()
            }
            var blockingIterator = blockingResult.makeAsyncIterator()
            // Both calls are parked at the service before the client closes.
            let deadline = ContinuousClock.now + .seconds(3)
            while peers.parked.calls.withLock({ $0.count }) < 2, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            let start = ContinuousClock.now
            client.close()
            #expect(await pending.value?.name == "org.freedesktop.DBus.Error.Disconnected")
            #expect(await blockingIterator.next()??.name == "org.freedesktop.DBus.Error.Disconnected")
            // At once, not after the calls' 120 s timeout (with plenty of room for a loaded machine).
            #expect(ContinuousClock.now - start < .seconds(30))
            #expect(!client.isConnected)
            // Using a closed connection is an error, not a crash.
            let after = await dbusError { () async throws(DBusError) in
                try await client.call(destination: destination, path: "/", interface: nil, method: "Ping")
            }
            #expect(after?.isDisconnected == true)
            client.close()
        }
    }

    @Test func cancellingTheAwaitingTaskAbandonsTheCall() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let task = Task { () async -> DBusError? in
                await dbusError { () async throws(DBusError) in try await peers.call("Never", timeout: .seconds(10)) }
            }
            try await Task.sleep(for: .milliseconds(50))
            task.cancel()
            #expect(await task.value == DBusError.cancelled)
        }
    }

    @Test func unixFileDescriptorsPassBothWays() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            var ends: [Int32] = [0, 0]
            #expect(pipe(&ends) == 0)
            defer {
                close(ends[0])
                close(ends[1])
            }
            // Client to service: the service reads what the client wrote into the pipe.
            let hello = Array("hello".utf8)
            #expect(write(ends[1], hello, hello.count) == hello.count)
            let readEnd = try DBusFileDescriptor.duplicating(ends[0])
            let read = try await peers.call("ReadFrom", [.unixFileDescriptor(readEnd)])
            #expect(read == [.byteArray(hello)])
            // Service to client: the echoed descriptor is a new one we own, reading the same pipe.
            let echoed = try await peers.call("Echo", [.unixFileDescriptor(readEnd)])
            let received = try #require(echoed.first?.fileDescriptor)
            let raw = try #require(received.rawValue)
            #expect(raw != ends[0])
            #expect(raw != readEnd.rawValue)
            let world = Array("world".utf8)
            #expect(write(ends[1], world, world.count) == world.count)
            var buffer = [UInt8](repeating: 0, count: 16)
            let count = buffer.withUnsafeMutableBytes { Glibc.read(raw, $0.baseAddress, $0.count) }
            #expect(Array(buffer.prefix(max(0, count))) == world)
            // Taking the descriptor hands it over: the object no longer closes it.
            let taken = try #require(received.take())
            #expect(received.rawValue == nil)
            #expect(fcntl(taken, F_GETFD) >= 0)
            close(taken)
        }
    }

    @Test func nestedAndMalformedValuesNeverCrash() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            // A variant holding arrays of arrays of variants of arrays.
            let nested = DBusValue.variant(
                .array(
                    elementSignature: "av",
                    [
                        .array(
                            elementSignature: "v",
                            [.variant(.array(elementSignature: "ay", [.byteArray([1]), .byteArray([])]))]),
                        .array(elementSignature: "v", []),
                    ]))
            #expect(try await peers.call("Echo", [nested]) == [nested])
            // 30 levels of arrays inside a variant: within D-Bus's limits, so it round-trips.
            var deep = DBusValue.int32(7)
            for _ in 0..<30 { deep = .array(elementSignature: deep.signature, [deep]) }
            #expect(try await peers.call("Echo", [.variant(deep)]) == [.variant(deep)])
            // 70 levels of variants: deeper than D-Bus allows in one message; refused before sending.
            var variants = DBusValue.int32(7)
            for _ in 0..<70 { variants = .variant(variants) }
            let tooDeep = await dbusError { () async throws(DBusError) in try await peers.call("Echo", [variants]) }
            #expect(tooDeep?.name == "org.freedesktop.DBus.Error.InvalidArgs")
            // Values that contradict their own signatures are refused, not sent.
            let invalid: [DBusValue] = [
                .array(elementSignature: "s", [.int32(1)]),
                .array(elementSignature: "a{", []),
                .dictionary(keySignature: "v", valueSignature: "s", []),
                .dictionary(
                    keySignature: "s", valueSignature: "v", [(key: .string("k"), value: .string("not a variant"))]),
                .structure([]),
                .objectPath("not/a/path"),
                .objectPath("/trailing/"),
                .signature("a{"),
                .string("nul\0inside"),
            ]
            for value in invalid {
                let error = await dbusError { () async throws(DBusError) in try await peers.call("Echo", [value]) }
                #expect(error?.name == "org.freedesktop.DBus.Error.InvalidArgs", "\(value)")
            }
            let closed = DBusFileDescriptor(owning: -1)
            let fd = await dbusError { () async throws(DBusError) in
                try await peers.call("Echo", [.unixFileDescriptor(closed)])
            }
            #expect(fd?.name == "org.freedesktop.DBus.Error.InvalidArgs")
            // Invalid names are refused before libdbus sees them (it would abort).
            let badPath = await dbusError { () async throws(DBusError) in
                try await peers.client.call(
                    destination: peers.service.uniqueName, path: "bad", interface: nil, method: "X")
            }
            #expect(badPath?.name == "org.freedesktop.DBus.Error.InvalidArgs")
            let badMember = await dbusError { () async throws(DBusError) in
                try await peers.client.call(destination: "org.x", path: "/", interface: "no dots", method: "1x")
            }
            #expect(badMember?.name == "org.freedesktop.DBus.Error.InvalidArgs")
            // And the connection still works.
            #expect(try await peers.call("Concat", [.string("still "), .string("fine")]) == [.string("still fine")])
        }
    }

    @Test func aHandlerCanMakeABlockingCall() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let relay = try bus.connect()
            let service = peers.service.uniqueName
            // The relay's handler calls the service synchronously from the relay's own queue.
            try relay.export(
                path: "/relay",
                interfaces: [
                    DBusInterface(
                        "org.horizon.Relay",
                        methods: [
                            DBusMethod("Forward", input: "ss", output: "s") { [relay] arguments throws(DBusError) in
                                try relay.call(
                                    destination: service, path: TestService.path, interface: TestService.interface,
                                    method: "Concat", arguments: arguments, timeout: .seconds(2))
                            }
                        ])
                ])
            let reply = try await peers.client.call(
                destination: relay.uniqueName, path: "/relay", interface: "org.horizon.Relay", method: "Forward",
                arguments: [.string("a"), .string("b")])
            #expect(reply == [.string("ab")])
            // The handler holds the relay strongly (a cycle through its exported object); closing breaks it.
            relay.close()
        }
    }

    @Test func manyConcurrentCallsAllGetTheirOwnReplies() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let replies = try await withThrowingTaskGroup(of: (UInt32, [DBusValue]).self) { group in
                for index in UInt32(0)..<200 {
                    group.addTask { (index, try await peers.call("Echo", [.uint32(index), .string("\(index)")])) }
                }
                var replies: [UInt32: [DBusValue]] = [:]
                for try await (index, reply) in group { replies[index] = reply }
                return replies
            }
            #expect(replies.count == 200)
            #expect(replies.allSatisfy { $0.value == [.uint32($0.key), .string("\($0.key)")] })
        }
    }
    /// Many more calls in flight than the cooperative pool has threads, all answered only once
    /// every one of them has reached the service: an awaited call holds no thread while it waits.
    @Test func callsInFlightHoldNoThread() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let count = 16 * max(2, ProcessInfo.processInfo.activeProcessorCount)
            let replies = try await withThrowingTaskGroup(of: [DBusValue].self) { group in
                for _ in 0..<count {
                    group.addTask { try await peers.call("Gather", [.uint32(UInt32(count))]) }
                }
                var replies: [[DBusValue]] = []
                for try await reply in group { replies.append(reply) }
                return replies
            }
            #expect(replies.count == count)
            #expect(replies.allSatisfy { $0 == [.uint32(UInt32(count))] })
            #expect(peers.client.pendingCallCount == 0)
        }
    }

    /// Calls whose replies never come each fail with `NoReply` at their own timeout, together,
    /// and leave no pending call or timer behind.
    @Test func unansweredCallsTimeOutAndLeaveNothingBehind() async throws {
        try await withBus { bus in
            let peers = try Peers(bus)
            let timersBefore = peers.client.timerCount
            let count = 8 * max(2, ProcessInfo.processInfo.activeProcessorCount)
            let start = ContinuousClock.now
            let errors = await withTaskGroup(of: DBusError?.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        await dbusError { () async throws(DBusError) in
                            try await peers.call("Never", timeout: .milliseconds(500))
                        }
                    }
                }
                var errors: [DBusError?] = []
                for await error in group { errors.append(error) }
                return errors
            }
            #expect(errors.count == count)
            #expect(errors.allSatisfy { $0?.name == "org.freedesktop.DBus.Error.NoReply" })
            #expect(ContinuousClock.now - start >= .milliseconds(490))
            #expect(peers.parked.calls.withLock { $0.count } == count)
            #expect(peers.client.pendingCallCount == 0)
            #expect(peers.client.timerCount == timersBefore)
        }
    }
}
