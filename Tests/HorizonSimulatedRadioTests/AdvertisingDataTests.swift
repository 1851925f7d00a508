import HorizonRadio
import Testing

@Suite("AdvertisingData codec")
struct AdvertisingDataTests {
    @Test func encodesStructures() throws {
        let data = AdvertisingData(structures: [
            AdvertisingData.flagsStructure,
            AdvertisingData.manufacturerStructure(companyID: 0x1234, payload: [0xAA, 0xBB]),
            AdvertisingData.Structure(type: AdvertisingData.StructureType.completeLocalName, data: Array("Hz".utf8)),
        ])
        #expect(
            try data.encoded() == [0x02, 0x01, 0x06, 0x05, 0xFF, 0x34, 0x12, 0xAA, 0xBB, 0x03, 0x09, 0x48, 0x7A])
        #expect(AdvertisingData.parse(try data.encoded()) == data)
        #expect(data.manufacturerData(companyID: 0x1234) == [0xAA, 0xBB])
        #expect(data.manufacturerData(companyID: 0x3412) == nil)
    }

    @Test func enforcesTheLegacyLimit() throws {
        // 3 bytes of flags + 2 + 26 = 31: fits exactly.
        let fits = AdvertisingData(structures: [
            AdvertisingData.flagsStructure,
            AdvertisingData.manufacturerStructure(companyID: 0xFFFF, payload: [UInt8](repeating: 1, count: 24)),
        ])
        #expect(try fits.encoded().count == 31)
        let tooBig = AdvertisingData(structures: [
            AdvertisingData.flagsStructure,
            AdvertisingData.manufacturerStructure(companyID: 0xFFFF, payload: [UInt8](repeating: 1, count: 25)),
        ])
        #expect(throws: RadioError.advertisementTooLarge(size: 32, maximum: 31)) { try tooBig.encoded() }
        let hugeStructure = AdvertisingData(structures: [
            AdvertisingData.Structure(type: 0xFF, data: [UInt8](repeating: 0, count: 255))
        ])
        #expect(throws: RadioError.advertisementTooLarge(size: 257, maximum: 31)) { try hugeStructure.encoded() }
        #expect(try AdvertisingData(structures: []).encoded() == [])
    }

    @Test func parsesLeniently() {
        // A zero length ends the data; the rest is padding.
        #expect(
            AdvertisingData.parse([0x02, 0x01, 0x06, 0x00, 0xFF, 0xFF])
                == AdvertisingData(structures: [AdvertisingData.flagsStructure]))
        // A structure running past the end is dropped.
        #expect(
            AdvertisingData.parse([0x02, 0x01, 0x06, 0x05, 0xFF, 0x01])
                == AdvertisingData(structures: [AdvertisingData.flagsStructure]))
        // Nothing at all parses: nil; no bytes at all: empty data.
        #expect(AdvertisingData.parse([0x05, 0xFF, 0x01]) == nil)
        #expect(AdvertisingData.parse([0x00, 0x00]) == nil)
        #expect(AdvertisingData.parse([]) == AdvertisingData(structures: []))
        // A one-byte structure (length 1) carries a type and no data.
        #expect(AdvertisingData.parse([0x01, 0x09]) == AdvertisingData(structures: [.init(type: 0x09, data: [])]))
    }

    @Test func manufacturerDataSkipsShortAndForeignStructures() {
        let data = AdvertisingData(structures: [
            AdvertisingData.Structure(type: 0xFF, data: [0x01]),
            AdvertisingData.manufacturerStructure(companyID: 0x004C, payload: [0x02]),
            AdvertisingData.manufacturerStructure(companyID: 0xFFFF, payload: []),
        ])
        #expect(data.manufacturerData(companyID: 0x004C) == [0x02])
        #expect(data.manufacturerData(companyID: 0xFFFF) == [])
        #expect(data.manufacturerData(companyID: 0x0001) == nil)
    }
}
