import Crypto
import Foundation
import HorizonCore

/// Which record counters have been accepted, so a replayed or too-old record is refused.
///
/// With `size` 1 (the default) only a counter above the highest accepted one passes: strictly
/// increasing counters, the rule for an ordered link. A larger window (up to 64) also accepts a
/// record that arrives late but unseen, as IPsec's anti-replay window does (RFC 4303, 3.4.3).
public struct ReplayWindow: Sendable, Equatable {
    public let size: Int
    public private(set) var highest: UInt64 = 0
    private var seen: UInt64 = 0  // bit i: counter (highest - i) accepted

    public init(size: Int = 1) {
        self.size = min(max(size, 1), 64)
    }

    /// Throws if `counter` must be refused. Does not record it: call `accept` after the record
    /// authenticates, so forged records cannot move the window.
    public func check(_ counter: UInt64) throws(SecureChannelError) {
        guard counter > 0 else { throw .outsideReplayWindow(counter: counter, highest: highest) }
        guard counter <= highest else { return }
        let offset = highest - counter
        guard offset < UInt64(size) else { throw .outsideReplayWindow(counter: counter, highest: highest) }
        if seen & (1 << offset) != 0 { throw .replayed(counter: counter) }
    }

    public mutating func accept(_ counter: UInt64) {
        if counter > highest {
            let shift = counter - highest
            seen = shift >= 64 ? 0 : seen << shift
            seen |= 1
            highest = counter
        } else {
            seen |= 1 << (highest - counter)
        }
    }
}

/// An established channel: AES-256-GCM, one key per direction, 64-bit counter nonces.
///
///     record = 0x03 | counter (8, big endian) | ciphertext | tag (16)
///
/// The nonce is four zero bytes and the counter; the header is the additional authenticated
/// data. Each direction has its own key, so the same counter in both directions never reuses a
/// nonce under one key.
public struct SecureChannel: Sendable {
    public static let headerSize = 9
    public static let tagSize = 16
    /// Bytes a record adds to its plaintext.
    public static let overhead = headerSize + tagSize

    public let transcriptHash: [UInt8]
    /// The code both ends show, from the connection's shared secret (see `ConfirmationCode`).
    public let confirmationCode: ConfirmationCode
    /// The context the wallet bound into the handshake (the session id).
    public let context: [UInt8]
    /// The terminal's verified credential (on the wallet's side; nil on the terminal's).
    public let terminalCredential: TerminalCredential?
    /// The trust anchor that vouched for the terminal (on the wallet's side; nil on the terminal's).
    public let vouchingAnchor: TrustAnchor?
    private let sendKey: SymmetricKey
    private let receiveKey: SymmetricKey
    private var sendCounter: UInt64 = 0
    public private(set) var replayWindow: ReplayWindow

    init(
        sendKey: SymmetricKey, receiveKey: SymmetricKey, transcriptHash: [UInt8], confirmationCode: ConfirmationCode,
        context: [UInt8], terminalCredential: TerminalCredential?, vouchingAnchor: TrustAnchor?,
        replayWindowSize: Int = 1
    ) {
        self.confirmationCode = confirmationCode
        self.vouchingAnchor = vouchingAnchor
        self.sendKey = sendKey
        self.receiveKey = receiveKey
        self.transcriptHash = transcriptHash
        self.context = context
        self.terminalCredential = terminalCredential
        self.replayWindow = ReplayWindow(size: replayWindowSize)
    }

    /// The same channel with a wider replay window (for links that may reorder).
    public func withReplayWindow(size: Int) -> SecureChannel {
        var copy = self
        copy.replayWindow = ReplayWindow(size: size)
        return copy
    }

    public mutating func seal(_ plaintext: [UInt8]) throws(SecureChannelError) -> [UInt8] {
        guard sendCounter < UInt64.max else { throw .counterExhausted }
        sendCounter += 1
        let header = Self.header(counter: sendCounter)
        do {
            let box = try AES.GCM.seal(
                plaintext, using: sendKey, nonce: try Self.nonce(counter: sendCounter), authenticating: header)
            return header + Array(box.ciphertext) + Array(box.tag)
        } catch {
            throw .cryptoFailure("sealing failed")
        }
    }

    public mutating func open(_ record: [UInt8]) throws(SecureChannelError) -> [UInt8] {
        guard record.count >= Self.overhead else {
            throw .malformed(.truncated(field: record.count < Self.headerSize ? "record header" : "record tag"))
        }
        guard record[0] == SecureFrameType.record else {
            throw .unexpectedMessage(expected: "record", received: record[0])
        }
        var counter: UInt64 = 0
        for byte in record[1..<Self.headerSize] { counter = counter << 8 | UInt64(byte) }
        try replayWindow.check(counter)
        let plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(
                nonce: try Self.nonce(counter: counter),
                ciphertext: record[Self.headerSize..<(record.count - Self.tagSize)],
                tag: record[(record.count - Self.tagSize)...])
            plaintext = try AES.GCM.open(box, using: receiveKey, authenticating: record[..<Self.headerSize])
        } catch {
            throw .authenticationFailed
        }
        replayWindow.accept(counter)
        return Array(plaintext)
    }

    private static func header(counter: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: headerSize)
        writer.write(SecureFrameType.record)
        writer.write(counter)
        return writer.bytes
    }

    private static func nonce(counter: UInt64) throws -> AES.GCM.Nonce {
        var writer = ByteWriter(capacity: 12)
        writer.write(UInt32(0))
        writer.write(counter)
        return try AES.GCM.Nonce(data: writer.bytes)
    }
}
