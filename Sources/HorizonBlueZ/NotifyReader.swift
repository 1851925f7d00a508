// SOCK_SEQPACKET's datagrams are read with recv(2); the C shim's <sys/socket.h> exports what
// Glibc's module does not to every file (see NotifySocket.swift).
import CBluetooth
import Dispatch
import HorizonDBus

#if canImport(Glibc)
    import Glibc
#endif

/// The wallet's end of a socket bluetoothd handed over in answer to `AcquireNotify` on the
/// terminal's notify characteristic: each notification arrives as one datagram, read here as soon
/// as it lands instead of travelling as a `PropertiesChanged` signal through dbus-daemon and the
/// signal dispatch (doc/gatt-api.txt, `AcquireNotify`; `notify_io` in bluetoothd's
/// src/gatt-client.c). Closing it releases the subscription (bluetoothd sees the socket hang up).
final class NotifyReader: Sendable {
    /// Dispatch sources are thread-safe; Dispatch does not mark them Sendable.
    private nonisolated(unsafe) let source: any DispatchSourceRead

    /// Starts reading `descriptor` (taken over: closed when the reader is cancelled) on `queue`.
    /// `received` gets each datagram; `ended` once, when bluetoothd closes its end or a read fails.
    init(
        taking descriptor: Int32, mtu: Int, queue: DispatchQueue, received: @escaping @Sendable ([UInt8]) -> Void,
        ended: @escaping @Sendable () -> Void
    ) {
        // A datagram longer than the buffer would be cut: room for the largest notification an
        // ATT MTU of 517 allows, and never less than the MTU bluetoothd gave.
        let capacity = max(mtu, 517) + 16
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler {
            var buffer = [UInt8](repeating: 0, count: capacity)
            while true {
                let count = buffer.withUnsafeMutableBytes {
                    recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
                }
                if count > 0 {
                    received(Array(buffer.prefix(count)))
                    continue
                }
                if count < 0, errno == EINTR { continue }
                if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
                // 0: bluetoothd closed its end (unsubscribed, disconnected, or quit); or an error.
                source.cancel()
                ended()
                return
            }
        }
        source.setCancelHandler { _ = Glibc.close(descriptor) }
        self.source = source
        source.resume()
    }

    /// Stops reading and closes the socket (bluetoothd then drops the subscription).
    func cancel() { source.cancel() }
}
