import HorizonCore
import HorizonRadio

/// The terminal's GATT service: one primary service with a characteristic the wallet writes link
/// frames to and one the terminal notifies link frames on.
public enum HorizonGATTService {
    public static let service = "4a5a0001-6f72-697a-6f6e-2d4c696e7578"
    /// Wallet to terminal: written with ATT Write Request, so each write is acknowledged.
    public static let walletToTerminal = "4a5a0002-6f72-697a-6f6e-2d4c696e7578"
    /// Terminal to wallet: notifications, each carrying the addressed wallet's link tag.
    public static let terminalToWallet = "4a5a0003-6f72-697a-6f6e-2d4c696e7578"
}

/// Addresses a terminal's notifications to one wallet.
///
/// BlueZ sends a notification from a local characteristic to every central subscribed to it, so
/// with several wallets connected each would see the others' frames. Each wallet therefore picks
/// a random tag and registers it with its first write; the terminal prefixes every notification
/// for that wallet with the tag, and a wallet drops notifications bearing another. The tag is
/// routing, not security: frames are authenticated and encrypted by the secure channel above.
public struct LinkTag: Hashable, Sendable, CustomStringConvertible {
    public static let length = 4
    public let bytes: [UInt8]

    public init?(_ bytes: [UInt8]) {
        guard bytes.count == Self.length else { return nil }
        self.bytes = bytes
    }

    public static func random() -> LinkTag {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next() as UInt32
        return LinkTag(withUnsafeBytes(of: value.littleEndian) { Array($0) })
            ?? LinkTag(unchecked: [0, 0, 0, 1])
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    public var description: String { bytes.hexString }
}

/// The bytes the BlueZ radio adds around link frames on the two characteristics.
public enum LinkFraming {
    /// "HZL" and a version: a wallet's first write on a connection, carrying its tag.
    static let registrationMagic: [UInt8] = [0x48, 0x5A, 0x4C, 0x01]
    public static let registrationLength = registrationMagic.count + LinkTag.length

    public static func registration(_ tag: LinkTag) -> [UInt8] { registrationMagic + tag.bytes }

    /// The tag of a registration write, or nil when `bytes` is not one (a foreign central's write).
    public static func parseRegistration(_ bytes: [UInt8]) -> LinkTag? {
        guard bytes.count == registrationLength, bytes.starts(with: registrationMagic) else { return nil }
        return LinkTag(Array(bytes.suffix(LinkTag.length)))
    }

    public static func notification(_ payload: [UInt8], to tag: LinkTag) -> [UInt8] { tag.bytes + payload }

    /// The payload of a notification addressed to `tag`, or nil when it is for another wallet.
    public static func payload(ofNotification bytes: [UInt8], for tag: LinkTag) -> [UInt8]? {
        guard bytes.count >= LinkTag.length, bytes.starts(with: tag.bytes) else { return nil }
        return Array(bytes.dropFirst(LinkTag.length))
    }
}
