/// Bluetooth advertising data: a sequence of AD structures (length, type, data), as carried in a
/// legacy advertising PDU (Core Specification Vol 3, Part C, 11).
public struct AdvertisingData: Equatable, Sendable {
    /// Legacy advertising carries at most 31 bytes; more makes BlueZ switch to extended
    /// advertising, which many phones and dongles do not scan.
    public static let legacyMaximumLength = 31

    public struct Structure: Equatable, Sendable {
        public let type: UInt8
        public let data: [UInt8]
        public init(type: UInt8, data: [UInt8]) {
            self.type = type
            self.data = data
        }
    }

    public enum StructureType {
        public static let flags: UInt8 = 0x01
        public static let completeLocalName: UInt8 = 0x09
        public static let manufacturerSpecificData: UInt8 = 0xFF
    }

    /// LE General Discoverable Mode, BR/EDR not supported.
    public static let generalDiscoverableLEOnly: UInt8 = 0x06

    public var structures: [Structure]

    public init(structures: [Structure]) { self.structures = structures }

    /// The bytes as they go on air. Throws if they would not fit legacy advertising.
    public func encoded() throws(RadioError) -> [UInt8] {
        var bytes: [UInt8] = []
        for structure in structures {
            guard structure.data.count <= 254 else {
                throw .advertisementTooLarge(size: structure.data.count + 2, maximum: Self.legacyMaximumLength)
            }
            bytes.append(UInt8(structure.data.count + 1))
            bytes.append(structure.type)
            bytes.append(contentsOf: structure.data)
        }
        guard bytes.count <= Self.legacyMaximumLength else {
            throw .advertisementTooLarge(size: bytes.count, maximum: Self.legacyMaximumLength)
        }
        return bytes
    }

    /// Parses AD structures leniently, as scanners must: a zero length ends the data (the rest is
    /// padding), and a structure running past the end is dropped. Returns nil only when nothing
    /// parses at all.
    public static func parse(_ bytes: [UInt8]) -> AdvertisingData? {
        var structures: [Structure] = []
        var index = 0
        while index < bytes.count {
            let length = Int(bytes[index])
            if length == 0 { break }
            guard index + 1 + length <= bytes.count else { break }
            structures.append(Structure(type: bytes[index + 1], data: Array(bytes[(index + 2)..<(index + 1 + length)])))
            index += 1 + length
        }
        return structures.isEmpty && !bytes.isEmpty ? nil : AdvertisingData(structures: structures)
    }

    /// Manufacturer specific data by company identifier (the first two data bytes, little endian).
    public func manufacturerData(companyID: UInt16) -> [UInt8]? {
        for structure in structures where structure.type == StructureType.manufacturerSpecificData {
            guard structure.data.count >= 2 else { continue }
            let id = UInt16(structure.data[0]) | UInt16(structure.data[1]) << 8
            if id == companyID { return Array(structure.data.dropFirst(2)) }
        }
        return nil
    }

    /// A manufacturer specific data structure for `companyID` carrying `payload`.
    public static func manufacturerStructure(companyID: UInt16, payload: [UInt8]) -> Structure {
        Structure(
            type: StructureType.manufacturerSpecificData,
            data: [UInt8(companyID & 0xFF), UInt8(companyID >> 8)] + payload)
    }

    public static let flagsStructure = Structure(type: StructureType.flags, data: [generalDiscoverableLEOnly])
}
