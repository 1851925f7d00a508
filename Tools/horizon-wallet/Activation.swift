import ArgumentParser
import Crypto
import Foundation
import HorizonAPI
import HorizonCLISupport
import HorizonCore
import HorizonRadioCLISupport
import HorizonServerClient
import HorizonServiceClients

/// `activation-status`: where a registration proven by PUK and activation link stands (the
/// reference's `retryCheckActivationAgain`); once both are proven, the server's anchor is pinned
/// and the wallet is registered.
struct ActivationStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activation-status",
        abstract: "Check whether your registration is active (PUK given, e-mail link confirmed); finish it when it is.",
        discussion: """
            Open the link in the activation mail and press its button (or pass the link with --confirm-link: \
            there are no universal links on Linux), and give the PUK with `horizon-wallet verify PUK`, in either \
            order. When both are proven this pins the server's trust anchor and the wallet is registered.
            """)

    @Option(help: "The link from the activation mail: the wallet confirms it as its page's button does.")
    var confirmLink: String?
    @Option(help: "Ask again every 2 s for at most this many seconds until the registration is active.")
    var wait: Int = 0
    @Option(help: "The server's anchor fingerprint as its operator publishes it (`horizon-server anchor`).")
    var anchorFingerprint: String?
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (0...3600).contains(wait) else { throw ValidationError("--wait must be 0 to 3600 seconds") }
        if let anchorFingerprint, WalletServer.fingerprintDigits(anchorFingerprint) == nil {
            throw ValidationError("--anchor-fingerprint must be 64 hex digits (spaces and colons are ignored)")
        }
    }

    func run() async throws {
        let files = global.walletFiles
        guard let pending = try WalletServer.pending(files), pending.kind == .registration, pending.byLink else {
            throw CLIError("no registration waits for its activation: start with `horizon-wallet register`")
        }
        let url = try WalletServer.url(pending.server)
        let key = try files.keyVault().unlock(pin: pin.current)
        let client = HorizonServerClient(serverURL: url, signingKey: key)
        if let confirmLink {
            try await WalletServer.call(url, forget: files) { () async throws(ServerClientError) in
                try await HorizonServerClient(serverURL: url).confirmActivationLink(confirmLink)
            }
        }
        let id = pending.registrationId
        let deadline = ContinuousClock.now + .seconds(wait)
        var status = try await WalletServer.call(url, forget: files) { () async throws(ServerClientError) in
            try await client.registrationActivation(id: id)
        }
        while !status.active, ContinuousClock.now < deadline {
            try await Task.sleep(for: .seconds(2))
            status = try await WalletServer.call(url, forget: files) { () async throws(ServerClientError) in
                try await client.registrationActivation(id: id)
            }
        }
        guard status.active, let walletId = status.walletId else {
            if json {
                return try Console().json(
                    StatusJSON(
                        active: false, phoneProven: status.phoneProven, emailProven: status.emailProven,
                        activationExpiresAt: status.activationExpiresAt, walletId: nil, anchor: nil))
            }
            let until = ISO8601DateFormatter().string(
                from: Date(timeIntervalSince1970: TimeInterval(status.activationExpiresAt)))
            print("Not active yet:")
            print("  PUK (phone): \(status.phoneProven ? "given" : "not given; run `horizon-wallet verify PUK`")")
            print(
                "  e-mail: \(status.emailProven ? "confirmed" : "not confirmed; open the link in the activation mail and press its button (before \(until))")"
            )
            return
        }
        let anchor = try await WalletServer.confirmedAnchor(
            url, given: anchorFingerprint, json: json, what: "the wallet")
        guard status.anchor?.publicKey == nil || status.anchor?.publicKey == anchor.publicKey else {
            throw CLIError("the server named two different trust anchors; nothing was pinned (ask its operator)")
        }
        if pending.pinless == true {
            // Active now: the server limits the pinless wallet's payments from here on.
            do { try await WalletPINClient(serverURL: url).declarePinless(key) } catch {
                throw CLIError(error.description)
            }
        }
        let account = try WalletServer.finish(
            anchor: anchor, walletId: walletId, server: url, files: files)
        if json {
            return try Console().json(
                StatusJSON(
                    active: true, phoneProven: true, emailProven: true, activationExpiresAt: status.activationExpiresAt,
                    walletId: walletId,
                    anchor: .init(
                        name: anchor.name, keyId: account.anchorKeyId, fingerprint: account.anchorFingerprint)))
        }
        print("Wallet registered: account \(walletId) at \(account.server)")
        print("Pinned the server's trust anchor \"\(anchor.name.sanitizedForDisplay)\" (key id \(account.anchorKeyId))")
        print("  fingerprint \(account.anchorFingerprint)")
    }

    struct StatusJSON: Encodable {
        let active: Bool
        let phoneProven: Bool
        let emailProven: Bool
        let activationExpiresAt: Int64
        let walletId: String?
        /// The anchor pinned, once active.
        let anchor: Verify.VerifyJSON.Anchor?
    }
}

/// `reactivate TOKEN`: the last step of `restore`: the account moves to this device's key and
/// every other key of it is revoked at once.
struct Reactivate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Finish `restore` with the token from the reactivation mail: this device's key takes over the account.",
        discussion: """
            The token works once, on this device only (the one that ran `restore` and `verify PUK`). Reactivating \
            revokes the account's other keys at that moment: the lost device can no longer pay, online or offline. \
            Balance, history and loyalty stay with the account. On a phone a tap on the mail's link does this; on \
            Linux there are no universal links, so the token (or the whole link) is given here.
            """)

    @Argument(help: "The reactivation token from the mail (43 characters), or a link that carries it.")
    var token: String
    @Option(help: "The server's anchor fingerprint as its operator publishes it (`horizon-server anchor`).")
    var anchorFingerprint: String?
    @Flag(
        help:
            "Keep this device's key without a PIN (the reference's reactivatePinlessWithReactivationToken), as `restore --pinless` does."
    )
    var pinless = false
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions

    /// The token itself, from a bare token or a link with `token=`.
    static func tokenText(_ text: String) -> String? {
        var candidate = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let query = URLComponents(string: candidate)?.queryItems?.first(where: { $0.name == "token" })?.value {
            candidate = query
        }
        guard candidate.utf8.count == 43,
            candidate.unicodeScalars.allSatisfy({
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_")
            })
        else { return nil }
        return candidate
    }

    func validate() throws {
        guard Self.tokenText(token) != nil else {
            throw ValidationError("TOKEN must be the 43 letters, digits, - and _ of the reactivation mail")
        }
        if let anchorFingerprint, WalletServer.fingerprintDigits(anchorFingerprint) == nil {
            throw ValidationError("--anchor-fingerprint must be 64 hex digits (spaces and colons are ignored)")
        }
    }

    func run() async throws {
        let files = global.walletFiles
        guard let pending = try WalletServer.pending(files), pending.kind == .restoration, pending.byLink else {
            throw CLIError(
                "no restoration waits for its reactivation: start with `horizon-wallet restore --email ADDRESS`")
        }
        guard let token = Self.tokenText(token) else { throw ValidationError("TOKEN is not a reactivation token") }
        let url = try WalletServer.url(pending.server)
        let key = try files.keyVault().unlock(pin: pin.current)
        // Confirmed first, as for a registration: a refusal leaves the token unused.
        let anchor = try await WalletServer.confirmedAnchor(
            url, given: anchorFingerprint, json: json, what: "the token")
        let id = pending.registrationId
        let verified = try await WalletServer.call(url, forget: files) { () async throws(ServerClientError) in
            try await HorizonServerClient(serverURL: url, signingKey: key).reactivateWallet(id: id, token: token)
        }
        guard anchor.publicKey == verified.anchor.publicKey else {
            throw CLIError("the server named two different trust anchors; nothing was pinned (ask its operator)")
        }
        // The account is this key's now; the server dropped the old device's PIN, and limits a
        // pinless key's payments once it is told.
        if pinless || pending.pinless == true, case .plain = try files.keyVault().stored() {
            do { try await WalletPINClient(serverURL: url).declarePinless(key) } catch {
                throw CLIError(error.description)
            }
        }
        let account = try WalletServer.finish(anchor: anchor, walletId: verified.walletId, server: url, files: files)
        if json {
            return try Console().json(
                Verify.VerifyJSON(
                    kind: "reactivation", walletId: verified.walletId, server: account.server,
                    revokedKeys: verified.revokedKeys,
                    anchor: .init(
                        name: anchor.name, keyId: account.anchorKeyId, fingerprint: account.anchorFingerprint)))
        }
        let revoked = verified.revokedKeys
        print(
            "Wallet reactivated on this device: account \(verified.walletId); \(revoked) older key\(revoked == 1 ? "" : "s") revoked"
        )
        print("Pinned the server's trust anchor \"\(anchor.name.sanitizedForDisplay)\" (key id \(account.anchorKeyId))")
        print("  fingerprint \(account.anchorFingerprint)")
    }
}

extension WalletServer {
    /// The server's anchor, once the person confirmed its fingerprint (or it matched the one
    /// given): trusted because of that, never because the network returned it.
    static func confirmedAnchor(_ url: URL, given: String?, json: Bool, what: String) async throws
        -> Components.Schemas.Anchor
    {
        let anchor = try await call(url) { () async throws(ServerClientError) in
            try await HorizonServerClient(serverURL: url).anchor()
        }
        let fingerprint = fingerprint(of: try anchorKey(anchor))
        if let given {
            guard sameFingerprint(given, fingerprint) else {
                throw CLIError(
                    "the server's anchor has the fingerprint \(fingerprint), not the one given (\(given)); nothing was pinned and \(what) was not used"
                )
            }
            return anchor
        }
        guard !json else {
            throw ValidationError("--json needs --anchor-fingerprint (there is nobody to confirm the fingerprint)")
        }
        print("The server's trust anchor \"\(anchor.name.sanitizedForDisplay)\" has the fingerprint")
        print("  \(fingerprint)")
        print("Compare it with the one the server's operator publishes (`horizon-server anchor`).")
        guard await Console().confirm("Is it the same?") else {
            throw CLIError(
                "the anchor's fingerprint was not confirmed; nothing was pinned and \(what) was not used (run it again, or pass --anchor-fingerprint)"
            )
        }
        return anchor
    }

    /// Pins the anchor, saves the account and forgets the pending registration or restoration.
    static func finish(anchor: Components.Schemas.Anchor, walletId: String, server url: URL, files: WalletFiles)
        throws -> WalletAccount
    {
        let pinned = try pin(anchor, files: files)
        let account = WalletAccount(
            server: url.absoluteString, walletId: walletId, anchorName: anchor.name, anchorKeyId: pinned.keyID,
            anchorFingerprint: pinned.fingerprint)
        try save(account, files: files)
        try? FileManager.default.removeItem(at: files.directory.file(pendingFile))
        return account
    }
}
