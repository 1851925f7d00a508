import Crypto
import CryptoExtras
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonServiceClients

/// scrypt's cost for a PIN-sealed key, stored in the file so that a later default still opens
/// older files. Tests pass a low cost; the programs use `standard`.
public struct PINKeyCost: Sendable, Equatable {
    /// log2 of scrypt's N.
    public var logN: UInt8
    public var blockSize: UInt8
    public var parallelism: UInt8

    public init(logN: UInt8, blockSize: UInt8 = 8, parallelism: UInt8 = 1) {
        self.logN = logN
        self.blockSize = blockSize
        self.parallelism = parallelism
    }

    /// N = 2^15, r = 8 (32 MiB, about 0.1 s): what each wrong guess costs anyone holding a copy.
    public static let standard = PINKeyCost(logN: 15)
    /// The costs a file may name (outside this range it is refused as damaged, not tried).
    static let acceptedLogN: ClosedRange<UInt8> = 10...22
}

/// How wrong PINs lock the wallet: a few free tries, then a back-off that doubles up to a
/// ceiling (the reference's `BlockedWithWrongPIN` with `remainingTimeToAllowUnlock`).
public struct PINPolicy: Sendable, Equatable {
    public var freeAttempts: Int
    public var firstDelay: Int64
    public var maximumDelay: Int64
    public var minimumLength: Int

    public init(freeAttempts: Int = 3, firstDelay: Int64 = 30, maximumDelay: Int64 = 3600, minimumLength: Int = 6) {
        self.freeAttempts = freeAttempts
        self.firstDelay = firstDelay
        self.maximumDelay = maximumDelay
        self.minimumLength = minimumLength
    }

    /// The wait after `failures` wrong PINs in a row: none for the free tries, then 30 s, 60 s,
    /// 120 s… up to `maximumDelay`.
    public func delay(afterFailures failures: Int) -> Int64 {
        guard failures >= freeAttempts else { return 0 }
        var delay = firstDelay
        for _ in 0..<min(failures - freeAttempts, 62) where delay < maximumDelay { delay *= 2 }
        return min(delay, maximumDelay)
    }

    /// The record a missing or altered lock record is replaced with: deep in the back-off, so
    /// that removing or editing the record never buys a free try.
    var tamperedFailures: Int { freeAttempts + 62 }
}

/// Why the wallet's key could not be used or protected, each with what to do.
public enum WalletKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A wrong PIN; `attemptsBeforeLock` more are free, or the wallet is now locked for `lockedFor` s.
    case wrongPIN(attemptsBeforeLock: Int, lockedFor: Int64)
    /// The reference's `BlockedWithWrongPIN`: no PIN is tried until the time has passed.
    case blockedWithWrongPIN(remainingSeconds: Int64)
    /// The attempt record was missing, unreadable or not this key's: locked as after many wrong PINs.
    case lockRecordTampered(remainingSeconds: Int64)
    /// The key file is not a wallet key this program reads, or was altered.
    case damaged(path: String, reason: String)
    case unsupportedVersion(Int)
    case unacceptablePIN(String)
    case pinNotSet
    case pinAlreadySet
    case pinsDiffer
    case sealingFailed(String)
    /// The key's PIN is counted by the server: only the server's answer opens it.
    case countedByServer
    /// The device protection asked for cannot be used here (systemd-creds missing or refusing).
    case deviceProtectionUnavailable(String)
    /// A plain key file others than its owner may read or write.
    case exposedKeyFile(path: String, mode: Int)

    public var description: String {
        switch self {
        case .wrongPIN(_, let locked) where locked > 0:
            "wrong PIN; the wallet is now blocked for \(locked) s (BlockedWithWrongPIN), each further wrong PIN doubles the wait"
        case .wrongPIN(let left, _):
            "wrong PIN; \(left) more wrong \(left == 1 ? "PIN blocks" : "PINs block") the wallet for a while"
        case .blockedWithWrongPIN(let remaining):
            "blocked after wrong PINs (BlockedWithWrongPIN): try again in \(remaining) s"
        case .lockRecordTampered(let remaining):
            "the wallet's PIN attempt record (pin-lock.json, or its secret pin-lock.key) is missing or was altered, so the wallet is blocked as after many wrong PINs: try again in \(remaining) s"
        case .damaged(let path, let reason):
            "the wallet key \(path) is damaged or was altered (\(reason)); it is not used: put back a backup of the data directory, or move the account to a new key with `horizon-wallet restore`"
        case .unsupportedVersion(let version):
            "the wallet key file has format version \(version), newer than this program reads; use a newer horizon-wallet"
        case .unacceptablePIN(let reason): reason
        case .pinNotSet: "this wallet has no PIN yet; set one with `horizon-wallet pin set`"
        case .pinAlreadySet: "this wallet has a PIN already; change it with `horizon-wallet pin change`"
        case .pinsDiffer: "the two PINs differ; nothing was changed"
        case .sealingFailed(let reason): "the key could not be encrypted: \(reason)"
        case .countedByServer: "this wallet's PIN is checked by its server; the key opens only with the server's answer"
        case .deviceProtectionUnavailable(let reason):
            "systemd-creds cannot protect the key here (\(reason)); use --key-protection file (the key as a 0600 file), or run as a user systemd-creds encrypts for (root before systemd 256)"
        case .exposedKeyFile(let path, let mode):
            "the wallet key \(path) has mode 0\(String(mode, radix: 8)): others than its owner may read or change it, so it is not used. Run `chmod 600 \(path)` and `chmod 700` on its directory if nobody else could have read it; otherwise move the account to a new key with `horizon-wallet restore`"
        }
    }
}

/// A wallet key encrypted under a PIN: scrypt(PIN, salt) is an AES-256-GCM key over the raw
/// private key. The file is PEM-armoured binary, version 1:
///
///     "HZWK" | version 1 | kdf 1 (scrypt) | log2 N | r | p | salt (16) | lock id (16) |
///     public key (65, X9.63)                                  -- the header, GCM's associated data
///     nonce (12) | ciphertext (32) | tag (16) | SHA-256 of everything before (32)
///
/// The header is authenticated: lowering the cost, swapping the public key or the lock id makes
/// the right PIN fail rather than weakening anything. The trailing digest is not a secret check;
/// it tells a damaged or naively edited file from a wrong PIN before any PIN is spent on it.
public struct SealedWalletKey: Sendable, Equatable {
    public static let pemLabel = "HORIZON ENCRYPTED WALLET KEY"
    public static let version: UInt8 = 1
    static let magic = Array("HZWK".utf8)
    static let scryptID: UInt8 = 1

    public let cost: PINKeyCost
    public let salt: [UInt8]
    /// Random per sealing: names this file's attempt record (and keys its MAC).
    public let lockID: [UInt8]
    public let publicKey: [UInt8]
    let nonce: [UInt8]
    let ciphertext: [UInt8]
    let tag: [UInt8]

    /// Encrypts `key` under `pin` with a fresh salt, lock id and nonce.
    public static func seal(_ key: P256.Signing.PrivateKey, pin: String, cost: PINKeyCost)
        throws(WalletKeyError) -> SealedWalletKey
    {
        var random = SystemRandomNumberGenerator()
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
        let lockID = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
        let nonce = (0..<12).map { _ in UInt8.random(in: 0...255, using: &random) }
        let publicKey = Array(key.publicKey.x963Representation)
        let header = Self.header(cost: cost, salt: salt, lockID: lockID, publicKey: publicKey)
        do {
            let box = try AES.GCM.seal(
                key.rawRepresentation, using: try derive(pin: pin, salt: salt, cost: cost),
                nonce: try AES.GCM.Nonce(data: nonce), authenticating: header)
            return SealedWalletKey(
                cost: cost, salt: salt, lockID: lockID, publicKey: publicKey, nonce: nonce,
                ciphertext: Array(box.ciphertext), tag: Array(box.tag))
        } catch let error as WalletKeyError {
            throw error
        } catch {
            throw .sealingFailed("\(error)")
        }
    }

    /// The private key if `pin` is right, nil if it is not (GCM's tag does not verify).
    public func open(pin: String) throws(WalletKeyError) -> P256.Signing.PrivateKey? {
        let header = Self.header(cost: cost, salt: salt, lockID: lockID, publicKey: publicKey)
        let raw: Data
        do {
            let box = try AES.GCM.SealedBox(nonce: try AES.GCM.Nonce(data: nonce), ciphertext: ciphertext, tag: tag)
            raw = try AES.GCM.open(
                box, using: try Self.derive(pin: pin, salt: salt, cost: cost), authenticating: header)
        } catch let error as WalletKeyError {
            throw error
        } catch {
            return nil
        }
        // The header's public key is authenticated, so this holds for any file that decrypted;
        // checked anyway, since using a key other than the one named would be far worse.
        guard let key = try? P256.Signing.PrivateKey(rawRepresentation: raw),
            Array(key.publicKey.x963Representation) == publicKey
        else { throw .damaged(path: "", reason: "the decrypted key does not match the public key it names") }
        return key
    }

    /// The MAC key of this file's attempt record: the wallet's lock secret (a file of its own,
    /// never derivable from the key file) salted with this file's authenticated header, so a
    /// record made for another file or an earlier PIN does not verify either.
    func lockKey(secret: SymmetricKey) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: secret, salt: Self.header(cost: cost, salt: salt, lockID: lockID, publicKey: publicKey),
            info: Array("horizon/pin-lock/v2".utf8), outputByteCount: 32)
    }

    static func header(cost: PINKeyCost, salt: [UInt8], lockID: [UInt8], publicKey: [UInt8]) -> [UInt8] {
        var writer = ByteWriter(capacity: 110)
        writer.write(raw: magic)
        writer.write(version)
        writer.write(scryptID)
        writer.write(cost.logN)
        writer.write(cost.blockSize)
        writer.write(cost.parallelism)
        writer.write(raw: salt)
        writer.write(raw: lockID)
        writer.write(raw: publicKey)
        return writer.bytes
    }

    static func derive(pin: String, salt: [UInt8], cost: PINKeyCost) throws(WalletKeyError) -> SymmetricKey {
        guard PINKeyCost.acceptedLogN.contains(cost.logN), (1...16).contains(cost.blockSize),
            (1...4).contains(cost.parallelism)
        else { throw .damaged(path: "", reason: "scrypt cost out of range") }
        do {
            // NFC, so the same PIN typed on another keyboard derives the same key.
            return try KDF.Scrypt.deriveKey(
                from: Array(pin.precomposedStringWithCanonicalMapping.utf8), salt: salt, outputByteCount: 32,
                rounds: 1 << Int(cost.logN), blockSize: Int(cost.blockSize), parallelism: Int(cost.parallelism))
        } catch {
            throw .sealingFailed("scrypt: \(error)")
        }
    }

    // MARK: Encoding

    public func encoded() -> [UInt8] {
        var bytes = Self.header(cost: cost, salt: salt, lockID: lockID, publicKey: publicKey)
        bytes += nonce + ciphertext + tag
        return bytes + Array(SHA256.hash(data: bytes))
    }

    public var pem: String {
        let body = Data(encoded()).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN \(Self.pemLabel)-----\n\(body)\n-----END \(Self.pemLabel)-----\n"
    }

    /// Whether `text` is a sealed key's PEM (rather than a plain private key's).
    static func isSealed(pem text: String) -> Bool { text.contains("-----BEGIN \(pemLabel)-----") }

    public static func decode(pem text: String) throws(WalletKeyError) -> SealedWalletKey {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let begin = lines.firstIndex(of: "-----BEGIN \(pemLabel)-----"),
            let end = lines.firstIndex(of: "-----END \(pemLabel)-----"), begin < end,
            let data = Data(base64Encoded: lines[(begin + 1)..<end].joined())
        else { throw .damaged(path: "", reason: "not a readable \(pemLabel) PEM block") }
        return try decode(Array(data))
    }

    public static func decode(_ bytes: [UInt8]) throws(WalletKeyError) -> SealedWalletKey {
        guard bytes.count > 32 else { throw .damaged(path: "", reason: "too short") }
        let body = Array(bytes.dropLast(32))
        guard Array(SHA256.hash(data: body)) == Array(bytes.suffix(32)) else {
            throw .damaged(path: "", reason: "its checksum does not match its contents")
        }
        var reader = ByteReader(body)
        do {
            guard try reader.readBytes(4, "magic") == magic else {
                throw WalletKeyError.damaged(path: "", reason: "not a Horizon wallet key")
            }
            let version = try reader.readUInt8("version")
            guard version == Self.version else { throw WalletKeyError.unsupportedVersion(Int(version)) }
            guard try reader.readUInt8("kdf") == scryptID else {
                throw WalletKeyError.damaged(path: "", reason: "unknown key derivation")
            }
            let cost = PINKeyCost(
                logN: try reader.readUInt8("logN"), blockSize: try reader.readUInt8("r"),
                parallelism: try reader.readUInt8("p"))
            let key = SealedWalletKey(
                cost: cost, salt: try reader.readBytes(16, "salt"), lockID: try reader.readBytes(16, "lock id"),
                publicKey: try reader.readBytes(65, "public key"), nonce: try reader.readBytes(12, "nonce"),
                ciphertext: try reader.readBytes(32, "ciphertext"), tag: try reader.readBytes(16, "tag"))
            try reader.expectEnd()
            return key
        } catch let error as WalletKeyError {
            throw error
        } catch {
            throw .damaged(path: "", reason: "\(error)")
        }
    }
}

extension WalletKeyError {
    /// The same error naming the file it is about.
    func at(_ path: String) -> WalletKeyError {
        if case .damaged(_, let reason) = self { return .damaged(path: path, reason: reason) }
        return self
    }
}

/// Where wrong PINs are counted, and how many.
public struct PINLockState: Sendable, Equatable {
    public let failures: Int
    public let lockedUntil: Int64

    public init(failures: Int, lockedUntil: Int64) {
        self.failures = failures
        self.lockedUntil = lockedUntil
    }
}

/// The wallet's key file and its PIN attempt record in a data directory.
///
/// **Why a second, authenticated record, and what it can and cannot do.** A wrong PIN cannot
/// re-encrypt the key file (that needs the key), so the counter cannot live in the key file's
/// associated data; it lives in `pin-lock.json`, HMACed with a key derived from a random
/// 32-byte secret in `pin-lock.key` (0600, made with the first PIN), salted with the key
/// file's authenticated header (its random lock id, salt and public key). Someone who has read
/// the key file (and the record) cannot write a record that verifies: the key file holds
/// nothing the MAC key comes from; and a record made for another file or an earlier PIN does
/// not verify either. A record that is missing, unreadable or does not verify, or a missing
/// secret, is not "no failures": it is replaced by one deep in the back-off, so deleting,
/// truncating, resetting or editing the record never buys a try. Each attempt is counted and
/// synced before the PIN is tried, so killing the program once it knows the answer does not
/// undo the count. What no file-only scheme can stop is someone with the whole data directory
/// (or the owner's account): they can copy an older record back together with its secret, or
/// copy the key file and try PINs offline, paying scrypt's cost per guess; hence the
/// 6-character minimum and N = 2^15. A server-held counter would close that.
public struct WalletKeyVault {
    public static let lockFile = "pin-lock.json"
    /// The attempt record's MAC secret: 32 random bytes, never derivable from the key file.
    public static let lockSecretFile = "pin-lock.key"

    public let directory: DataDirectory
    public let keyFile: String
    public var policy: PINPolicy
    public var cost: PINKeyCost
    public var now: @Sendable () -> Int64
    /// What encrypts a pinless key for this device, when it is installed.
    public var systemdCreds: SystemdCredsTool?

    public init(
        directory: DataDirectory, keyFile: String, policy: PINPolicy = PINPolicy(), cost: PINKeyCost = .standard,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        systemdCreds: SystemdCredsTool? = SystemdCredsTool.installed()
    ) {
        self.directory = directory
        self.keyFile = keyFile
        self.policy = policy
        self.cost = cost
        self.now = now
        self.systemdCreds = systemdCreds
    }

    /// The key file as stored: a plain PEM key (no PIN yet) or a sealed one.
    public enum Stored {
        /// Pinless: a 0600 PEM file, or a credential systemd-creds decrypted (`pinlessProtection`).
        case plain(P256.Signing.PrivateKey)
        /// Sealed under a PIN counted in `pin-lock.json` (a wallet without a server).
        case sealed(SealedWalletKey)
        /// Sealed under a PIN and a share the server releases to a right proof (`WalletPINClient`).
        case countedByServer(ServerSealedWalletKey)
    }

    var keyPath: String { directory.file(keyFile).path }

    public func stored() throws -> Stored {
        let text = String(decoding: try directory.read(keyFile), as: UTF8.self)
        if ServerSealedWalletKey.isSealed(pem: text) {
            do { return .countedByServer(try ServerSealedWalletKey.decode(pem: text)) } catch {
                throw WalletKeyError.damaged(path: keyPath, reason: "\(error)")
            }
        }
        if SealedWalletKey.isSealed(pem: text) {
            do { return .sealed(try SealedWalletKey.decode(pem: text)) } catch { throw error.at(keyPath) }
        }
        if DeviceSealedWalletKey.isSealed(pem: text) {
            guard let tool = systemdCreds else {
                throw WalletKeyError.deviceProtectionUnavailable(
                    "the key is encrypted by systemd-creds, which is not installed")
            }
            do { return .plain(try DeviceSealedWalletKey.decode(pem: text).open(with: tool)) } catch {
                throw error.at(keyPath)
            }
        }
        // A plain key others may read is as good as theirs: refused rather than used.
        let mode = Self.mode(of: keyPath)
        if mode >= 0, mode & 0o077 != 0 { throw WalletKeyError.exposedKeyFile(path: keyPath, mode: mode) }
        do { return .plain(try P256.Signing.PrivateKey(pemRepresentation: text)) } catch {
            throw WalletKeyError.damaged(path: keyPath, reason: "neither a P-256 private key nor a sealed wallet key")
        }
    }

    /// What protects the key while it is pinless; nil once a PIN is set. Reads the file only
    /// (a credential is not decrypted).
    public func pinlessProtection() throws -> PinlessKeyProtection? {
        let text = String(decoding: try directory.read(keyFile), as: UTF8.self)
        if ServerSealedWalletKey.isSealed(pem: text) || SealedWalletKey.isSealed(pem: text) { return nil }
        if DeviceSealedWalletKey.isSealed(pem: text) {
            do { return .systemdCreds(try DeviceSealedWalletKey.decode(pem: text).seal) } catch {
                throw error.at(keyPath)
            }
        }
        return .filePermissions
    }

    /// The pinless key file's contents under `choice`: `auto` takes systemd-creds (with the TPM2
    /// where there is one) when it can encrypt here, else the plain file.
    public func pinlessFile(for key: P256.Signing.PrivateKey, protection choice: WalletKeyProtectionChoice)
        throws(WalletKeyError) -> (text: String, protection: PinlessKeyProtection)
    {
        let plain = (key.pemRepresentation, PinlessKeyProtection.filePermissions)
        if choice == .file { return plain }
        guard let tool = systemdCreds else {
            if choice == .auto { return plain }
            throw .deviceProtectionUnavailable("systemd-creds is not installed")
        }
        let seal: SystemdCredsTool.Seal = tool.hasTPM2() ? .tpm2 : .host
        let sealed: DeviceSealedWalletKey
        do { sealed = try DeviceSealedWalletKey.seal(key, seal: seal, with: tool) } catch {
            if choice == .auto { return plain }
            throw error
        }
        // Proven to open before the plain key is replaced by it.
        guard (try? sealed.open(with: tool).rawRepresentation) == key.rawRepresentation else {
            if choice == .auto { return plain }
            throw .deviceProtectionUnavailable("systemd-creds encrypted the key but could not decrypt it again")
        }
        return (sealed.pem, .systemdCreds(seal))
    }

    static func mode(of path: String) -> Int {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let mode = attributes[.posixPermissions] as? NSNumber
        else { return -1 }
        return mode.intValue & 0o777
    }

    public var isPINSet: Bool {
        switch try? stored() {
        case .sealed, .countedByServer: true
        case .plain, nil: false
        }
    }

    /// The public key, which needs no PIN (a sealed file names it in its authenticated header).
    public func publicKey() throws -> P256.Signing.PublicKey {
        switch try stored() {
        case .plain(let key): return key.publicKey
        case .sealed(let sealed):
            do { return try P256.Signing.PublicKey(x963Representation: sealed.publicKey) } catch {
                throw WalletKeyError.damaged(path: keyPath, reason: "its public key is not a P-256 point")
            }
        case .countedByServer(let sealed):
            do { return try P256.Signing.PublicKey(x963Representation: sealed.walletPublicKey) } catch {
                throw WalletKeyError.damaged(path: keyPath, reason: "its public key is not a P-256 point")
            }
        }
    }

    /// The private key: as it is while no PIN is set, else after the lock rules and `pin()`
    /// (asked only when a try is allowed).
    public func unlock(pin: () throws -> String) throws -> P256.Signing.PrivateKey {
        switch try stored() {
        case .plain(let key): return key
        case .sealed(let sealed): return try open(sealed, pin: try allowedAttempt(sealed, pin: pin))
        case .countedByServer: throw WalletKeyError.countedByServer
        }
    }

    /// Replaces the key file with `sealed` (one rename); the local attempt record, which such a
    /// file does not use, goes.
    public func store(_ sealed: ServerSealedWalletKey) throws {
        try directory.write(Data(sealed.pem.utf8), to: keyFile)
        try? FileManager.default.removeItem(at: directory.file(Self.lockFile))
        try? FileManager.default.removeItem(at: directory.file(Self.lockSecretFile))
    }

    /// Replaces the key file with the pinless key, protected by the device as `protection` says.
    @discardableResult
    public func storePinless(_ key: P256.Signing.PrivateKey, protection: WalletKeyProtectionChoice = .file) throws
        -> PinlessKeyProtection
    {
        let file = try pinlessFile(for: key, protection: protection)
        try directory.write(Data(file.text.utf8), to: keyFile)
        try? FileManager.default.removeItem(at: directory.file(Self.lockFile))
        try? FileManager.default.removeItem(at: directory.file(Self.lockSecretFile))
        return file.protection
    }

    /// Encrypts the plain key under a first PIN.
    public func setPIN(_ pin: String) throws {
        guard case .plain(let key) = try stored() else { throw WalletKeyError.pinAlreadySet }
        try replace(with: try SealedWalletKey.seal(key, pin: try validated(pin), cost: cost))
    }

    /// Re-encrypts the key under `new` after `current` opened it (the lock rules apply to `current`).
    public func changePIN(current: () throws -> String, new: () throws -> String) throws {
        guard case .sealed(let sealed) = try stored() else { throw WalletKeyError.pinNotSet }
        let key = try open(sealed, pin: try allowedAttempt(sealed, pin: current))
        try replace(with: try SealedWalletKey.seal(key, pin: try validated(try new()), cost: cost))
    }

    /// The attempt record as it stands (nil while no PIN is set).
    public func lockState() throws -> PINLockState? {
        switch try stored() {
        case .plain: return nil
        case .sealed(let sealed): return try verifiedLockState(sealed)
        case .countedByServer: throw WalletKeyError.countedByServer
        }
    }

    // MARK: Attempts

    /// The PIN to try, after refusing while blocked and counting this attempt first.
    private func allowedAttempt(_ sealed: SealedWalletKey, pin: () throws -> String) throws -> (String, Int) {
        let state = try verifiedLockState(sealed)
        let time = now()
        if state.lockedUntil > time {
            throw WalletKeyError.blockedWithWrongPIN(remainingSeconds: state.lockedUntil - time)
        }
        let pin = try pin()
        let failures = state.failures + 1
        let delay = policy.delay(afterFailures: failures)
        try writeLock(PINLockState(failures: failures, lockedUntil: delay > 0 ? time + delay : 0), for: sealed)
        return (pin, failures)
    }

    private func open(_ sealed: SealedWalletKey, pin attempt: (String, Int)) throws -> P256.Signing.PrivateKey {
        let key: P256.Signing.PrivateKey?
        do { key = try sealed.open(pin: attempt.0) } catch { throw error.at(keyPath) }
        guard let key else {
            throw WalletKeyError.wrongPIN(
                attemptsBeforeLock: max(0, policy.freeAttempts - attempt.1),
                lockedFor: policy.delay(afterFailures: attempt.1))
        }
        try writeLock(PINLockState(failures: 0, lockedUntil: 0), for: sealed)
        return key
    }

    /// The record if it verifies for this key file; otherwise (missing, unreadable, another
    /// file's, edited) a fresh record deep in the back-off, written before it is reported.
    private func verifiedLockState(_ sealed: SealedWalletKey) throws -> PINLockState {
        let time = now()
        if let secret = lockSecret(),
            let data = try? directory.read(Self.lockFile),
            let record = try? JSONDecoder().decode(LockRecord.self, from: data), record.version == 2,
            let mac = Data(base64Encoded: record.mac),
            HMAC<SHA256>.isValidAuthenticationCode(
                mac, authenticating: LockRecord.signedBytes(record.failures, record.lockedUntil),
                using: sealed.lockKey(secret: secret)),
            record.failures >= 0
        {
            // A clock set back must not stretch a lock beyond the longest one.
            if record.lockedUntil - time > policy.maximumDelay {
                let state = PINLockState(failures: record.failures, lockedUntil: time + policy.maximumDelay)
                try writeLock(state, for: sealed)
                return state
            }
            return PINLockState(failures: record.failures, lockedUntil: record.lockedUntil)
        }
        let state = PINLockState(failures: policy.tamperedFailures, lockedUntil: time + policy.maximumDelay)
        try writeLock(state, for: sealed)
        throw WalletKeyError.lockRecordTampered(remainingSeconds: policy.maximumDelay)
    }

    /// The lock secret, nil when it is missing or not 32 bytes.
    private func lockSecret() -> SymmetricKey? {
        guard let data = try? directory.read(Self.lockSecretFile), data.count == 32 else { return nil }
        return SymmetricKey(data: data)
    }

    /// The lock secret, made when missing or damaged (a record under the old one then no longer
    /// verifies, which blocks rather than gives tries).
    private func lockSecretMadeIfMissing() throws -> SymmetricKey {
        if let secret = lockSecret() { return secret }
        let secret = SymmetricKey(size: .bits256)
        try directory.write(secret.withUnsafeBytes { Data($0) }, to: Self.lockSecretFile)
        return secret
    }

    private func writeLock(_ state: PINLockState, for sealed: SealedWalletKey) throws {
        let mac = HMAC<SHA256>.authenticationCode(
            for: LockRecord.signedBytes(state.failures, state.lockedUntil),
            using: sealed.lockKey(secret: try lockSecretMadeIfMissing()))
        let record = LockRecord(
            version: 2, failures: state.failures, lockedUntil: state.lockedUntil, mac: Data(mac).base64EncodedString())
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try directory.write(try encoder.encode(record), to: Self.lockFile)
    }

    /// Writes the sealed key over the old file (one rename: never both, never half), then its
    /// clean attempt record. A crash between the two leaves a record that does not verify,
    /// which blocks for a while rather than giving tries.
    private func replace(with sealed: SealedWalletKey) throws {
        try directory.write(Data(sealed.pem.utf8), to: keyFile)
        try writeLock(PINLockState(failures: 0, lockedUntil: 0), for: sealed)
    }

    func validated(_ pin: String) throws(WalletKeyError) -> String {
        guard pin.count >= policy.minimumLength, pin.utf8.count <= 64 else {
            throw .unacceptablePIN("a PIN must have \(policy.minimumLength) to 64 characters")
        }
        guard !pin.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .unacceptablePIN("a PIN cannot contain control characters")
        }
        return pin
    }

    struct LockRecord: Codable {
        let version: Int
        let failures: Int
        let lockedUntil: Int64
        let mac: String

        static func signedBytes(_ failures: Int, _ lockedUntil: Int64) -> [UInt8] {
            Array("horizon/pin-lock/v2\n\(failures)\n\(lockedUntil)".utf8)
        }
    }
}
