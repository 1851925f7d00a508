import HorizonCore
import HorizonRadio
import HorizonUnixSocket
import Synchronization

/// This process's device in a `RadioServer`'s shared simulated room. It implements the same
/// radio protocols as every other radio, so terminals and wallets run on it unchanged; callbacks
/// arrive on `scheduler`'s queue, one at a time.
///
/// No thread waits on the socket: a task reads the server's frames and another writes ours, in
/// the order they were sent. Starting to advertise or to scan answers at once: the device checks
/// what the server's device would refuse itself (the server answers each request in order and
/// numbers advertising sets as this side does), so it never waits for the server's answer.
public final class RemoteSimulatedRadio: DeviceRadio, Sendable {
    public let address: PeerAddress
    private let realTime: RealTimeScheduler
    private let connection: UnixConnection
    private let outbox: FrameOutbox
    /// Writes the outbox's frames until `disconnect()`; done once the last one is written.
    private let sending: Task<Void, Never>

    private struct State {
        var nextRequest: UInt32 = 1
        /// The number the server gives this device's next advertising set: it counts from 1, one
        /// per set it starts, and it starts every set this side asks for.
        var nextSetID: UInt32 = 1
        var connectCompletions: [UInt32: @Sendable (Result<any ByteLink, RadioError>) -> Void] = [:]
        var connectPeers: [UInt32: PeerAddress] = [:]
        var links: [UInt32: RemoteLink] = [:]
        var connectionHandler: (@Sendable (any ByteLink) -> Void)?
        var scanHandler: (@Sendable (Sighting) -> Void)?
        var serverGone = false
    }

    private let state = Mutex(State())

    /// Joins the room served at `socketPath` as a device named `name` at `position`.
    public init(
        socketPath: String, name: String, position: Position, attMTU: Int = 247, reportsRSSI: Bool = true,
        transmitPowerOffset: Double = 0
    ) async throws(RadioError) {
        guard transmitPowerOffset.isFinite, abs(transmitPowerOffset) <= 40 else {
            throw .invalidConfiguration("transmit power offset must be within ±40 dB")
        }
        guard (23...517).contains(attMTU) else { throw .invalidConfiguration("ATT MTU \(attMTU) is outside 23...517") }
        let connection: UnixConnection
        do {
            connection = try UnixConnection.connect(to: socketPath)
        } catch {
            throw RadioError(error)
        }
        var writer = ByteWriter()
        writer.write(RadioWire.hello)
        writer.write(string: String(name.prefix(64)))
        writer.write(position.x.bitPattern)
        writer.write(position.y.bitPattern)
        writer.write(UInt16(attMTU))
        writer.write(UInt8(reportsRSSI ? 1 : 0))
        writer.write(transmitPowerOffset.bitPattern)
        var frames = connection.frames(maximumSize: RadioServer.maximumFrameSize)
        guard await connection.send(UnixSocket.frame(writer.bytes)), case .frame(let welcome) = await frames.next()
        else {
            connection.close()
            throw .adapterUnavailable(.serviceUnavailable)
        }
        var reader = ByteReader(welcome)
        guard (try? reader.readUInt8("op")) == RadioWire.welcome,
            let address = try? reader.readString("address", maximumBytes: 64)
        else {
            connection.close()
            throw .backend(name: "radio-server", message: "the radio server sent an unexpected greeting")
        }
        self.address = PeerAddress(address)
        self.connection = connection
        realTime = RealTimeScheduler(label: "horizon.radio.\(name)")
        outbox = FrameOutbox(connection: connection, maximumQueuedBytes: RadioServer.maximumQueuedBytes)
        sending = Task { [outbox] in await outbox.drain() }
        // The reader holds the radio until the connection ends (`disconnect()`, or the server
        // going away), as a device stays in the room until it leaves.
        Task { [self, frames] in
            var frames = frames
            while case .frame(let frame) = await frames.next() {
                var reader = ByteReader(frame)
                do {
                    try dispatch(&reader)
                } catch {
                    break
                }
            }
            connection.close()
            serverGone()
        }
    }

    deinit {
        disconnect()
    }

    /// Leaves the room (the server powers this device off) once what was sent before has been
    /// written.
    public func disconnect() { outbox.finish() }

    /// Leaves the room (`DeviceRadio`).
    public func shutdown() { disconnect() }

    /// Returns once everything sent before `disconnect()` or `shutdown()` is written to the
    /// server (or the connection is gone). A program awaits it before it exits: its last frames,
    /// such as a wallet's decline, are queued, not yet written, when it shuts the radio down.
    public func untilSent() async { await sending.value }

    public var scheduler: any Scheduler { realTime }

    public var availability: AdapterAvailability {
        state.withLock { $0.serverGone } ? .serviceUnavailable : .poweredOn
    }

    // MARK: Peripheral

    public func setConnectionHandler(_ handler: @escaping @Sendable (any ByteLink) -> Void) {
        state.withLock { $0.connectionHandler = handler }
    }

    public func startAdvertising(_ advertisingData: [UInt8], interval: Duration) throws(RadioError)
        -> any AdvertisingSet
    {
        guard advertisingData.count <= AdvertisingData.legacyMaximumLength else {
            throw .advertisementTooLarge(size: advertisingData.count, maximum: AdvertisingData.legacyMaximumLength)
        }
        // What the server's device refuses (`SimulatedDevice.startAdvertising`), refused here.
        guard interval >= .milliseconds(20), interval <= .milliseconds(10_240) else {
            throw .invalidConfiguration("advertising interval must be 20 ms to 10.24 s")
        }
        let setID = try sendRequest { state in
            defer { state.nextSetID &+= 1 }
            return state.nextSetID
        } build: { request, writer in
            writer.write(RadioWire.startAdvertising)
            writer.write(request)
            writer.write(lengthPrefixed: advertisingData)
            writer.write(UInt32(clamping: interval.nanoseconds / 1_000_000))
        }
        return RemoteAdvertisingSet(radio: self, setID: setID)
    }

    func stopAdvertising(_ setID: UInt32) {
        var writer = ByteWriter()
        writer.write(RadioWire.stopAdvertising)
        writer.write(setID)
        write(writer.bytes)
    }

    // MARK: Central

    public func startScanning(_ handler: @escaping @Sendable (Sighting) -> Void) throws(RadioError) {
        _ = try sendRequest { state throws(RadioError) in
            // The server's device scans while this one has a handler (`stopScanning` reaches it
            // before a later start).
            guard state.scanHandler == nil else { throw .alreadyScanning }
            state.scanHandler = handler
            return 0
        } build: { request, writer in
            writer.write(RadioWire.startScanning)
            writer.write(request)
        }
    }

    public func stopScanning() {
        state.withLock { $0.scanHandler = nil }
        write([RadioWire.stopScanning])
    }

    public func connect(
        to peer: PeerAddress, timeout: Duration,
        completion: @escaping @Sendable (Result<any ByteLink, RadioError>) -> Void
    ) {
        let request = state.withLock { state -> UInt32 in
            let request = state.nextRequest
            state.nextRequest &+= 1
            state.connectCompletions[request] = completion
            state.connectPeers[request] = peer
            return request
        }
        var writer = ByteWriter()
        writer.write(RadioWire.connect)
        writer.write(request)
        writer.write(string: peer.rawValue)
        writer.write(UInt32(clamping: timeout.nanoseconds / 1_000_000))
        if !write(writer.bytes) {
            _ = state.withLock { $0.connectCompletions.removeValue(forKey: request) }
            realTime.execute { completion(.failure(.adapterUnavailable(.serviceUnavailable))) }
        }
    }

    /// Moves this device in the shared room.
    public func move(to position: Position) {
        var writer = ByteWriter()
        writer.write(RadioWire.move)
        writer.write(position.x.bitPattern)
        writer.write(position.y.bitPattern)
        write(writer.bytes)
    }

    // MARK: Links

    func send(_ payload: [UInt8], on linkID: UInt32) -> Bool {
        var writer = ByteWriter(capacity: payload.count + 8)
        writer.write(RadioWire.send)
        writer.write(linkID)
        writer.write(lengthPrefixed: payload)
        return write(writer.bytes)
    }

    func close(link linkID: UInt32) {
        var writer = ByteWriter()
        writer.write(RadioWire.close)
        writer.write(linkID)
        write(writer.bytes)
    }

    // MARK: Plumbing

    /// Queues a frame for the server; false once the connection is gone, or once the server is
    /// `RadioServer.maximumQueuedBytes` behind (then the room is left, as a stalled device).
    @discardableResult
    private func write(_ frame: [UInt8]) -> Bool { outbox.enqueue(frame) }

    /// Sends a request whose answer this side knows already (`accept` gives it, or throws what
    /// the server would answer), with the next request number; the server's answer is not
    /// waited for. Under one lock with the queueing, so requests leave in the order `accept`
    /// numbered them.
    private func sendRequest<Value>(
        _ accept: (inout State) throws(RadioError) -> Value, build: (UInt32, inout ByteWriter) -> Void
    ) throws(RadioError) -> Value {
        try state.withLock { state throws(RadioError) -> Value in
            guard !state.serverGone else { throw .adapterUnavailable(.serviceUnavailable) }
            let value = try accept(&state)
            let request = state.nextRequest
            state.nextRequest &+= 1
            var writer = ByteWriter()
            build(request, &writer)
            guard outbox.enqueue(writer.bytes) else { throw .adapterUnavailable(.serviceUnavailable) }
            return value
        }
    }

    private func dispatch(_ reader: inout ByteReader) throws {
        switch try reader.readUInt8("op") {
        case RadioWire.result:
            // The answer to a start of advertising or scanning, which this side gave already.
            _ = try reader.read(UInt32.self, "request")
            _ = try reader.read(UInt32.self, "value")
            _ = try RadioWire.readError(from: &reader)
        case RadioWire.sighting:
            let address = PeerAddress(try reader.readString("address", maximumBytes: 64))
            let hasRSSI = try reader.readUInt8("hasRSSI") != 0
            let rssi = Int(try reader.read(Int16.self, "rssi"))
            let data = try reader.readLengthPrefixed("data", maximum: 255)
            guard let handler = state.withLock({ $0.scanHandler }) else { return }
            let sighting = Sighting(
                address: address, advertisingData: data, rssi: hasRSSI ? rssi : nil, receivedAt: realTime.now)
            realTime.execute { handler(sighting) }
        case RadioWire.incomingLink:
            let linkID = try reader.read(UInt32.self, "link")
            let peer = PeerAddress(try reader.readString("peer", maximumBytes: 64))
            let mtu = Int(try reader.read(UInt16.self, "mtu"))
            let link = RemoteLink(radio: self, linkID: linkID, peer: peer, attMTU: mtu)
            let handler = state.withLock { state in
                state.links[linkID] = link
                return state.connectionHandler
            }
            if let handler { realTime.execute { handler(link) } } else { link.close() }
        case RadioWire.connectResult:
            let request = try reader.read(UInt32.self, "request")
            let linkID = try reader.read(UInt32.self, "link")
            let mtu = Int(try reader.read(UInt16.self, "mtu"))
            let error = try RadioWire.readError(from: &reader)
            let (completion, peer) = state.withLock { state in
                (state.connectCompletions.removeValue(forKey: request), state.connectPeers.removeValue(forKey: request))
            }
            guard let completion else { return }
            if let error {
                realTime.execute { completion(.failure(error)) }
            } else {
                let link = RemoteLink(radio: self, linkID: linkID, peer: peer ?? PeerAddress("?"), attMTU: mtu)
                state.withLock { $0.links[linkID] = link }
                realTime.execute { completion(.success(link)) }
            }
        case RadioWire.received:
            let linkID = try reader.read(UInt32.self, "link")
            let payload = try reader.readLengthPrefixed("payload", maximum: 1024)
            if let link = state.withLock({ $0.links[linkID] }) { realTime.execute { link.deliver(payload) } }
        case RadioWire.linkClosed:
            let linkID = try reader.read(UInt32.self, "link")
            let reason = RadioWire.linkCloseReason(try reader.readUInt8("reason"))
            if let link = state.withLock({ $0.links.removeValue(forKey: linkID) }) {
                realTime.execute { link.closed(reason) }
            }
        case let op:
            throw WireError.unknownType(op)
        }
    }

    /// The server went away: every link is lost and every connection under way fails.
    private func serverGone() {
        let (links, completions) = state.withLock { state in
            state.serverGone = true
            defer {
                state.links = [:]
                state.connectCompletions = [:]
            }
            return (Array(state.links.values), Array(state.connectCompletions.values))
        }
        outbox.finish()
        for link in links { realTime.execute { link.closed(.connectionLost) } }
        for completion in completions {
            realTime.execute { completion(.failure(.adapterUnavailable(.serviceUnavailable))) }
        }
    }
}

final class RemoteAdvertisingSet: AdvertisingSet, Sendable {
    let radio: RemoteSimulatedRadio
    let setID: UInt32
    init(radio: RemoteSimulatedRadio, setID: UInt32) {
        self.radio = radio
        self.setID = setID
    }
    func stop() { radio.stopAdvertising(setID) }
}

/// One end of a link carried through the radio server.
final class RemoteLink: ByteLink, Sendable {
    let radio: RemoteSimulatedRadio
    let linkID: UInt32
    let peer: PeerAddress
    let attMTU: Int

    private struct State {
        var handler: ByteLinkHandler?
        var pending: [[UInt8]] = []
        var pendingClose: LinkCloseReason?
        var closed = false
    }

    private let state = Mutex(State())

    init(radio: RemoteSimulatedRadio, linkID: UInt32, peer: PeerAddress, attMTU: Int) {
        self.radio = radio
        self.linkID = linkID
        self.peer = peer
        self.attMTU = attMTU
    }

    func setHandler(_ handler: ByteLinkHandler) {
        let (payloads, close) = state.withLock { state in
            state.handler = handler
            defer {
                state.pending = []
                state.pendingClose = nil
            }
            return (state.pending, state.pendingClose)
        }
        for payload in payloads { handler.onReceive(payload) }
        if let close { handler.onClose(close) }
    }

    func send(_ payload: [UInt8]) throws(RadioError) {
        guard payload.count <= maximumPayloadSize else {
            throw .payloadTooLarge(size: payload.count, maximum: maximumPayloadSize)
        }
        guard !state.withLock({ $0.closed }), radio.send(payload, on: linkID) else { throw .linkClosed }
    }

    func close() {
        let first = state.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
        guard first else { return }
        radio.close(link: linkID)
    }

    func deliver(_ payload: [UInt8]) {
        guard
            let handler = state.withLock({ state -> ByteLinkHandler? in
                guard let handler = state.handler else {
                    state.pending.append(payload)
                    return nil
                }
                return handler
            })
        else { return }
        handler.onReceive(payload)
    }

    func closed(_ reason: LinkCloseReason) {
        guard
            let handler = state.withLock({ state -> ByteLinkHandler? in
                state.closed = true
                guard let handler = state.handler else {
                    state.pendingClose = reason
                    return nil
                }
                return handler
            })
        else { return }
        handler.onClose(reason)
    }
}

extension RemoteSimulatedRadio {
    /// Whether a radio server answers at `socketPath` (connects and hangs up at once: connecting
    /// to a Unix socket does not wait for the server to accept).
    public static func probe(socketPath: String) throws(RadioError) -> Bool {
        do {
            UnixSocket.close(try UnixSocket.connect(to: socketPath))
        } catch {
            throw RadioError(error)
        }
        return true
    }
}

extension RadioError {
    /// A socket failure as the radio reports it: no server to connect to is a service that is
    /// not there.
    init(_ error: UnixSocketError) {
        switch error {
        case .noListener: self = .adapterUnavailable(.serviceUnavailable)
        case .pathTooLong: self = .invalidConfiguration(error.description)
        case .notASocket, .system: self = .backend(name: "radio-server", message: error.description)
        }
    }
}
