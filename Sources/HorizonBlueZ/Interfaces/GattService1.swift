import HorizonDBus

/// `org.bluez.GattService1` (doc/org.bluez.GattService.rst): a remote device's service as
/// bluetoothd shows it, or one of ours exported for bluetoothd to serve.
enum GattService1 {
    static let interface = BlueZName.gattService

    struct Properties: Equatable, Sendable {
        var uuid: String?
        var primary: Bool?

        init(_ values: [String: DBusValue]) {
            uuid = values["UUID"]?.unwrapped.string
            primary = values["Primary"]?.unwrapped.boolean
        }
    }

    /// A service of our GATT application.
    static func local(uuid: String, primary: Bool) -> DBusInterface {
        DBusInterface(
            interface, properties: [.constant("UUID", .string(uuid)), .constant("Primary", .boolean(primary))])
    }
}
