/// BlueZ's D-Bus names.
public enum BlueZName {
    public static let service = "org.bluez"
    public static let adapter = "org.bluez.Adapter1"
    public static let device = "org.bluez.Device1"
    public static let gattManager = "org.bluez.GattManager1"
    public static let advertisingManager = "org.bluez.LEAdvertisingManager1"
    public static let gattCharacteristic = "org.bluez.GattCharacteristic1"
    public static let gattService = "org.bluez.GattService1"
    public static let advertisement = "org.bluez.LEAdvertisement1"

    /// `AA:BB:CC:DD:EE:FF` from `/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF` (the path if it is not a device's).
    public static func address(ofDevicePath path: String) -> String {
        guard let last = path.split(separator: "/").last, last.hasPrefix("dev_") else { return path }
        return last.dropFirst(4).split(separator: "_").joined(separator: ":")
    }

    /// The device object bluetoothd keeps for `address` under `adapterPath`.
    public static func devicePath(adapterPath: String, address: String) -> String {
        adapterPath + "/dev_" + address.uppercased().split(separator: ":").joined(separator: "_")
    }
}
