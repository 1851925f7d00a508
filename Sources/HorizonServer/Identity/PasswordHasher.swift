import Crypto
import CryptoExtras
import Foundation

/// Merchant passwords at rest: scrypt with a random salt, stored self-describing
/// (`scrypt$<log2 N>$<r>$<p>$<salt>$<hash>`, base64), so that a later change of cost still
/// verifies the hashes written before it.
public struct PasswordHasher: Sendable {
    /// log2 of scrypt's N: 15 (32 MiB, ~0.1 s here) in production; tests use less.
    public let costLog2: Int
    public static let minimumPasswordLength = 10

    public init(costLog2: Int = 15) { self.costLog2 = min(max(costLog2, 10), 20) }

    public func hash(_ password: String) throws(PasswordError) -> String {
        guard password.count >= Self.minimumPasswordLength else { throw .tooShort(minimum: Self.minimumPasswordLength) }
        guard password.utf8.count <= 1024 else { throw .tooLong(maximum: 1024) }
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let derived = try Self.derive(password, salt: salt, costLog2: costLog2, blockSize: 8, parallelism: 1)
        return [
            "scrypt", String(costLog2), "8", "1", Data(salt).base64EncodedString(), Data(derived).base64EncodedString(),
        ]
        .joined(separator: "$")
    }

    /// Whether `password` matches `stored`, compared in constant time. A stored value this
    /// program cannot read never matches.
    public func verify(_ password: String, against stored: String) -> Bool {
        let parts = stored.split(separator: "$").map(String.init)
        guard parts.count == 6, parts[0] == "scrypt", let costLog2 = Int(parts[1]), (10...20).contains(costLog2),
            let blockSize = Int(parts[2]), (1...16).contains(blockSize), let parallelism = Int(parts[3]),
            (1...4).contains(parallelism), let salt = Data(base64Encoded: parts[4]),
            let expected = Data(base64Encoded: parts[5]), password.utf8.count <= 1024,
            let derived = try? Self.derive(
                password, salt: Array(salt), costLog2: costLog2, blockSize: blockSize, parallelism: parallelism)
        else { return false }
        return derived.count == expected.count && zip(derived, expected).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private static func derive(_ password: String, salt: [UInt8], costLog2: Int, blockSize: Int, parallelism: Int)
        throws(PasswordError) -> [UInt8]
    {
        do {
            let key = try KDF.Scrypt.deriveKey(
                from: Array(password.utf8), salt: salt, outputByteCount: 32, rounds: 1 << costLog2,
                blockSize: blockSize,
                parallelism: parallelism)
            return key.withUnsafeBytes { Array($0) }
        } catch {
            throw .hashingFailed("\(error)")
        }
    }
}

public enum PasswordError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooShort(minimum: Int)
    case tooLong(maximum: Int)
    case hashingFailed(String)

    public var description: String {
        switch self {
        case .tooShort(let minimum): "a password must have at least \(minimum) characters"
        case .tooLong(let maximum): "a password must have at most \(maximum) bytes"
        case .hashingFailed(let reason): "the password could not be hashed: \(reason)"
        }
    }
}
