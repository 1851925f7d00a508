import HorizonCore
import HorizonRadio

/// What a terminal advertises about its open session, in the manufacturer specific data of a
/// legacy (31-byte) advertisement: enough for a wallet to rank and route it before connecting.
///
/// Payload (20 bytes): magic "HZ", version, transaction type, session id (big endian), terminal
/// key id. The merchant's name is deliberately absent: a wallet shows only what the terminal's
/// signed credential says, never what an unauthenticated advertisement claims.
public struct HorizonAdvertisement: Hashable, Sendable {
    /// Bluetooth SIG company identifier 0xFFFF, reserved for testing. Change it here when a real
    /// identifier is assigned; scanners filter on it.
    public static let companyID: UInt16 = 0xFFFF
    /// "HZ": tells our payload apart from other devices that also use the test company id.
    public static let magic: [UInt8] = [0x48, 0x5A]
    /// 2 since the session protocol's version 2: an older wallet shows "update" instead of
    /// connecting and failing.
    public static let currentVersion: UInt8 = 2
    /// Magic, version, transaction type, session id, terminal key id.
    public static let payloadLength = 2 + 1 + 1 + 8 + TerminalKeyID.byteCount

    public let version: UInt8
    public let transactionType: TransactionType
    public let sessionID: SessionID
    public let terminalKeyID: TerminalKeyID

    /// `version` is a parameter only so tests can build advertisements of other versions.
    public init(
        version: UInt8 = currentVersion, transactionType: TransactionType, sessionID: SessionID,
        terminalKeyID: TerminalKeyID
    ) {
        self.version = version
        self.transactionType = transactionType
        self.sessionID = sessionID
        self.terminalKeyID = terminalKeyID
    }

    /// The manufacturer specific data after the company id, as BlueZ takes and reports it.
    public var manufacturerPayload: [UInt8] {
        var writer = ByteWriter(capacity: Self.payloadLength)
        writer.write(raw: Self.magic)
        writer.write(version)
        writer.write(transactionType.rawValue)
        sessionID.write(to: &writer)
        writer.write(raw: terminalKeyID.bytes)
        return writer.bytes
    }

    /// Flags plus our manufacturer data: 27 bytes, inside legacy advertising's 31.
    public func advertisingData() throws(RadioError) -> [UInt8] {
        try AdvertisingData(structures: [
            AdvertisingData.flagsStructure,
            AdvertisingData.manufacturerStructure(companyID: Self.companyID, payload: manufacturerPayload),
        ]).encoded()
    }

    /// Finds and parses our payload in raw advertising data.
    ///
    /// Every manufacturer structure with our company id is tried, since other test devices may
    /// use 0xFFFF too; the first that carries our magic decides.
    public static func parse(_ advertisingData: [UInt8]) -> AdvertisementParseResult {
        guard let data = AdvertisingData.parse(advertisingData) else { return .foreign }
        let manufacturerType = AdvertisingData.StructureType.manufacturerSpecificData
        for structure in data.structures where structure.type == manufacturerType {
            guard structure.data.count >= 2 else { continue }
            let id = UInt16(structure.data[0]) | UInt16(structure.data[1]) << 8
            guard id == companyID else { continue }
            let result = parse(manufacturerPayload: Array(structure.data.dropFirst(2)))
            if result != .foreign { return result }
        }
        return .foreign
    }

    /// Parses the manufacturer data BlueZ reports for our company id (without the id itself).
    public static func parse(manufacturerPayload payload: [UInt8]) -> AdvertisementParseResult {
        guard payload.count >= magic.count, Array(payload.prefix(magic.count)) == magic else { return .foreign }
        var reader = ByteReader(payload.dropFirst(magic.count))
        do throws(WireError) {
            let version = try reader.readUInt8("version")
            guard version == currentVersion else { return .unsupportedVersion(version) }
            let transactionType = try TransactionType.read(from: &reader, field: "transactionType")
            let sessionID = try SessionID.read(from: &reader, field: "sessionID")
            let terminalKeyID = try TerminalKeyID.read(from: &reader, field: "terminalKeyID")
            try reader.expectEnd()
            return .horizon(
                HorizonAdvertisement(
                    version: version, transactionType: transactionType, sessionID: sessionID,
                    terminalKeyID: terminalKeyID))
        } catch {
            return .malformed(error)
        }
    }
}

/// What a scanner made of one advertisement.
public enum AdvertisementParseResult: Equatable, Sendable {
    case horizon(HorizonAdvertisement)
    /// Not ours: no manufacturer data with our company id and magic. Scanners hear plenty of
    /// other devices, so this is not an error.
    case foreign
    /// Ours, from a newer (or older) protocol version: worth telling the user to update.
    case unsupportedVersion(UInt8)
    /// Ours, but broken: worth logging, never worth connecting to.
    case malformed(WireError)
}
