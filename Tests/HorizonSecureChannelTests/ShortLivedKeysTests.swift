import Crypto
import HorizonCore
import Testing

@testable import HorizonSecureChannel

@Suite("Short-lived keys")
struct ShortLivedKeysTests {
    /// P-256's group order n, and the generator's coordinates.
    static let order = hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
    static let orderMinusOne = hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632550")
    static let generatorX = hex("6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296")
    /// p − Gy: the y coordinate of −G, which is (n − 1)·G.
    static let negatedGeneratorY = hex("b01cbd1c01e58065711814b583f061e9d431cca994cea1313449bf97c840ae0a")

    static func hex(_ text: String) -> [UInt8] { [UInt8](hexString: text) ?? [] }

    /// Hands out the given scalars in order, counting the draws.
    final class Draws {
        var remaining: [[UInt8]]
        var count = 0
        init(_ scalars: [[UInt8]]) { remaining = scalars }
        func next() -> SymmetricKey {
            count += 1
            return SymmetricKey(data: remaining.isEmpty ? [UInt8](repeating: 0, count: 32) : remaining.removeFirst())
        }
    }

    /// Zero, n itself and 2²⁵⁶ − 1 are not private keys: each is drawn again, and the first
    /// scalar in 1…n−1 is the key, with the public key it determines.
    static let outOfRange: [[UInt8]] = [[UInt8](repeating: 0, count: 32), order, [UInt8](repeating: 0xFF, count: 32)]

    enum Kind: CaseIterable { case agreement, signing }

    /// The key's scalar and its public key (x9.63), made by the kind's function from `draws`.
    static func key(_ kind: Kind, from draws: Draws) -> (scalar: [UInt8], publicKey: [UInt8]) {
        switch kind {
        case .agreement:
            let key = ShortLivedKeys.agreementKey(drawing: draws.next)
            return ([UInt8](key.rawRepresentation), [UInt8](key.publicKey.x963Representation))
        case .signing:
            let key = ShortLivedKeys.signingKey(drawing: draws.next)
            return ([UInt8](key.rawRepresentation), [UInt8](key.publicKey.x963Representation))
        }
    }

    @Test(arguments: Kind.allCases) func aScalarOutsideOneToNMinusOneIsDrawnAgain(_ kind: Kind) {
        let draws = Draws(Self.outOfRange + [Self.orderMinusOne])
        let key = Self.key(kind, from: draws)
        #expect(draws.count == 4)
        #expect(key.scalar == Self.orderMinusOne)
        #expect(key.publicKey == [0x04] + Self.generatorX + Self.negatedGeneratorY)
    }

    @Test func aGeneratorThatNeverYieldsAScalarFallsBackToSwiftCrypto() throws {
        let agreementDraws = Draws([])
        let agreement = ShortLivedKeys.agreementKey(drawing: agreementDraws.next)
        #expect(agreementDraws.count == ShortLivedKeys.maximumDraws)
        #expect([UInt8](agreement.rawRepresentation) != [UInt8](repeating: 0, count: 32))
        let peer = ShortLivedKeys.agreementKey()
        #expect(
            try agreement.sharedSecretFromKeyAgreement(with: peer.publicKey)
                == peer.sharedSecretFromKeyAgreement(with: agreement.publicKey))

        let signingDraws = Draws([])
        let signing = ShortLivedKeys.signingKey(drawing: signingDraws.next)
        #expect(signingDraws.count == ShortLivedKeys.maximumDraws)
        let message = Array("fallback".utf8)
        #expect(signing.publicKey.isValidSignature(try signing.signature(for: message), for: message))
    }

    @Test func freshKeysAreDistinctAgreeAndSign() throws {
        var scalars = Set<[UInt8]>()
        for _ in 0..<64 {
            scalars.insert([UInt8](ShortLivedKeys.agreementKey().rawRepresentation))
            scalars.insert([UInt8](ShortLivedKeys.signingKey().rawRepresentation))
        }
        #expect(scalars.count == 128)

        let wallet = ShortLivedKeys.agreementKey()
        let terminal = ShortLivedKeys.agreementKey()
        // Each side's public key, as the other decodes it from the wire.
        let walletPublic = try P256.KeyAgreement.PublicKey(x963Representation: wallet.publicKey.x963Representation)
        let terminalPublic = try P256.KeyAgreement.PublicKey(x963Representation: terminal.publicKey.x963Representation)
        #expect(
            try wallet.sharedSecretFromKeyAgreement(with: terminalPublic)
                == terminal.sharedSecretFromKeyAgreement(with: walletPublic))

        let session = ShortLivedKeys.signingKey()
        let proof = Array("hello proof".utf8)
        let signature = try session.signature(for: proof)
        let sessionPublic = try P256.Signing.PublicKey(x963Representation: session.publicKey.x963Representation)
        #expect(sessionPublic.isValidSignature(signature, for: proof))
        #expect(!sessionPublic.isValidSignature(signature, for: Array("another proof".utf8)))
    }
}
