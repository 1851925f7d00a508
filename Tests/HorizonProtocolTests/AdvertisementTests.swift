import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonTestSupport
import Testing

@Suite("Advertisement payload", .offTheCooperativePool)
struct AdvertisementTests {
    let f: Fixtures
    let advertisement: HorizonAdvertisement

    init() throws {
        f = try Fixtures()
        advertisement = HorizonAdvertisement(
            transactionType: .payment, sessionID: f.sessionID, terminalKeyID: f.terminalKeyID)
    }

    @Test func exactBytes() throws {
        let expected: [UInt8] = [
            0x02, 0x01, 0x06,  // flags: LE general discoverable, no BR/EDR
            0x17, 0xFF, 0xFF, 0xFF,  // manufacturer data, 23 bytes, company 0xFFFF (little endian)
            0x48, 0x5A,  // "HZ"
            0x02,  // version
            0x01,  // payment
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // session id, big endian
            0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7,  // terminal key id
        ]
        let bytes = try advertisement.advertisingData()
        #expect(bytes == expected)
        #expect(bytes.count == 27)
        #expect(bytes.count <= AdvertisingData.legacyMaximumLength)
        #expect(advertisement.manufacturerPayload == Array(expected.dropFirst(7)))
        #expect(HorizonAdvertisement.payloadLength == 20)
    }

    @Test("round trip", arguments: TransactionType.allCases)
    func roundTrip(type: TransactionType) throws {
        var random = SeededRandom(seed: UInt64(type.rawValue))
        let ad = HorizonAdvertisement(
            transactionType: type, sessionID: SessionID.random(using: &random),
            terminalKeyID: try TerminalKeyID(bytes: counting(8, from: type.rawValue)))
        #expect(HorizonAdvertisement.parse(try ad.advertisingData()) == .horizon(ad))
        #expect(HorizonAdvertisement.parse(manufacturerPayload: ad.manufacturerPayload) == .horizon(ad))
    }

    @Test func foreignAdvertisements() {
        let iBeacon: [UInt8] =
            [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15] + counting(16, from: 0xE2)
            + [0x00, 0x01, 0x00, 0x02, 0xC5]
        #expect(iBeacon.count == 30)
        #expect(HorizonAdvertisement.parse(iBeacon) == .foreign)
        #expect(HorizonAdvertisement.parse([]) == .foreign)
        #expect(HorizonAdvertisement.parse([0x05, 0x09] + Array("Horz".utf8)) == .foreign)
        #expect(HorizonAdvertisement.parse([0x00, 0x00, 0x00]) == .foreign, "padding only")
        // Our company id, other magic; and our company id with no payload at all.
        #expect(
            HorizonAdvertisement.parse([0x02, 0x01, 0x06, 0x07, 0xFF, 0xFF, 0xFF, 0x41, 0x42, 0x01, 0x01]) == .foreign)
        #expect(HorizonAdvertisement.parse([0x03, 0xFF, 0xFF, 0xFF]) == .foreign)
        #expect(HorizonAdvertisement.parse([0x02, 0xFF, 0xFF]) == .foreign)
        // Our payload under another company id.
        #expect(
            HorizonAdvertisement.parse(
                [0x02, 0x01, 0x06, 0x17, 0xFF, 0x4C, 0x00] + advertisement.manufacturerPayload) == .foreign)
        #expect(HorizonAdvertisement.parse(manufacturerPayload: []) == .foreign)
        #expect(HorizonAdvertisement.parse(manufacturerPayload: [0x48]) == .foreign)
        #expect(HorizonAdvertisement.parse(manufacturerPayload: [0x5A, 0x48, 0x01]) == .foreign)

        var random = SeededRandom(seed: 7)
        for _ in 0..<200 {
            let bytes = (0..<Int.random(in: 0...31, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
            #expect(HorizonAdvertisement.parse(bytes) == .foreign)
        }
    }

    @Test func ourPayloadAfterAnotherTestDeviceUsingTheSameCompanyID() {
        let other: [UInt8] = [0x05, 0xFF, 0xFF, 0xFF, 0x41, 0x42]
        let ours: [UInt8] = [0x17, 0xFF, 0xFF, 0xFF] + advertisement.manufacturerPayload
        #expect(HorizonAdvertisement.parse(other + ours) == .horizon(advertisement))
    }

    @Test func otherVersions() throws {
        for version: UInt8 in [0, 1, 3, 0xFF] {
            let ad = HorizonAdvertisement(
                version: version, transactionType: .payment, sessionID: f.sessionID, terminalKeyID: f.terminalKeyID)
            #expect(HorizonAdvertisement.parse(try ad.advertisingData()) == .unsupportedVersion(version))
        }
        // A newer version may change the layout: only magic and version are read.
        #expect(HorizonAdvertisement.parse(manufacturerPayload: [0x48, 0x5A, 0x03]) == .unsupportedVersion(3))
        #expect(
            HorizonAdvertisement.parse(manufacturerPayload: [0x48, 0x5A, 0x03, 0x00, 0x00]) == .unsupportedVersion(3))
    }

    @Test func malformedPayloads() {
        let payload = advertisement.manufacturerPayload
        func parse(_ bytes: [UInt8]) -> AdvertisementParseResult {
            HorizonAdvertisement.parse(manufacturerPayload: bytes)
        }
        #expect(parse([0x48, 0x5A]) == .malformed(.truncated(field: "version")))
        #expect(parse(Array(payload.prefix(3))) == .malformed(.truncated(field: "transactionType")))
        #expect(parse(Array(payload.prefix(10))) == .malformed(.truncated(field: "sessionID")))
        #expect(parse(Array(payload.dropLast())) == .malformed(.truncated(field: "terminalKeyID")))
        #expect(parse(payload + [0x00]) == .malformed(.trailingBytes(count: 1)))
        var badType = payload
        badType[3] = 0
        #expect(
            parse(badType)
                == .malformed(.invalidValue(field: "transactionType", reason: "unknown transaction type 0")))
        badType[3] = 9
        #expect(
            parse(badType)
                == .malformed(.invalidValue(field: "transactionType", reason: "unknown transaction type 9")))
        var zeroSession = payload
        zeroSession.replaceSubrange(4..<12, with: [UInt8](repeating: 0, count: 8))
        #expect(parse(zeroSession) == .malformed(.invalidValue(field: "sessionID", reason: "must not be zero")))

        // The same through full advertising data.
        let short: [UInt8] = [0x02, 0x01, 0x06, 0x16, 0xFF, 0xFF, 0xFF] + Array(payload.dropLast())
        #expect(HorizonAdvertisement.parse(short) == .malformed(.truncated(field: "terminalKeyID")))
    }
}
