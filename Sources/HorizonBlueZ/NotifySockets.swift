import HorizonDBus
import Synchronization

/// The terminal's sockets that bluetoothd acquired with `AcquireNotify`, by the device it named:
/// each kept until that device disconnects, bluetoothd closes it, or bluetoothd acquires a new
/// one for the device (see `NotifySocket` for what bluetoothd does with what is written).
final class NotifySockets: Sendable {
    private struct State {
        var sockets: [String: NotifySocket] = [:]
        /// Notifications written to a socket rather than sent as a Value change.
        var sent = 0
    }

    private let state = Mutex(State())

    var isEmpty: Bool { state.withLock { $0.sockets.isEmpty } }
    var devices: Set<String> { state.withLock { Set($0.sockets.keys) } }
    var sentCount: Int { state.withLock { $0.sent } }

    /// A socket pair for `device`'s notifications: ours kept (replacing one acquired earlier for
    /// the device, closed once released), bluetoothd's end returned.
    func acquire(device: String, mtu: Int) throws(DBusError) -> DBusFileDescriptor {
        let (ours, theirs) = try NotifySocket.pair(device: device, mtu: mtu)
        state.withLock { _ = $0.sockets.updateValue(ours, forKey: device) }
        return theirs
    }

    enum Delivery: Equatable {
        case sent
        /// The device has no socket: the notification is for a Value change.
        case noSocket
        /// bluetoothd closed the device's socket (now forgotten): Value changes from now on.
        case closed
        /// bluetoothd did not take it (errno).
        case failed(Int32)
    }

    /// Writes `bytes` to `device`'s socket, if it has one.
    func send(_ bytes: [UInt8], to device: String) -> Delivery {
        guard let socket = state.withLock({ $0.sockets[device] }) else { return .noSocket }
        switch socket.send(bytes) {
        case .sent:
            state.withLock { $0.sent += 1 }
            return .sent
        case .closed:
            state.withLock { state in
                if state.sockets[device] === socket { state.sockets[device] = nil }
            }
            return .closed
        case .failed(let error):
            return .failed(error)
        }
    }

    /// Closes `device`'s socket (it disconnected).
    func remove(_ device: String) { _ = state.withLock { $0.sockets.removeValue(forKey: device) } }

    func removeAll() { state.withLock { $0.sockets.removeAll() } }
}
