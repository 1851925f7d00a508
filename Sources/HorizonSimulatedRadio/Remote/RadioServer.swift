import Dispatch
import Foundation
import HorizonCore
import HorizonRadio
import HorizonUnixSocket
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The simulated radio shared by several processes: one `RadioSimulation` whose virtual clock
/// follows the wall clock, serving devices to clients over a Unix socket. A terminal in one
/// shell and a wallet in another each become a device of the same room; a client that goes away
/// (even killed) is powered off, as a crashed device would be.
///
/// Each client is a child task reading its frames (no thread per client). The simulation, the
/// clients' requests and the clock's timer share one serial context, so the room changes one
/// step at a time; between events the server sleeps until the next one is due.
public final class RadioServer: Sendable {
    public let socketPath: String
    /// The room. Its events fire on the server's context; change it only through the clients.
    public let simulation: RadioSimulation
    /// Exit `run()` after this long with no client (nil: never).
    public let idleExit: Duration?

    /// Frames larger than this are a protocol error (a link payload is at most 512 bytes).
    static let maximumFrameSize = 64 * 1024
    /// Bytes waiting for a client that does not read: past this it is disconnected (a device out
    /// of range) rather than held in memory or allowed to stall the room.
    static let maximumQueuedBytes = 4 * 1024 * 1024

    private struct Client {
        let connection: UnixConnection
        let outbox: FrameOutbox
        let device: SimulatedDevice
        var links: [UInt32: SimulatedLinkEndpoint] = [:]
        var advertising: [UInt32: any AdvertisingSet] = [:]
        var nextSetID: UInt32 = 1
    }

    private struct State {
        /// Every accepted connection, greeted or not, so `stop()` can end them all.
        var connections: [Int: UnixConnection] = [:]
        /// The connections that said hello: devices of the room.
        var clients: [Int: Client] = [:]
        var nextConnectionID = 0
        var lastClientSeen = ContinuousClock.now
        var clock: ClockTimer?
        var stopped = false
    }

    private let state = Mutex(State())
    /// The serial context: the simulation's events, the clients' requests and the clock's wakeups
    /// run here, one at a time.
    private let context = DispatchQueue(label: "horizon.radio-server")
    private let listener: UnixListener
    private let lock: Int32
    /// The wall-clock instant of the simulation's virtual time zero.
    private let start = ContinuousClock.now

    /// Serves at `socketPath`. Only one server may serve a path: the holder of an exclusive lock
    /// on `<socketPath>.lock` binds the socket, so two programs starting a server at the same
    /// moment cannot split the room in two. The socket accepts connections from here on (they
    /// wait in its backlog until `run()`).
    public init(socketPath: String, seed: UInt64 = 1, idleExit: Duration? = nil) throws(RadioError) {
        self.socketPath = socketPath
        self.idleExit = idleExit
        simulation = RadioSimulation(seed: seed, wallClockAtStart: UnixTime(Date().timeIntervalSince1970))
        lock = open(socketPath + ".lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard lock >= 0 else {
            throw .backend(
                name: "radio-server", message: "cannot create \(socketPath).lock: \(String(cString: strerror(errno)))")
        }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            close(lock)
            throw .backend(name: "radio-server", message: "another simulated radio already serves \(socketPath)")
        }
        do {
            listener = try UnixListener(path: socketPath, mode: 0o600)
        } catch {
            close(lock)
            throw .backend(name: "bind", message: error.description)
        }
    }

    /// Number of connected client devices.
    public var clientCount: Int { state.withLock { $0.clients.count } }

    /// Serves until `stop()` or the idle timeout. Call it once.
    public func run() async {
        context.async { [self] in startClock() }
        await withDiscardingTaskGroup { group in
            for await connection in listener.connections() {
                guard let id = admit(connection) else {
                    connection.close()
                    continue
                }
                group.addTask { await self.serve(connection, id: id) }
            }
            // The listener closed (`stop()`, or the idle exit): `stop()` ended every connection,
            // so the clients' tasks end too.
        }
        stop()
    }

    /// Stops serving and releases the socket and its lock. Safe to call more than once.
    public func stop() {
        let (first, connections, clock) = state.withLock { state -> (Bool, [UnixConnection], ClockTimer?) in
            defer { state.stopped = true }
            return (!state.stopped, Array(state.connections.values), state.clock)
        }
        guard first else { return }
        clock?.cancel()
        // Removes the socket file while this server still holds the lock, so no other server can
        // bind the path in between.
        listener.close()
        for connection in connections { connection.close() }
        // Unlock before closing: a process being spawned elsewhere in this program at this moment
        // holds a copy of the descriptor until its exec, and the lock belongs to the open file,
        // so closing ours alone would leave the path locked until then.
        flock(lock, LOCK_UN)
        close(lock)
    }

    // MARK: Clock

    /// On the context: the clock's timer, first armed for whatever is already due.
    private func startClock() {
        let timer = ClockTimer(queue: context) { [weak self] in self?.advanceClock() }
        let started = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.clock = timer
            return true
        }
        guard started else {
            timer.cancel()
            return
        }
        advanceClock()
    }

    /// On the context: fires every event due by the wall clock, then sleeps until the next one
    /// (or the idle exit). Nothing wakes the server in between, so a room at rest costs no CPU.
    private func advanceClock() {
        simulation.run(until: virtualNow)
        let (clock, idleSince) = state.withLock { state in
            (state.clock, state.clients.isEmpty && !state.stopped ? state.lastClientSeen : nil)
        }
        var wake = simulation.nextEventTime.map { $0 - virtualNow }
        if let idleExit, let idleSince {
            let idleLeft = idleExit - (ContinuousClock.now - idleSince)
            guard idleLeft > .zero else {
                stop()
                return
            }
            wake = min(wake ?? idleLeft, idleLeft)
        }
        clock?.wake(after: wake)
    }

    /// The wall clock as the simulation's virtual time.
    private var virtualNow: Instant { Instant(nanoseconds: (ContinuousClock.now - start).nanoseconds) }

    /// Runs `body` on the context, after bringing the simulation up to the wall clock (so what
    /// a client asks happens at the time it arrives), and re-arms the clock after it.
    private func onContext<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            context.async { [self] in
                simulation.run(until: virtualNow)
                let result = body()
                advanceClock()
                continuation.resume(returning: result)
            }
        }
    }

    // MARK: Clients

    private func admit(_ connection: UnixConnection) -> Int? {
        state.withLock { state in
            guard !state.stopped else { return nil }
            let id = state.nextConnectionID
            state.nextConnectionID += 1
            state.connections[id] = connection
            return id
        }
    }

    /// One client's task: its hello, then its requests in order, each handled on the context;
    /// a child task writes what the room sends it.
    private func serve(_ connection: UnixConnection, id: Int) async {
        var frames = connection.frames(maximumSize: Self.maximumFrameSize)
        let outbox = FrameOutbox(connection: connection, maximumQueuedBytes: Self.maximumQueuedBytes)
        if case .frame(let hello) = await frames.next(),
            await onContext({ self.welcome(hello, id: id, connection: connection, outbox: outbox) })
        {
            await withDiscardingTaskGroup { group in
                group.addTask { await outbox.drain() }
                while case .frame(let frame) = await frames.next() {
                    // A client speaking nonsense is disconnected.
                    guard await onContext({ self.handle(frame, from: id) }) else { break }
                }
                connection.close()
                outbox.finish()
            }
            await onContext { self.disconnect(id) }
        }
        connection.close()
        _ = state.withLock { $0.connections.removeValue(forKey: id) }
    }

    private func welcome(_ frame: [UInt8], id: Int, connection: UnixConnection, outbox: FrameOutbox) -> Bool {
        guard !state.withLock({ $0.stopped }), let device = try? addDevice(frame) else { return false }
        state.withLock { state in
            state.clients[id] = Client(connection: connection, outbox: outbox, device: device)
            state.lastClientSeen = ContinuousClock.now
        }
        device.setConnectionHandler { [weak self] link in
            guard let self, let endpoint = link as? SimulatedLinkEndpoint else { return }
            self.adopt(endpoint, for: id)
            var writer = ByteWriter()
            writer.write(RadioWire.incomingLink)
            writer.write(UInt32(endpoint.identifier))
            writer.write(string: endpoint.peer.rawValue)
            writer.write(UInt16(endpoint.attMTU))
            self.send(writer.bytes, to: id)
        }
        var writer = ByteWriter()
        writer.write(RadioWire.welcome)
        writer.write(string: device.address.rawValue)
        send(writer.bytes, to: id)
        return true
    }

    private func addDevice(_ hello: [UInt8]) throws -> SimulatedDevice {
        var reader = ByteReader(hello)
        guard try reader.readUInt8("op") == RadioWire.hello else { throw WireError.unknownType(0) }
        let name = try reader.readString("name", maximumBytes: 64)
        let x = Double(bitPattern: try reader.read(UInt64.self, "x"))
        let y = Double(bitPattern: try reader.read(UInt64.self, "y"))
        let mtu = Int(try reader.read(UInt16.self, "mtu"))
        let reportsRSSI = try reader.readUInt8("reportsRSSI") != 0
        let power = Double(bitPattern: try reader.read(UInt64.self, "transmitPowerOffset"))
        guard x.isFinite, y.isFinite else { throw WireError.invalidValue(field: "position", reason: "not finite") }
        guard power.isFinite, abs(power) <= 40 else {
            throw WireError.invalidValue(field: "transmitPowerOffset", reason: "must be within ±40 dB")
        }
        return try simulation.addDevice(
            name: name,
            configuration: DeviceConfiguration(
                position: Position(x: x, y: y), link: LinkParameters(attMTU: mtu), reportsRSSI: reportsRSSI,
                transmitPowerOffset: power))
    }

    /// One request, on the context; false for a frame that makes no sense.
    private func handle(_ frame: [UInt8], from id: Int) -> Bool {
        guard let device = state.withLock({ $0.clients[id]?.device }) else { return false }
        do {
            try handle(frame, from: id, device: device)
            return true
        } catch {
            return false
        }
    }

    private func handle(_ frame: [UInt8], from id: Int, device: SimulatedDevice) throws {
        var reader = ByteReader(frame)
        switch try reader.readUInt8("op") {
        case RadioWire.startAdvertising:
            let request = try reader.read(UInt32.self, "request")
            let data = try reader.readLengthPrefixed("data", maximum: 255)
            let interval = Duration.milliseconds(Int(try reader.read(UInt32.self, "interval")))
            var setID: UInt32 = 0
            var failure: RadioError?
            do {
                let set = try device.startAdvertising(data, interval: interval)
                setID = state.withLock { state in
                    let setID = state.clients[id]?.nextSetID ?? 0
                    state.clients[id]?.nextSetID += 1
                    state.clients[id]?.advertising[setID] = set
                    return setID
                }
            } catch {
                failure = error
            }
            reply(request, value: setID, error: failure, to: id)
        case RadioWire.stopAdvertising:
            let setID = try reader.read(UInt32.self, "set")
            state.withLock { $0.clients[id]?.advertising.removeValue(forKey: setID) }?.stop()
        case RadioWire.startScanning:
            let request = try reader.read(UInt32.self, "request")
            var failure: RadioError?
            do {
                try device.startScanning { [weak self] sighting in self?.forward(sighting, to: id) }
            } catch {
                failure = error
            }
            reply(request, value: 0, error: failure, to: id)
        case RadioWire.stopScanning:
            device.stopScanning()
        case RadioWire.connect:
            let request = try reader.read(UInt32.self, "request")
            let peer = PeerAddress(try reader.readString("peer", maximumBytes: 64))
            let timeout = Duration.milliseconds(Int(try reader.read(UInt32.self, "timeout")))
            device.connect(to: peer, timeout: timeout) { [weak self] result in
                self?.connected(result, request: request, to: id)
            }
        case RadioWire.send:
            let linkID = try reader.read(UInt32.self, "link")
            let payload = try reader.readLengthPrefixed("payload", maximum: 1024)
            try? state.withLock { $0.clients[id]?.links[linkID] }?.send(payload)
        case RadioWire.close:
            let linkID = try reader.read(UInt32.self, "link")
            state.withLock { $0.clients[id]?.links[linkID] }?.close()
        case RadioWire.move:
            let x = Double(bitPattern: try reader.read(UInt64.self, "x"))
            let y = Double(bitPattern: try reader.read(UInt64.self, "y"))
            if x.isFinite, y.isFinite { device.move(to: Position(x: x, y: y)) }
        case let op:
            throw WireError.unknownType(op)
        }
    }

    private func connected(_ result: Result<any ByteLink, RadioError>, request: UInt32, to id: Int) {
        var writer = ByteWriter()
        writer.write(RadioWire.connectResult)
        writer.write(request)
        switch result {
        case .success(let link):
            guard let endpoint = link as? SimulatedLinkEndpoint else { return }
            adopt(endpoint, for: id)
            writer.write(UInt32(endpoint.identifier))
            writer.write(UInt16(endpoint.attMTU))
            RadioWire.write(nil, to: &writer)
        case .failure(let error):
            writer.write(UInt32(0))
            writer.write(UInt16(0))
            RadioWire.write(error, to: &writer)
        }
        send(writer.bytes, to: id)
    }

    /// Relays a link's traffic to the client that owns this end.
    private func adopt(_ endpoint: SimulatedLinkEndpoint, for id: Int) {
        let linkID = UInt32(endpoint.identifier)
        state.withLock { $0.clients[id]?.links[linkID] = endpoint }
        endpoint.setHandler(
            ByteLinkHandler(
                onReceive: { [weak self] payload in
                    var writer = ByteWriter(capacity: payload.count + 8)
                    writer.write(RadioWire.received)
                    writer.write(linkID)
                    writer.write(lengthPrefixed: payload)
                    self?.send(writer.bytes, to: id)
                },
                onClose: { [weak self] reason in
                    _ = self?.state.withLock { $0.clients[id]?.links.removeValue(forKey: linkID) }
                    var writer = ByteWriter()
                    writer.write(RadioWire.linkClosed)
                    writer.write(linkID)
                    writer.write(RadioWire.linkCloseCode(reason))
                    self?.send(writer.bytes, to: id)
                }))
    }

    private func forward(_ sighting: Sighting, to id: Int) {
        var writer = ByteWriter(capacity: 64)
        writer.write(RadioWire.sighting)
        writer.write(string: sighting.address.rawValue)
        writer.write(UInt8(sighting.rssi == nil ? 0 : 1))
        writer.write(Int16(clamping: sighting.rssi ?? 0))
        writer.write(lengthPrefixed: sighting.advertisingData)
        send(writer.bytes, to: id)
    }

    private func reply(_ request: UInt32, value: UInt32, error: RadioError?, to id: Int) {
        var writer = ByteWriter()
        writer.write(RadioWire.result)
        writer.write(request)
        writer.write(value)
        RadioWire.write(error, to: &writer)
        send(writer.bytes, to: id)
    }

    /// Queues a frame for a client without waiting (the room's events cannot wait for a reader).
    private func send(_ frame: [UInt8], to id: Int) {
        guard let client = state.withLock({ $0.clients[id] }) else { return }
        client.outbox.enqueue(frame)
    }

    /// On the context: a client that goes away is a device switched off; its peers lose their
    /// links.
    private func disconnect(_ id: Int) {
        let client = state.withLock { state -> Client? in
            state.lastClientSeen = ContinuousClock.now
            return state.clients.removeValue(forKey: id)
        }
        client?.device.powerOff()
    }
}

/// The server clock's one timer, re-armed for each next event. Only the server's context arms
/// it; dispatch sources are safe to cancel from any thread (the type just does not say so).
private final class ClockTimer: @unchecked Sendable {
    private let timer: any DispatchSourceTimer

    init(queue: DispatchQueue, fire: @escaping @Sendable () -> Void) {
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler(handler: fire)
        timer.schedule(deadline: .distantFuture)
        timer.resume()
    }

    /// Fires once after `delay` (at once if it is not positive); nil: not until re-armed.
    func wake(after delay: Duration?) {
        guard let delay else {
            timer.schedule(deadline: .distantFuture)
            return
        }
        let nanoseconds = Int(clamping: max(delay.nanoseconds, 0))
        // Up to a millisecond late is fine (the room catches up to the wall clock on each wakeup)
        // and lets the kernel group wakeups.
        timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), leeway: .milliseconds(1))
    }

    func cancel() { timer.cancel() }
}
