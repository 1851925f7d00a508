import HorizonDBus

/// `org.bluez.Device1` (doc/org.bluez.Device.rst): a remote device bluetoothd knows, heard
/// advertising or connected.
struct Device1: BlueZProxy {
    static let interface = BlueZName.device
    let connection: DBusConnection
    /// `/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF`.
    let path: String

    /// The properties this radio reads, from GetAll, GetManagedObjects, InterfacesAdded or a
    /// PropertiesChanged (then only the changed ones are set).
    struct Properties: Equatable, Sendable {
        var address: String?
        /// The raw value: 127 is HCI's "not available".
        var rssi: Int16?
        /// Company identifier → data, from the last advertisement.
        var manufacturerData: [UInt16: [UInt8]]?
        var connected: Bool?
        var servicesResolved: Bool?
        var paired: Bool?
        var trusted: Bool?

        init(_ values: [String: DBusValue]) {
            address = values["Address"]?.unwrapped.string
            rssi = values["RSSI"]?.unwrapped.int16
            manufacturerData = values["ManufacturerData"]?.unwrapped.uint16VariantDictionary?.compactMapValues(\.bytes)
            connected = values["Connected"]?.unwrapped.boolean
            servicesResolved = values["ServicesResolved"]?.unwrapped.boolean
            paired = values["Paired"]?.unwrapped.boolean
            trusted = values["Trusted"]?.unwrapped.boolean
        }

        /// The device's changed properties in a `PropertiesChanged` of this interface, else nil.
        init?(changedIn signal: DBusSignal) {
            guard let change = signal.propertiesChanged, change.interface == Device1.interface else { return nil }
            self.init(change.changed)
        }
    }

    func connect() -> BlueZCall<Void> { method("Connect") }

    func disconnect() -> BlueZCall<Void> { method("Disconnect") }

    func connected() -> BlueZCall<Bool> { property("Connected", \.boolean) }

    func properties() -> BlueZCall<Properties> { allProperties(Properties.init) }

    /// `PropertiesChanged` of every device under `adapterPath`.
    static func changes(under adapterPath: String) -> DBusMatchRule {
        .propertiesChanged(sender: BlueZName.service, pathNamespace: adapterPath, interface: interface)
    }
}
