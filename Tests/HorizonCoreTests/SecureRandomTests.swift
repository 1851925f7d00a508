import HorizonCore
import Testing

@Suite("SecureRandom")
struct SecureRandomTests {
    @Test func fillsEveryByteOfEachLength() {
        // Lengths around the 8-byte words and the 256-byte single-call limit. A byte that was never
        // written stays 0xAA; over 64 draws each position is that value by chance with
        // probability 256⁻⁶⁴.
        for length in [1, 7, 8, 9, 32, 255, 256, 257, 1000] {
            var seen = [Bool](repeating: false, count: length)
            for _ in 0..<64 {
                var bytes = [UInt8](repeating: 0xAA, count: length)
                bytes.withUnsafeMutableBytes { SecureRandom.fill($0) }
                for (index, byte) in bytes.enumerated() where byte != 0xAA { seen[index] = true }
            }
            #expect(seen.allSatisfy { $0 }, "length \(length)")
        }
    }

    @Test func bytesHaveTheLengthAskedAndDoNotRepeat() {
        #expect(SecureRandom.bytes(0).isEmpty)
        #expect(SecureRandom.bytes(-1).isEmpty)
        #expect(SecureRandom.bytes(17).count == 17)
        let draws = Set((0..<256).map { _ in SecureRandom.bytes(32) })
        #expect(draws.count == 256)
        // Roughly half the bits set over 256 × 32 bytes (65,536 bits; 6 standard deviations ≈ 768).
        let ones = draws.reduce(0) { total, draw in total + draw.reduce(0) { $0 + $1.nonzeroBitCount } }
        #expect(abs(ones - 32_768) < 768)
    }
}
