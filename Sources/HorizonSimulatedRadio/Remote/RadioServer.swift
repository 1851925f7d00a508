import Foundation
import HorizonCore
import HorizonRadio
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
public final class RadioServer: Sendable {
    public let socketPath: String
    public let simulation: RadioSimulation
    /// Exit `run()` after this long with no client (nil: never).
    public let idleExit: Duration?

    private struct Client {
        let descriptor: Int32
        let device: SimulatedDevice
        let writeLock: WriteLock
        var links: [UInt32: SimulatedLinkEndpoint] = [:]
        var advertising: [UInt32: any AdvertisingSet] = [:]
        var nextSetID: UInt32 = 1
    }

    private struct State {
        var clients: [Int32: Client] = [:]
        var lastClientSeen = ContinuousClock.now
        var stopped = false
        var released = false
    }

    private let state = Mutex(State())
    private let listener: Int32
    private let lock: Int32

    /// Serves at `socketPath`. Only one server may serve a path: the holder of an exclusive lock
    /// on `<socketPath>.lock` binds the socket, so two programs starting a server at the same
    /// moment cannot split the room in two.
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
            UnixSocket.close(lock)
            throw .backend(name: "radio-server", message: "another simulated radio already serves \(socketPath)")
        }
        do {
            listener = try UnixSocket.listen(at: socketPath)
        } catch {
            UnixSocket.close(lock)
            throw error
        }
    }

    /// Number of connected client devices.
    public var clientCount: Int { state.withLock { $0.clients.count } }

    /// Serves until `stop()` or the idle timeout. Blocks the calling thread.
    public func run() {
        let acceptor = Thread { [self] in acceptLoop() }
        acceptor.start()
        let start = ContinuousClock.now
        while !state.withLock({ $0.stopped }) {
            simulation.run(until: Instant(nanoseconds: (ContinuousClock.now - start).nanoseconds))
            if let idleExit, shouldExitIdle(after: idleExit) { break }
            usleep(1000)
        }
        stop()
    }

    /// Stops serving and releases the socket and its lock. Safe to call more than once.
    public func stop() {
        let (first, descriptors) = state.withLock { state -> (Bool, [Int32]) in
            defer { state.stopped = true }
            return (!state.released, Array(state.clients.keys))
        }
        guard first else { return }
        state.withLock { $0.released = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for descriptor in descriptors { shutdown(descriptor, Int32(SHUT_RDWR)) }
        unlink(socketPath)
        // Unlock before closing: a process being spawned elsewhere in this program at this moment
        // holds a copy of the descriptor until its exec, and the lock belongs to the open file,
        // so closing ours alone would leave the path locked until then.
        flock(lock, LOCK_UN)
        UnixSocket.close(lock)
    }

    private func shouldExitIdle(after timeout: Duration) -> Bool {
        state.withLock { $0.clients.isEmpty && ContinuousClock.now - $0.lastClientSeen > timeout }
    }

    private func acceptLoop() {
        while !state.withLock({ $0.stopped }) {
            let descriptor = accept(listener, nil, nil)
            guard descriptor >= 0 else {
                if errno == EINTR { continue }
                return
            }
            Thread { [self] in serve(descriptor) }.start()
        }
    }

    private func serve(_ descriptor: Int32) {
        defer { disconnect(descriptor) }
        guard let first = UnixSocket.readFrame(from: descriptor), let device = try? welcome(first, descriptor) else {
            close(descriptor)
            return
        }
        while let frame = UnixSocket.readFrame(from: descriptor) {
            do {
                try handle(frame, from: descriptor, device: device)
            } catch {
                return  // a client speaking nonsense is disconnected
            }
        }
    }

    private func welcome(_ frame: [UInt8], _ descriptor: Int32) throws -> SimulatedDevice {
        var reader = ByteReader(frame)
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
        let device = try simulation.addDevice(
            name: name,
            configuration: DeviceConfiguration(
                position: Position(x: x, y: y), link: LinkParameters(attMTU: mtu), reportsRSSI: reportsRSSI,
                transmitPowerOffset: power))
        state.withLock { state in
            state.clients[descriptor] = Client(descriptor: descriptor, device: device, writeLock: WriteLock())
            state.lastClientSeen = ContinuousClock.now
        }
        device.setConnectionHandler { [weak self] link in
            guard let self, let endpoint = link as? SimulatedLinkEndpoint else { return }
            self.adopt(endpoint, for: descriptor)
            var writer = ByteWriter()
            writer.write(RadioWire.incomingLink)
            writer.write(UInt32(endpoint.identifier))
            writer.write(string: endpoint.peer.rawValue)
            writer.write(UInt16(endpoint.attMTU))
            self.send(writer.bytes, to: descriptor)
        }
        var writer = ByteWriter()
        writer.write(RadioWire.welcome)
        writer.write(string: device.address.rawValue)
        send(writer.bytes, to: descriptor)
        return device
    }

    private func handle(_ frame: [UInt8], from descriptor: Int32, device: SimulatedDevice) throws {
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
                    let id = state.clients[descriptor]?.nextSetID ?? 0
                    state.clients[descriptor]?.nextSetID += 1
                    state.clients[descriptor]?.advertising[id] = set
                    return id
                }
            } catch {
                failure = error
            }
            reply(request, value: setID, error: failure, to: descriptor)
        case RadioWire.stopAdvertising:
            let setID = try reader.read(UInt32.self, "set")
            state.withLock { $0.clients[descriptor]?.advertising.removeValue(forKey: setID) }?.stop()
        case RadioWire.startScanning:
            let request = try reader.read(UInt32.self, "request")
            var failure: RadioError?
            do {
                try device.startScanning { [weak self] sighting in self?.forward(sighting, to: descriptor) }
            } catch {
                failure = error
            }
            reply(request, value: 0, error: failure, to: descriptor)
        case RadioWire.stopScanning:
            device.stopScanning()
        case RadioWire.connect:
            let request = try reader.read(UInt32.self, "request")
            let peer = PeerAddress(try reader.readString("peer", maximumBytes: 64))
            let timeout = Duration.milliseconds(Int(try reader.read(UInt32.self, "timeout")))
            device.connect(to: peer, timeout: timeout) { [weak self] result in
                self?.connected(result, request: request, peer: peer, to: descriptor)
            }
        case RadioWire.send:
            let linkID = try reader.read(UInt32.self, "link")
            let payload = try reader.readLengthPrefixed("payload", maximum: 1024)
            try? state.withLock { $0.clients[descriptor]?.links[linkID] }?.send(payload)
        case RadioWire.close:
            let linkID = try reader.read(UInt32.self, "link")
            state.withLock { $0.clients[descriptor]?.links[linkID] }?.close()
        case RadioWire.move:
            let x = Double(bitPattern: try reader.read(UInt64.self, "x"))
            let y = Double(bitPattern: try reader.read(UInt64.self, "y"))
            if x.isFinite, y.isFinite { device.move(to: Position(x: x, y: y)) }
        case let op:
            throw WireError.unknownType(op)
        }
    }

    private func connected(
        _ result: Result<any ByteLink, RadioError>, request: UInt32, peer: PeerAddress, to descriptor: Int32
    ) {
        var writer = ByteWriter()
        writer.write(RadioWire.connectResult)
        writer.write(request)
        switch result {
        case .success(let link):
            guard let endpoint = link as? SimulatedLinkEndpoint else { return }
            adopt(endpoint, for: descriptor)
            writer.write(UInt32(endpoint.identifier))
            writer.write(UInt16(endpoint.attMTU))
            RadioWire.write(nil, to: &writer)
        case .failure(let error):
            writer.write(UInt32(0))
            writer.write(UInt16(0))
            RadioWire.write(error, to: &writer)
        }
        send(writer.bytes, to: descriptor)
    }

    /// Relays a link's traffic to the client that owns this end.
    private func adopt(_ endpoint: SimulatedLinkEndpoint, for descriptor: Int32) {
        let linkID = UInt32(endpoint.identifier)
        state.withLock { $0.clients[descriptor]?.links[linkID] = endpoint }
        endpoint.setHandler(
            ByteLinkHandler(
                onReceive: { [weak self] payload in
                    var writer = ByteWriter(capacity: payload.count + 8)
                    writer.write(RadioWire.received)
                    writer.write(linkID)
                    writer.write(lengthPrefixed: payload)
                    self?.send(writer.bytes, to: descriptor)
                },
                onClose: { [weak self] reason in
                    _ = self?.state.withLock { $0.clients[descriptor]?.links.removeValue(forKey: linkID) }
                    var writer = ByteWriter()
                    writer.write(RadioWire.linkClosed)
                    writer.write(linkID)
                    writer.write(RadioWire.linkCloseCode(reason))
                    self?.send(writer.bytes, to: descriptor)
                }))
    }

    private func forward(_ sighting: Sighting, to descriptor: Int32) {
        var writer = ByteWriter(capacity: 64)
        writer.write(RadioWire.sighting)
        writer.write(string: sighting.address.rawValue)
        writer.write(UInt8(sighting.rssi == nil ? 0 : 1))
        writer.write(Int16(clamping: sighting.rssi ?? 0))
        writer.write(lengthPrefixed: sighting.advertisingData)
        send(writer.bytes, to: descriptor)
    }

    private func reply(_ request: UInt32, value: UInt32, error: RadioError?, to descriptor: Int32) {
        var writer = ByteWriter()
        writer.write(RadioWire.result)
        writer.write(request)
        writer.write(value)
        RadioWire.write(error, to: &writer)
        send(writer.bytes, to: descriptor)
    }

    private func send(_ frame: [UInt8], to descriptor: Int32) {
        guard let lock = state.withLock({ $0.clients[descriptor]?.writeLock }) else { return }
        lock.mutex.withLock { _ in _ = UnixSocket.writeFrame(frame, to: descriptor) }
    }

    private func disconnect(_ descriptor: Int32) {
        let client = state.withLock { state -> Client? in
            state.lastClientSeen = ContinuousClock.now
            return state.clients.removeValue(forKey: descriptor)
        }
        // A client that goes away is a device switched off: its peers lose their links.
        client?.device.powerOff()
        close(descriptor)
    }
}

/// Serialises whole frames written to one socket from several threads.
final class WriteLock: Sendable {
    let mutex = Mutex(())
}
