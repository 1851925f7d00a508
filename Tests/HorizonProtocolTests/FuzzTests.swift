import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonTestSupport
import Testing

/// Feeds every decoder random and mutated input. A decoder may accept or refuse, but it must
/// return: a crash, a trap or a hang fails the whole run. The seed is fixed so a failure replays.
@Suite("Decoder fuzzing", .offTheCooperativePool)
struct FuzzTests {
    static let inputsPerDecoder = 100_000
    static let seed: UInt64 = 0x485A_F022

    @Test func sessionMessageDecoder() throws {
        let corpus = try Fixtures().samples().map(\.encoded) + Self.extraMessages()
        var fuzzer = Fuzzer(seed: Self.seed, label: "session", corpus: corpus)
        let outcomes = fuzzer.run(count: Self.inputsPerDecoder) { input in
            do throws(WireError) {
                let message = try SessionMessage.decode(input)
                // The format has one encoding per message, so whatever decodes re-encodes to itself.
                #expect(message.encoded() == input)
                return true
            } catch {
                // The typed throw guarantees a WireError; its description must be printable.
                #expect(!error.description.isEmpty)
                return false
            }
        }
        outcomes.check()
    }

    @Test func advertisementParser() throws {
        let corpus = try Self.advertisements().map { try $0.advertisingData() } + Self.foreignAdvertisements
        var fuzzer = Fuzzer(seed: Self.seed, label: "advertisement", corpus: corpus)
        let outcomes = fuzzer.run(count: Self.inputsPerDecoder) { input in
            if case .horizon = HorizonAdvertisement.parse(input) { return true }
            return false
        }
        outcomes.check()
    }

    @Test func manufacturerPayloadParser() throws {
        let corpus = try Self.advertisements().map(\.manufacturerPayload) + [[0x48, 0x5A, 0x02], [0x41, 0x42]]
        var fuzzer = Fuzzer(seed: Self.seed, label: "payload", corpus: corpus)
        let outcomes = fuzzer.run(count: Self.inputsPerDecoder) { input in
            if case .horizon(let ad) = HorizonAdvertisement.parse(manufacturerPayload: input) {
                #expect(ad.manufacturerPayload == input)
                return true
            }
            return false
        }
        outcomes.check()
    }

    @Test func advertisingDataParser() throws {
        let corpus = try Self.advertisements().map { try $0.advertisingData() } + Self.foreignAdvertisements
        var fuzzer = Fuzzer(seed: Self.seed, label: "ad structures", corpus: corpus)
        let outcomes = fuzzer.run(count: Self.inputsPerDecoder) { input in
            guard let data = AdvertisingData.parse(input) else { return false }
            let size = data.structures.reduce(0) { $0 + 2 + $1.data.count }
            #expect(size <= input.count)
            return true
        }
        outcomes.check()
    }

    static func extraMessages() throws -> [[UInt8]] {
        let f = try Fixtures()
        return [
            SessionMessage.offer(try f.offer(registerUser: "Kasse 3 — Jörg")).encoded(),
            SessionMessage.redeem(try f.redeem(item: "")).encoded(),
            SessionMessage.proxyRequest(try ProxyEnvelope(requestID: 1, sealed: counting(300, from: 0))).encoded(),
        ]
    }

    static func advertisements() throws -> [HorizonAdvertisement] {
        let f = try Fixtures()
        return TransactionType.allCases.map {
            HorizonAdvertisement(transactionType: $0, sessionID: f.sessionID, terminalKeyID: f.terminalKeyID)
        }
    }

    static let foreignAdvertisements: [[UInt8]] = [
        [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15] + counting(16, from: 0xE2) + [0, 1, 0, 2, 0xC5],
        [0x02, 0x01, 0x06, 0x05, 0x09] + Array("Horz".utf8),
    ]
}

/// How many inputs a decoder accepted and refused, separately for the two halves.
struct Outcomes {
    var randomAccepted = 0
    var randomRefused = 0
    var mutatedAccepted = 0
    var mutatedRefused = 0

    var total: Int { randomAccepted + randomRefused + mutatedAccepted + mutatedRefused }

    /// Both results among the mutations prove the mutations reached past the first check.
    func check(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(total >= FuzzTests.inputsPerDecoder, sourceLocation: sourceLocation)
        #expect(mutatedAccepted > 0, "\(self)", sourceLocation: sourceLocation)
        #expect(mutatedRefused > 0, "\(self)", sourceLocation: sourceLocation)
    }
}

/// Random inputs and mutations of valid encodings, reproducible from a seed.
struct Fuzzer {
    var random: SeededRandom
    let corpus: [[UInt8]]

    init(seed: UInt64, label: String, corpus: [[UInt8]]) {
        random = SeededRandom(seed: seed, label: label)
        self.corpus = corpus
    }

    /// Runs `decode` on `count` inputs, half random and half mutated; it returns whether the
    /// input was accepted.
    mutating func run(count: Int, _ decode: ([UInt8]) -> Bool) -> Outcomes {
        var outcomes = Outcomes()
        for index in 0..<count {
            if index % 2 == 0 {
                if decode(randomInput()) { outcomes.randomAccepted += 1 } else { outcomes.randomRefused += 1 }
            } else {
                if decode(mutatedInput()) { outcomes.mutatedAccepted += 1 } else { outcomes.mutatedRefused += 1 }
            }
        }
        return outcomes
    }

    mutating func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }

    mutating func randomBytes(_ count: Int) -> [UInt8] { random.bytes(count) }

    mutating func randomInput() -> [UInt8] { randomBytes(below(601)) }

    mutating func pick() -> [UInt8] { corpus[below(corpus.count)] }

    /// One to four mutations of a valid encoding.
    mutating func mutatedInput() -> [UInt8] {
        var bytes = pick()
        for _ in 0...below(4) {
            switch below(8) {
            case 0, 1:  // flip one bit
                guard !bytes.isEmpty else { continue }
                bytes[below(bytes.count)] ^= 1 << UInt8(below(8))
            case 2:  // replace one byte, often with a boundary value
                guard !bytes.isEmpty else { continue }
                let values: [UInt8] = [0x00, 0x01, 0x7F, 0x80, 0xFF]
                bytes[below(bytes.count)] = below(2) == 0 ? values[below(values.count)] : UInt8(below(256))
            case 3:  // truncate
                bytes.removeLast(below(bytes.count + 1))
            case 4:  // extend
                bytes += randomBytes(1 + below(16))
            case 5:  // splice with another valid encoding
                let other = pick()
                let cut = below(bytes.count + 1)
                let otherCut = below(other.count + 1)
                bytes = Array(bytes.prefix(cut)) + Array(other.dropFirst(otherCut))
            case 6:  // insert a byte
                bytes.insert(UInt8(below(256)), at: below(bytes.count + 1))
            default:  // delete a byte
                guard !bytes.isEmpty else { continue }
                bytes.remove(at: below(bytes.count))
            }
        }
        return bytes
    }
}
