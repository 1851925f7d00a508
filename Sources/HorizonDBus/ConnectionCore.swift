internal import CDBus
import Dispatch
import Synchronization

/// A libdbus pointer that may cross threads because it is only ever dereferenced on the
/// connection's dispatch queue (see `ConnectionCore`).
struct UnsafeHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// A dispatch source kept in the connection's state; created, cancelled and fired only on the
/// connection's queue.
struct SourceHandle: @unchecked Sendable {
    let source: any DispatchSourceProtocol
}

/// libdbus's thread support, switched on once per process before the first connection: the
/// connection's queue is not the only thread that touches libdbus's global state (messages are
/// built and released on callers' threads).
private let threadsInitialized: Bool = dbus_threads_init_default() != 0

/// Lets an awaiting task cancel a call, whether or not the call has started yet.
final class CallCancellation: Sendable {
    private let state = Mutex<(cancelled: Bool, id: UInt64?)>((false, nil))

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Records the started call's id; false if the task was cancelled meanwhile (then the
    /// starter cancels the call itself, as nobody else will).
    func bind(_ id: UInt64) -> Bool {
        state.withLock { state in
            state.id = id
            return !state.cancelled
        }
    }

    /// Marks the task cancelled; the call's id if it has started (then it must be cancelled).
    func cancel() -> UInt64? {
        state.withLock { state in
            state.cancelled = true
            return state.id
        }
    }
}

/// The connection itself: one libdbus connection confined to one serial dispatch queue.
///
/// Dispatch design. Every libdbus call on the connection (send, dispatch, handling a watch or a
/// timeout, close) happens on `queue`. libdbus reports which file descriptor it needs to read or
/// write (watches) and which timers it needs (method-call timeouts) through its watch and timeout
/// functions; each enabled watch becomes a `DispatchSource` read or write source on the socket and
/// each enabled timeout a `DispatchSource` timer, all targeting `queue`. When libdbus has received
/// messages (dispatch status `DATA_REMAINS`) a drain is scheduled on `queue`, which dispatches them:
/// replies complete their pending calls, signals go to subscribers, method calls to exported
/// objects. Nothing polls: the queue sleeps until the socket is readable, writable while libdbus
/// has something to write, or a timer is due.
///
/// Why a queue rather than a thread blocking in poll(): libdbus calls the watch functions from
/// whichever thread touches the connection, sometimes while it holds its own lock, and a watch may
/// be freed by one thread while another is about to handle it. Confining the connection to one
/// serial queue makes every watch callback, every `dbus_watch_handle` and every free happen in one
/// order on one queue, with no wake-up pipe and no thread of our own to stop. Swift concurrency
/// sits on top through continuations resumed from the queue.
///
/// Callers on other threads hop to the queue (`perform`); code already on it (handlers of exported
/// methods) runs inline, so a handler may send, emit and even make a blocking call (which then
/// uses libdbus's own blocking I/O, as the queue cannot wait for itself).
final class ConnectionCore: Sendable {
    let queue: DispatchQueue
    let uniqueName: String
    /// How errors name this connection ("system bus", "bus at unix:path=…").
    let busDescription: String
    /// Whether file descriptors can travel on this connection (negotiated when connecting).
    let canPassFileDescriptors: Bool
    private let connection: UnsafeHandle
    private let queueKey = DispatchSpecificKey<Bool>()
    private let state = Mutex(State())

    struct State {
        var isOpen = true
        var watches: [Int: WatchEntry] = [:]
        var timeouts: [Int: TimeoutEntry] = [:]
        var drainScheduled = false
        var nextID: UInt64 = 1
        var pending: [UInt64: PendingEntry] = [:]
        var objects: [String: ExportedObject] = [:]
        var subscriptions: [UInt64: Subscription] = [:]
        var owners: [String: OwnerTracking] = [:]
    }

    struct WatchEntry {
        let watch: UnsafeHandle
        var enabled = false
        var sources: [SourceHandle] = []
    }

    struct TimeoutEntry {
        let timeout: UnsafeHandle
        var timer: SourceHandle?
    }

    struct PendingEntry {
        let pending: UnsafeHandle
        let completion: @Sendable (Result<Message, DBusError>) -> Void
    }

    struct Subscription {
        let rule: DBusMatchRule
        let continuation: AsyncStream<DBusSignal>.Continuation
        /// Whether the rule was added on the bus (so it is removed again).
        var matchAdded = false
        /// Whether this subscription holds a reference on its well-known sender's owner tracking.
        var tracksOwner = false
    }

    /// The current owner of a well-known name that some subscription filters on.
    struct OwnerTracking {
        var references = 0
        var owner: String?
    }

    /// Connects (blocking: libdbus connects and says Hello to the bus synchronously) and starts
    /// the event-driven dispatch on a new serial queue.
    init(bus: DBusConnection.Bus) throws(DBusError) {
        _ = threadsInitialized
        busDescription = bus.description
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        func failure() -> DBusError {
            let name = error.name.map { String(cString: $0) } ?? DBusError.Name.failed
            let detail = error.message.map { String(cString: $0) } ?? "unknown error"
            return .connectionFailed(to: bus.description, name: name, detail: detail)
        }
        let opened: OpaquePointer?
        switch bus {
        case .system:
            opened = dbus_bus_get_private(DBUS_BUS_SYSTEM, &error)
        case .session:
            opened = dbus_bus_get_private(DBUS_BUS_SESSION, &error)
        case .address(let address):
            guard DBusSyntax.isValidString(address), !address.isEmpty else {
                throw DBusError(name: DBusError.Name.badAddress, message: "invalid bus address '\(address)'")
            }
            let raw = address.withCString { dbus_connection_open_private($0, &error) }
            if let raw, dbus_bus_register(raw, &error) == 0 {
                dbus_connection_close(raw)
                dbus_connection_unref(raw)
                opened = nil
            } else {
                opened = raw
            }
        }
        guard let opened else { throw failure() }
        // dbus_bus_get_private makes a lost bus _exit() the process; a library must not.
        dbus_connection_set_exit_on_disconnect(opened, 0)
        connection = UnsafeHandle(pointer: opened)
        uniqueName = dbus_bus_get_unique_name(opened).map { String(cString: $0) } ?? ""
        canPassFileDescriptors = dbus_connection_can_send_type(opened, TypeCode.unixFD) != 0
        queue = DispatchQueue(label: "horizon.dbus.\(uniqueName)")
        queue.setSpecific(key: queueKey, value: true)
        let installed = queue.sync { installEventLoop() }
        guard installed else {
            close()
            throw DBusError.noMemory
        }
    }

    deinit {
        close()
    }

    // MARK: The queue

    var isOnQueue: Bool { DispatchQueue.getSpecific(key: queueKey) == true }

    /// Runs `body` on the queue: inline if already there (keeps a handler's sends in order),
    /// otherwise asynchronously.
    func perform(_ body: @escaping @Sendable () -> Void) {
        if isOnQueue { body() } else { queue.async(execute: body) }
    }

    /// Runs `body` on the queue and waits for it.
    func performAndWait<T>(_ body: () -> T) -> T {
        isOnQueue ? body() : queue.sync(execute: body)
    }

    var isOpen: Bool { state.withLock { $0.isOpen } }

    /// The connection, if still open; only call on the queue.
    private var openConnection: OpaquePointer? {
        state.withLock { $0.isOpen } ? connection.pointer : nil
    }

    func nextID() -> UInt64 {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            return id
        }
    }

    // MARK: Event loop

    private func installEventLoop() -> Bool {
        let context = Unmanaged.passUnretained(self).toOpaque()
        let raw = connection.pointer
        let watches = dbus_connection_set_watch_functions(
            raw,
            { watch, data in
                guard let watch, let data else { return 0 }
                ConnectionCore.from(data).watchAdded(watch)
                return 1
            },
            { watch, data in
                guard let watch, let data else { return }
                ConnectionCore.from(data).watchRemoved(watch)
            },
            { watch, data in
                guard let watch, let data else { return }
                ConnectionCore.from(data).watchToggled(watch)
            }, context, nil)
        let timeouts = dbus_connection_set_timeout_functions(
            raw,
            { timeout, data in
                guard let timeout, let data else { return 0 }
                ConnectionCore.from(data).timeoutAdded(timeout)
                return 1
            },
            { timeout, data in
                guard let timeout, let data else { return }
                ConnectionCore.from(data).timeoutRemoved(timeout)
            },
            { timeout, data in
                guard let timeout, let data else { return }
                ConnectionCore.from(data).timeoutToggled(timeout)
            }, context, nil)
        dbus_connection_set_dispatch_status_function(
            raw,
            { _, status, data in
                guard let data, status == DBUS_DISPATCH_DATA_REMAINS else { return }
                ConnectionCore.from(data).scheduleDrain()
            }, context, nil)
        dbus_connection_set_wakeup_main_function(
            raw,
            { data in
                guard let data else { return }
                ConnectionCore.from(data).scheduleDrain()
            }, context, nil)
        let filter = dbus_connection_add_filter(
            raw,
            { _, message, data in
                guard let message, let data else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
                return ConnectionCore.from(data).filter(Message(retaining: message))
                    ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED
            }, context, nil)
        // Messages that arrived while connecting (NameAcquired) are waiting already.
        scheduleDrain()
        return watches != 0 && timeouts != 0 && filter != 0
    }

    /// The core behind a libdbus callback's user data. The pointer is unretained: libdbus only
    /// calls back while the connection is open, and `close()` removes every callback first.
    private static func from(_ data: UnsafeMutableRawPointer) -> ConnectionCore {
        Unmanaged<ConnectionCore>.fromOpaque(data).takeUnretainedValue()
    }

    private func watchAdded(_ watch: OpaquePointer) {
        state.withLock { $0.watches[Int(bitPattern: watch)] = WatchEntry(watch: UnsafeHandle(pointer: watch)) }
        watchToggled(watch)
    }

    private func watchRemoved(_ watch: OpaquePointer) {
        let entry = state.withLock { $0.watches.removeValue(forKey: Int(bitPattern: watch)) }
        for handle in entry?.sources ?? [] { handle.source.cancel() }
    }

    /// Creates the watch's sources when libdbus enables it and cancels them when it disables it
    /// (libdbus enables the write watch only while it has bytes to write, so an idle connection
    /// has just one read source).
    private func watchToggled(_ watch: OpaquePointer) {
        let key = Int(bitPattern: watch)
        // libdbus toggles the read watch from the thread that releases a received message when the
        // memory held by received messages crosses its limit. Redo it on the queue, where the
        // watch is only ever removed, so it is still valid if it is still registered.
        guard isOnQueue else {
            queue.async { [weak self] in
                guard let self, let watch = state.withLock({ $0.watches[key]?.watch }) else { return }
                watchToggled(watch.pointer)
            }
            return
        }
        let enabled = dbus_watch_get_enabled(watch) != 0
        let stale = state.withLock { state -> [SourceHandle]? in
            guard var entry = state.watches[key], entry.enabled != enabled else { return nil }
            let stale = entry.sources
            entry.enabled = enabled
            entry.sources = []
            state.watches[key] = entry
            return stale
        }
        guard let stale else { return }
        for handle in stale { handle.source.cancel() }
        guard enabled else { return }
        let descriptor = dbus_watch_get_unix_fd(watch)
        let flags = dbus_watch_get_flags(watch)
        var sources: [SourceHandle] = []
        if flags & DBUS_WATCH_READABLE.rawValue != 0 {
            let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
            source.setEventHandler { [weak self] in self?.handleWatch(key, flags: DBUS_WATCH_READABLE.rawValue) }
            sources.append(SourceHandle(source: source))
        }
        if flags & DBUS_WATCH_WRITABLE.rawValue != 0 {
            let source = DispatchSource.makeWriteSource(fileDescriptor: descriptor, queue: queue)
            source.setEventHandler { [weak self] in self?.handleWatch(key, flags: DBUS_WATCH_WRITABLE.rawValue) }
            sources.append(SourceHandle(source: source))
        }
        state.withLock { $0.watches[key]?.sources = sources }
        for handle in sources { handle.source.activate() }
    }

    private func handleWatch(_ key: Int, flags: UInt32) {
        let watch = state.withLock { state in state.isOpen ? state.watches[key]?.watch : nil }
        guard let watch else { return }
        _ = dbus_watch_handle(watch.pointer, flags)
        drain()
    }

    private func timeoutAdded(_ timeout: OpaquePointer) {
        state.withLock { $0.timeouts[Int(bitPattern: timeout)] = TimeoutEntry(timeout: UnsafeHandle(pointer: timeout)) }
        timeoutToggled(timeout)
    }

    private func timeoutRemoved(_ timeout: OpaquePointer) {
        let entry = state.withLock { $0.timeouts.removeValue(forKey: Int(bitPattern: timeout)) }
        entry?.timer?.source.cancel()
    }

    /// (Re)starts the timer: libdbus expects a re-enabled timeout to count its interval afresh.
    private func timeoutToggled(_ timeout: OpaquePointer) {
        let key = Int(bitPattern: timeout)
        let stale = state.withLock { state -> SourceHandle? in
            let stale = state.timeouts[key]?.timer
            state.timeouts[key]?.timer = nil
            return stale
        }
        stale?.source.cancel()
        guard dbus_timeout_get_enabled(timeout) != 0 else { return }
        let interval = DispatchTimeInterval.milliseconds(Int(max(1, dbus_timeout_get_interval(timeout))))
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(1))
        timer.setEventHandler { [weak self] in self?.handleTimeout(key) }
        let registered = state.withLock { state -> Bool in
            guard state.timeouts[key] != nil else { return false }
            state.timeouts[key]?.timer = SourceHandle(source: timer)
            return true
        }
        timer.activate()
        if !registered { timer.cancel() }
    }

    private func handleTimeout(_ key: Int) {
        let timeout = state.withLock { state in state.isOpen ? state.timeouts[key]?.timeout : nil }
        guard let timeout else { return }
        _ = dbus_timeout_handle(timeout.pointer)
        drain()
    }

    private func scheduleDrain() {
        let alreadyScheduled = state.withLock { state -> Bool in
            defer { state.drainScheduled = true }
            return state.drainScheduled
        }
        guard !alreadyScheduled else { return }
        queue.async { [weak self] in
            guard let self else { return }
            state.withLock { $0.drainScheduled = false }
            drain()
        }
    }

    /// Dispatches received messages. Bounded per turn so a flood of signals cannot starve the
    /// callers' work queued behind it; what is left is picked up by a new turn.
    private func drain() {
        for _ in 0..<64 {
            guard let raw = openConnection else { return }
            switch dbus_connection_dispatch(raw) {
            case DBUS_DISPATCH_DATA_REMAINS: continue
            case DBUS_DISPATCH_NEED_MEMORY:
                queue.asyncAfter(deadline: .now() + .milliseconds(10)) { [weak self] in self?.drain() }
                return
            default: return
            }
        }
        scheduleDrain()
    }

    // MARK: Closing

    /// Closes the connection: pending calls fail with `Disconnected`, signal streams finish,
    /// exported objects go away, and every dispatch source is cancelled. Idempotent.
    func close(reason: String = "the D-Bus connection was closed") {
        performAndWait { teardown(reason: reason) }
    }

    private func teardown(reason: String) {
        // Everything is moved out of the state and released after the lock: an exported object's
        // handler may hold the last reference to its own connection, whose deinit closes again.
        let taken = state.withLock { state -> ([PendingEntry], [Subscription], [String: ExportedObject])? in
            guard state.isOpen else { return nil }
            state.isOpen = false
            let taken = (Array(state.pending.values), Array(state.subscriptions.values), state.objects)
            state.pending = [:]
            state.subscriptions = [:]
            state.objects = [:]
            state.owners = [:]
            return taken
        }
        guard let (pending, subscriptions, objects) = taken else { return }
        defer { withExtendedLifetime(objects) {} }
        let raw = connection.pointer
        for entry in pending {
            dbus_pending_call_cancel(entry.pending.pointer)
            dbus_pending_call_unref(entry.pending.pointer)
        }
        flushBriefly(raw)
        dbus_connection_close(raw)
        dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
        dbus_connection_set_wakeup_main_function(raw, nil, nil, nil)
        let sources = state.withLock { state -> [SourceHandle] in
            let sources = state.watches.values.flatMap(\.sources) + state.timeouts.values.compactMap(\.timer)
            state.watches = [:]
            state.timeouts = [:]
            return sources
        }
        for handle in sources { handle.source.cancel() }
        dbus_connection_unref(raw)
        let error = DBusError.disconnected(reason)
        for entry in pending { entry.completion(.failure(error)) }
        for subscription in subscriptions { subscription.continuation.finish() }
    }

    /// Lets messages already queued (InterfacesRemoved, a last PropertiesChanged, a reply) reach
    /// the bus before closing, for at most a second: `dbus_connection_flush` would wait forever
    /// for a bus that stopped reading.
    private func flushBriefly(_ raw: OpaquePointer) {
        let deadline = DispatchTime.now() + .seconds(1)
        while dbus_connection_get_is_connected(raw) != 0, dbus_connection_has_messages_to_send(raw) != 0,
            DispatchTime.now() < deadline
        {
            _ = dbus_connection_read_write(raw, 100)
        }
    }

    // MARK: Sending

    /// Sends a message that expects no reply (signals, replies, fire-and-forget calls).
    func send(_ message: Message) {
        perform { [self] in
            guard let raw = openConnection else { return }
            _ = dbus_connection_send(raw, message.pointer, nil)
        }
    }

    /// Refuses descriptors on a connection that cannot pass them (libdbus would fail the send
    /// without saying why).
    private func checkCanSend(_ values: [DBusValue]) throws(DBusError) {
        guard !canPassFileDescriptors, values.contains(where: \.containsFileDescriptor) else { return }
        throw DBusError(
            name: DBusError.Name.notSupported,
            message: "this connection cannot pass file descriptors (the transport is not a Unix socket)")
    }

    func checkedMessage(_ values: [DBusValue], _ make: () throws(DBusError) -> Message) throws(DBusError) -> Message {
        try checkCanSend(values)
        return try make()
    }

    // MARK: Calls

    /// Starts a call on the queue; `completion` runs on the queue, in message order, exactly once:
    /// with the reply, the error reply, a timeout (`NoReply`), `Disconnected`, or `Cancelled`.
    func startCall(
        _ message: Message, timeout: Duration, cancellation: CallCancellation? = nil,
        completion: @escaping @Sendable (Result<Message, DBusError>) -> Void
    ) {
        perform { [self] in
            guard let raw = openConnection else { return completion(.failure(.disconnected())) }
            if let cancellation, cancellation.isCancelled { return completion(.failure(.cancelled)) }
            var pendingCall: OpaquePointer?
            guard dbus_connection_send_with_reply(raw, message.pointer, &pendingCall, Self.milliseconds(timeout)) != 0
            else { return completion(.failure(.noMemory)) }
            guard let pendingCall else { return completion(.failure(.disconnected())) }
            let id = nextID()
            state.withLock {
                $0.pending[id] = PendingEntry(pending: UnsafeHandle(pointer: pendingCall), completion: completion)
            }
            let token = Unmanaged.passRetained(PendingToken(core: self, id: id)).toOpaque()
            let notified = dbus_pending_call_set_notify(
                pendingCall,
                { pending, data in
                    guard let pending, let data else { return }
                    let token = Unmanaged<PendingToken>.fromOpaque(data).takeUnretainedValue()
                    token.core.pendingCompleted(token.id, pending)
                }, token,
                { data in
                    guard let data else { return }
                    Unmanaged<PendingToken>.fromOpaque(data).release()
                })
            if notified == 0 {
                Unmanaged<PendingToken>.fromOpaque(token).release()
                finishPending(id, with: .failure(.noMemory), cancel: true)
            }
            if let cancellation, !cancellation.bind(id) {
                finishPending(id, with: .failure(.cancelled), cancel: true)
            }
        }
    }

    private func pendingCompleted(_ id: UInt64, _ pending: OpaquePointer) {
        let reply = dbus_pending_call_steal_reply(pending).map { Message(adopting: $0) }
        guard let reply else { return finishPending(id, with: .failure(.disconnected())) }
        if reply.type == DBUS_MESSAGE_TYPE_ERROR {
            var error = reply.asError()
            // libdbus fails calls still pending when the bus goes away with NoReply; say what happened.
            if error.name == DBusError.Name.noReply, let raw = openConnection,
                dbus_connection_get_is_connected(raw) == 0
            {
                error = .disconnected("the bus connection was lost before the reply came")
            }
            finishPending(id, with: .failure(error))
        } else {
            finishPending(id, with: .success(reply))
        }
    }

    /// Completes a pending call once: whoever removes it from the table completes it.
    private func finishPending(_ id: UInt64, with result: Result<Message, DBusError>, cancel: Bool = false) {
        guard let entry = state.withLock({ $0.pending.removeValue(forKey: id) }) else { return }
        if cancel { dbus_pending_call_cancel(entry.pending.pointer) }
        dbus_pending_call_unref(entry.pending.pointer)
        entry.completion(result)
    }

    /// Cancels a started call (an awaiting task was cancelled).
    func cancelCall(_ id: UInt64) {
        perform { [self] in
            finishPending(id, with: .failure(.cancelled), cancel: true)
        }
    }

    /// A call that blocks the calling thread until its reply, unmarshalled on the queue (so the
    /// reply's descriptors are owned before it crosses threads). `onQueue` runs on the queue with
    /// the result before this returns, so state derived from a reply changes in message order.
    ///
    /// Off the queue it waits for the queue to complete the call. On the queue (a blocking call
    /// from a handler) the queue cannot wait for itself, so libdbus does the I/O itself.
    func callBlocking(
        _ message: Message, timeout: Duration,
        onQueue: (@Sendable (Result<[DBusValue], DBusError>) -> Void)? = nil
    ) -> Result<[DBusValue], DBusError> {
        if isOnQueue {
            let result = Self.unpack(blockOnQueue(message, timeout: timeout))
            onQueue?(result)
            return result
        }
        let box = Mutex<Result<[DBusValue], DBusError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let cancellation = CallCancellation()
        startCall(message, timeout: timeout, cancellation: cancellation) { reply in
            let result = Self.unpack(reply)
            onQueue?(result)
            box.withLock { $0 = result }
            done.signal()
        }
        // libdbus's own timer ends the call; this margin only guards against a wedged queue.
        let deadline = DispatchTime.now() + .milliseconds(Int(Self.milliseconds(timeout)) + 2_000)
        if done.wait(timeout: deadline) == .timedOut, let id = cancellation.cancel() {
            cancelCall(id)
        }
        return box.withLock { $0 } ?? .failure(.timedOut(after: timeout))
    }

    private func blockOnQueue(_ message: Message, timeout: Duration) -> Result<Message, DBusError> {
        guard let raw = openConnection else { return .failure(.disconnected()) }
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard
            let reply = dbus_connection_send_with_reply_and_block(
                raw, message.pointer, Self.milliseconds(timeout), &error)
        else {
            let name = error.name.map { String(cString: $0) } ?? DBusError.Name.failed
            let text = error.message.map { String(cString: $0) } ?? ""
            return .failure(DBusError(name: name, message: text))
        }
        return .success(Message(adopting: reply))
    }

    /// An async call: suspends until the reply (unmarshalled on the queue, see `callBlocking`);
    /// cancelling the task cancels the call.
    func callAsync(
        _ message: Message, timeout: Duration,
        onQueue: (@Sendable (Result<[DBusValue], DBusError>) -> Void)? = nil
    ) async -> Result<[DBusValue], DBusError> {
        let cancellation = CallCancellation()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                startCall(message, timeout: timeout, cancellation: cancellation) { reply in
                    let result = Self.unpack(reply)
                    onQueue?(result)
                    continuation.resume(returning: result)
                }
            }
        } onCancel: {
            if let id = cancellation.cancel() { cancelCall(id) }
        }
    }

    /// Sends `message` (in call order: `perform` keeps it) and hands the unpacked reply to `completion`.
    func callWithCompletion(
        _ message: Message, timeout: Duration,
        completion: @escaping @Sendable (Result<[DBusValue], DBusError>) -> Void
    ) {
        startCall(message, timeout: timeout) { reply in completion(Self.unpack(reply)) }
    }

    /// A reply's arguments, or its error.
    private static func unpack(_ reply: Result<Message, DBusError>) -> Result<[DBusValue], DBusError> {
        switch reply {
        case .success(let message):
            do {
                return .success(try message.arguments())
            } catch {
                return .failure(error)
            }
        case .failure(let error):
            return .failure(error)
        }
    }

    /// libdbus's timeout argument: milliseconds, at least 1, at most its "infinite".
    static func milliseconds(_ timeout: Duration) -> Int32 {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        return Int32(clamping: max(1, min(milliseconds, Int64(DBUS_TIMEOUT_INFINITE))))
    }

    // MARK: Replies to calls we received

    func sendReply(_ values: [DBusValue], outputSignature: String?, to call: Message) {
        guard call.expectsReply else { return }
        let signature = values.map(\.signature).joined()
        if let outputSignature, signature != outputSignature {
            return sendError(
                .failed("the service replied with signature '\(signature)' where '\(outputSignature)' was declared"),
                to: call)
        }
        do {
            send(try call.methodReturn(values))
        } catch {
            sendError(.failed("the service's reply could not be sent: \(error.message)"), to: call)
        }
    }

    func sendError(_ error: DBusError, to call: Message) {
        guard call.expectsReply, let reply = call.errorReply(error) else { return }
        send(reply)
    }

    // MARK: Filter

    /// Every incoming message that is not a reply: method calls for exported objects (handled,
    /// always answered), signals (to subscribers), libdbus's local Disconnected.
    private func filter(_ message: Message) -> Bool {
        switch message.type {
        case DBUS_MESSAGE_TYPE_METHOD_CALL:
            handleMethodCall(message)
            return true
        case DBUS_MESSAGE_TYPE_SIGNAL:
            if message.interface == DBusInterfaceName.local, message.member == "Disconnected" {
                queue.async { [weak self] in self?.teardown(reason: "the bus connection was lost") }
                return true
            }
            deliverSignal(message)
            return false
        default:
            return false
        }
    }

    // MARK: State shared with the other files

    func withStateThrowing<T>(_ body: (inout State) throws(DBusError) -> T) throws(DBusError) -> T {
        try state.withLock { (state) throws(DBusError) -> T in try body(&state) }
    }

    func withState<T>(_ body: (inout State) -> T) -> T {
        state.withLock { body(&$0) }
    }
}

/// The user data of a pending call's notify function.
private final class PendingToken: Sendable {
    let core: ConnectionCore
    let id: UInt64

    init(core: ConnectionCore, id: UInt64) {
        self.core = core
        self.id = id
    }
}

extension DBusValue {
    var containsFileDescriptor: Bool {
        switch self {
        case .unixFileDescriptor: true
        case .array(let element, let items): element.contains("h") && items.contains { $0.containsFileDescriptor }
        case .dictionary(let key, let value, let entries):
            (key + value).contains("h")
                && entries.contains { $0.key.containsFileDescriptor || $0.value.containsFileDescriptor }
        case .structure(let fields): fields.contains { $0.containsFileDescriptor }
        case .variant(let inner): inner.containsFileDescriptor
        default: false
        }
    }
}
