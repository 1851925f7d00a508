import ArgumentParser
import Crypto
import Foundation
import HorizonAPI
import HorizonCLISupport
import HorizonCore
import HorizonRadioCLISupport
import HorizonSecureChannel
import HorizonServerClient

/// `register`: a new wallet account on a Horizon server, for this wallet's key.
struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Register this wallet with a Horizon server: a PUK is texted to your phone, an activation link mailed.",
        discussion: """
            Makes the wallet's key if there is none. Then give the PUK within 10 minutes with \
            `horizon-wallet verify PUK`, open the mailed link and press its button, and run \
            `horizon-wallet activation-status`: once both are proven the wallet is registered and pins the \
            server's trust anchor, so `pay` trusts its terminals.
            """)

    @Option(help: "The server's URL, e.g. http://127.0.0.1:8080.") var server: String
    @Option(help: "Your name.") var name: String
    @Option(help: "Your e-mail address (a restoration on a new device sends its code there).") var email: String
    @Option(help: "Your mobile number in international form, e.g. +4915112345678 (the PUK is texted there).")
    var phone: String
    @Option(help: "The invitation code the operator gave you (needed when the server asks for one).")
    var invitationCode: String?
    @Flag(
        help:
            "Keep the key without a PIN (the reference's pinless registration): protected by this device; the server limits each payment."
    )
    var pinless = false
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var keyProtection: KeyProtectionOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let url = try WalletServer.url(server)
        let files = global.walletFiles
        try WalletServer.refuseIfRegistered(files)
        try WalletServer.ensureKey(files, protection: keyProtection.keyProtection)
        let key = try files.keyVault().unlock(pin: pin.current)
        let (name, email, phone, invitationCode) = (name, email, phone, invitationCode)
        let sent = try await WalletServer.call(url) { () async throws(ServerClientError) in
            try await HorizonServerClient(serverURL: url).registerWalletWithActivationLink(
                name: name, email: email, phone: phone, invitationCode: invitationCode, key: key)
        }
        try WalletServer.start(
            .registration, sent, server: url, email: email, files: files, json: json, pinless: pinless)
    }
}

/// `restore`: move an account registered elsewhere to this device's key.
struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Restore your wallet account on this device: a PUK is texted to the account's phone.",
        discussion: """
            Makes this device's key if there is none. Then run `horizon-wallet verify PUK`: a reactivation token \
            is mailed to the account's address; `horizon-wallet reactivate TOKEN` makes this key the account's \
            and revokes every older key (the lost device's) at that moment. The server answers the same whether \
            or not the e-mail has an account, so no PUK arriving means the e-mail is not the registered one (an \
            account registered without a phone gets its PUK by mail).
            """)

    @Option(help: "The server's URL, e.g. http://127.0.0.1:8080.") var server: String
    @Option(help: "The e-mail address the account was registered with.") var email: String
    @Flag(
        help:
            "Keep this device's key without a PIN (the reference's pinless restoration): protected by this device; once reactivated the server limits each payment."
    )
    var pinless = false
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var keyProtection: KeyProtectionOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let url = try WalletServer.url(server)
        let files = global.walletFiles
        try WalletServer.refuseIfRegistered(files)
        try WalletServer.ensureKey(files, protection: keyProtection.keyProtection)
        let key = try files.keyVault().unlock(pin: pin.current)
        let email = email
        let sent = try await WalletServer.call(url) { () async throws(ServerClientError) in
            try await HorizonServerClient(serverURL: url).restoreWalletWithReactivationLink(email: email, key: key)
        }
        try WalletServer.start(
            .restoration, sent, server: url, email: email, files: files, json: json, pinless: pinless)
    }
}

/// `verify CODE`: completes the pending registration or restoration and pins the server's anchor.
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Give the PUK texted to you after `register` or `restore` (older registrations: their codes)."
    )

    @Argument(help: "The 8-digit PUK texted to you (for a registration or a restoration).")
    var code: String
    @Argument(help: "For a registration: the 8-digit code mailed to you (each channel proves itself).")
    var emailCode: String?
    @Option(
        help: ArgumentHelp(
            "The server's anchor fingerprint as its operator publishes it (`horizon-server anchor`).",
            discussion:
                "64 hex digits (spaces and colons are ignored). Without it, the fingerprint is shown and you are asked to confirm it; no answer is no."
        )) var anchorFingerprint: String?
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard code.filter({ !$0.isWhitespace }).count == 8,
            code.allSatisfy({ $0.isWhitespace || ("0"..."9").contains($0) })
        else { throw ValidationError("CODE must be the 8 digits you received") }
        if let emailCode,
            emailCode.filter({ !$0.isWhitespace }).count != 8
                || !emailCode.allSatisfy({ $0.isWhitespace || ("0"..."9").contains($0) })
        {
            throw ValidationError("EMAIL-CODE must be the 8 digits mailed to you")
        }
        if let anchorFingerprint, WalletServer.fingerprintDigits(anchorFingerprint) == nil {
            throw ValidationError("--anchor-fingerprint must be 64 hex digits (spaces and colons are ignored)")
        }
    }

    func run() async throws {
        let files = global.walletFiles
        guard let pending = try WalletServer.pending(files) else {
            throw CLIError(
                "nothing to verify: start with `horizon-wallet register` (a new account) or `horizon-wallet restore` (a new device)"
            )
        }
        if pending.byLink { return try await givePuk(pending, files: files) }
        if json, anchorFingerprint == nil {
            throw ValidationError("--json needs --anchor-fingerprint (there is nobody to confirm the fingerprint)")
        }
        let url = try WalletServer.url(pending.server)
        let emailCode = emailCode?.filter { !$0.isWhitespace }
        switch (pending.kind, emailCode) {
        case (.registration, nil):
            throw ValidationError("a registration needs both codes: horizon-wallet verify SMS-CODE EMAIL-CODE")
        case (.restoration, .some):
            throw ValidationError("a restoration has one code, the mailed one: horizon-wallet verify CODE")
        default: break
        }
        let client = HorizonServerClient(serverURL: url)
        // The anchor is trusted because the person confirms its fingerprint (or passes the one
        // the operator published), never because the network returned it: a man in the middle
        // could return its own. Confirmed first, so a refusal leaves the code unused.
        let anchor = try await WalletServer.call(url) { () async throws(ServerClientError) in
            try await client.anchor()
        }
        let key = try WalletServer.anchorKey(anchor)
        let fingerprint = WalletServer.fingerprint(of: key)
        if let anchorFingerprint {
            guard WalletServer.sameFingerprint(anchorFingerprint, fingerprint) else {
                throw CLIError(
                    "the server's anchor has the fingerprint \(fingerprint), not the one given (\(anchorFingerprint)); nothing was pinned and the code was not used"
                )
            }
        } else {
            print("The server's trust anchor \"\(anchor.name.sanitizedForDisplay)\" has the fingerprint")
            print("  \(fingerprint)")
            print("Compare it with the one the server's operator publishes (`horizon-server anchor`).")
            guard await Console().confirm("Is it the same?") else {
                throw CLIError(
                    "the anchor's fingerprint was not confirmed; nothing was pinned and the code was not used (run verify again, or pass --anchor-fingerprint)"
                )
            }
        }
        let (id, code) = (pending.registrationId, code.filter { !$0.isWhitespace })
        let verified = try await WalletServer.call(url, forget: files) { () async throws(ServerClientError) in
            switch pending.kind {
            case .registration:
                try await client.verifyWalletRegistration(id: id, smsCode: code, emailCode: emailCode ?? "")
            case .restoration: try await client.verifyWalletRestoration(id: id, code: code)
            }
        }
        // The verify must name the anchor that was confirmed.
        guard anchor.publicKey == verified.anchor.publicKey else {
            throw CLIError("the server named two different trust anchors; nothing was pinned (ask its operator)")
        }
        let pinned = try WalletServer.pin(anchor, files: files)
        let account = WalletAccount(
            server: url.absoluteString, walletId: verified.walletId, anchorName: anchor.name,
            anchorKeyId: pinned.keyID, anchorFingerprint: pinned.fingerprint)
        try WalletServer.save(account, files: files)
        try? FileManager.default.removeItem(at: files.directory.file(WalletServer.pendingFile))
        if json {
            return try Console().json(
                VerifyJSON(
                    kind: pending.kind.rawValue, walletId: verified.walletId, server: account.server,
                    revokedKeys: verified.revokedKeys,
                    anchor: .init(name: anchor.name, keyId: pinned.keyID, fingerprint: pinned.fingerprint)))
        }
        switch pending.kind {
        case .registration: print("Wallet registered: account \(verified.walletId) at \(account.server)")
        case .restoration:
            print(
                "Wallet restored on this device: account \(verified.walletId); \(verified.revokedKeys) older key\(verified.revokedKeys == 1 ? "" : "s") revoked"
            )
        }
        print("Pinned the server's trust anchor \"\(anchor.name.sanitizedForDisplay)\" (key id \(pinned.keyID))")
        print("  fingerprint \(pinned.fingerprint)")
    }

    /// The PUK of a registration proven by link or of a restoration, signed with this device's key.
    private func givePuk(_ pending: PendingVerification, files: WalletFiles) async throws {
        guard emailCode == nil else {
            throw ValidationError("give the PUK alone: horizon-wallet verify PUK (the e-mail is proven by its link)")
        }
        let url = try WalletServer.url(pending.server)
        let key = try files.keyVault().unlock(pin: pin.current)
        let client = HorizonServerClient(serverURL: url, signingKey: key)
        let (id, puk) = (pending.registrationId, code.filter { !$0.isWhitespace })
        switch pending.kind {
        case .registration:
            let status = try await WalletServer.call(url, forget: files) { () async throws(ServerClientError) in
                try await client.submitRegistrationPuk(id: id, puk: puk)
            }
            if json {
                return try Console().json(
                    ActivationStatus.StatusJSON(
                        active: status.active, phoneProven: status.phoneProven, emailProven: status.emailProven,
                        activationExpiresAt: status.activationExpiresAt, walletId: status.walletId, anchor: nil))
            }
            print("PUK accepted: your phone is proven.")
            if status.active {
                print("Your e-mail is confirmed too: run `horizon-wallet activation-status` to finish.")
            } else {
                print(
                    "Open the link in the activation mail and press its button, then run `horizon-wallet activation-status`."
                )
            }
        case .restoration:
            // Not `forget`: a PUK given twice is `used`, and the mailed token still needs this restoration.
            let accepted = try await WalletServer.call(url) { () async throws(ServerClientError) in
                try await client.submitRestorationPuk(id: id, puk: puk)
            }
            if json {
                return try Console().json(
                    ReactivationJSON(
                        registrationId: accepted.registrationId, sentTo: accepted.sentTo,
                        reactivationExpiresAt: accepted.reactivationExpiresAt))
            }
            let until = ISO8601DateFormatter().string(
                from: Date(timeIntervalSince1970: TimeInterval(accepted.reactivationExpiresAt)))
            print("PUK accepted: a reactivation token was mailed (\(accepted.sentTo.joined(separator: ", "))).")
            print("Run `horizon-wallet reactivate TOKEN` on this device before \(until).")
        }
    }

    struct ReactivationJSON: Encodable {
        let registrationId: String
        let sentTo: [String]
        let reactivationExpiresAt: Int64
    }

    struct VerifyJSON: Encodable {
        struct Anchor: Encodable {
            let name: String
            let keyId: String
            let fingerprint: String
        }
        let kind: String
        let walletId: String
        let server: String
        let revokedKeys: Int64
        let anchor: Anchor
    }
}

/// What `register`/`restore` leave for `verify` (registration.json).
struct PendingVerification: Codable {
    enum Kind: String, Codable {
        case registration, restoration
    }
    let kind: Kind
    let server: String
    let registrationId: String
    let expiresAt: Int64
    let email: String
    /// "link": the PUK comes back alone (`verify PUK`), then the activation link
    /// (`activation-status`) or the reactivation token (`reactivate`); nil: the older codes.
    var proof: String? = nil
    /// `register --pinless`: the server is told once the wallet is active.
    var pinless: Bool? = nil

    var byLink: Bool { proof == "link" }
}

/// The account this wallet is registered to (account.json).
struct WalletAccount: Codable {
    let server: String
    let walletId: String
    let anchorName: String
    let anchorKeyId: String
    let anchorFingerprint: String
}

/// The wallet's side of registration: its files, the server calls and their errors in words.
enum WalletServer {
    static let pendingFile = "registration.json"
    static let accountFile = "account.json"

    static func url(_ text: String) throws -> URL {
        do { return try HorizonServerClient.url(text) } catch { throw ValidationError("--server: \(error)") }
    }

    static func account(_ files: WalletFiles) throws -> WalletAccount? {
        guard files.directory.exists(accountFile) else { return nil }
        return try decode(WalletAccount.self, accountFile, files)
    }

    static func pending(_ files: WalletFiles) throws -> PendingVerification? {
        guard files.directory.exists(pendingFile) else { return nil }
        return try decode(PendingVerification.self, pendingFile, files)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ name: String, _ files: WalletFiles) throws -> T {
        do { return try JSONDecoder().decode(type, from: try files.directory.read(name)) } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("\(files.directory.file(name).path) is damaged (\(error)); remove it and start again")
        }
    }

    static func save(_ value: some Encodable, to name: String, files: WalletFiles) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try files.directory.write(try encoder.encode(value), to: name)
    }

    static func save(_ account: WalletAccount, files: WalletFiles) throws {
        try save(account, to: accountFile, files: files)
    }

    static func refuseIfRegistered(_ files: WalletFiles) throws {
        if let account = try account(files) {
            throw CLIError(
                "this wallet is registered already (account \(account.walletId) at \(account.server)); to use another account, pass another --data-dir"
            )
        }
    }

    /// A wallet registering first (or a new device restoring) gets its key here, with no PIN yet.
    static func ensureKey(_ files: WalletFiles, protection: WalletKeyProtectionChoice) throws {
        if !files.directory.exists(WalletFiles.walletKey) {
            _ = try files.initialize(trusting: [], force: false, keyProtection: protection)
        }
    }

    /// Keeps what `verify` needs and says where the code went.
    static func start(
        _ kind: PendingVerification.Kind, _ sent: Components.Schemas.OneTimeCodeSent, server: URL, email: String,
        files: WalletFiles, json: Bool, pinless: Bool = false
    ) throws {
        try save(
            PendingVerification(
                kind: kind, server: server.absoluteString, registrationId: sent.registrationId,
                expiresAt: sent.expiresAt, email: email, proof: "link", pinless: pinless ? true : nil),
            to: pendingFile, files: files)
        if json {
            return try Console().json(
                StartJSON(
                    kind: kind.rawValue, registrationId: sent.registrationId, expiresAt: sent.expiresAt,
                    sentTo: sent.sentTo,
                    server: server.absoluteString))
        }
        let until = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(sent.expiresAt)))
        switch kind {
        case .registration:
            print("A PUK was texted and an activation link mailed (\(sent.sentTo.joined(separator: ", "))).")
            print("Run `horizon-wallet verify PUK` before \(until), open the link and press its button,")
            print("then run `horizon-wallet activation-status`.")
        case .restoration:
            print("If a wallet is registered with \(email), a PUK was texted to its phone.")
            print("Run `horizon-wallet verify PUK` before \(until); a reactivation token is then mailed to \(email).")
        }
    }

    struct StartJSON: Encodable {
        let kind: String
        let registrationId: String
        let expiresAt: Int64
        let sentTo: [String]
        let server: String
    }

    /// Writes the anchor where the wallet's trusted anchors live; returns its key id and the
    /// fingerprint computed here (not the server's text).
    static func pin(_ anchor: Components.Schemas.Anchor, files: WalletFiles) throws -> (
        keyID: String, fingerprint: String
    ) {
        let key = try anchorKey(anchor)
        let fingerprint = fingerprint(of: key)
        guard fingerprint == anchor.fingerprint else {
            throw CLIError("the server's anchor does not match the fingerprint it states; nothing was pinned")
        }
        let keyID = keyIdentifier(of: key).hexString
        let trust = DataDirectory(explicit: files.directory.file(WalletFiles.trustDirectory).path, role: "")
        try trust.create()
        try KeyFiles.writePublic(key, to: keyID + ".pub", in: trust)
        return (keyID, fingerprint)
    }

    static func anchorKey(_ anchor: Components.Schemas.Anchor) throws -> P256.Signing.PublicKey {
        guard let bytes = Data(base64Encoded: anchor.publicKey),
            let key = try? P256.Signing.PublicKey(x963Representation: bytes)
        else { throw CLIError("the server's anchor is not a P-256 public key; nothing was pinned") }
        return key
    }

    /// A fingerprint's 64 hex digits in lower case (spaces and colons dropped), nil if it is not one.
    static func fingerprintDigits(_ text: String) -> [UInt8]? {
        let digits = Array(text.lowercased().utf8.filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: ":") })
        guard digits.count == 64,
            digits.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return nil }
        return digits
    }

    /// Whether two fingerprints are the same, compared in constant time.
    static func sameFingerprint(_ given: String, _ computed: String) -> Bool {
        guard let a = fingerprintDigits(given), let b = fingerprintDigits(computed) else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// SHA-256 of the X9.63 key in groups of four hex digits, as `horizon-server anchor` prints it.
    static func fingerprint(of key: P256.Signing.PublicKey) -> String {
        let hex = Array(SHA256.hash(data: key.x963Representation)).hexString
        var groups: [Substring] = []
        var rest = Substring(hex)
        while !rest.isEmpty {
            groups.append(rest.prefix(4))
            rest = rest.dropFirst(4)
        }
        return groups.joined(separator: " ")
    }

    /// Runs a server call; its failure becomes one line a person can act on. With `forget`, a
    /// registration that can no longer complete is forgotten, so the next step is a fresh start.
    static func call<T: Sendable>(
        _ server: URL, forget files: WalletFiles? = nil, _ body: () async throws(ServerClientError) -> T
    ) async throws -> T {
        do { return try await body() } catch {
            if let files, let code = error.code,
                ["registration_expired", "registration_used", "registration_locked", "registration_not_found"].contains(
                    code)
            {
                try? FileManager.default.removeItem(at: files.directory.file(pendingFile))
            }
            throw CLIError(describe(error, server: server))
        }
    }

    static func describe(_ error: ServerClientError, server: URL) -> String {
        switch error {
        case .unreachable(let sentence):
            return sentence
        case .timedOut: return "the server \(server.absoluteString) did not answer in time; try again"
        case .refused(_, let code, let message, let requestID):
            let what =
                switch code {
                case "registration_code_invalid": "wrong code"
                case "registration_expired": "code expired"
                case "registration_used": "code already used"
                case "registration_locked": "registration locked"
                case "registration_not_found": "no such registration"
                case "already_exists": "already registered"
                case "invitation_required", "invitation_unknown", "invitation_spent", "invitation_revoked":
                    "invitation refused"
                default: "refused"
                }
            return "\(what): \(message) (\(code), request \(requestID))"
        case .invalidResponse, .invalidServerURL, .insecureServerURL, .cancelled, .notRelayed, .relayOutcomeUnknown:
            return error.description
        }
    }
}
