import HorizonDBus

/// `org.bluez.GattManager1` (doc/org.bluez.GattManager.rst) on an adapter: registers a local
/// GATT application, an object manager whose objects bluetoothd reads before it answers.
struct GattManager1: BlueZProxy {
    static let interface = BlueZName.gattManager
    let connection: DBusConnection
    /// The adapter's path.
    let path: String

    func registerApplication(_ root: String) -> BlueZCall<Void> {
        method("RegisterApplication", [.objectPath(root), .stringVariantDictionary([:])])
    }

    func unregisterApplication(_ root: String) -> BlueZCall<Void> {
        method("UnregisterApplication", [.objectPath(root)])
    }
}
