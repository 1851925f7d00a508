import Crypto
import HorizonCore

/// The HPKE algorithms of Oblivious HTTP. Horizon's gateway uses DHKEM(P-256, HKDF-SHA256) with
/// HKDF-SHA256 and AES-128-GCM; X25519 is here so the RFC 9458 Appendix A example runs through
/// the same code.
public enum ObliviousHTTPKEM: UInt16, Sendable, Equatable {
    case p256HKDFSHA256 = 0x0010
    case x25519HKDFSHA256 = 0x0020

    /// Bytes of a public key and of an encapsulated key (Npk = Nenc).
    var publicKeyBytes: Int {
        switch self {
        case .p256HKDFSHA256: 65
        case .x25519HKDFSHA256: 32
        }
    }

    var hpke: HPKE.KEM {
        switch self {
        case .p256HKDFSHA256: .P256_HKDF_SHA256
        case .x25519HKDFSHA256: .Curve25519_HKDF_SHA256
        }
    }
}

/// One (KDF, AEAD) pair a key configuration offers.
public struct ObliviousHTTPSymmetricAlgorithm: Sendable, Equatable {
    public var kdf: UInt16
    public var aead: UInt16

    public init(kdf: UInt16, aead: UInt16) {
        self.kdf = kdf
        self.aead = aead
    }

    /// HKDF-SHA256 with AES-128-GCM: the only pair this implementation seals with.
    public static let hkdfSHA256AES128GCM = ObliviousHTTPSymmetricAlgorithm(kdf: 0x0001, aead: 0x0001)
}

/// A gateway's key configuration (RFC 9458 section 3.1): what a client needs to seal a request
/// to the gateway. Decoded strictly: one configuration, nothing after it.
public struct ObliviousHTTPKeyConfiguration: Sendable, Equatable {
    public let keyID: UInt8
    public let kem: ObliviousHTTPKEM
    public let publicKey: [UInt8]
    public let symmetricAlgorithms: [ObliviousHTTPSymmetricAlgorithm]

    /// A configuration for a P-256 gateway key offering HKDF-SHA256 and AES-128-GCM.
    public init(keyID: UInt8, publicKey: P256.KeyAgreement.PublicKey) {
        self.keyID = keyID
        kem = .p256HKDFSHA256
        self.publicKey = Array(publicKey.x963Representation)
        symmetricAlgorithms = [.hkdfSHA256AES128GCM]
    }

    init(
        keyID: UInt8, kem: ObliviousHTTPKEM, publicKey: [UInt8], symmetricAlgorithms: [ObliviousHTTPSymmetricAlgorithm]
    ) {
        self.keyID = keyID
        self.kem = kem
        self.publicKey = publicKey
        self.symmetricAlgorithms = symmetricAlgorithms
    }

    public func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(keyID)
        writer.write(kem.rawValue)
        writer.write(raw: publicKey)
        writer.write(UInt16(symmetricAlgorithms.count * 4))
        for algorithm in symmetricAlgorithms {
            writer.write(algorithm.kdf)
            writer.write(algorithm.aead)
        }
        return writer.bytes
    }

    public init(decoding bytes: [UInt8]) throws(ObliviousHTTPError) {
        var reader = ByteReader(bytes)
        do {
            keyID = try reader.readUInt8("key id")
            let kemID = try reader.read(UInt16.self, "KEM id")
            guard let kem = ObliviousHTTPKEM(rawValue: kemID) else {
                throw ObliviousHTTPError.unsupportedKeyConfiguration(
                    "KEM 0x\(String(kemID, radix: 16)) is not DHKEM(P-256) or DHKEM(X25519)")
            }
            self.kem = kem
            publicKey = try reader.readBytes(kem.publicKeyBytes, "public key")
            let length = Int(try reader.read(UInt16.self, "symmetric algorithms length"))
            guard length >= 4, length % 4 == 0 else {
                throw ObliviousHTTPError.malformedKeyConfiguration(
                    "the symmetric algorithms length \(length) is not a positive multiple of 4")
            }
            var algorithms: [ObliviousHTTPSymmetricAlgorithm] = []
            for _ in 0..<(length / 4) {
                algorithms.append(
                    .init(kdf: try reader.read(UInt16.self, "KDF id"), aead: try reader.read(UInt16.self, "AEAD id")))
            }
            symmetricAlgorithms = algorithms
            try reader.expectEnd()
        } catch let error as ObliviousHTTPError {
            throw error
        } catch {
            throw .malformedKeyConfiguration("\(error)")
        }
    }

    /// The HPKE public key, after checking that this configuration offers what we seal with.
    func recipientKey() throws(ObliviousHTTPError) -> GatewayPublicKey {
        guard symmetricAlgorithms.contains(.hkdfSHA256AES128GCM) else {
            throw .unsupportedKeyConfiguration("it does not offer HKDF-SHA256 with AES-128-GCM")
        }
        do {
            switch kem {
            case .p256HKDFSHA256: return .p256(try P256.KeyAgreement.PublicKey(x963Representation: publicKey))
            case .x25519HKDFSHA256:
                return .x25519(try Curve25519.KeyAgreement.PublicKey(rawRepresentation: publicKey))
            }
        } catch {
            throw .unsupportedKeyConfiguration("its public key is not a valid point")
        }
    }
}

enum GatewayPublicKey {
    case p256(P256.KeyAgreement.PublicKey)
    case x25519(Curve25519.KeyAgreement.PublicKey)
}
