#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Bytes from the kernel's secure generator, up to 256 in one `getrandom` call.
///
/// `SystemRandomNumberGenerator` asks the kernel for eight bytes at a time, so 32 bytes cost
/// four system calls; a payment draws nonces and short-lived keys on both sides.
public enum SecureRandom {
    /// Fills `buffer`; falls back to `SystemRandomNumberGenerator` where `getentropy` is missing
    /// or fails, so the bytes are always secure.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        var filled = 0
        #if canImport(Glibc) || canImport(Musl)
            // `getentropy` is one `getrandom` call of at most 256 bytes.
            while filled < buffer.count {
                let chunk = min(256, buffer.count - filled)
                guard getentropy(base + filled, chunk) == 0 else { break }
                filled += chunk
            }
        #endif
        if filled < buffer.count {
            var generator = SystemRandomNumberGenerator()
            for index in filled..<buffer.count {
                buffer[index] = UInt8(truncatingIfNeeded: generator.next())
            }
        }
    }

    public static func bytes(_ count: Int) -> [UInt8] {
        let count = max(count, 0)
        return [UInt8](unsafeUninitializedCapacity: count) { storage, initialized in
            fill(UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: storage[0..<count])))
            initialized = count
        }
    }
}
