import HorizonDBus

/// A method call a BlueZ proxy built, bound to the connection that makes it: awaited, blocking
/// (for start-up and shutdown code that must not return before bluetoothd answered) or with a
/// completion (calls that must leave in the order they were made). Errors come as `BlueZError`.
struct BlueZCall<Reply: Sendable>: Sendable {
    let connection: DBusConnection
    let call: DBusCall<Reply>

    /// Suspends until bluetoothd answers, or `timeout` (`noReply`).
    func reply(within timeout: Duration) async throws(BlueZError) -> Reply {
        do {
            return try await connection.call(call, timeout: timeout)
        } catch {
            throw BlueZError(error)
        }
    }

    /// Blocks until bluetoothd answers, or `timeout` (`noReply`).
    func replyBlocking(within timeout: Duration) throws(BlueZError) -> Reply {
        do {
            return try connection.call(call, timeout: timeout)
        } catch {
            throw BlueZError(error)
        }
    }

    /// Sends the call now and hands the answer to `completion` on the connection's queue.
    func whenAnswered(
        within timeout: Duration, _ completion: @escaping @Sendable (Result<Reply, BlueZError>) -> Void = { _ in }
    ) {
        connection.call(call, timeout: timeout) { result in completion(result.mapError(BlueZError.init)) }
    }
}

/// What every proxy shares: bluetoothd's object at `path`, reached over `connection`.
protocol BlueZProxy: Sendable {
    static var interface: String { get }
    var connection: DBusConnection { get }
    var path: String { get }
}

extension BlueZProxy {
    func method(_ member: String, _ arguments: [DBusValue] = []) -> BlueZCall<Void> {
        BlueZCall(
            connection: connection,
            call: DBusCall(
                destination: BlueZName.service, path: path, interface: Self.interface, member: member,
                arguments: arguments))
    }

    func method<Reply>(
        _ member: String, _ arguments: [DBusValue] = [],
        decode: @escaping @Sendable ([DBusValue]) throws(DBusError) -> Reply
    ) -> BlueZCall<Reply> {
        BlueZCall(
            connection: connection,
            call: DBusCall(
                destination: BlueZName.service, path: path, interface: Self.interface, member: member,
                arguments: arguments, decode: decode))
    }

    func property<Value>(_ name: String, _ decode: @escaping @Sendable (DBusValue) -> Value?) -> BlueZCall<Value> {
        BlueZCall(
            connection: connection,
            call: .property(
                destination: BlueZName.service, path: path, interface: Self.interface, name: name, decode: decode))
    }

    func allProperties<Properties>(_ decode: @escaping @Sendable ([String: DBusValue]) -> Properties)
        -> BlueZCall<Properties>
    {
        BlueZCall(
            connection: connection,
            call: .allProperties(destination: BlueZName.service, path: path, interface: Self.interface, decode: decode))
    }

    /// The object's `PropertiesChanged` signals for this interface, from now on.
    func propertyChanges() async throws(BlueZError) -> AsyncStream<DBusSignal> {
        do {
            return try await connection.signals(
                matching: .propertiesChanged(sender: BlueZName.service, path: path, interface: Self.interface))
        } catch {
            throw BlueZError(error)
        }
    }
}
