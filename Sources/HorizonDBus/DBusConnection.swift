/// A private connection to a D-Bus message bus: method calls with typed arguments and replies,
/// signals as async streams, exported objects.
///
/// Each instance owns its own libdbus connection (never libdbus's shared one, which a library
/// must not close), dispatched on its own serial queue without polling (see `ConnectionCore` for
/// the design). It is safe to use from any thread or task. Closing it (`close()`, or releasing
/// the last reference) fails pending calls with `Disconnected`, finishes signal streams and
/// withdraws exported objects.
public final class DBusConnection: Sendable {
    /// Which bus to connect to.
    public enum Bus: Sendable, Hashable, CustomStringConvertible {
        /// The system bus (BlueZ lives here); `DBUS_SYSTEM_BUS_ADDRESS` overrides its address.
        case system
        /// The user's session bus, from `DBUS_SESSION_BUS_ADDRESS`.
        case session
        /// A bus at a D-Bus address such as `unix:path=/tmp/bus` (a test's private dbus-daemon).
        case address(String)

        public var description: String {
            switch self {
            case .system: "system bus"
            case .session: "session bus"
            case .address(let address): "bus at \(address)"
            }
        }
    }

    /// libdbus's default method-call timeout.
    public static let defaultTimeout: Duration = .seconds(25)

    public let bus: Bus
    private let core: ConnectionCore

    /// Connects and registers with the bus (blocking, typically a few milliseconds).
    ///
    /// Throws `NoServer` when the bus is not running (nothing listens at its address),
    /// `AccessDenied` when we may not use it, `BadAddress` for a malformed address; each message
    /// says what to do.
    public init(_ bus: Bus) throws(DBusError) {
        self.bus = bus
        self.core = try ConnectionCore(bus: bus)
    }

    deinit { core.close() }

    /// Our unique name on the bus, such as `:1.42`.
    public var uniqueName: String { core.uniqueName }

    /// False once closed or once the bus went away.
    public var isConnected: Bool { core.isOpen }

    /// Closes the connection. Pending calls fail with `Disconnected`; signal streams finish.
    public func close() { core.close() }

    // MARK: Method calls

    /// Calls a method and blocks until its reply (or error, or `timeout`: `NoReply`). Async code
    /// gets the async overload; this one is for synchronous code.
    ///
    /// It may be called from a handler of an exported method: libdbus then does the I/O itself
    /// and other incoming messages wait until it returns. So from a handler, never block on a
    /// service that calls back into this connection before replying (BlueZ's RegisterApplication
    /// calls our GetManagedObjects): that waits for the full timeout. Use the async variant there.
    public func call(
        destination: String?, path: String, interface: String?, method: String, arguments: [DBusValue] = [],
        timeout: Duration = defaultTimeout
    ) throws(DBusError) -> [DBusValue] {
        let message = try makeCall(destination, path, interface, method, arguments)
        return try Self.values(of: core.callBlocking(message, timeout: timeout))
    }

    /// Calls a method and suspends until its reply (or error, or `timeout`: `NoReply`).
    /// Cancelling the task abandons the call (`DBusError.cancelled`).
    public func call(
        destination: String?, path: String, interface: String?, method: String, arguments: [DBusValue] = [],
        timeout: Duration = defaultTimeout
    ) async throws(DBusError) -> [DBusValue] {
        let message = try makeCall(destination, path, interface, method, arguments)
        return try Self.values(of: await core.callAsync(message, timeout: timeout))
    }

    /// Calls a method and hands its reply (or error, or `NoReply` after `timeout`) to `completion`,
    /// on the connection's queue. Calls made one after another from one thread leave in that
    /// order, which async calls started from separate tasks do not promise (BlueZ GATT writes
    /// must keep their order).
    public func call(
        destination: String?, path: String, interface: String?, method: String, arguments: [DBusValue] = [],
        timeout: Duration = defaultTimeout,
        completion: @escaping @Sendable (Result<[DBusValue], DBusError>) -> Void
    ) {
        let message: Message
        do {
            message = try makeCall(destination, path, interface, method, arguments)
        } catch {
            completion(.failure(error))
            return
        }
        core.callWithCompletion(message, timeout: timeout, completion: completion)
    }

    /// Calls a method without waiting for (or wanting) a reply.
    public func send(
        destination: String?, path: String, interface: String?, method: String, arguments: [DBusValue] = []
    ) throws(DBusError) {
        let message = try makeCall(destination, path, interface, method, arguments)
        message.setNoReply()
        guard core.isOpen else { throw .disconnected() }
        core.send(message)
    }

    private func makeCall(
        _ destination: String?, _ path: String, _ interface: String?, _ method: String, _ arguments: [DBusValue]
    ) throws(DBusError) -> Message {
        guard core.isOpen else { throw .disconnected() }
        return try core.checkedMessage(arguments) { () throws(DBusError) in
            try Message.methodCall(
                destination: destination, path: path, interface: interface, method: method, arguments: arguments)
        }
    }

    private static func values(of result: Result<[DBusValue], DBusError>) throws(DBusError) -> [DBusValue] {
        try result.get()
    }

    // MARK: Properties of remote objects

    /// `org.freedesktop.DBus.Properties.Get`, variant removed.
    public func property(
        destination: String, path: String, interface: String, name: String, timeout: Duration = defaultTimeout
    ) async throws(DBusError) -> DBusValue {
        let reply = try await call(
            destination: destination, path: path, interface: DBusInterfaceName.properties, method: "Get",
            arguments: [.string(interface), .string(name)], timeout: timeout)
        guard let value = reply.first?.variant else { throw .failed("Get returned '\(reply)', not a variant") }
        return value
    }

    /// `org.freedesktop.DBus.Properties.GetAll`, variants removed.
    public func properties(
        destination: String, path: String, interface: String, timeout: Duration = defaultTimeout
    ) async throws(DBusError) -> [String: DBusValue] {
        let reply = try await call(
            destination: destination, path: path, interface: DBusInterfaceName.properties, method: "GetAll",
            arguments: [.string(interface)], timeout: timeout)
        guard let values = reply.first?.stringVariantDictionary else {
            throw .failed("GetAll returned '\(reply)', not a{sv}")
        }
        return values
    }

    /// `org.freedesktop.DBus.Properties.Set`.
    public func setProperty(
        destination: String, path: String, interface: String, name: String, value: DBusValue,
        timeout: Duration = defaultTimeout
    ) async throws(DBusError) {
        _ = try await call(
            destination: destination, path: path, interface: DBusInterfaceName.properties, method: "Set",
            arguments: [.string(interface), .string(name), .variant(value)], timeout: timeout)
    }

    /// `org.freedesktop.DBus.ObjectManager.GetManagedObjects`: path → interface → property → value.
    public func managedObjects(destination: String, path: String = "/", timeout: Duration = defaultTimeout)
        async throws(DBusError) -> [String: [String: [String: DBusValue]]]
    {
        let reply = try await call(
            destination: destination, path: path, interface: DBusInterfaceName.objectManager,
            method: "GetManagedObjects", timeout: timeout)
        guard let objects = reply.first?.managedObjects else {
            throw .failed("GetManagedObjects returned '\(reply)', not a{oa{sa{sv}}}")
        }
        return objects
    }

    // MARK: Names

    /// How `requestName` should behave when another connection owns the name.
    public struct NameFlags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let allowReplacement = NameFlags(rawValue: 1)
        public static let replaceExisting = NameFlags(rawValue: 2)
        public static let doNotQueue = NameFlags(rawValue: 4)
    }

    /// The bus's answer to `requestName`.
    public enum NameReply: UInt32, Sendable, Hashable {
        case primaryOwner = 1
        case inQueue = 2
        case exists = 3
        case alreadyOwner = 4
    }

    /// Asks the bus for a well-known name (`org.freedesktop.DBus.RequestName`).
    @discardableResult
    public func requestName(_ name: String, flags: NameFlags = [.doNotQueue], timeout: Duration = defaultTimeout)
        async throws(DBusError) -> NameReply
    {
        try DBusSyntax.require(DBusSyntax.isValidBusName(name) && !name.hasPrefix(":"), "well-known name", name)
        let reply = try await call(
            destination: DBusInterfaceName.bus, path: "/org/freedesktop/DBus", interface: DBusInterfaceName.bus,
            method: "RequestName", arguments: [.string(name), .uint32(flags.rawValue)], timeout: timeout)
        guard let code = reply.first?.uint32, let answer = NameReply(rawValue: code) else {
            throw .failed("RequestName returned '\(reply)'")
        }
        return answer
    }

    /// Gives a well-known name back (`org.freedesktop.DBus.ReleaseName`).
    public func releaseName(_ name: String, timeout: Duration = defaultTimeout) async throws(DBusError) {
        try DBusSyntax.require(DBusSyntax.isValidBusName(name) && !name.hasPrefix(":"), "well-known name", name)
        _ = try await call(
            destination: DBusInterfaceName.bus, path: "/org/freedesktop/DBus", interface: DBusInterfaceName.bus,
            method: "ReleaseName", arguments: [.string(name)], timeout: timeout)
    }

    /// The unique name owning `name`, or nil if nobody does (for BlueZ: is bluetoothd running?).
    public func nameOwner(of name: String, timeout: Duration = defaultTimeout) async throws(DBusError) -> String? {
        do {
            let reply = try await call(
                destination: DBusInterfaceName.bus, path: "/org/freedesktop/DBus", interface: DBusInterfaceName.bus,
                method: "GetNameOwner", arguments: [.string(name)], timeout: timeout)
            return reply.first?.string
        } catch  where error.name == DBusError.Name.nameHasNoOwner {
            return nil
        }
    }

    // MARK: Signals

    /// Emits a signal from one of our objects (broadcast, or to `destination` only).
    public func emitSignal(
        path: String, interface: String, name: String, arguments: [DBusValue] = [], destination: String? = nil
    ) throws(DBusError) {
        try core.emitSignal(
            path: path, interface: interface, name: name, arguments: arguments, destination: destination)
    }

    /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` for `interface` at `path`: new
    /// values in `changed`, names whose value is not sent in `invalidated`. BlueZ delivers GATT
    /// notifications this way (a change of a characteristic's `Value`).
    public func emitPropertiesChanged(
        path: String, interface: String, changed: [String: DBusValue], invalidated: [String] = []
    ) throws(DBusError) {
        try DBusSyntax.require(DBusSyntax.isValidInterface(interface), "interface name", interface)
        try core.emitPropertiesChanged(path: path, interface: interface, changed: changed, invalidated: invalidated)
    }

    /// Adds a match rule on the bus, so that the signals it describes are routed to us.
    /// `signals(matching:)` does this itself; use this for rules that outlive one stream.
    public func addMatch(_ rule: DBusMatchRule, timeout: Duration = defaultTimeout) async throws(DBusError) {
        try rule.validate()
        let message = try Message.busCall("AddMatch", [.string(rule.description)])
        _ = try Self.values(of: await core.callAsync(message, timeout: timeout))
    }

    /// Removes a match rule added with `addMatch`.
    public func removeMatch(_ rule: DBusMatchRule, timeout: Duration = defaultTimeout) async throws(DBusError) {
        try rule.validate()
        let message = try Message.busCall("RemoveMatch", [.string(rule.description)])
        _ = try Self.values(of: await core.callAsync(message, timeout: timeout))
    }

    /// The signals matching `rule`, from the moment this returns until the stream is dropped or
    /// its task cancelled (then the rule is removed from the bus) or the connection closes (then
    /// the stream finishes).
    ///
    /// It adds the rule on the bus and, for a well-known `sender` such as `org.bluez`, looks up and
    /// then follows the name's owner, since signals carry the sender's unique name. The stream
    /// buffers without limit by default: dropping a PropertiesChanged could lose a state change.
    public func signals(
        matching rule: DBusMatchRule,
        bufferingPolicy: AsyncStream<DBusSignal>.Continuation.BufferingPolicy = .unbounded,
        timeout: Duration = defaultTimeout
    ) async throws(DBusError) -> AsyncStream<DBusSignal> {
        try rule.validate()
        let (id, stream) = try core.subscribe(rule, bufferingPolicy: bufferingPolicy)
        do {
            if let sender = rule.sender, !rule.senderIsUnique {
                core.retainOwner(sender, for: id)
                let lookup = try Message.busCall("GetNameOwner", [.string(sender)])
                _ = await core.callAsync(lookup, timeout: timeout) { [core] in core.applyOwner(sender, $0) }
            }
            let add = try Message.busCall("AddMatch", [.string(rule.description)])
            _ = try Self.values(of: await core.callAsync(add, timeout: timeout))
            _ = core.markMatchAdded(id, rule: rule)
        } catch {
            core.unsubscribe(id)
            throw error
        }
        return stream
    }

    /// The signals matching `rule` (see the async variant); blocks while the rule is added.
    public func signals(
        matching rule: DBusMatchRule,
        bufferingPolicy: AsyncStream<DBusSignal>.Continuation.BufferingPolicy = .unbounded,
        timeout: Duration = defaultTimeout
    ) throws(DBusError) -> AsyncStream<DBusSignal> {
        try rule.validate()
        let (id, stream) = try core.subscribe(rule, bufferingPolicy: bufferingPolicy)
        do {
            if let sender = rule.sender, !rule.senderIsUnique {
                core.retainOwner(sender, for: id)
                let lookup = try Message.busCall("GetNameOwner", [.string(sender)])
                _ = core.callBlocking(lookup, timeout: timeout) { [core] in core.applyOwner(sender, $0) }
            }
            let add = try Message.busCall("AddMatch", [.string(rule.description)])
            _ = try Self.values(of: core.callBlocking(add, timeout: timeout))
            _ = core.markMatchAdded(id, rule: rule)
        } catch {
            core.unsubscribe(id)
            throw error
        }
        return stream
    }

    // MARK: Exported objects

    /// Exports an object at `path` with `interfaces`; the connection answers Properties,
    /// Introspectable and Peer calls for it, and, if `isObjectManager`, ObjectManager's
    /// GetManagedObjects for every object exported below it.
    ///
    /// An object exported below an object manager is announced with InterfacesAdded (and
    /// `unexport` announces InterfacesRemoved), so export the manager root first. Throws
    /// `ObjectPathInUse` if `path` is taken, `InvalidArgs` for an invalid name or signature.
    public func export(path: String, interfaces: [DBusInterface], isObjectManager: Bool = false) throws(DBusError) {
        try core.export(path: path, interfaces: interfaces, isObjectManager: isObjectManager)
    }

    /// Withdraws the object at `path`; false if there was none.
    @discardableResult
    public func unexport(path: String) -> Bool {
        core.unexport(path: path)
    }

    /// The paths of every exported object, sorted.
    public var exportedPaths: [String] { core.withState { $0.objects.keys.sorted() } }

    // MARK: Book-keeping (for tests)

    /// Calls sent and not yet answered, failed, timed out or abandoned.
    var pendingCallCount: Int { core.withState { $0.pending.count } }

    /// Timers libdbus has asked for (a pending call's timeout among them).
    var timerCount: Int { core.withState { $0.timeouts.count } }
}
