import HorizonDBus
import HorizonRadio

extension RadioError {
    /// The radio error for a D-Bus failure talking to bluetoothd, phrased so a person knows what
    /// to do; BlueZ's own error name is kept.
    public static func bluez(_ error: DBusError, doing action: String) -> RadioError {
        .bluez(BlueZError(error), doing: action)
    }

    /// The radio error for an error bluetoothd answered (see the `DBusError` variant).
    public static func bluez(_ error: BlueZError, doing action: String) -> RadioError {
        switch error.kind {
        case .serviceUnknown: return .adapterUnavailable(.serviceUnavailable)
        case .accessDenied: return .adapterUnavailable(.unauthorized)
        case .notReady: return .adapterUnavailable(.poweredOff)
        case .noServer:
            return .backend(
                name: error.name,
                message: "the system D-Bus is not running; start it (systemctl start dbus) before bluetoothd")
        case .noReply:
            return .backend(name: error.name, message: "bluetoothd did not answer \(action) in time; is it stuck?")
        case .inProgress:
            return .backend(
                name: error.name, message: "another operation is in progress on the adapter (\(action)); retry")
        case .notPermitted:
            return .backend(
                name: error.name,
                message:
                    "bluetoothd refused \(action); install udev/org.horizon.Terminal.conf and run as a member of 'bluetooth'"
            )
        case .alreadyExists:
            return .backend(
                name: error.name, message: "\(action): already registered (a previous run did not clean up)")
        case .invalidLength:
            return .backend(name: error.name, message: "\(action): a value has an invalid length for BlueZ")
        case .notSupported:
            return .backend(name: error.name, message: "this adapter or BlueZ version does not support \(action)")
        case .doesNotExist:
            return .backend(name: error.name, message: "\(action): the object no longer exists (the device went away)")
        case .failed where error.reason == .connectionAbortedLocally:
            return .backend(name: error.name, message: "the connection was aborted while \(action); retry")
        default:
            return .backend(name: error.name, message: "\(action) failed: \(error.message)")
        }
    }
}
