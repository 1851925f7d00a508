import HorizonBlueZ
import HorizonDBus
import HorizonRadio
import HorizonTestSupport
import Synchronization
import Testing

/// A stand-in bluetoothd on a private bus: it owns `org.bluez` and exports adapters the way
/// bluetoothd does (an ObjectManager at `/`, `Adapter1` objects under `/org/bluez`). The real
/// bluetoothd is exercised in the VM tests; this checks our side of the conversation.
final class FakeBlueZ: Sendable {
    let bus: TestBus
    let connection: DBusConnection

    init(adapters: [(name: String, powered: Bool, advertising: Bool)]) async throws {
        bus = try TestBus()
        connection = try DBusConnection(.address(bus.address))
        _ = try await connection.requestName("org.bluez")
        try connection.export(path: "/", interfaces: [], isObjectManager: true)
        for (index, adapter) in adapters.enumerated() {
            var interfaces = [
                DBusInterface(
                    "org.bluez.Adapter1",
                    properties: [
                        .constant("Address", .string("00:AA:01:00:00:0\(index)")),
                        .constant("Alias", .string("box-\(adapter.name)")),
                        .constant("Powered", .boolean(adapter.powered)),
                    ]),
                DBusInterface("org.bluez.GattManager1"),
            ]
            if adapter.advertising { interfaces.append(DBusInterface("org.bluez.LEAdvertisingManager1")) }
            try connection.export(path: "/org/bluez/\(adapter.name)", interfaces: interfaces)
        }
    }

    func client() throws -> BlueZ { try BlueZ(bus: .address(bus.address)) }

    deinit {
        connection.close()
        bus.stop()
    }
}

@Suite("BlueZ adapters (against a stand-in bluetoothd on a private bus)")
struct AdapterTests {
    @Test func listsAdaptersWithWhatTheyCanDo() async throws {
        let bluez = try await FakeBlueZ(adapters: [("hci1", true, true), ("hci0", false, false)])
        let adapters = try await bluez.client().adapters()
        #expect(adapters.map(\.name) == ["hci0", "hci1"])
        #expect(adapters.map(\.path) == ["/org/bluez/hci0", "/org/bluez/hci1"])
        #expect(adapters[1].address == "00:AA:01:00:00:00")
        #expect(adapters[1].alias == "box-hci1")
        #expect(adapters.map(\.powered) == [false, true])
        #expect(adapters.map(\.canAdvertise) == [false, true])
        #expect(adapters.allSatisfy { $0.canServeGATT })
    }

    @Test func choosesByNameOrTheFirstPoweredAdapter() async throws {
        let bluez = try await FakeBlueZ(adapters: [("hci0", false, true), ("hci1", true, true), ("hci2", true, true)])
        let client = try bluez.client()
        #expect(try await client.adapter(named: nil).name == "hci1")
        #expect(try await client.adapter(named: "hci0").name == "hci0")
        #expect(await client.availability(adapter: "hci0") == .poweredOff)
        #expect(await client.availability() == .poweredOn)
        await #expect(
            throws: RadioError.invalidConfiguration("no Bluetooth adapter hci7; this machine has hci0, hci1, hci2")
        ) {
            try await client.adapter(named: "hci7")
        }
    }

    @Test func noAdapterIsUnsupportedAndNoBluetoothdIsServiceUnavailable() async throws {
        let empty = try await FakeBlueZ(adapters: [])
        await #expect(throws: RadioError.adapterUnavailable(.unsupported)) {
            try await empty.client().adapter(named: nil)
        }
        let emptyClient = try empty.client()
        #expect(await emptyClient.availability() == .unsupported)

        // A bus where nobody owns org.bluez: bluetoothd is not running.
        let bus = try TestBus()
        defer { bus.stop() }
        let client = try BlueZ(bus: .address(bus.address))
        await #expect(throws: RadioError.adapterUnavailable(.serviceUnavailable)) { try await client.adapters() }
        #expect(await client.availability() == .serviceUnavailable)
        #expect(
            RadioError.adapterUnavailable(.serviceUnavailable).description
                == "bluetoothd is not running; start it (systemctl start bluetooth)")
    }

    @Test func noBusAtAllSaysWhatToStart() throws {
        #expect(throws: RadioError.self) { try BlueZ(bus: .address("unix:path=/nonexistent/system_bus_socket")) }
    }

    /// The library says what went wrong and keeps BlueZ's name; what to do is the programs' to say.
    @Test func blueZErrorsBecomeSentencesThatSayWhatWentWrong() {
        func map(_ name: String, _ message: String = "") -> RadioError {
            .bluez(DBusError(name: name, message: message), doing: "registering the advertisement")
        }
        #expect(map("org.bluez.Error.NotReady") == .adapterUnavailable(.poweredOff))
        #expect(map("org.freedesktop.DBus.Error.AccessDenied") == .adapterUnavailable(.unauthorized))
        #expect(map("org.freedesktop.DBus.Error.ServiceUnknown") == .adapterUnavailable(.serviceUnavailable))
        #expect(map("org.freedesktop.DBus.Error.NameHasNoOwner") == .adapterUnavailable(.serviceUnavailable))
        #expect(
            map("org.bluez.Error.InProgress")
                == .backend(
                    name: "org.bluez.Error.InProgress",
                    message: "another operation is in progress on the adapter (registering the advertisement)"))
        #expect(
            map("org.bluez.Error.NotPermitted")
                == .backend(
                    name: "org.bluez.Error.NotPermitted", message: "bluetoothd refused registering the advertisement"))
        #expect(
            map("org.bluez.Error.AlreadyExists").description
                == "registering the advertisement: already registered (a previous run did not clean up) (org.bluez.Error.AlreadyExists)"
        )
        #expect(
            map("org.bluez.Error.Failed", "le-connection-abort-by-local").description
                == "the connection was aborted while registering the advertisement (org.bluez.Error.Failed)")
        // A reason is the whole message, never a part of it.
        #expect(
            map("org.bluez.Error.Failed", "not le-connection-abort-by-local").description
                == "registering the advertisement failed: not le-connection-abort-by-local (org.bluez.Error.Failed)")
        #expect(
            map("org.bluez.Error.Failed", "Operation failed").description
                == "registering the advertisement failed: Operation failed (org.bluez.Error.Failed)")
        #expect(
            map("org.freedesktop.DBus.Error.NoReply").description
                == "bluetoothd did not answer registering the advertisement in time (org.freedesktop.DBus.Error.NoReply)"
        )
        #expect(
            map("org.freedesktop.DBus.Error.NoServer")
                == .backend(name: "org.freedesktop.DBus.Error.NoServer", message: "the system D-Bus is not running"))
    }
}
