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

/// This process's device in a `RadioServer`'s shared simulated room. It implements the same
/// radio protocols as every other radio, so terminals and wallets run on it unchanged; callbacks
/// arrive on `scheduler`'s queue, one at a time.
public final class RemoteSimulatedRadio: DeviceRadio, Sendable {
    public let address: PeerAddress
    private let realTime: RealTimeScheduler
    private let descriptor: Int32
    /// How long a request waits for the server's answer.
    public static let requestTimeout: Duration = .seconds(3)

    private struct State {
        var nextRequest: UInt32 = 1
        var pending: [UInt32: PendingRequest] = [:]
        var connectCompletions: [UInt32: @Sendable (Result<any ByteLink, RadioError>) -> Void] = [:]
        var connectPeers: [UInt32: PeerAddress] = [:]
        var links: [UInt32: RemoteLink] = [:]
        var connectionHandler: (@Sendable (any ByteLink) -> Void)?
        var scanHandler: (@Sendable (Sighting) -> Void)?
        var serverGone = false
    }

    private let state = Mutex(State())
    /// Serialises whole frames written from several threads.
    private let writeLock = Mutex(())

    /// Joins the room served at `socketPath` as a device named `name` at `position`.
    public init(
        socketPath: String, name: String, position: Position, attMTU: Int = 247, reportsRSSI: Bool = true,
        transmitPowerOffset: Double = 0
    ) throws(RadioError) {
        guard transmitPowerOffset.isFinite, abs(transmitPowerOffset) <= 40 else {
            throw .invalidConfiguration("transmit power offset must be within ±40 dB")
        }
        guard (23...517).contains(attMTU) else { throw .invalidConfiguration("ATT MTU \(attMTU) is outside 23...517") }
        do {
            descriptor = try UnixSocket.connect(to: socketPath)
        } catch {
            throw RadioError(error)
        }
        realTime = RealTimeScheduler(label: "horizon.radio.\(name)")
        var writer = ByteWriter()
        writer.write(RadioWire.hello)
        writer.write(string: String(name.prefix(64)))
        writer.write(position.x.bitPattern)
        writer.write(position.y.bitPattern)
        writer.write(UInt16(attMTU))
        writer.write(UInt8(reportsRSSI ? 1 : 0))
        writer.write(transmitPowerOffset.bitPattern)
        guard UnixSocket.writeFrame(writer.bytes, to: descriptor),
            let welcome = UnixSocket.readFrame(from: descriptor, maximumSize: RadioServer.maximumFrameSize)
        else {
            UnixSocket.close(descriptor)
            throw .adapterUnavailable(.serviceUnavailable)
        }
        var reader = ByteReader(welcome)
        guard (try? reader.readUInt8("op")) == RadioWire.welcome,
            let address = try? reader.readString("address", maximumBytes: 64)
        else {
            UnixSocket.close(descriptor)
            throw .backend(name: "radio-server", message: "the radio server sent an unexpected greeting")
        }
        self.address = PeerAddress(address)
        let thread = Thread { [self] in readLoop() }
        thread.start()
    }

    deinit {
        disconnect()
    }

    /// Leaves the room (the server powers this device off).
    public func disconnect() { closeSocket(descriptor) }

    /// Leaves the room (`DeviceRadio`).
    public func shutdown() { disconnect() }

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
        let setID = try request { request, writer in
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
        state.withLock { $0.scanHandler = handler }
        do {
            _ = try request { request, writer in
                writer.write(RadioWire.startScanning)
                writer.write(request)
            }
        } catch {
            state.withLock { $0.scanHandler = nil }
            throw error
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

    @discardableResult
    private func write(_ frame: [UInt8]) -> Bool {
        writeLock.withLock { _ in UnixSocket.writeFrame(frame, to: descriptor) }
    }

    /// Sends a request and waits for its result; the value is request-specific.
    private func request(_ build: (UInt32, inout ByteWriter) -> Void) throws(RadioError) -> UInt32 {
        let pending = PendingRequest()
        let request = state.withLock { state -> UInt32? in
            guard !state.serverGone else { return nil }
            let request = state.nextRequest
            state.nextRequest &+= 1
            state.pending[request] = pending
            return request
        }
        guard let request else { throw .adapterUnavailable(.serviceUnavailable) }
        var writer = ByteWriter()
        build(request, &writer)
        guard write(writer.bytes) else { throw .adapterUnavailable(.serviceUnavailable) }
        let timeout = DispatchTime.now() + .milliseconds(Int(Self.requestTimeout.milliseconds))
        guard pending.semaphore.wait(timeout: timeout) == .success, let result = pending.result.withLock({ $0 }) else {
            _ = state.withLock { $0.pending.removeValue(forKey: request) }
            throw .backend(name: "radio-server", message: "the simulated radio server did not answer in time")
        }
        return try result.get()
    }

    private func readLoop() {
        while let frame = UnixSocket.readFrame(from: descriptor, maximumSize: RadioServer.maximumFrameSize) {
            var reader = ByteReader(frame)
            do {
                try dispatch(&reader)
            } catch {
                break
            }
        }
        serverGone()
    }

    private func dispatch(_ reader: inout ByteReader) throws {
        switch try reader.readUInt8("op") {
        case RadioWire.result:
            let request = try reader.read(UInt32.self, "request")
            let value = try reader.read(UInt32.self, "value")
            let error = try RadioWire.readError(from: &reader)
            let pending = state.withLock { $0.pending.removeValue(forKey: request) }
            pending?.result.withLock { $0 = error.map { .failure($0) } ?? .success(value) }
            pending?.semaphore.signal()
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

    /// The server went away: every link is lost and every waiting request fails.
    private func serverGone() {
        let (pending, links, completions) = state.withLock { state in
            state.serverGone = true
            defer {
                state.pending = [:]
                state.links = [:]
                state.connectCompletions = [:]
            }
            return (Array(state.pending.values), Array(state.links.values), Array(state.connectCompletions.values))
        }
        for request in pending {
            request.result.withLock { $0 = .failure(.adapterUnavailable(.serviceUnavailable)) }
            request.semaphore.signal()
        }
        for link in links { realTime.execute { link.closed(.connectionLost) } }
        for completion in completions {
            realTime.execute { completion(.failure(.adapterUnavailable(.serviceUnavailable))) }
        }
    }
}

private final class PendingRequest: Sendable {
    let semaphore = DispatchSemaphore(value: 0)
    let result = Mutex<Result<UInt32, RadioError>?>(nil)
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
    /// Whether a radio server answers at `socketPath` (connects and hangs up at once).
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

/// Shuts the socket down both ways (outside the class, where `shutdown` is the C function).
private func closeSocket(_ descriptor: Int32) {
    shutdown(descriptor, Int32(SHUT_RDWR))
}
