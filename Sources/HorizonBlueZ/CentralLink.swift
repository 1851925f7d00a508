import Dispatch
import HorizonCore
import HorizonDBus
import HorizonRadio
import Logging
import Synchronization

/// How a wallet's link receives the terminal's notifications.
public enum BlueZNotificationPath: String, Sendable, CaseIterable {
    /// `AcquireNotify`: bluetoothd writes each notification to a socket (`StartNotify` and
    /// `Value` signals when bluetoothd refuses it).
    case acquiredSocket = "socket"
    /// `StartNotify`, each notification a `Value` change signalled through dbus-daemon.
    case valueChanges = "signals"
}

/// The wallet's link to one terminal: frames leave as acknowledged writes, one at a time and in
/// order (bluetoothd refuses a second write request on a characteristic while one is under way:
/// `InProgress`), and arrive as notifications bearing this link's tag.
final class CentralLink: ByteLink, Sendable {
    private struct State {
        /// Frames waiting for the write in flight to be acknowledged.
        var queued: [[UInt8]] = []
        var writing = false
        var pendingWrites: Int { queued.count + (writing ? 1 : 0) }
        var disconnectWhenDrained = false
        var disconnected = false
        var tasks: [Task<Void, Never>] = []
        var reader: NotifyReader?
    }

    let peer: PeerAddress
    let attMTU: Int
    let devicePath: String
    /// The terminal's wallet-to-terminal characteristic.
    let write: GattCharacteristic1
    let tag: LinkTag
    let inbox: LinkInbox
    private let scheduler: any Scheduler
    private weak let central: BlueZCentral?
    private let logger: Logger
    private let state = Mutex(State())
    /// How long a close waits for writes still in flight before disconnecting anyway.
    static let drainLimit: Duration = .seconds(2)

    init(
        central: BlueZCentral, peer: PeerAddress, devicePath: String, write: GattCharacteristic1, tag: LinkTag,
        attMTU: Int,
        scheduler: any Scheduler
    ) {
        self.central = central
        logger = central.logger
        self.peer = peer
        self.devicePath = devicePath
        self.write = write
        self.tag = tag
        self.attMTU = min(517, max(23, attMTU))
        self.scheduler = scheduler
        inbox = LinkInbox(scheduler: scheduler)
    }

    func follow(notifications: AsyncStream<DBusSignal>, deviceChanges: AsyncStream<DBusSignal>) {
        let tag = tag
        let inbox = inbox
        let receiving = Task {
            for await signal in notifications {
                guard let value = GattCharacteristic1.Properties(changedIn: signal)?.value,
                    let payload = LinkFraming.payload(ofNotification: value, for: tag)
                else { continue }
                inbox.receive(payload)
            }
        }
        state.withLock { $0.tasks = [receiving, watchForDisconnect(deviceChanges)] }
    }

    /// Ends the link as closed by the peer when bluetoothd reports the device disconnected.
    private func watchForDisconnect(_ deviceChanges: AsyncStream<DBusSignal>) -> Task<Void, Never> {
        Task { [weak self] in
            for await signal in deviceChanges where Device1.Properties(changedIn: signal)?.connected == false {
                self?.ended(.closedByPeer)
                return
            }
        }
    }

    /// Notifications from a socket bluetoothd acquired for this link (see `NotifyReader`).
    func follow(socket descriptor: Int32, deviceChanges: AsyncStream<DBusSignal>) {
        let tag = tag
        let inbox = inbox
        let scheduler = scheduler
        let reader = NotifyReader(
            taking: descriptor, mtu: attMTU, queue: Self.notifyQueue,
            received: { value in
                guard let payload = LinkFraming.payload(ofNotification: value, for: tag) else { return }
                inbox.receive(payload)
            },
            ended: { [weak self] in
                // Usually the device went: let its Connected signal say so (the peer's close),
                // and end the link here only if it does not come.
                scheduler.schedule(after: Self.socketEndGrace) { [weak self] in self?.ended(.connectionLost) }
                self?.logger.trace("link: bluetoothd closed the notify socket")
            })
        let watching = watchForDisconnect(deviceChanges)
        state.withLock {
            $0.tasks = [watching]
            $0.reader = reader
        }
    }

    /// Every link's notify socket is read on this queue; a frame's handling hops to the scheduler.
    static let notifyQueue = DispatchQueue(label: "horizon.bluez.notify")
    static let socketEndGrace: Duration = .milliseconds(500)

    func setHandler(_ handler: ByteLinkHandler) { inbox.setHandler(handler) }

    func send(_ payload: [UInt8]) throws(RadioError) {
        guard !inbox.isClosed, central != nil else { throw .linkClosed }
        guard payload.count <= maximumPayloadSize else {
            throw .payloadTooLarge(size: payload.count, maximum: maximumPayloadSize)
        }
        let startNow = state.withLock { state -> Bool in
            guard !state.writing else {
                state.queued.append(payload)
                return false
            }
            state.writing = true
            return true
        }
        if startNow { writeNow(payload) }
    }

    /// One acknowledged write, answered later (so that writes leave in the order they were made).
    private func writeNow(_ payload: [UInt8]) {
        write.writeValue(payload, type: .request).whenAnswered(within: .seconds(10)) { [weak self] result in
            guard let self else { return }
            if case .failure(let error) = result {
                self.logger.trace("link: write to \(self.write.path) failed: \(error)")
                state.withLock { state in
                    state.writing = false
                    state.queued.removeAll()
                }
                ended(.connectionLost)
                return
            }
            let (next, drained) = state.withLock { state -> ([UInt8]?, Bool) in
                guard !state.queued.isEmpty else {
                    state.writing = false
                    return (nil, state.disconnectWhenDrained)
                }
                return (state.queued.removeFirst(), false)
            }
            if let next, self.central != nil {
                writeNow(next)
            } else if drained {
                disconnectNow()
            }
        }
    }

    /// Closes the link; the connection goes once the writes already sent are acknowledged.
    func close() {
        guard inbox.close(.closedLocally) else { return }
        logger.trace("link: closed by this side; disconnecting \(devicePath)")
        stopFollowing()
        let drained = state.withLock { state -> Bool in
            state.disconnectWhenDrained = true
            return state.pendingWrites == 0
        }
        if drained {
            disconnectNow()
        } else {
            scheduler.schedule(after: Self.drainLimit) { [weak self] in self?.disconnectNow() }
        }
    }

    /// A link that never reached its owner (the connect failed after it was made).
    func abandon() {
        inbox.close(.closedLocally)
        stopFollowing()
    }

    private func ended(_ reason: LinkCloseReason) {
        guard inbox.close(reason) else { return }
        logger.trace("link: to \(devicePath) ended (\(reason))")
        stopFollowing()
        disconnectNow()
    }

    private func stopFollowing() {
        let (tasks, reader) = state.withLock { state in
            defer {
                state.tasks.removeAll()
                state.reader = nil
            }
            return (state.tasks, state.reader)
        }
        for task in tasks { task.cancel() }
        reader?.cancel()
    }

    private func disconnectNow() {
        let first = state.withLock { state -> Bool in
            defer { state.disconnected = true }
            return !state.disconnected
        }
        if first { central?.disconnect(devicePath) }
    }
}
