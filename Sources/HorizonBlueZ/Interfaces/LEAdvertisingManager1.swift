import HorizonDBus

/// `org.bluez.LEAdvertisingManager1` (doc/org.bluez.LEAdvertisingManager.rst) on an adapter:
/// registers advertisements, `LEAdvertisement1` objects bluetoothd reads before it answers.
struct LEAdvertisingManager1: BlueZProxy {
    static let interface = BlueZName.advertisingManager
    let connection: DBusConnection
    /// The adapter's path.
    let path: String

    func registerAdvertisement(_ advertisement: String) -> BlueZCall<Void> {
        method("RegisterAdvertisement", [.objectPath(advertisement), .stringVariantDictionary([:])])
    }

    func unregisterAdvertisement(_ advertisement: String) -> BlueZCall<Void> {
        method("UnregisterAdvertisement", [.objectPath(advertisement)])
    }
}
