/// One method call on a remote object, with how its reply decodes: what a typed proxy builds,
/// so that the interface, member and argument types are named once, in the proxy, and callers
/// get values rather than `[DBusValue]`.
///
/// A call is a value; the connection makes it (`DBusConnection.call(_:timeout:)`), awaited,
/// blocking or with a completion, as the caller needs.
public struct DBusCall<Reply: Sendable>: Sendable {
    public let destination: String?
    public let path: String
    public let interface: String
    public let member: String
    public let arguments: [DBusValue]
    private let decode: @Sendable ([DBusValue]) throws(DBusError) -> Reply

    public init(
        destination: String?, path: String, interface: String, member: String, arguments: [DBusValue] = [],
        decode: @escaping @Sendable ([DBusValue]) throws(DBusError) -> Reply
    ) {
        self.destination = destination
        self.path = path
        self.interface = interface
        self.member = member
        self.arguments = arguments
        self.decode = decode
    }

    /// The signature of the arguments, as the callee checks it (`oa{sv}`).
    public var signature: String { arguments.map(\.signature).joined() }

    /// The reply's values as `Reply`; `Failed` naming the call when they do not fit.
    public func decodeReply(_ values: [DBusValue]) throws(DBusError) -> Reply { try decode(values) }
}

extension DBusCall where Reply == Void {
    /// A call whose reply carries nothing the caller needs.
    public init(
        destination: String?, path: String, interface: String, member: String, arguments: [DBusValue] = []
    ) {
        self.init(
            destination: destination, path: path, interface: interface, member: member, arguments: arguments
        ) { _ throws(DBusError) in }
    }
}

extension DBusCall {
    /// `org.freedesktop.DBus.Properties.Get` of `name`, the value decoded by `decode` (nil: the
    /// property has another type, reported as `Failed`).
    public static func property(
        destination: String?, path: String, interface: String, name: String,
        decode: @escaping @Sendable (DBusValue) -> Reply?
    ) -> DBusCall<Reply> {
        DBusCall(
            destination: destination, path: path, interface: DBusInterfaceName.properties, member: "Get",
            arguments: [.string(interface), .string(name)]
        ) { reply throws(DBusError) in
            guard let value = reply.first?.variant else { throw .failed("Get returned '\(reply)', not a variant") }
            guard let decoded = decode(value.unwrapped) else {
                throw .failed("\(interface).\(name) is '\(value)', not the type expected")
            }
            return decoded
        }
    }

    /// `org.freedesktop.DBus.Properties.GetAll` of `interface`, variants removed, decoded by `decode`.
    public static func allProperties(
        destination: String?, path: String, interface: String,
        decode: @escaping @Sendable ([String: DBusValue]) -> Reply
    ) -> DBusCall<Reply> {
        DBusCall(
            destination: destination, path: path, interface: DBusInterfaceName.properties, member: "GetAll",
            arguments: [.string(interface)]
        ) { reply throws(DBusError) in
            guard let values = reply.first?.stringVariantDictionary else {
                throw .failed("GetAll returned '\(reply)', not a{sv}")
            }
            return decode(values)
        }
    }
}

extension DBusCall where Reply == [String: [String: [String: DBusValue]]] {
    /// `org.freedesktop.DBus.ObjectManager.GetManagedObjects`: path → interface → property → value.
    public static func managedObjects(destination: String?, path: String = "/") -> Self {
        DBusCall(
            destination: destination, path: path, interface: DBusInterfaceName.objectManager,
            member: "GetManagedObjects"
        ) { reply throws(DBusError) in
            guard let objects = reply.first?.managedObjects else {
                throw .failed("GetManagedObjects returned '\(reply)', not a{oa{sa{sv}}}")
            }
            return objects
        }
    }
}

extension DBusConnection {
    /// Makes `call` and suspends until its decoded reply (or error, or `NoReply` after `timeout`).
    public func call<Reply>(_ call: DBusCall<Reply>, timeout: Duration = defaultTimeout)
        async throws(DBusError) -> Reply
    {
        let reply = try await self.call(
            destination: call.destination, path: call.path, interface: call.interface, method: call.member,
            arguments: call.arguments, timeout: timeout)
        return try call.decodeReply(reply)
    }

    /// Makes `call` and blocks until its decoded reply (see the blocking `call` for when this is safe).
    public func call<Reply>(_ call: DBusCall<Reply>, timeout: Duration = defaultTimeout)
        throws(DBusError) -> Reply
    {
        let reply = try self.call(
            destination: call.destination, path: call.path, interface: call.interface, method: call.member,
            arguments: call.arguments, timeout: timeout)
        return try call.decodeReply(reply)
    }

    /// Makes `call` and hands its decoded reply to `completion` on the connection's queue; calls
    /// made one after another from one thread leave in that order.
    public func call<Reply>(
        _ call: DBusCall<Reply>, timeout: Duration = defaultTimeout,
        completion: @escaping @Sendable (Result<Reply, DBusError>) -> Void
    ) {
        self.call(
            destination: call.destination, path: call.path, interface: call.interface, method: call.member,
            arguments: call.arguments, timeout: timeout
        ) { result in
            switch result {
            case .success(let values):
                do throws(DBusError) {
                    completion(.success(try call.decodeReply(values)))
                } catch {
                    completion(.failure(error))
                }
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }
}
