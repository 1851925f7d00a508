import Synchronization

/// One interface of an exported object: its methods, properties and (for introspection) signals.
///
/// Handlers and property accessors run on the connection's dispatch queue, one at a time, so they
/// must return quickly; a method whose answer takes time (BlueZ's `ReadValue` waiting for the
/// link layer, `Release` waiting for a shutdown) uses a deferred or asynchronous method instead.
public struct DBusInterface: Sendable {
    public let name: String
    public var methods: [DBusMethod]
    public var properties: [DBusProperty]
    public var signals: [DBusSignalDescription]

    public init(
        _ name: String, methods: [DBusMethod] = [], properties: [DBusProperty] = [],
        signals: [DBusSignalDescription] = []
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }

    /// Checks every name and signature, so that a mistake shows up at export, not at the first call.
    func validate() throws(DBusError) {
        try DBusSyntax.require(DBusSyntax.isValidInterface(name), "interface name", name)
        let reserved = [
            DBusInterfaceName.properties, DBusInterfaceName.introspectable, DBusInterfaceName.peer,
            DBusInterfaceName.objectManager,
        ]
        guard !reserved.contains(name) else {
            throw .invalidArguments("\(name) is implemented by the connection itself")
        }
        var methodNames: Set<String> = []
        for method in methods {
            try DBusSyntax.require(DBusSyntax.isValidMember(method.name), "method name", method.name)
            for signature in [method.inputSignature, method.outputSignature].compactMap({ $0 }) {
                try DBusSyntax.require(DBusSyntax.isValidSignature(signature), "signature", signature)
            }
            guard methodNames.insert(method.name).inserted else {
                throw .invalidArguments("method \(method.name) appears twice in \(name)")
            }
        }
        var propertyNames: Set<String> = []
        for property in properties {
            try DBusSyntax.require(DBusSyntax.isValidMember(property.name), "property name", property.name)
            try DBusSyntax.require(
                DBusSyntax.isValidSingleSignature(property.signature), "single complete type", property.signature)
            guard propertyNames.insert(property.name).inserted else {
                throw .invalidArguments("property \(property.name) appears twice in \(name)")
            }
        }
        for signal in signals {
            try DBusSyntax.require(DBusSyntax.isValidMember(signal.name), "signal name", signal.name)
            try DBusSyntax.require(DBusSyntax.isValidSignature(signal.signature), "signature", signal.signature)
        }
    }
}

/// A method of an exported interface.
public struct DBusMethod: Sendable {
    public let name: String
    /// The arguments' signature, checked before the handler runs (a mismatch gets `InvalidArgs`);
    /// nil accepts any arguments.
    public let inputSignature: String?
    /// The reply's signature, checked before the reply is sent (a mismatch becomes `Failed`); nil accepts any.
    public let outputSignature: String?
    let body: Body

    enum Body: Sendable {
        case immediate(@Sendable ([DBusValue]) throws(DBusError) -> [DBusValue])
        case deferred(@Sendable (DBusMethodCall) -> Void)
    }

    /// A method answered by the handler's return value, or by the error it throws (which reaches the
    /// caller with its name and message unchanged).
    public init(
        _ name: String, input: String? = "", output: String? = "",
        handler: @escaping @Sendable ([DBusValue]) throws(DBusError) -> [DBusValue]
    ) {
        self.name = name
        self.inputSignature = input
        self.outputSignature = output
        self.body = .immediate(handler)
    }

    private init(name: String, input: String?, output: String?, body: Body) {
        self.name = name
        self.inputSignature = input
        self.outputSignature = output
        self.body = body
    }

    /// A method answered later: the handler keeps the `DBusMethodCall` and calls `reply` or `fail`
    /// on it from any thread, whenever the answer is known.
    public static func deferred(
        _ name: String, input: String? = "", output: String? = "",
        handler: @escaping @Sendable (DBusMethodCall) -> Void
    ) -> DBusMethod {
        DBusMethod(name: name, input: input, output: output, body: .deferred(handler))
    }

    /// A method answered by an `async` handler, run in a new task so the dispatch queue stays free.
    public static func asynchronous(
        _ name: String, input: String? = "", output: String? = "",
        handler: @escaping @Sendable (DBusMethodCall) async throws(DBusError) -> [DBusValue]
    ) -> DBusMethod {
        deferred(name, input: input, output: output) { call in
            Task {
                do throws(DBusError) {
                    call.reply(try await handler(call))
                } catch {
                    call.fail(error)
                }
            }
        }
    }
}

/// A property of an exported interface, read (and written) through the accessors given.
public struct DBusProperty: Sendable {
    public let name: String
    /// One complete type; the getter's value must have it.
    public let signature: String
    /// Whether a successful `Properties.Set` emits PropertiesChanged with the new value (D-Bus's
    /// `EmitsChangedSignal` annotation). Changes made by the service itself are announced with
    /// `DBusConnection.emitPropertiesChanged`.
    public let emitsChangedSignal: Bool
    let getter: @Sendable () throws(DBusError) -> DBusValue
    let setter: (@Sendable (DBusValue) throws(DBusError) -> Void)?

    /// A property; a getter that throws leaves the property out of GetAll and GetManagedObjects
    /// (for properties that exist only some of the time) and answers Get with its error.
    public init(
        _ name: String, signature: String, emitsChangedSignal: Bool = true,
        get: @escaping @Sendable () throws(DBusError) -> DBusValue,
        set: (@Sendable (DBusValue) throws(DBusError) -> Void)? = nil
    ) {
        self.name = name
        self.signature = signature
        self.emitsChangedSignal = emitsChangedSignal
        self.getter = get
        self.setter = set
    }

    /// A read-only property that never changes.
    public static func constant(_ name: String, _ value: DBusValue) -> DBusProperty {
        DBusProperty(name, signature: value.signature, emitsChangedSignal: false, get: { value })
    }

    public var isWritable: Bool { setter != nil }
}

/// A signal an interface emits, listed by Introspect.
public struct DBusSignalDescription: Sendable {
    public let name: String
    public let signature: String

    public init(_ name: String, signature: String = "") {
        self.name = name
        self.signature = signature
    }
}

/// A method call received by an exported object, waiting for its answer.
///
/// Answer it once, from any thread, with `reply` or `fail`; later answers are ignored. A call
/// released without an answer is answered with `org.freedesktop.DBus.Error.Failed`, so a caller is
/// never left waiting for a reply its service forgot (keep the object while the answer is pending).
public final class DBusMethodCall: Sendable {
    /// The caller's unique name; check it when only one peer may call (BlueZ's `:1.x`).
    public let sender: String?
    public let path: String
    public let interface: String?
    public let member: String
    public let arguments: [DBusValue]
    let outputSignature: String?
    private let core: ConnectionCore
    private let message: Message
    private let answered: Atomic<Bool>

    init(core: ConnectionCore, message: Message, arguments: [DBusValue], outputSignature: String?) {
        self.core = core
        self.message = message
        self.sender = message.sender
        self.path = message.path ?? "/"
        self.interface = message.interface
        self.member = message.member ?? ""
        self.arguments = arguments
        self.outputSignature = outputSignature
        // A call that wants no reply counts as answered already.
        self.answered = Atomic(!message.expectsReply)
    }

    deinit {
        if !answered.load(ordering: .acquiring) {
            core.sendError(
                .failed("\(member) was dropped by the service without a reply"), to: message)
        }
    }

    /// Whether `reply` or `fail` was called (or the caller wants no reply).
    public var isAnswered: Bool { answered.load(ordering: .acquiring) }

    /// Answers with `values`; if they do not match the method's output signature, the caller
    /// gets `Failed` instead (a service bug should not look like success).
    public func reply(_ values: [DBusValue] = []) {
        guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
        core.sendReply(values, outputSignature: outputSignature, to: message)
    }

    /// Answers with an error, which the caller receives with this name and message.
    public func fail(_ error: DBusError) {
        guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
        core.sendError(error, to: message)
    }
}

/// An object registered on the connection.
struct ExportedObject: Sendable {
    let path: String
    let interfaces: [DBusInterface]
    let isObjectManager: Bool

    func interface(named name: String) -> DBusInterface? { interfaces.first { $0.name == name } }

    /// Every readable property of `interface`, for GetAll, InterfacesAdded and GetManagedObjects;
    /// properties whose getter throws or returns the wrong type are left out.
    static func readableProperties(of interface: DBusInterface) -> [String: DBusValue] {
        var values: [String: DBusValue] = [:]
        for property in interface.properties {
            guard let value = try? property.getter(), value.signature == property.signature,
                (try? value.validate()) != nil
            else { continue }
            values[property.name] = value
        }
        return values
    }

    var interfacesAndProperties: [String: [String: DBusValue]] {
        var result: [String: [String: DBusValue]] = [:]
        for interface in interfaces { result[interface.name] = Self.readableProperties(of: interface) }
        return result
    }
}

extension String {
    /// Whether this object path lies strictly below `ancestor`.
    func isObjectPath(below ancestor: String) -> Bool {
        guard self != ancestor else { return false }
        return ancestor == "/" ? hasPrefix("/") : hasPrefix(ancestor + "/")
    }
}
