import HorizonDBus
import HorizonRadio

/// One Bluetooth adapter as bluetoothd describes it (`org.bluez.Adapter1`).
public struct BlueZAdapter: Sendable, Equatable {
    /// The D-Bus object path, e.g. `/org/bluez/hci0`.
    public let path: String
    /// The kernel's name, e.g. `hci0`.
    public var name: String { path.split(separator: "/").last.map(String.init) ?? path }
    public let address: String
    public let alias: String
    public let powered: Bool
    /// Whether the adapter can advertise (it exports `LEAdvertisingManager1`).
    public let canAdvertise: Bool
    /// Whether the adapter can serve GATT (it exports `GattManager1`).
    public let canServeGATT: Bool

    public var availability: AdapterAvailability { powered ? .poweredOn : .poweredOff }
}

/// bluetoothd on the system bus (or the bus at `DBUS_SYSTEM_BUS_ADDRESS`): its adapters and
/// what they can do. Every failure is a `RadioError` that says what to do.
public final class BlueZ: Sendable {
    public let connection: DBusConnection

    /// Connects to the bus bluetoothd is on.
    public init(bus: DBusConnection.Bus = .system) throws(RadioError) {
        do {
            connection = try DBusConnection(bus)
        } catch {
            throw .bluez(error, doing: "connecting to the system bus")
        }
    }

    /// Every adapter bluetoothd manages, by name.
    public func adapters() async throws(RadioError) -> [BlueZAdapter] {
        do {
            return Self.adapters(
                in: try await BlueZObjectManager(connection: connection).managedObjects()
                    .reply(within: DBusConnection.defaultTimeout))
        } catch {
            throw .bluez(error, doing: "listing adapters")
        }
    }

    static func adapters(in objects: BlueZObjects) -> [BlueZAdapter] {
        objects.adapters.map { adapter in
            BlueZAdapter(
                path: adapter.path, address: adapter.properties.address ?? "",
                alias: adapter.properties.alias ?? adapter.properties.name ?? "",
                powered: adapter.properties.powered ?? false, canAdvertise: adapter.canAdvertise,
                canServeGATT: adapter.canServeGATT)
        }.sorted { $0.name < $1.name }
    }

    /// The adapter named `name` (`--adapter hci1`), or by default the first powered one (else the
    /// first). Throws `adapterUnavailable(.unsupported)` when there is none, and a clear error
    /// naming the adapters there are when `name` is not one of them.
    public func adapter(named name: String?) async throws(RadioError) -> BlueZAdapter {
        try Self.choose(name, from: try await adapters())
    }

    static func choose(_ name: String?, from all: [BlueZAdapter]) throws(RadioError) -> BlueZAdapter {
        guard !all.isEmpty else { throw .adapterUnavailable(.unsupported) }
        if let name {
            guard let adapter = all.first(where: { $0.name == name }) else {
                throw .invalidConfiguration(
                    "no Bluetooth adapter \(name); this machine has \(all.map(\.name).joined(separator: ", "))")
            }
            return adapter
        }
        return all.first(where: \.powered) ?? all[0]
    }

    /// What the adapter's state means for a terminal or a wallet: powered on, off, not allowed,
    /// missing, or bluetoothd not running.
    public func availability(adapter name: String? = nil) async -> AdapterAvailability {
        do {
            return try await adapter(named: name).availability
        } catch {
            if case .adapterUnavailable(let availability) = error { return availability }
            return .unsupported
        }
    }
}
