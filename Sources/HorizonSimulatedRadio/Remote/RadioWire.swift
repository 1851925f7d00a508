import HorizonCore
import HorizonRadio

/// The messages between a radio server and its client devices. Every frame is one operation
/// tag followed by its fields, written with `ByteWriter` (big endian, 16-bit length prefixes).
enum RadioWire {
    // Client to server.
    static let hello: UInt8 = 0x01
    static let startAdvertising: UInt8 = 0x02
    static let stopAdvertising: UInt8 = 0x03
    static let startScanning: UInt8 = 0x04
    static let stopScanning: UInt8 = 0x05
    static let connect: UInt8 = 0x06
    static let send: UInt8 = 0x07
    static let close: UInt8 = 0x08
    static let move: UInt8 = 0x09
    // Server to client.
    static let welcome: UInt8 = 0x81
    static let result: UInt8 = 0x82
    static let connectResult: UInt8 = 0x83
    static let sighting: UInt8 = 0x84
    static let incomingLink: UInt8 = 0x85
    static let received: UInt8 = 0x86
    static let linkClosed: UInt8 = 0x87

    static func write(_ error: RadioError?, to writer: inout ByteWriter) {
        switch error {
        case nil: writer.write(UInt8(0))
        case .adapterUnavailable(let availability)?:
            writer.write(UInt8(1))
            writer.write(availabilityCode(availability))
        case .advertisementTooLarge(let size, let maximum)?:
            writer.write(UInt8(2))
            writer.write(UInt32(size))
            writer.write(UInt32(maximum))
        case .payloadTooLarge(let size, let maximum)?:
            writer.write(UInt8(3))
            writer.write(UInt32(size))
            writer.write(UInt32(maximum))
        case .invalidConfiguration(let reason)?:
            writer.write(UInt8(4))
            writer.write(string: reason)
        case .peerNotFound(let peer)?:
            writer.write(UInt8(5))
            writer.write(string: peer.rawValue)
        case .connectionTimedOut(let peer)?:
            writer.write(UInt8(6))
            writer.write(string: peer.rawValue)
        case .linkClosed?: writer.write(UInt8(7))
        case .alreadyScanning?: writer.write(UInt8(8))
        case .backend(let name, let message)?:
            writer.write(UInt8(9))
            writer.write(string: name)
            writer.write(string: message)
        }
    }

    static func readError(from reader: inout ByteReader) throws(WireError) -> RadioError? {
        switch try reader.readUInt8("error kind") {
        case 0: return nil
        case 1: return .adapterUnavailable(availability(try reader.readUInt8("availability")))
        case 2:
            return .advertisementTooLarge(
                size: Int(try reader.read(UInt32.self, "size")), maximum: Int(try reader.read(UInt32.self, "maximum")))
        case 3:
            return .payloadTooLarge(
                size: Int(try reader.read(UInt32.self, "size")), maximum: Int(try reader.read(UInt32.self, "maximum")))
        case 4: return .invalidConfiguration(try reader.readString("reason", maximumBytes: 1024))
        case 5: return .peerNotFound(PeerAddress(try reader.readString("peer", maximumBytes: 64)))
        case 6: return .connectionTimedOut(PeerAddress(try reader.readString("peer", maximumBytes: 64)))
        case 7: return .linkClosed
        case 8: return .alreadyScanning
        case 9:
            return .backend(
                name: try reader.readString("name", maximumBytes: 256),
                message: try reader.readString("message", maximumBytes: 1024))
        case let kind: throw .unknownType(kind)
        }
    }

    static func availabilityCode(_ availability: AdapterAvailability) -> UInt8 {
        switch availability {
        case .poweredOn: 0
        case .poweredOff: 1
        case .unauthorized: 2
        case .unsupported: 3
        case .serviceUnavailable: 4
        }
    }

    static func availability(_ code: UInt8) -> AdapterAvailability {
        switch code {
        case 0: .poweredOn
        case 1: .poweredOff
        case 2: .unauthorized
        case 3: .unsupported
        default: .serviceUnavailable
        }
    }

    static func linkCloseCode(_ reason: LinkCloseReason) -> UInt8 {
        switch reason {
        case .closedLocally: 0
        case .closedByPeer: 1
        case .connectionLost: 2
        }
    }

    static func linkCloseReason(_ code: UInt8) -> LinkCloseReason {
        switch code {
        case 0: .closedLocally
        case 1: .closedByPeer
        default: .connectionLost
        }
    }
}
