import Crypto
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import Synchronization
import Testing

/// The wallet's key at rest under a PIN: the sealed format, the back-off and what tampering gets.
/// scrypt runs at N = 2^10 here (the cost is stored in the file; the programs use 2^15).
@Suite("Wallet key under a PIN")
struct WalletKeyProtectionTests {
    static let cheap = PINKeyCost(logN: 10)

    @Test func aSealedKeyOpensWithItsPINOnly() throws {
        let key = P256.Signing.PrivateKey()
        let sealed = try SealedWalletKey.seal(key, pin: "246810", cost: Self.cheap)
        #expect(try sealed.open(pin: "246810")?.rawRepresentation == key.rawRepresentation)
        #expect(try sealed.open(pin: "246811") == nil)
        #expect(sealed.publicKey == Array(key.publicKey.x963Representation))
        // The file round-trips and never holds the raw key.
        #expect(try SealedWalletKey.decode(sealed.encoded()) == sealed)
        #expect(try SealedWalletKey.decode(pem: sealed.pem) == sealed)
        #expect(sealed.pem.hasPrefix("-----BEGIN HORIZON ENCRYPTED WALLET KEY-----\n"))
        #expect(!Data(sealed.encoded()).contains(key.rawRepresentation))
        // Each sealing has its own salt, lock id and nonce.
        let again = try SealedWalletKey.seal(key, pin: "246810", cost: Self.cheap)
        #expect(again.salt != sealed.salt && again.lockID != sealed.lockID && again.encoded() != sealed.encoded())
    }

    @Test func aPlainKeyWorksUntilAPINIsSetThenOnlyWithIt() throws {
        let wallet = try TestWallet()
        var asked = 0
        #expect(
            try wallet.vault.unlock(pin: {
                asked += 1
                return ""
            }).rawRepresentation == wallet.key.rawRepresentation)
        #expect(asked == 0)
        #expect(!wallet.vault.isPINSet)
        #expect(throws: WalletKeyError.unacceptablePIN("a PIN must have 6 to 64 characters")) {
            try wallet.vault.setPIN("1234")
        }
        try wallet.vault.setPIN("135790")
        #expect(wallet.vault.isPINSet)
        #expect(throws: WalletKeyError.pinAlreadySet) { try wallet.vault.setPIN("135790") }
        #expect(try wallet.vault.publicKey().x963Representation == wallet.key.publicKey.x963Representation)
        #expect(try wallet.vault.unlock(pin: { "135790" }).rawRepresentation == wallet.key.rawRepresentation)
        for file in ["wallet-key.pem", "pin-lock.json"] {
            let mode =
                try FileManager.default.attributesOfItem(atPath: wallet.path(file))[.posixPermissions] as? NSNumber
            #expect(mode?.intValue == 0o600, "\(file)")
        }
        #expect(
            try String(contentsOfFile: wallet.path("wallet-key.pem"), encoding: .utf8).contains("ENCRYPTED WALLET KEY"))

        try wallet.vault.changePIN(current: { "135790" }, new: { "24682468" })
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 2, lockedFor: 0)) {
            try wallet.vault.unlock(pin: { "135790" })
        }
        #expect(try wallet.vault.unlock(pin: { "24682468" }).rawRepresentation == wallet.key.rawRepresentation)
    }

    @Test func wrongPINsBlockWithAGrowingBackOffAndTheRightOneResetsIt() throws {
        let wallet = try TestWallet(pin: "112358")
        let vault = wallet.vault
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 2, lockedFor: 0)) {
            try vault.unlock(pin: { "000000" })
        }
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 1, lockedFor: 0)) {
            try vault.unlock(pin: { "000000" })
        }
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 0, lockedFor: 30)) {
            try vault.unlock(pin: { "000000" })
        }
        // Blocked: not even the right PIN is asked for.
        var asked = false
        #expect(throws: WalletKeyError.blockedWithWrongPIN(remainingSeconds: 30)) {
            try vault.unlock(pin: {
                asked = true
                return "112358"
            })
        }
        #expect(!asked)
        wallet.advance(29)
        #expect(throws: WalletKeyError.blockedWithWrongPIN(remainingSeconds: 1)) { try vault.unlock(pin: { "112358" }) }
        wallet.advance(1)
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 0, lockedFor: 60)) {
            try vault.unlock(pin: { "000000" })
        }
        wallet.advance(60)
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 0, lockedFor: 120)) {
            try vault.unlock(pin: { "000000" })
        }
        #expect(try vault.lockState() == PINLockState(failures: 5, lockedUntil: wallet.now + 120))
        wallet.advance(120)
        #expect(try vault.unlock(pin: { "112358" }).rawRepresentation == wallet.key.rawRepresentation)
        #expect(try vault.lockState() == PINLockState(failures: 0, lockedUntil: 0))
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 2, lockedFor: 0)) {
            try vault.unlock(pin: { "000000" })
        }

        #expect((0...9).map { PINPolicy().delay(afterFailures: $0) } == [0, 0, 0, 30, 60, 120, 240, 480, 960, 1920])
        #expect(PINPolicy().delay(afterFailures: 10) == 3600)
        #expect(PINPolicy().delay(afterFailures: 10_000) == 3600)
    }

    @Test func anAlteredKeyFileIsRefused() throws {
        let wallet = try TestWallet(pin: "112358")
        let path = wallet.path("wallet-key.pem")
        let original = try SealedWalletKey.decode(pem: try String(contentsOfFile: path, encoding: .utf8))

        // One byte changed anywhere: refused before any PIN is tried.
        var bytes = original.encoded()
        bytes[150] ^= 0x01
        try wallet.writeKey(bytes)
        #expect(throws: WalletKeyError.damaged(path: path, reason: "its checksum does not match its contents")) {
            try wallet.vault.unlock(pin: { "112358" })
        }

        // Altered with a fixed-up checksum (a lower scrypt cost): the attempt record no longer
        // fits the header (its MAC key comes from it), and once the block has passed the right
        // PIN still does not open it, because the header is GCM's associated data.
        var weakened = Array(original.encoded().dropLast(32))
        weakened[6] = 11
        try wallet.writeKey(weakened + Array(SHA256.hash(data: weakened)))
        #expect(throws: WalletKeyError.lockRecordTampered(remainingSeconds: 3600)) {
            try wallet.vault.unlock(pin: { "112358" })
        }
        wallet.advance(3600)
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 0, lockedFor: 3600)) {
            try wallet.vault.unlock(pin: { "112358" })
        }

        try wallet.writeKey(Array("-----BEGIN HORIZON ENCRYPTED WALLET KEY-----\nAAAA\n-----END".utf8))
        #expect(
            throws: WalletKeyError.damaged(path: path, reason: "not a readable HORIZON ENCRYPTED WALLET KEY PEM block")
        ) {
            try wallet.vault.unlock(pin: { "112358" })
        }
    }

    @Test func tamperingWithTheAttemptRecordGivesNoFreeTries() throws {
        let wallet = try TestWallet(pin: "112358")
        let lock = wallet.path("pin-lock.json")
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 2, lockedFor: 0)) {
            try wallet.vault.unlock(pin: { "000000" })
        }

        // Removed: blocked as after many wrong PINs, and the PIN is not even asked for.
        try FileManager.default.removeItem(atPath: lock)
        var asked = false
        #expect(throws: WalletKeyError.lockRecordTampered(remainingSeconds: 3600)) {
            try wallet.vault.unlock(pin: {
                asked = true
                return "112358"
            })
        }
        #expect(!asked)
        #expect(throws: WalletKeyError.blockedWithWrongPIN(remainingSeconds: 3600)) {
            try wallet.vault.unlock(pin: { "112358" })
        }
        wallet.advance(3600)
        // After the wait a wrong PIN blocks at the longest delay again; the right one resets.
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 0, lockedFor: 3600)) {
            try wallet.vault.unlock(pin: { "000000" })
        }
        wallet.advance(3600)
        #expect(try wallet.vault.unlock(pin: { "112358" }).rawRepresentation == wallet.key.rawRepresentation)

        // Edited back to "no failures": its MAC no longer verifies.
        #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 2, lockedFor: 0)) {
            try wallet.vault.unlock(pin: { "000000" })
        }
        let edited = try String(contentsOfFile: lock, encoding: .utf8).replacingOccurrences(
            of: "\"failures\":1", with: "\"failures\":0")
        try edited.write(toFile: lock, atomically: true, encoding: .utf8)
        #expect(throws: WalletKeyError.lockRecordTampered(remainingSeconds: 3600)) {
            try wallet.vault.unlock(pin: { "112358" })
        }
        wallet.advance(3600)
        #expect(try wallet.vault.unlock(pin: { "112358" }).rawRepresentation == wallet.key.rawRepresentation)

        // A clean record saved earlier does not fit the key once the PIN changed (new lock id).
        let saved = try Data(contentsOf: URL(fileURLWithPath: lock))
        try wallet.vault.changePIN(current: { "112358" }, new: { "86420864" })
        try saved.write(to: URL(fileURLWithPath: lock))
        #expect(throws: WalletKeyError.lockRecordTampered(remainingSeconds: 3600)) {
            try wallet.vault.unlock(pin: { "86420864" })
        }

        // Garbage is no better.
        try Data("{}".utf8).write(to: URL(fileURLWithPath: lock))
        #expect(throws: WalletKeyError.lockRecordTampered(remainingSeconds: 3600)) {
            try wallet.vault.unlock(pin: { "86420864" })
        }
    }
}

extension WalletKeyProtectionTests {
    /// Someone who has read the key file (and can write the record) forges a record of no
    /// failures the way the old MAC key was made, from the key file's header alone: refused as
    /// tampered. So is one with the secret file removed or replaced (a reset).
    @Test func aRecordForgedFromTheKeyFileAloneIsDetected() throws {
        let wallet = try TestWallet(pin: "112358")
        for left in [2, 1] {
            #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: left, lockedFor: 0)) {
                try wallet.vault.unlock(pin: { "000000" })
            }
        }
        let keyText = try String(contentsOfFile: wallet.path(WalletFiles.walletKey), encoding: .utf8)
        let sealed = try SealedWalletKey.decode(pem: keyText)
        // The header is the file's first 106 bytes: "HZWK", version, kdf, cost, salt, lock id, public key.
        let header = Array(sealed.encoded().prefix(106))
        let magic: [UInt8] = Array("HZWK".utf8)
        #expect(Array(header.prefix(4)) == magic)
        #expect(Array(header.suffix(65)) == sealed.publicKey)
        for version in [1, 2] {
            let macKey = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: header), info: Array("horizon/pin-lock/v\(version)".utf8),
                outputByteCount: 32)
            let mac = HMAC<SHA256>.authenticationCode(
                for: Array("horizon/pin-lock/v\(version)\n0\n0".utf8), using: macKey)
            let forged =
                #"{"failures":0,"lockedUntil":0,"mac":"\#(Data(mac).base64EncodedString())","version":\#(version)}"#
            try forged.write(toFile: wallet.path("pin-lock.json"), atomically: true, encoding: .utf8)
            var asked = false
            #expect(throws: WalletKeyError.lockRecordTampered(remainingSeconds: 3600)) {
                try wallet.vault.unlock(pin: {
                    asked = true
                    return "112358"
                })
            }
            #expect(!asked, "a forged record gave a try")
            wallet.advance(3600)
            #expect(try wallet.vault.unlock(pin: { "112358" }).rawRepresentation == wallet.key.rawRepresentation)
        }

        // The secret is its own owner-only file, and the key file does not hold it.
        let secretPath = wallet.path(WalletKeyVault.lockSecretFile)
        let secret = try Data(contentsOf: URL(fileURLWithPath: secretPath))
        #expect(secret.count == 32)
        let mode = try FileManager.default.attributesOfItem(atPath: secretPath)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        #expect(!Data(sealed.encoded()).contains(secret))

        // Reset: the record and its secret removed, or the secret replaced, is the most restrictive state.
        for reset in [true, false] {
            #expect(throws: WalletKeyError.wrongPIN(attemptsBeforeLock: 2, lockedFor: 0)) {
                try wallet.vault.unlock(pin: { "000000" })
            }
            if reset {
                try FileManager.default.removeItem(atPath: secretPath)
                try FileManager.default.removeItem(atPath: wallet.path("pin-lock.json"))
            } else {
                try Data(repeating: 7, count: 32).write(to: URL(fileURLWithPath: secretPath))
            }
            #expect(throws: WalletKeyError.lockRecordTampered(remainingSeconds: 3600)) {
                try wallet.vault.unlock(pin: { "112358" })
            }
            #expect(try wallet.vault.lockState()?.lockedUntil == wallet.now + 3600)
            wallet.advance(3600)
            #expect(try wallet.vault.unlock(pin: { "112358" }).rawRepresentation == wallet.key.rawRepresentation)
        }
    }
}

/// A wallet data directory with a plain key (or one sealed under `pin`) and a clock the test moves.
final class TestWallet: Sendable {
    let directory: DataDirectory
    let key = P256.Signing.PrivateKey()
    private let clock = Mutex<Int64>(1_800_000_000)

    init(pin: String? = nil) throws {
        directory = DataDirectory(explicit: "/tmp/hz-pin-\(UUID().uuidString.prefix(8))", role: "wallet")
        try directory.create()
        try KeyFiles.writePrivate(key, to: WalletFiles.walletKey, in: directory)
        if let pin { try vault.setPIN(pin) }
    }

    deinit { try? FileManager.default.removeItem(at: directory.url) }

    var now: Int64 { clock.withLock { $0 } }
    func advance(_ seconds: Int64) { clock.withLock { $0 += seconds } }

    var vault: WalletKeyVault {
        WalletKeyVault(
            directory: directory, keyFile: WalletFiles.walletKey, cost: WalletKeyProtectionTests.cheap,
            now: { [self] in now })
    }

    func path(_ name: String) -> String { directory.file(name).path }

    func writeKey(_ bytes: [UInt8]) throws {
        let text =
            bytes.first == UInt8(ascii: "-")
            ? String(decoding: bytes, as: UTF8.self)
            : "-----BEGIN HORIZON ENCRYPTED WALLET KEY-----\n\(Data(bytes).base64EncodedString())\n-----END HORIZON ENCRYPTED WALLET KEY-----\n"
        try directory.write(Data(text.utf8), to: WalletFiles.walletKey)
    }
}
