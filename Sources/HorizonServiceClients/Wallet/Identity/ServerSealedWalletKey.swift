import Crypto
import CryptoExtras
import Foundation
import HorizonCore

/// scrypt's cost for a PIN, stored in the file so a later default still opens older files.
public struct PINStretchCost: Sendable, Equatable {
    /// log2 of scrypt's N.
    public var logN: UInt8
    public var blockSize: UInt8
    public var parallelism: UInt8

    public init(logN: UInt8, blockSize: UInt8 = 8, parallelism: UInt8 = 1) {
        self.logN = logN
        self.blockSize = blockSize
        self.parallelism = parallelism
    }

    /// N = 2^15, r = 8 (32 MiB, about 0.1 s a try).
    public static let standard = PINStretchCost(logN: 15)
    /// The costs a file may name (outside this range it is refused as damaged, not tried).
    static let accepted: ClosedRange<UInt8> = 10...22
}

/// Why the wallet's PIN could not be used or set, each with what to do.
public enum WalletPINError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A wrong PIN, counted by the server: `remainingBeforeBlock` more block it; the next try is
    /// taken after `retryAfter` s.
    case wrongPIN(remainingBeforeBlock: Int, retryAfter: Int64)
    /// The server takes no proof for `retryAfter` s (the reference's BlockedWithWrongPIN).
    case backingOff(retryAfter: Int64)
    /// Too many wrong PINs: the server releases nothing until the wallet is restored.
    case blocked
    /// The server has no PIN for this device (never set, deactivated, or the key was revoked).
    case notSet
    case unacceptablePIN(String)
    /// The key file is not one this program reads, or was altered.
    case damaged(String)
    /// The server could not be asked or refused the request.
    case server(String)

    public var description: String {
        switch self {
        case .wrongPIN(let remaining, let wait):
            "wrong PIN; \(remaining) more wrong \(remaining == 1 ? "PIN blocks" : "PINs block") the wallet"
                + (wait > 0 ? "; the next try is taken in \(wait) s (BlockedWithWrongPIN)" : "")
        case .backingOff(let wait):
            "blocked after wrong PINs (BlockedWithWrongPIN): the server takes the next try in \(wait) s"
        case .blocked:
            "the PIN is blocked after too many wrong tries, counted by the server: restore the wallet (horizon-wallet restore) to use it again"
        case .notSet:
            "the server has no PIN for this wallet's device (it was deactivated, or the wallet was restored elsewhere)"
        case .unacceptablePIN(let reason): reason
        case .damaged(let reason): "the wallet key file is damaged or was altered (\(reason))"
        case .server(let reason): reason
        }
    }
}

/// What the server keeps of a PIN (`PUT /v1/wallet/pin`).
public struct WalletPINSetup: Sendable, Equatable {
    /// The device key's public half: it signs the PIN proofs, so only a holder of this device's
    /// file can spend the wallet's tries.
    public let deviceKey: P256.Signing.PublicKey
    /// The public key derived from the PIN: a proof verifies under it.
    public let pinKey: P256.Signing.PublicKey
    /// Released only to a right proof; the key file cannot be opened without it.
    public let share: [UInt8]

    public static func == (a: WalletPINSetup, b: WalletPINSetup) -> Bool {
        a.deviceKey.x963Representation == b.deviceKey.x963Representation
            && a.pinKey.x963Representation == b.pinKey.x963Representation && a.share == b.share
    }
}

/// A wallet key whose PIN the server counts. The private key is encrypted (AES-256-GCM) under a
/// key derived from scrypt(PIN) *and* a 32-byte share only the server holds, so a copy of this
/// file cannot be opened, nor a PIN guess checked, without asking the server, which counts every
/// wrong guess. The file holds nothing derived from the PIN alone. To ask, the device proves the
/// PIN with a signature by a key derived from scrypt(PIN) (the server keeps its public half), in
/// a request signed by the file's device key, which is not the wallet's key (that is still
/// locked) and lets no one without the file spend the wallet's tries.
///
/// PEM-armoured binary, version 2:
///
///     "HZWK" | version 2 | kdf 1 (scrypt) | log2 N | r | p | salt (16) |
///     wallet public key (65) | device public key (65)       -- the header, GCM's associated data
///     device private key (32) | nonce (12) | ciphertext (32) | tag (16) | SHA-256 of all before (32)
public struct ServerSealedWalletKey: Sendable {
    public static let pemLabel = "HORIZON SERVER-COUNTED WALLET KEY"
    public static let version: UInt8 = 2
    static let magic = Array("HZWK".utf8)
    static let scryptID: UInt8 = 1

    public let cost: PINStretchCost
    let salt: [UInt8]
    public let walletPublicKey: [UInt8]
    /// Signs PIN proofs; kept in the clear (the file is the device's, 0600).
    public let deviceKey: P256.Signing.PrivateKey
    let nonce: [UInt8]
    let ciphertext: [UInt8]
    let tag: [UInt8]

    /// The PIN stretched once, for both the proof and the opening.
    public struct StretchedPIN: Sendable {
        let material: SymmetricKey
    }

    /// Encrypts `key` under `pin` and a fresh share, with a fresh device key; returns what the
    /// server must keep.
    public static func seal(_ key: P256.Signing.PrivateKey, pin: String, cost: PINStretchCost = .standard)
        throws(WalletPINError) -> (ServerSealedWalletKey, WalletPINSetup)
    {
        let pin = try validated(pin)
        let salt = random(16)
        let share = random(32)
        let device = P256.Signing.PrivateKey()
        let nonce = random(12)
        let walletPublic = Array(key.publicKey.x963Representation)
        let header = header(
            cost: cost, salt: salt, wallet: walletPublic, device: Array(device.publicKey.x963Representation))
        let stretched = try stretch(pin, salt: salt, cost: cost)
        do {
            let box = try AES.GCM.seal(
                key.rawRepresentation, using: sealingKey(stretched, share: share, header: header),
                nonce: try AES.GCM.Nonce(data: nonce), authenticating: header)
            let sealed = ServerSealedWalletKey(
                cost: cost, salt: salt, walletPublicKey: walletPublic, deviceKey: device, nonce: nonce,
                ciphertext: Array(box.ciphertext), tag: Array(box.tag))
            let setup = WalletPINSetup(
                deviceKey: device.publicKey, pinKey: try pinKey(stretched, header: header).publicKey, share: share)
            return (sealed, setup)
        } catch let error as WalletPINError {
            throw error
        } catch {
            throw .damaged("the key could not be encrypted: \(error)")
        }
    }

    /// scrypt over the PIN (NFC, so another keyboard's same PIN gives the same key).
    public func stretch(_ pin: String) throws(WalletPINError) -> StretchedPIN {
        try Self.stretch(pin, salt: salt, cost: cost)
    }

    /// The proof the server checks: the PIN key's signature over the proof's lines.
    public func proof(_ stretched: StretchedPIN, time: Int64, nonce: String) throws(WalletPINError) -> [UInt8] {
        let bytes = Self.proofBytes(
            deviceKey: Data(deviceKey.publicKey.x963Representation).base64EncodedString(), time: time, nonce: nonce)
        do { return Array(try Self.pinKey(stretched, header: header).signature(for: bytes).rawRepresentation) } catch {
            throw .damaged("the proof could not be signed: \(error)")
        }
    }

    /// The lines a PIN proof signs (the server checks the same).
    public static func proofBytes(deviceKey: String, time: Int64, nonce: String) -> [UInt8] {
        Array(["horizon/pin-proof/v1", deviceKey, String(time), nonce].joined(separator: "\n").utf8)
    }

    /// The wallet's key, with the share the server released to a right proof.
    public func open(_ stretched: StretchedPIN, share: [UInt8]) throws(WalletPINError) -> P256.Signing.PrivateKey {
        let raw: Data
        do {
            let box = try AES.GCM.SealedBox(nonce: try AES.GCM.Nonce(data: nonce), ciphertext: ciphertext, tag: tag)
            raw = try AES.GCM.open(
                box, using: Self.sealingKey(stretched, share: share, header: header), authenticating: header)
        } catch {
            throw .damaged("the server's share does not open it")
        }
        guard let key = try? P256.Signing.PrivateKey(rawRepresentation: raw),
            Array(key.publicKey.x963Representation) == walletPublicKey
        else { throw .damaged("the decrypted key does not match the public key it names") }
        return key
    }

    var header: [UInt8] {
        Self.header(
            cost: cost, salt: salt, wallet: walletPublicKey, device: Array(deviceKey.publicKey.x963Representation))
    }

    static func header(cost: PINStretchCost, salt: [UInt8], wallet: [UInt8], device: [UInt8]) -> [UInt8] {
        var writer = ByteWriter(capacity: 176)
        writer.write(raw: magic)
        writer.write(version)
        writer.write(scryptID)
        writer.write(cost.logN)
        writer.write(cost.blockSize)
        writer.write(cost.parallelism)
        writer.write(raw: salt)
        writer.write(raw: wallet)
        writer.write(raw: device)
        return writer.bytes
    }

    static func stretch(_ pin: String, salt: [UInt8], cost: PINStretchCost) throws(WalletPINError) -> StretchedPIN {
        guard PINStretchCost.accepted.contains(cost.logN), (1...16).contains(cost.blockSize),
            (1...4).contains(cost.parallelism)
        else { throw .damaged("scrypt cost out of range") }
        do {
            return StretchedPIN(
                material: try KDF.Scrypt.deriveKey(
                    from: Array(pin.precomposedStringWithCanonicalMapping.utf8), salt: salt, outputByteCount: 32,
                    rounds: 1 << Int(cost.logN), blockSize: Int(cost.blockSize), parallelism: Int(cost.parallelism)))
        } catch {
            throw .damaged("scrypt: \(error)")
        }
    }

    /// The PIN key: a P-256 key from the stretched PIN (bound to this file's header).
    static func pinKey(_ stretched: StretchedPIN, header: [UInt8]) throws(WalletPINError) -> P256.Signing.PrivateKey {
        let raw = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: stretched.material, salt: header, info: Array("horizon/pin-key/v1".utf8),
            outputByteCount: 32)
        // A scalar outside the group's order is about 2^-32 likely; the file is then unusable
        // with this PIN and `seal` is simply run again by the caller.
        do { return try raw.withUnsafeBytes { try P256.Signing.PrivateKey(rawRepresentation: Data($0)) } } catch {
            throw .unacceptablePIN("this PIN cannot be used with this key; choose another")
        }
    }

    static func sealingKey(_ stretched: StretchedPIN, share: [UInt8], header: [UInt8]) -> SymmetricKey {
        var material = stretched.material.withUnsafeBytes { Array($0) }
        material += share
        return HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: material), salt: header,
            info: Array("horizon/wallet-key/v2".utf8), outputByteCount: 32)
    }

    static func random(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// A PIN this library accepts: 6 to 64 characters, no control characters.
    public static func validated(_ pin: String) throws(WalletPINError) -> String {
        guard pin.count >= 6, pin.utf8.count <= 64 else {
            throw .unacceptablePIN("a PIN must have 6 to 64 characters")
        }
        guard !pin.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .unacceptablePIN("a PIN cannot contain control characters")
        }
        return pin
    }

    // MARK: Encoding

    public func encoded() -> [UInt8] {
        var bytes = header + Array(deviceKey.rawRepresentation) + nonce + ciphertext + tag
        bytes += Array(SHA256.hash(data: bytes))
        return bytes
    }

    public var pem: String {
        let body = Data(encoded()).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN \(Self.pemLabel)-----\n\(body)\n-----END \(Self.pemLabel)-----\n"
    }

    public static func isSealed(pem text: String) -> Bool { text.contains("-----BEGIN \(pemLabel)-----") }

    public static func decode(pem text: String) throws(WalletPINError) -> ServerSealedWalletKey {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let begin = lines.firstIndex(of: "-----BEGIN \(pemLabel)-----"),
            let end = lines.firstIndex(of: "-----END \(pemLabel)-----"), begin < end,
            let data = Data(base64Encoded: lines[(begin + 1)..<end].joined())
        else { throw .damaged("not a readable \(pemLabel) PEM block") }
        return try decode(Array(data))
    }

    public static func decode(_ bytes: [UInt8]) throws(WalletPINError) -> ServerSealedWalletKey {
        guard bytes.count > 32 else { throw .damaged("too short") }
        let body = Array(bytes.dropLast(32))
        guard Array(SHA256.hash(data: body)) == Array(bytes.suffix(32)) else {
            throw .damaged("its checksum does not match its contents")
        }
        var reader = ByteReader(body)
        do {
            guard try reader.readBytes(4, "magic") == magic else { throw WalletPINError.damaged("not a Horizon key") }
            let version = try reader.readUInt8("version")
            guard version == Self.version else { throw WalletPINError.damaged("format version \(version)") }
            guard try reader.readUInt8("kdf") == scryptID else { throw WalletPINError.damaged("unknown derivation") }
            let cost = PINStretchCost(
                logN: try reader.readUInt8("logN"), blockSize: try reader.readUInt8("r"),
                parallelism: try reader.readUInt8("p"))
            let salt = try reader.readBytes(16, "salt")
            let wallet = try reader.readBytes(65, "wallet key")
            let devicePublic = try reader.readBytes(65, "device key")
            let device = try P256.Signing.PrivateKey(rawRepresentation: try reader.readBytes(32, "device private key"))
            guard Array(device.publicKey.x963Representation) == devicePublic else {
                throw WalletPINError.damaged("the device key does not match its public half")
            }
            let key = ServerSealedWalletKey(
                cost: cost, salt: salt, walletPublicKey: wallet, deviceKey: device,
                nonce: try reader.readBytes(12, "nonce"), ciphertext: try reader.readBytes(32, "ciphertext"),
                tag: try reader.readBytes(16, "tag"))
            try reader.expectEnd()
            return key
        } catch let error as WalletPINError {
            throw error
        } catch {
            throw .damaged("\(error)")
        }
    }
}
