import Synchronization

#if canImport(Glibc)
    import Glibc

    /// `close(2)`, reachable from types that have a `close()` method of their own.
    func closeDescriptor(_ descriptor: Int32) { _ = Glibc.close(descriptor) }
#elseif canImport(Musl)
    import Musl

    /// `close(2)`, reachable from types that have a `close()` method of their own.
    func closeDescriptor(_ descriptor: Int32) { _ = Musl.close(descriptor) }
#endif

/// A Unix file descriptor carried by a D-Bus message (signature `h`), owned by this object.
///
/// D-Bus passes descriptors as copies: appending one to a message duplicates it (the original
/// stays ours), and every descriptor read out of a received message is a fresh duplicate that
/// nobody else closes. So the value type holds its descriptor in a class that closes it when the
/// last reference goes away, and `take()` hands it over to code that manages it itself (a GATT
/// `AcquireWrite` socket read by the link layer, for example). That way a received descriptor is
/// never leaked, whether or not the receiver looked at it.
public final class DBusFileDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The descriptor, or -1 once taken or closed.
    private let descriptor: Mutex<Int32>

    /// Takes ownership of `descriptor`: it is closed when this object is released, unless taken.
    public init(owning descriptor: Int32) {
        self.descriptor = Mutex(descriptor)
    }

    /// A duplicate of `descriptor` (close-on-exec); the caller keeps and still closes the original.
    public static func duplicating(_ descriptor: Int32) throws(DBusError) -> DBusFileDescriptor {
        let copy = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else {
            throw .invalidArguments(
                "cannot duplicate file descriptor \(descriptor): \(String(cString: strerror(errno)))")
        }
        return DBusFileDescriptor(owning: copy)
    }

    deinit { close() }

    /// The descriptor, still owned by this object (valid while it lives); nil once taken or closed.
    public var rawValue: Int32? {
        let value = descriptor.withLock { $0 }
        return value >= 0 ? value : nil
    }

    /// Hands the descriptor over: the caller now owns and must close it. Nil if already taken or closed.
    public func take() -> Int32? {
        let value = descriptor.withLock { state -> Int32 in
            let value = state
            state = -1
            return value
        }
        return value >= 0 ? value : nil
    }

    /// Closes the descriptor now, rather than when the object is released.
    public func close() {
        if let value = take() { closeDescriptor(value) }
    }

    public static func == (lhs: DBusFileDescriptor, rhs: DBusFileDescriptor) -> Bool { lhs === rhs }

    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    public var description: String { rawValue.map { "fd \($0)" } ?? "fd (closed)" }
}
