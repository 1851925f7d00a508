import HorizonDBus
import HorizonRadio

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

extension RadioError {
    /// The radio error for a D-Bus failure talking to bluetoothd, phrased so a person knows what
    /// to do; BlueZ's own error name is kept.
    public static func bluez(_ error: DBusError, doing action: String) -> RadioError {
        switch error.name {
        case DBusError.Name.serviceUnknown, DBusError.Name.nameHasNoOwner:
            return .adapterUnavailable(.serviceUnavailable)
        case DBusError.Name.accessDenied:
            return .adapterUnavailable(.unauthorized)
        case DBusError.Name.noServer:
            return .backend(
                name: error.name,
                message: "the system D-Bus is not running; start it (systemctl start dbus) before bluetoothd")
        case DBusError.Name.noReply:
            return .backend(name: error.name, message: "bluetoothd did not answer \(action) in time; is it stuck?")
        case "org.bluez.Error.InProgress":
            return .backend(
                name: error.name, message: "another operation is in progress on the adapter (\(action)); retry")
        case "org.bluez.Error.NotReady":
            return .adapterUnavailable(.poweredOff)
        case "org.bluez.Error.NotPermitted":
            return .backend(
                name: error.name,
                message:
                    "bluetoothd refused \(action); install udev/org.horizon.Terminal.conf and run as a member of 'bluetooth'"
            )
        case "org.bluez.Error.AlreadyExists":
            return .backend(
                name: error.name, message: "\(action): already registered (a previous run did not clean up)")
        case "org.bluez.Error.InvalidLength":
            return .backend(name: error.name, message: "\(action): a value has an invalid length for BlueZ")
        case "org.bluez.Error.NotSupported":
            return .backend(name: error.name, message: "this adapter or BlueZ version does not support \(action)")
        case "org.bluez.Error.DoesNotExist":
            return .backend(name: error.name, message: "\(action): the object no longer exists (the device went away)")
        default:
            if error.message.contains("le-connection-abort-by-local") {
                return .backend(name: error.name, message: "the connection was aborted while \(action); retry")
            }
            return .backend(name: error.name, message: "\(action) failed: \(error.message)")
        }
    }
}
