import HorizonCore
import HorizonTestSupport
import Testing

@Suite("SeededRandom", .offTheCooperativePool)
struct SeededRandomTests {
    private func draw(_ generator: inout SeededRandom, _ count: Int) -> [UInt64] {
        (0..<count).map { _ in generator.next() }
    }

    @Test("pins xoshiro256** seeded through SplitMix64, so runs replay on every platform")
    func knownOutputs() {
        var zero = SeededRandom(seed: 0)
        #expect(draw(&zero, 3) == [0x99EC_5F36_CB75_F2B4, 0xBF6E_1F78_4956_452A, 0x1A5F_849D_4933_E6E0])
        var fortyTwo = SeededRandom(seed: 42)
        #expect(draw(&fortyTwo, 3) == [0x1578_0B2E_0C2E_C716, 0x6104_D986_6D11_3A7E, 0xAE17_5332_39E4_99A1])
        // A labelled generator is the plain one seeded with seed ^ FNV-1a(label).
        var labelled = SeededRandom(seed: 42, label: "rssi/0/1")
        #expect(draw(&labelled, 2) == [0xB170_A2CE_E1DA_6BB2, 0xB77B_2A46_B7CC_CAB3])
        var equivalent = SeededRandom(seed: 42 ^ 0xBAAE_59C1_29E5_8749)
        #expect(draw(&equivalent, 2) == [0xB170_A2CE_E1DA_6BB2, 0xB77B_2A46_B7CC_CAB3])
    }

    @Test func sameSeedAndLabelGiveTheSameSequence() {
        var a = SeededRandom(seed: 7, label: "loss/3/1")
        var b = SeededRandom(seed: 7, label: "loss/3/1")
        #expect(draw(&a, 1000) == draw(&b, 1000))
        var c = SeededRandom(seed: 99)
        var d = SeededRandom(seed: 99)
        #expect(draw(&c, 100) == draw(&d, 100))
    }

    @Test func differentLabelsOrSeedsGiveDifferentSequences() {
        var a = SeededRandom(seed: 7, label: "rssi/0/1")
        var b = SeededRandom(seed: 7, label: "rssi/1/0")
        var c = SeededRandom(seed: 8, label: "rssi/0/1")
        var d = SeededRandom(seed: 7)
        var e = SeededRandom(seed: 7, label: "")
        let sequences = [draw(&a, 16), draw(&b, 16), draw(&c, 16), draw(&d, 16), draw(&e, 16)]
        #expect(Set(sequences).count == 5)
        // Not merely different: no value of one appears in another.
        #expect(Set(sequences[0]).isDisjoint(with: sequences[1]))
    }

    @Test func labelledGeneratorsAreIndependentOfOthersDraws() {
        var first = SeededRandom(seed: 5, label: "a")
        var busy = SeededRandom(seed: 5, label: "b")
        _ = draw(&busy, 500)
        var again = SeededRandom(seed: 5, label: "a")
        #expect(draw(&first, 10) == draw(&again, 10))
    }

    @Test func nextUnitStaysInHalfOpenUnitInterval() {
        var random = SeededRandom(seed: 1234)
        var minimum = 1.0
        var maximum = 0.0
        var sum = 0.0
        let count = 10_000
        for _ in 0..<count {
            let value = random.nextUnit()
            #expect(value >= 0 && value < 1)
            minimum = min(minimum, value)
            maximum = max(maximum, value)
            sum += value
        }
        #expect(minimum < 0.001)
        #expect(maximum > 0.999)
        #expect(abs(sum / Double(count) - 0.5) < 0.01)
    }

    @Test func gaussianHasTheRequestedMeanAndDeviation() {
        var random = SeededRandom(seed: 2024, label: "gauss")
        let count = 10_000
        let samples = (0..<count).map { _ in random.nextGaussian(mean: -59, standardDeviation: 2) }
        let mean = samples.reduce(0, +) / Double(count)
        let variance = samples.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(count - 1)
        let deviation = variance.squareRoot()
        // Standard error of the mean is 0.02; of the deviation about 0.014.
        #expect(abs(mean - -59) < 0.1)
        #expect(abs(deviation - 2) < 0.08)
        #expect(samples.allSatisfy { $0.isFinite })
        // About 68% within one deviation, 95% within two.
        let withinOne = samples.filter { abs($0 + 59) < 2 }.count
        let withinTwo = samples.filter { abs($0 + 59) < 4 }.count
        #expect((6600...7050).contains(withinOne))
        #expect((9400...9600).contains(withinTwo))
    }

    @Test func standardGaussianDefaults() {
        var random = SeededRandom(seed: 3)
        let count = 10_000
        let samples = (0..<count).map { _ in random.nextGaussian() }
        let mean = samples.reduce(0, +) / Double(count)
        let variance = samples.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(count - 1)
        #expect(abs(mean) < 0.05)
        #expect(abs(variance.squareRoot() - 1) < 0.04)
    }

    @Test func chance() {
        var random = SeededRandom(seed: 11)
        #expect((0..<1000).allSatisfy { _ in !random.chance(0) })
        #expect((0..<1000).allSatisfy { _ in !random.chance(-1) })
        #expect((0..<1000).allSatisfy { _ in random.chance(1) })
        let hits = (0..<10_000).filter { _ in random.chance(0.25) }.count
        #expect((2350...2650).contains(hits))
    }

    @Test func worksAsARandomNumberGenerator() {
        var a = SeededRandom(seed: 77)
        var b = SeededRandom(seed: 77)
        let first = (0..<20).map { _ in Int.random(in: 0..<1000, using: &a) }
        let second = (0..<20).map { _ in Int.random(in: 0..<1000, using: &b) }
        #expect(first == second)
        #expect(first.allSatisfy { (0..<1000).contains($0) })
        #expect(Set(first).count > 15)
    }
}
