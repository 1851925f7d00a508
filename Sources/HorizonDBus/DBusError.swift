/// A D-Bus error: the error `name` every D-Bus peer understands (for example
/// `org.bluez.Error.InProgress`) and a human-readable `message`.
///
/// It is a struct rather than an enum because the set of names is open: BlueZ, the bus daemon and
/// our own services each define theirs, and an error must travel unchanged from a service's handler
/// to the caller (a handler that throws `DBusError(name: "org.bluez.Error.InProgress", message: m)`
/// makes the remote caller's `call` throw exactly that value). The names this layer produces itself
/// are in `DBusError.Name`; the `is…` properties classify the ones callers usually branch on.
public struct DBusError: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The D-Bus error name, such as `org.freedesktop.DBus.Error.UnknownMethod`.
    public let name: String
    /// What went wrong and, where this layer knows it, what to do about it.
    public let message: String

    public init(name: String, message: String = "") {
        self.name = name
        self.message = message
    }

    public var description: String { message.isEmpty ? name : "\(message) (\(name))" }

    /// Well-known error names: the standard `org.freedesktop.DBus.Error.*` ones this layer sends and
    /// receives, and the few it makes up for local conditions no standard name covers.
    public enum Name {
        public static let failed = "org.freedesktop.DBus.Error.Failed"
        public static let noMemory = "org.freedesktop.DBus.Error.NoMemory"
        /// The call got no reply within its timeout (libdbus's own name for a method-call timeout).
        public static let noReply = "org.freedesktop.DBus.Error.NoReply"
        /// A timeout reported by a remote service (as opposed to `noReply`, our own).
        public static let timeout = "org.freedesktop.DBus.Error.Timeout"
        public static let timedOut = "org.freedesktop.DBus.Error.TimedOut"
        /// The connection is closed or the bus went away.
        public static let disconnected = "org.freedesktop.DBus.Error.Disconnected"
        /// Nothing listens at the bus address: the bus is not running.
        public static let noServer = "org.freedesktop.DBus.Error.NoServer"
        /// The bus refused us: no permission on that bus (socket permissions or bus policy).
        public static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
        public static let authFailed = "org.freedesktop.DBus.Error.AuthFailed"
        public static let badAddress = "org.freedesktop.DBus.Error.BadAddress"
        public static let fileNotFound = "org.freedesktop.DBus.Error.FileNotFound"
        public static let notSupported = "org.freedesktop.DBus.Error.NotSupported"
        public static let limitsExceeded = "org.freedesktop.DBus.Error.LimitsExceeded"
        /// No process owns the destination name (for BlueZ: bluetoothd is not running).
        public static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
        public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
        public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
        public static let unknownInterface = "org.freedesktop.DBus.Error.UnknownInterface"
        public static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
        public static let unknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
        public static let propertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
        public static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
        public static let invalidSignature = "org.freedesktop.DBus.Error.InvalidSignature"
        public static let objectPathInUse = "org.freedesktop.DBus.Error.ObjectPathInUse"
        public static let inconsistentMessage = "org.freedesktop.DBus.Error.InconsistentMessage"
        /// The awaiting task was cancelled before the reply came (no standard name exists for this).
        public static let cancelled = "org.horizon.DBus.Error.Cancelled"
    }

    /// The call's reply did not arrive in time (ours or the remote's timeout).
    public var isTimeout: Bool { name == Name.noReply || name == Name.timeout || name == Name.timedOut }

    /// The connection is closed or the bus went away; a new connection is needed.
    public var isDisconnected: Bool { name == Name.disconnected }

    /// The destination is not on the bus (for BlueZ: bluetoothd is not running).
    public var isServiceUnknown: Bool { name == Name.serviceUnknown || name == Name.nameHasNoOwner }

    /// Connecting failed because the bus is not running or we may not use it.
    public var isConnectionFailure: Bool {
        [Name.noServer, Name.accessDenied, Name.authFailed, Name.badAddress, Name.fileNotFound].contains(name)
    }
}

extension DBusError {
    public static func failed(_ message: String) -> DBusError { DBusError(name: Name.failed, message: message) }

    public static func invalidArguments(_ message: String) -> DBusError {
        DBusError(name: Name.invalidArgs, message: message)
    }

    public static func disconnected(_ message: String = "the D-Bus connection is closed") -> DBusError {
        DBusError(name: Name.disconnected, message: message)
    }

    public static func timedOut(after timeout: Duration) -> DBusError {
        DBusError(name: Name.noReply, message: "no reply within \(timeout)")
    }

    static let noMemory = DBusError(name: Name.noMemory, message: "libdbus ran out of memory")

    /// The awaiting task was cancelled; the call was abandoned.
    public static let cancelled = DBusError(name: Name.cancelled, message: "the call was cancelled")

    /// The error for a connection attempt that libdbus refused, reworded to say what to do.
    ///
    /// libdbus reports a missing socket as `FileNotFound` and a refused one as `NoServer`; both mean
    /// the same to a user ("the bus is not running"), so both become `NoServer`.
    static func connectionFailed(to bus: String, name: String, detail: String) -> DBusError {
        switch name {
        case Name.noServer, Name.fileNotFound:
            return DBusError(
                name: Name.noServer,
                message: "the \(bus) is not running (nothing listens at its address): start dbus-daemon, or point "
                    + "DBUS_SYSTEM_BUS_ADDRESS / DBUS_SESSION_BUS_ADDRESS at a running bus (\(detail))")
        case Name.accessDenied, Name.authFailed:
            return DBusError(
                name: name,
                message: "no permission on the \(bus): run as a user its policy admits (for BlueZ, one in the "
                    + "'bluetooth' group) (\(detail))")
        case Name.badAddress:
            return DBusError(name: name, message: "bad address for the \(bus): \(detail)")
        default:
            return DBusError(name: name, message: "cannot connect to the \(bus): \(detail)")
        }
    }
}
