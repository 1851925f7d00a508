// SOCK_SEQPACKET and SOCK_CLOEXEC come from <bits/socket_type.h>, which Glibc's module does not
// export to every file; the C shim's <sys/socket.h> does.
import CBluetooth
import HorizonDBus

#if canImport(Glibc)
    import Glibc
#endif

/// Our end of a socket pair handed to bluetoothd in answer to `AcquireNotify`: each datagram
/// written to it is sent as one notification of the characteristic.
///
/// bluetoothd calls `AcquireNotify` when a central enables notifications (writes the CCC) and
/// names that central in the `device` option. Since BlueZ 5.69 (commit 8eb1dee87, "gatt: Fix not
/// establishing a socket for each device") it does so for every subscribing device and sends what
/// is read from a device's socket to that device only (`sock_io_read` → `send_notification_to_device`
/// in src/gatt-database.c). Up to 5.68 (Debian 12 ships 5.66) it acquires one socket per
/// characteristic, for the first subscriber, and sends what it reads to every subscribed device
/// (`send_notification_to_devices`), exactly as it does with `Value` changes; link tags keep the
/// frames apart either way.
final class NotifySocket: Sendable {
    enum Outcome: Equatable {
        case sent
        /// bluetoothd closed its end (the device unsubscribed or disconnected, or bluetoothd quit).
        case closed
        /// bluetoothd did not read the socket in time, or the send failed otherwise (errno).
        case failed(Int32)
    }

    let device: String
    let mtu: Int
    /// Owned here and closed when the last reference goes: a sender holds the object while it
    /// writes, so the descriptor number cannot be closed and reused under it.
    private let descriptor: DBusFileDescriptor

    /// A socket pair: ours, and bluetoothd's end to hand over (closed here once the reply has
    /// carried a duplicate of it). SOCK_SEQPACKET keeps each write one notification, as BlueZ's
    /// own AcquireNotify clients do.
    static func pair(device: String, mtu: Int) throws(DBusError) -> (ours: NotifySocket, theirs: DBusFileDescriptor) {
        var ends: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue | SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &ends) == 0 else {
            // NotSupported rather than Failed: bluetoothd then falls back to StartNotify (and our
            // notifications go out as Value changes), while after Failed it does nothing more.
            throw BlueZError.reply(.notSupported, "no socket for notifications: \(String(cString: strerror(errno)))")
        }
        return (
            NotifySocket(device: device, mtu: mtu, descriptor: DBusFileDescriptor(owning: ends[0])),
            DBusFileDescriptor(owning: ends[1])
        )
    }

    private init(device: String, mtu: Int, descriptor: DBusFileDescriptor) {
        self.device = device
        self.mtu = mtu
        self.descriptor = descriptor
    }

    /// Writes `bytes` as one datagram. A full socket (bluetoothd reads each datagram as it comes,
    /// so this means it is stuck) is waited on for at most `patience`, never forever.
    func send(_ bytes: [UInt8], patience: Duration = .seconds(2)) -> Outcome {
        guard let fd = descriptor.rawValue else { return .closed }
        let clock = ContinuousClock()
        let deadline = clock.now + patience
        while true {
            // MSG_NOSIGNAL: a closed peer is an EPIPE to handle, not a SIGPIPE that ends the process.
            let written = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
            }
            if written == bytes.count { return .sent }
            let error = written < 0 ? errno : EMSGSIZE
            switch error {
            case EINTR:
                continue
            case EPIPE, ECONNRESET, ENOTCONN:
                return .closed
            case EAGAIN, EWOULDBLOCK:
                let left = deadline - clock.now
                guard left > .zero else { return .failed(EAGAIN) }
                var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&poller, 1, Int32(min(60_000, max(1, (left / .milliseconds(1)).rounded(.up)))))
                if poller.revents & Int16(POLLHUP | POLLERR) != 0 { return .closed }
            default:
                return .failed(error)
            }
        }
    }
}
