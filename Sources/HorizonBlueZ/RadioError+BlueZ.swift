import HorizonDBus
import HorizonRadio

extension RadioError {
    /// The radio error for a failure talking to bluetoothd: what went wrong, with BlueZ's own
    /// error name kept. What a person can do about it is the program's to say (by `BlueZError.Kind`).
    public static func bluez(_ error: DBusError, doing action: String) -> RadioError {
        .bluez(BlueZError(error), doing: action)
    }

    /// The radio error for an error bluetoothd answered (see the `DBusError` variant).
    public static func bluez(_ error: BlueZError, doing action: String) -> RadioError {
        switch error.kind {
        case .serviceUnknown: return .adapterUnavailable(.serviceUnavailable)
        case .accessDenied: return .adapterUnavailable(.unauthorized)
        case .notReady: return .adapterUnavailable(.poweredOff)
        case .noServer: return .backend(name: error.name, message: "the system D-Bus is not running")
        case .noReply: return .backend(name: error.name, message: "bluetoothd did not answer \(action) in time")
        case .inProgress:
            return .backend(name: error.name, message: "another operation is in progress on the adapter (\(action))")
        case .notPermitted: return .backend(name: error.name, message: "bluetoothd refused \(action)")
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
            return .backend(name: error.name, message: "the connection was aborted while \(action)")
        default:
            return .backend(name: error.name, message: "\(action) failed: \(error.message)")
        }
    }
}
