import HorizonDBus

/// An error bluetoothd (or the bus, on its way to bluetoothd) answered: its kind, parsed once
/// from the D-Bus error name, and the name and message as they came. Callers branch on `kind`
/// (and, for `Failed`, on `reason`), never on the message's words.
public struct BlueZError: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The errors of BlueZ's API (doc/org.bluez.*.rst, "Possible errors") and the bus's own
    /// that reach a BlueZ client.
    public enum Kind: Equatable, Hashable, Sendable, CaseIterable {
        // org.bluez.Error.*
        case notReady
        case inProgress
        case notPermitted
        case failed
        case doesNotExist
        case alreadyExists
        case notSupported
        case invalidArguments
        case notAuthorized
        case notAvailable
        case notConnected
        case alreadyConnected
        case invalidLength
        case invalidOffset
        case authenticationFailed
        // org.freedesktop.DBus.Error.*
        /// Nobody owns `org.bluez`: bluetoothd is not running (`ServiceUnknown`, `NameHasNoOwner`).
        case serviceUnknown
        /// The bus policy refused us.
        case accessDenied
        /// The system bus is not running.
        case noServer
        /// No answer within the call's timeout.
        case noReply
        /// A timeout the remote side reported (`Timeout`, `TimedOut`).
        case timedOut
        /// No object at the path (a device bluetoothd does not know).
        case unknownObject
        case unknownMethod
        case unknownInterface
        case unknownProperty
        /// The connection to the bus is closed.
        case disconnected
        /// Any other name; `BlueZError.name` says which.
        case other

        /// The kind of the D-Bus error `name`.
        public init(errorName name: String) {
            self = Self.byName[name] ?? .other
        }

        /// The D-Bus error name of this kind (the first, where several map to it); nil for `other`.
        public var errorName: String? { Self.names[self] }

        private static let names: [Kind: String] = [
            .notReady: "org.bluez.Error.NotReady",
            .inProgress: "org.bluez.Error.InProgress",
            .notPermitted: "org.bluez.Error.NotPermitted",
            .failed: "org.bluez.Error.Failed",
            .doesNotExist: "org.bluez.Error.DoesNotExist",
            .alreadyExists: "org.bluez.Error.AlreadyExists",
            .notSupported: "org.bluez.Error.NotSupported",
            .invalidArguments: "org.bluez.Error.InvalidArguments",
            .notAuthorized: "org.bluez.Error.NotAuthorized",
            .notAvailable: "org.bluez.Error.NotAvailable",
            .notConnected: "org.bluez.Error.NotConnected",
            .alreadyConnected: "org.bluez.Error.AlreadyConnected",
            .invalidLength: "org.bluez.Error.InvalidLength",
            .invalidOffset: "org.bluez.Error.InvalidOffset",
            .authenticationFailed: "org.bluez.Error.AuthenticationFailed",
            .serviceUnknown: DBusError.Name.serviceUnknown,
            .accessDenied: DBusError.Name.accessDenied,
            .noServer: DBusError.Name.noServer,
            .noReply: DBusError.Name.noReply,
            .timedOut: DBusError.Name.timeout,
            .unknownObject: DBusError.Name.unknownObject,
            .unknownMethod: DBusError.Name.unknownMethod,
            .unknownInterface: DBusError.Name.unknownInterface,
            .unknownProperty: DBusError.Name.unknownProperty,
            .disconnected: DBusError.Name.disconnected,
        ]

        private static let byName: [String: Kind] = {
            var byName = Dictionary(uniqueKeysWithValues: names.map { ($0.value, $0.key) })
            byName[DBusError.Name.nameHasNoOwner] = .serviceUnknown
            byName[DBusError.Name.timedOut] = .timedOut
            return byName
        }()
    }

    /// Why a connect failed, as bluetoothd words it in a `Failed` error's message: since BlueZ
    /// 5.65 one of the reason codes of src/error.h (`le-connection-abort-by-local`), before that
    /// the errno text (`strerror`). Matched whole, never as a part of the message.
    public enum Reason: Equatable, Hashable, Sendable {
        /// The controller or kernel aborted the connection attempt (ECONNABORTED).
        case connectionAbortedLocally
        /// The kernel was still busy with a connection to the device (EALREADY).
        case alreadyInProgress
        /// The peer or the controller refused the connection (ECONNREFUSED).
        case connectionRefused
        /// The socket failed while connecting (EIO).
        case inputOutput

        init?(message: String) {
            switch message {
            case "le-connection-abort-by-local", "Software caused connection abort": self = .connectionAbortedLocally
            case "Operation already in progress": self = .alreadyInProgress
            case "Connection refused": self = .connectionRefused
            case "Input/output error": self = .inputOutput
            default: return nil
            }
        }
    }

    public let kind: Kind
    /// The D-Bus error name, as received.
    public let name: String
    public let message: String
    /// For `failed`, the reason bluetoothd gave, when it is one this radio acts on.
    public let reason: Reason?

    public init(name: String, message: String = "") {
        self.name = name
        self.message = message
        kind = Kind(errorName: name)
        reason = kind == .failed ? Reason(message: message) : nil
    }

    public init(_ error: DBusError) { self.init(name: error.name, message: error.message) }

    /// The error to answer bluetoothd with from one of our exported objects.
    static func reply(_ kind: Kind, _ message: String) -> DBusError {
        DBusError(name: kind.errorName ?? DBusError.Name.failed, message: message)
    }

    public var description: String { message.isEmpty ? name : "\(message) (\(name))" }
}
