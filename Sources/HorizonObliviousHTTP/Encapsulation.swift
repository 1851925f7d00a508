import Crypto
import Foundation

/// Oblivious HTTP (RFC 9458): a request sealed with HPKE (RFC 9180) to the gateway's key, and a
/// response sealed with a key derived from that request's HPKE context, so only the client
/// that sealed the request can open its response. Messages are binary HTTP (RFC 9292), padded
/// so that a sealed message is one of a few sizes: a relay sees a size bucket and timing only.
public enum ObliviousHTTP {
    static let requestLabel = Array("message/bhttp request".utf8)
    static let responseLabel = Array("message/bhttp response".utf8)
    /// The sizes a sealed request or response is padded to.
    public static let sizeBuckets = [256, 512, 1024, 2048, 4096]
    /// The most sealed bytes a relay carries (the radio's `MessageLimits.sealedPayload`).
    public static let maximumSealedBytes = 4096
    /// Nk and Nn of AES-128-GCM, and the response nonce's length, max(Nn, Nk) (section 4.4).
    static let keyBytes = 16
    static let nonceBytes = 12
    static let responseNonceBytes = 16
    static let tagBytes = 16
    static let headerBytes = 7

    /// The smallest bucket `sealedBytes` fits in.
    public static func bucket(for sealedBytes: Int) throws(ObliviousHTTPError) -> Int {
        guard let bucket = sizeBuckets.first(where: { $0 >= sealedBytes }) else {
            throw .tooLarge(sealedBytes: sealedBytes, maximum: maximumSealedBytes)
        }
        return bucket
    }

    /// The request header (key id, KEM, KDF, AEAD): the start of the encapsulated request and
    /// part of the HPKE info, so that it cannot be changed in transit.
    static func header(keyID: UInt8, kem: ObliviousHTTPKEM) -> [UInt8] {
        let kem = kem.rawValue
        let algorithm = ObliviousHTTPSymmetricAlgorithm.hkdfSHA256AES128GCM
        return [
            keyID, UInt8(kem >> 8), UInt8(kem & 0xFF), UInt8(algorithm.kdf >> 8), UInt8(algorithm.kdf & 0xFF),
            UInt8(algorithm.aead >> 8), UInt8(algorithm.aead & 0xFF),
        ]
    }

    static func info(header: [UInt8]) -> Data { Data(requestLabel + [0] + header) }

    static func ciphersuite(_ kem: ObliviousHTTPKEM) -> HPKE.Ciphersuite {
        HPKE.Ciphersuite(kem: kem.hpke, kdf: .HKDF_SHA256, aead: .AES_GCM_128)
    }

    // MARK: Client

    /// Seals `request` to the gateway of `configuration`, padded to its size bucket. Throws
    /// `tooLarge` before anything is sent when it cannot be relayed.
    public static func seal(_ request: BinaryHTTPRequest, to configuration: ObliviousHTTPKeyConfiguration)
        throws(ObliviousHTTPError) -> (sealed: [UInt8], opener: ObliviousResponseOpener)
    {
        let unpadded = request.encoded()
        let overhead = headerBytes + configuration.kem.publicKeyBytes + tagBytes
        let bucket = try bucket(for: overhead + unpadded.count)
        return try seal(request.encoded(padding: bucket - overhead - unpadded.count), to: configuration)
    }

    /// Seals plaintext bytes as they are (section 4.3).
    public static func seal(_ plaintext: [UInt8], to configuration: ObliviousHTTPKeyConfiguration)
        throws(ObliviousHTTPError) -> (sealed: [UInt8], opener: ObliviousResponseOpener)
    {
        let header = header(keyID: configuration.keyID, kem: configuration.kem)
        let suite = ciphersuite(configuration.kem)
        do {
            var sender: HPKE.Sender
            switch try configuration.recipientKey() {
            case .p256(let key):
                sender = try HPKE.Sender(recipientKey: key, ciphersuite: suite, info: info(header: header))
            case .x25519(let key):
                sender = try HPKE.Sender(recipientKey: key, ciphersuite: suite, info: info(header: header))
            }
            let ciphertext = try sender.seal(plaintext)
            let secret = try sender.exportSecret(context: responseLabel, outputByteCount: responseNonceBytes)
            let encapsulatedKey = Array(sender.encapsulatedKey)
            return (
                header + encapsulatedKey + Array(ciphertext),
                ObliviousResponseOpener(secret: secret, encapsulatedKey: encapsulatedKey)
            )
        } catch let error as ObliviousHTTPError {
            throw error
        } catch {
            throw .cryptography("sealing the request failed: \(error)")
        }
    }

    // MARK: Response keys (section 4.4)

    static func responseKey(secret: SymmetricKey, encapsulatedKey: [UInt8], nonce: [UInt8])
        -> (key: SymmetricKey, nonce: [UInt8])
    {
        let prk = HKDF<SHA256>.extract(inputKeyMaterial: secret, salt: encapsulatedKey + nonce)
        let key = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Array("key".utf8), outputByteCount: keyBytes)
        let aeadNonce = HKDF<SHA256>.expand(
            pseudoRandomKey: prk, info: Array("nonce".utf8), outputByteCount: nonceBytes)
        return (key, aeadNonce.withUnsafeBytes { Array($0) })
    }
}

/// What a client keeps of a sealed request to open its response; the response of another
/// request does not open with it.
public struct ObliviousResponseOpener: Sendable {
    let secret: SymmetricKey
    let encapsulatedKey: [UInt8]

    /// Opens an encapsulated response (response nonce, then AES-128-GCM ciphertext and tag).
    public func open(_ encapsulated: [UInt8]) throws(ObliviousHTTPError) -> [UInt8] {
        guard encapsulated.count >= ObliviousHTTP.responseNonceBytes + ObliviousHTTP.tagBytes else {
            throw .decryptionFailed("the sealed response (\(encapsulated.count) bytes, too short)")
        }
        let nonce = Array(encapsulated.prefix(ObliviousHTTP.responseNonceBytes))
        let (key, aeadNonce) = ObliviousHTTP.responseKey(
            secret: secret, encapsulatedKey: encapsulatedKey, nonce: nonce)
        let body = encapsulated.dropFirst(ObliviousHTTP.responseNonceBytes)
        do {
            let box = try AES.GCM.SealedBox(
                nonce: try AES.GCM.Nonce(data: aeadNonce), ciphertext: body.dropLast(ObliviousHTTP.tagBytes),
                tag: body.suffix(ObliviousHTTP.tagBytes))
            return Array(try AES.GCM.open(box, using: key))
        } catch {
            throw .decryptionFailed("the sealed response")
        }
    }

    /// Opens and decodes a binary HTTP response.
    public func openResponse(_ encapsulated: [UInt8]) throws(ObliviousHTTPError) -> BinaryHTTPResponse {
        try BinaryHTTPResponse(decoding: open(encapsulated))
    }
}

/// The gateway's side: its private key, the configuration it publishes, and opening requests.
public struct ObliviousHTTPGateway: Sendable {
    enum PrivateKey: Sendable {
        case p256(P256.KeyAgreement.PrivateKey)
        case x25519(Curve25519.KeyAgreement.PrivateKey)
    }

    let privateKey: PrivateKey
    public let configuration: ObliviousHTTPKeyConfiguration

    /// A gateway with a P-256 key (Horizon's suite).
    public init(keyID: UInt8, privateKey: P256.KeyAgreement.PrivateKey) {
        self.privateKey = .p256(privateKey)
        configuration = ObliviousHTTPKeyConfiguration(keyID: keyID, publicKey: privateKey.publicKey)
    }

    /// A gateway with an X25519 key and the configuration it is published under (the RFC's example).
    init(x25519 privateKey: Curve25519.KeyAgreement.PrivateKey, configuration: ObliviousHTTPKeyConfiguration) {
        self.privateKey = .x25519(privateKey)
        self.configuration = configuration
    }

    /// A request opened by the gateway: its plaintext, its encapsulated key (what a replay
    /// window remembers) and the sealer for its response.
    public struct OpenedRequest: Sendable {
        public let plaintext: [UInt8]
        public let encapsulatedKey: [UInt8]
        public let responseSealer: ObliviousResponseSealer
    }

    /// Opens an encapsulated request (section 4.3): the header must name this gateway's key
    /// and suite, and the ciphertext must decrypt.
    public func open(_ encapsulated: [UInt8]) throws(ObliviousHTTPError) -> OpenedRequest {
        let kem = configuration.kem
        let minimum = ObliviousHTTP.headerBytes + kem.publicKeyBytes + ObliviousHTTP.tagBytes
        guard encapsulated.count >= minimum else {
            throw .malformedEncapsulatedRequest("\(encapsulated.count) bytes is shorter than the minimum \(minimum)")
        }
        let header = Array(encapsulated.prefix(ObliviousHTTP.headerBytes))
        guard header[0] == configuration.keyID else { throw .unknownKey(id: header[0]) }
        guard header == ObliviousHTTP.header(keyID: configuration.keyID, kem: kem) else {
            throw .malformedEncapsulatedRequest("the header names a suite other than this gateway's")
        }
        let encapsulatedKey = Array(
            encapsulated[ObliviousHTTP.headerBytes..<(ObliviousHTTP.headerBytes + kem.publicKeyBytes)])
        let ciphertext = encapsulated.dropFirst(ObliviousHTTP.headerBytes + kem.publicKeyBytes)
        let suite = ObliviousHTTP.ciphersuite(kem)
        let info = ObliviousHTTP.info(header: header)
        var recipient: HPKE.Recipient
        do {
            switch privateKey {
            case .p256(let key):
                recipient = try HPKE.Recipient(
                    privateKey: key, ciphersuite: suite, info: info, encapsulatedKey: Data(encapsulatedKey))
            case .x25519(let key):
                recipient = try HPKE.Recipient(
                    privateKey: key, ciphersuite: suite, info: info, encapsulatedKey: Data(encapsulatedKey))
            }
        } catch {
            throw .malformedEncapsulatedRequest("the encapsulated key is not a valid public key")
        }
        let plaintext: Data
        do { plaintext = try recipient.open(ciphertext) } catch { throw .decryptionFailed("the sealed request") }
        let secret: SymmetricKey
        do {
            secret = try recipient.exportSecret(
                context: ObliviousHTTP.responseLabel, outputByteCount: ObliviousHTTP.responseNonceBytes)
        } catch {
            throw .cryptography("exporting the response secret failed: \(error)")
        }
        return OpenedRequest(
            plaintext: Array(plaintext), encapsulatedKey: encapsulatedKey,
            responseSealer: ObliviousResponseSealer(secret: secret, encapsulatedKey: encapsulatedKey))
    }
}

/// Seals the response to one opened request (section 4.4).
public struct ObliviousResponseSealer: Sendable {
    let secret: SymmetricKey
    let encapsulatedKey: [UInt8]

    /// Seals `response`, padded to its size bucket; `tooLarge` when it cannot be relayed.
    public func seal(_ response: BinaryHTTPResponse) throws(ObliviousHTTPError) -> [UInt8] {
        let unpadded = response.encoded()
        let overhead = ObliviousHTTP.responseNonceBytes + ObliviousHTTP.tagBytes
        let bucket = try ObliviousHTTP.bucket(for: overhead + unpadded.count)
        return try seal(response.encoded(padding: bucket - overhead - unpadded.count))
    }

    /// Seals plaintext bytes with a fresh random response nonce.
    public func seal(_ plaintext: [UInt8]) throws(ObliviousHTTPError) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        let nonce = (0..<ObliviousHTTP.responseNonceBytes).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return try seal(plaintext, responseNonce: nonce)
    }

    /// Seals with a given response nonce: for the RFC's example only (a nonce must never repeat).
    func seal(_ plaintext: [UInt8], responseNonce nonce: [UInt8]) throws(ObliviousHTTPError) -> [UInt8] {
        let (key, aeadNonce) = ObliviousHTTP.responseKey(secret: secret, encapsulatedKey: encapsulatedKey, nonce: nonce)
        do {
            let box = try AES.GCM.seal(plaintext, using: key, nonce: try AES.GCM.Nonce(data: aeadNonce))
            return nonce + Array(box.ciphertext) + Array(box.tag)
        } catch {
            throw .cryptography("sealing the response failed: \(error)")
        }
    }

    /// The client's opener for this same context: lets a test open what the gateway sealed
    /// when the client's context cannot be rebuilt (the RFC example's fixed ephemeral key).
    var matchingOpener: ObliviousResponseOpener {
        ObliviousResponseOpener(secret: secret, encapsulatedKey: encapsulatedKey)
    }
}
