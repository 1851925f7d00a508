import HorizonDBus

/// `org.bluez.Adapter1` (doc/org.bluez.Adapter.rst): one local controller, its discovery and
/// the devices bluetoothd keeps for it.
struct Adapter1: BlueZProxy {
    static let interface = BlueZName.adapter
    let connection: DBusConnection
    /// `/org/bluez/hci0`.
    let path: String

    /// The properties this radio reads; nil where bluetoothd did not send one.
    struct Properties: Equatable, Sendable {
        var address: String?
        var alias: String?
        var name: String?
        var powered: Bool?
        var discovering: Bool?

        init(_ values: [String: DBusValue]) {
            address = values["Address"]?.unwrapped.string
            alias = values["Alias"]?.unwrapped.string
            name = values["Name"]?.unwrapped.string
            powered = values["Powered"]?.unwrapped.boolean
            discovering = values["Discovering"]?.unwrapped.boolean
        }

        /// The adapter's changed properties in a `PropertiesChanged` of this interface, else nil.
        init?(changedIn signal: DBusSignal) {
            guard let change = signal.propertiesChanged, change.interface == Adapter1.interface else { return nil }
            self.init(change.changed)
        }
    }

    /// `SetDiscoveryFilter`'s filter, as far as this radio sets it.
    struct DiscoveryFilter: Equatable, Sendable {
        enum Transport: String, Sendable { case auto, bredr, le }
        var transport: Transport
        /// Report every advertisement, not only changes (bluetoothd's default filters duplicates).
        var duplicateData: Bool

        var dictionary: [String: DBusValue] {
            ["Transport": .string(transport.rawValue), "DuplicateData": .boolean(duplicateData)]
        }
    }

    func setDiscoveryFilter(_ filter: DiscoveryFilter) -> BlueZCall<Void> {
        method("SetDiscoveryFilter", [.stringVariantDictionary(filter.dictionary)])
    }

    func startDiscovery() -> BlueZCall<Void> { method("StartDiscovery") }

    func stopDiscovery() -> BlueZCall<Void> { method("StopDiscovery") }

    /// Forgets a device (and its cached data); `device` is its object path.
    func removeDevice(_ device: String) -> BlueZCall<Void> { method("RemoveDevice", [.objectPath(device)]) }

    func discovering() -> BlueZCall<Bool> { property("Discovering", \.boolean) }
}
