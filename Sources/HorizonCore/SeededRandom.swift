/// A small, fast, seedable generator (xoshiro256**, seeded through SplitMix64).
///
/// The simulated radio draws all its noise, loss and timing jitter from generators like this,
/// each derived from the simulation seed and a stable label, so one seed replays one run exactly.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    public init(seed: UInt64) {
        var splitMix = seed
        func next() -> UInt64 {
            splitMix &+= 0x9E37_79B9_7F4A_7C15
            var z = splitMix
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        state = (next(), next(), next(), next())
    }

    /// A generator for one component, independent of how many numbers other components draw.
    public init(seed: UInt64, label: String) {
        // FNV-1a over the label: stable across runs and platforms, unlike `Hasher`.
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in label.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        self.init(seed: seed ^ hash)
    }

    public mutating func next() -> UInt64 {
        let result = rotateLeft(state.1 &* 5, 7) &* 9
        let t = state.1 << 17
        state.2 ^= state.0
        state.3 ^= state.1
        state.1 ^= state.2
        state.0 ^= state.3
        state.2 ^= t
        state.3 = rotateLeft(state.3, 45)
        return result
    }

    private func rotateLeft(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }

    /// A uniform value in [0, 1).
    public mutating func nextUnit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// A normally distributed value (Box-Muller).
    public mutating func nextGaussian(mean: Double = 0, standardDeviation: Double = 1) -> Double {
        let u1 = max(nextUnit(), .leastNonzeroMagnitude)
        let u2 = nextUnit()
        return mean + standardDeviation * (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
    }

    /// True with probability `probability`.
    public mutating func chance(_ probability: Double) -> Bool { probability > 0 && nextUnit() < probability }
}

extension RandomNumberGenerator {
    /// `count` random bytes, eight from each 64-bit draw.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count {
            var word = next()
            for _ in 0..<min(8, count - bytes.count) {
                bytes.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return bytes
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#else
    import Foundation
#endif
