import HorizonCore
import HorizonProtocol
import HorizonRadio

/// What a scanner parses from every advertisement it hears, from anyone: the AD structures, the
/// manufacturer payload, and `HorizonAdvertisement`. The whole input is the advertising data
/// (and, separately, a manufacturer payload as BlueZ reports it).
///
/// Checks: parsed structures never claim more bytes than arrived, re-encode to exactly the bytes
/// they came from, and parse again the same; an advertisement that parses re-encodes to data that
/// parses to the same advertisement; a payload that parses is exactly the payload it re-encodes to.
enum AdvertisementFuzz {
    static func run(_ input: [UInt8]) {
        checkStructures(input)
        switch HorizonAdvertisement.parse(input) {
        case .horizon(let advertisement):
            guard let data = try? advertisement.advertisingData(),
                data.count <= AdvertisingData.legacyMaximumLength,
                HorizonAdvertisement.parse(data) == .horizon(advertisement)
            else { finding("a parsed advertisement does not survive re-encoding: \(input.hexString)") }
        case .malformed(let error): _ = error.description
        case .foreign, .unsupportedVersion: break
        }
        if case .horizon(let advertisement) = HorizonAdvertisement.parse(manufacturerPayload: input),
            advertisement.manufacturerPayload != input
        {
            finding("the manufacturer payload \(input.hexString) parses but re-encodes differently")
        }
    }

    static func checkStructures(_ input: [UInt8]) {
        guard let data = AdvertisingData.parse(input) else {
            guard !input.isEmpty else { finding("empty advertising data was refused") }
            return
        }
        var consumed = 0
        for structure in data.structures {
            guard structure.data.count <= 254 else { finding("an AD structure of \(structure.data.count) bytes") }
            consumed += 2 + structure.data.count
        }
        guard consumed <= input.count else { finding("AD structures claim \(consumed) of \(input.count) bytes") }
        _ = data.manufacturerData(companyID: HorizonAdvertisement.companyID)
        // Re-encoding is only defined within legacy advertising's 31 bytes.
        guard consumed <= AdvertisingData.legacyMaximumLength else { return }
        guard let encoded = try? data.encoded() else { finding("parsed AD structures do not encode again") }
        guard encoded == Array(input[..<consumed]), AdvertisingData.parse(encoded) == data else {
            finding("AD structures from \(input.hexString) re-encode as \(encoded.hexString)")
        }
    }

    static func seeds() -> [[UInt8]] {
        let world = FuzzWorld.shared
        var seeds: [[UInt8]] = []
        for type in TransactionType.allCases {
            let advertisement = HorizonAdvertisement(
                transactionType: type, sessionID: world.sessionID, terminalKeyID: world.terminalKeyID)
            if let data = try? advertisement.advertisingData() { seeds.append(data) }
            seeds.append(advertisement.manufacturerPayload)
        }
        let other = HorizonAdvertisement(
            version: 2, transactionType: .payment, sessionID: world.sessionID, terminalKeyID: world.terminalKeyID)
        if let data = try? other.advertisingData() { seeds.append(data) }
        // Someone else's advertisement: a name, another company's data, padding.
        seeds.append([0x02, 0x01, 0x06, 0x05, 0x09, 0x48, 0x6F, 0x6D, 0x65, 0x04, 0xFF, 0x4C, 0x00, 0x10, 0, 0, 0])
        seeds.append([0x03, 0xFF, 0xFF, 0xFF, 0x03, 0xFF, 0x48, 0x5A])
        return seeds
    }
}
