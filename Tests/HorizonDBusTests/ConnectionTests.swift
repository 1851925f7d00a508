import Foundation
import HorizonDBus
import HorizonTestSupport
import Testing

/// Connecting, names, signal subscriptions and the connection's life cycle.
@Suite("D-Bus connections")
struct ConnectionTests {
    @Test func connectingWhereNothingListensIsATypedError() async throws {
        try await withBus { bus in
            let error = await dbusError { () async throws(DBusError) in
                try DBusConnection(.address("unix:path=\(bus.directory)/nobody-here"))
            }
            #expect(error?.name == "org.freedesktop.DBus.Error.NoServer")
            #expect(error?.isConnectionFailure == true)
            #expect(
                error?.message.hasPrefix("the bus at unix:path=\(bus.directory)/nobody-here is not running") == true)
            #expect(error?.message.contains("nobody-here") == true)
            let bad = await dbusError { () async throws(DBusError) in try DBusConnection(.address("nonsense")) }
            #expect(bad?.name == "org.freedesktop.DBus.Error.BadAddress")
            let empty = await dbusError { () async throws(DBusError) in try DBusConnection(.address("")) }
            #expect(empty?.name == "org.freedesktop.DBus.Error.BadAddress")
        }
    }

    @Test func theSystemBusConnectsWhereOneListensAndSaysWhyWhereNone() {
        // Machines differ (a build host has no system bus, the BlueZ test VM has one), so the
        // test first asks the socket itself whether a bus listens there, then holds the library
        // to the matching answer: a connection, or a connection error (never a crash or an exit).
        let listening = Self.systemBusListens()
        do {
            let system = try DBusConnection(.system)
            #expect(listening, "connected to a system bus where none listens")
            #expect(system.uniqueName.hasPrefix(":"))
        } catch {
            #expect(!listening, "a system bus listens, yet: \(error)")
            #expect(error.isConnectionFailure, "\(error)")
        }
    }

    /// Whether something accepts connections on the system bus's socket (DBUS_SYSTEM_BUS_ADDRESS
    /// when it names a path, else libdbus's default).
    static func systemBusListens() -> Bool {
        var path = "/run/dbus/system_bus_socket"
        if let address = ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"] {
            guard address.hasPrefix("unix:path=") else { return false }
            path = String(address.dropFirst("unix:path=".count).prefix { $0 != "," })
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() where index < buffer.count - 1 { buffer[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }

    @Test func connectingGivesAUniqueName() async throws {
        try await withBus { bus in
            let first = try bus.connect()
            let second = try bus.connect()
            #expect(first.uniqueName.hasPrefix(":"))
            #expect(first.uniqueName != second.uniqueName)
            #expect(first.isConnected)
            // The bus daemon answers its own methods.
            let id = try await first.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                method: "GetId")
            #expect(id.first?.string?.count == 32)
        }
    }

    @Test func requestNameOnThePrivateBus() async throws {
        try await withBus { bus in
            let owner = try bus.connect()
            let other = try bus.connect()
            let name = "org.horizon.Terminal"
            #expect(try await owner.nameOwner(of: name) == nil)
            #expect(try await owner.requestName(name) == .primaryOwner)
            #expect(try await owner.requestName(name) == .alreadyOwner)
            #expect(try await other.requestName(name) == .exists)
            #expect(try await other.nameOwner(of: name) == owner.uniqueName)
            // Calls can address the well-known name.
            try owner.export(
                path: "/t",
                interfaces: [
                    DBusInterface(
                        "org.horizon.T", methods: [DBusMethod("Who", output: "s") { _ in [.string("owner")] }])
                ])
            #expect(
                try await other.call(destination: name, path: "/t", interface: "org.horizon.T", method: "Who")
                    == [.string("owner")])
            try await owner.releaseName(name)
            #expect(try await other.nameOwner(of: name) == nil)
            let gone = await dbusError { () async throws(DBusError) in
                try await other.call(destination: name, path: "/t", interface: "org.horizon.T", method: "Who")
            }
            #expect(gone?.name == "org.freedesktop.DBus.Error.ServiceUnknown")
            #expect(gone?.isServiceUnknown == true)
            let invalid = await dbusError { () async throws(DBusError) in try await owner.requestName(":1.1") }
            #expect(invalid?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        }
    }

    @Test func signalsFromAWellKnownNameFollowItsOwner() async throws {
        try await withBus { bus in
            let listener = try bus.connect()
            let first = try bus.connect()
            let impostor = try bus.connect()
            let second = try bus.connect()
            let name = "org.horizon.Beacon"
            #expect(try await first.requestName(name) == .primaryOwner)
            let rule = DBusMatchRule(sender: name, path: "/beacon", interface: "org.horizon.Beacon", member: "Tick")
            let recorder = SignalRecorder(try await listener.signals(matching: rule))
            // The same signal from a process that does not own the name is not delivered.
            try impostor.emitSignal(
                path: "/beacon", interface: "org.horizon.Beacon", name: "Tick", arguments: [.uint32(0)])
            try first.emitSignal(
                path: "/beacon", interface: "org.horizon.Beacon", name: "Tick", arguments: [.uint32(1)])
            // Other members and paths are not delivered either.
            try first.emitSignal(
                path: "/beacon", interface: "org.horizon.Beacon", name: "Tock", arguments: [.uint32(9)])
            try first.emitSignal(path: "/other", interface: "org.horizon.Beacon", name: "Tick", arguments: [.uint32(9)])
            #expect(await recorder.wait(for: 1).map(\.arguments) == [[.uint32(1)]])
            // The name moves to another process: its signals are now the ones that count.
            try await first.releaseName(name)
            #expect(try await second.requestName(name) == .primaryOwner)
            // The NameOwnerChanged signal is processed before the next signal from the new owner.
            try await Task.sleep(for: .milliseconds(50))
            try first.emitSignal(
                path: "/beacon", interface: "org.horizon.Beacon", name: "Tick", arguments: [.uint32(2)])
            try second.emitSignal(
                path: "/beacon", interface: "org.horizon.Beacon", name: "Tick", arguments: [.uint32(3)])
            let signals = await recorder.wait(for: 2)
            #expect(signals.map(\.arguments) == [[.uint32(1)], [.uint32(3)]])
            #expect(signals.map(\.sender) == [first.uniqueName, second.uniqueName])
        }
    }

    @Test func arg0AndPathNamespaceNarrowASubscription() async throws {
        try await withBus { bus in
            let listener = try bus.connect()
            let sender = try bus.connect()
            // The blocking variant of signals(matching:), from a synchronous context.
            func subscribe() throws(DBusError) -> AsyncStream<DBusSignal> {
                try listener.signals(
                    matching: .propertiesChanged(
                        sender: sender.uniqueName, pathNamespace: "/org/bluez/hci0", interface: "org.bluez.Device1"))
            }
            let recorder = SignalRecorder(try subscribe())
            try sender.emitPropertiesChanged(
                path: "/org/bluez/hci0/dev_1", interface: "org.bluez.Adapter1", changed: ["Powered": .boolean(true)])
            try sender.emitPropertiesChanged(
                path: "/org/bluez/hci1/dev_1", interface: "org.bluez.Device1", changed: ["RSSI": .int16(-1)])
            try sender.emitPropertiesChanged(
                path: "/org/bluez/hci0/dev_2", interface: "org.bluez.Device1", changed: ["RSSI": .int16(-50)])
            let signals = await recorder.wait(for: 1)
            try await Task.sleep(for: .milliseconds(50))
            #expect(recorder.signals.count == 1)
            #expect(signals.first?.path == "/org/bluez/hci0/dev_2")
            #expect(signals.first?.propertiesChanged?.changed == ["RSSI": .int16(-50)])
        }
    }

    @Test func matchRulesRenderInTheBusSyntax() {
        let rule = DBusMatchRule.propertiesChanged(
            sender: "org.bluez", pathNamespace: "/org/bluez", interface: "org.bluez.Device1")
        #expect(
            rule.description
                == "type='signal',sender='org.bluez',path_namespace='/org/bluez',"
                + "interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',arg0='org.bluez.Device1'")
        #expect(DBusMatchRule(arg0: "it's").description == "type='signal',arg0='it'\\''s'")
        #expect(throws: DBusError.self) { try DBusMatchRule(path: "/a", pathNamespace: "/b").validate() }
        #expect(throws: DBusError.self) { try DBusMatchRule(sender: "not a name").validate() }
    }

    @Test func closingFinishesSignalStreamsAndWithdrawsObjects() async throws {
        try await withBus { bus in
            let listener = try bus.connect()
            let service = try bus.connect()
            let recorder = SignalRecorder(
                try await listener.signals(matching: DBusMatchRule(interface: "org.horizon.X")))
            try service.export(path: "/x", interfaces: [DBusInterface("org.horizon.X")])
            listener.close()
            #expect(await recorder.waitUntilFinished())
            let afterClose = await dbusError { () async throws(DBusError) in
                try listener.emitSignal(path: "/x", interface: "org.horizon.X", name: "Y")
            }
            #expect(afterClose?.isDisconnected == true)
            let client = try bus.connect()
            #expect(service.exportedPaths == ["/x"])
            service.close()
            #expect(service.exportedPaths == [])
            // The bus learns of the close asynchronously; once it has, the name is gone.
            let deadline = ContinuousClock.now + .seconds(3)
            while try await client.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                method: "NameHasOwner", arguments: [.string(service.uniqueName)]) == [.boolean(true)],
                ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(5))
            }
            let gone = await dbusError { () async throws(DBusError) in
                try await client.call(destination: service.uniqueName, path: "/x", interface: nil, method: "Introspect")
            }
            #expect(gone?.name == "org.freedesktop.DBus.Error.ServiceUnknown")
        }
    }

    @Test func releasingTheLastReferenceClosesTheConnection() async throws {
        try await withBus { bus in
            let observer = try bus.connect()
            var name = ""
            do {
                let transient = try bus.connect()
                name = transient.uniqueName
                try transient.export(path: "/t", interfaces: [DBusInterface("org.horizon.T")])
                // libdbus answers org.freedesktop.DBus.Peer for every connection.
                #expect(
                    try await observer.call(
                        destination: name, path: "/t", interface: "org.freedesktop.DBus.Peer", method: "Ping")
                        == [])
            }
            func hasOwner() async throws -> Bool {
                try await observer.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", method: "NameHasOwner", arguments: [.string(name)])
                    == [.boolean(true)]
            }
            let deadline = ContinuousClock.now + .seconds(3)
            while try await hasOwner(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(try await !hasOwner())
        }
    }

    @Test func droppingAStreamEndsItsSubscription() async throws {
        try await withBus { bus in
            let listener = try bus.connect()
            let sender = try bus.connect()
            let rule = DBusMatchRule(sender: sender.uniqueName, interface: "org.horizon.X")
            do {
                let recorder = SignalRecorder(try await listener.signals(matching: rule))
                try sender.emitSignal(path: "/x", interface: "org.horizon.X", name: "Y")
                #expect(await recorder.wait(for: 1).count == 1)
            }
            // The stream was released with its recorder; a new one still works on the same connection.
            let again = SignalRecorder(try await listener.signals(matching: rule))
            try sender.emitSignal(path: "/x", interface: "org.horizon.X", name: "Z")
            #expect(await again.wait(for: 1).map(\.member) == ["Z"])
        }
    }

    @Test func theBusGoingAwayDisconnectsCleanly() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let service = try bus.connect()
        let client = try bus.connect()
        let parkedCalls = CallTests.Parked()
        try service.export(
            path: "/slow",
            interfaces: [
                DBusInterface(
                    "org.horizon.Slow",
                    methods: [.deferred("Wait") { call in parkedCalls.calls.withLock { $0.append(call) } }])
            ])
        let recorder = SignalRecorder(try await client.signals(matching: DBusMatchRule(interface: "org.horizon.X")))
        let destination = service.uniqueName
        let pending = Task { () async -> DBusError? in
            await dbusError { () async throws(DBusError) in
                try await client.call(
                    destination: destination, path: "/slow", interface: "org.horizon.Slow", method: "Never",
                    timeout: .seconds(10))
            }
        }
        // The unknown method answers quickly; now park a call that stays pending, then kill the bus.
        #expect(await pending.value?.name == "org.freedesktop.DBus.Error.UnknownMethod")
        let parked = Task { () async -> DBusError? in
            await dbusError { () async throws(DBusError) in
                try await client.call(
                    destination: destination, path: "/slow", interface: "org.horizon.Slow", method: "Wait",
                    timeout: .seconds(10))
            }
        }
        let deadline = ContinuousClock.now + .seconds(3)
        while parkedCalls.calls.withLock({ $0.isEmpty }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        bus.stop()
        let error = await parked.value
        #expect(error?.name == "org.freedesktop.DBus.Error.Disconnected")
        #expect(await recorder.waitUntilFinished())
        #expect(!client.isConnected)
    }
}
