import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonRadioCLISupport
import HorizonRoles
import HorizonSecureChannel
import HorizonServerClient
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Logging
import Testing

/// Terminal activation makes a key that never leaves the terminal,
/// the server's issuer vouches for it, no anchor private key is kept, and the credential is
/// renewed while the terminal is not revoked.
// On the cooperative pool, not `.offTheCooperativePool`: the body only awaits (the simulated
// radio's live driver, which waits for the server's answers, has a thread of its own), and it
// races the clock, which behind a blocking test on a shared queue it lost (a redemption's
// decision timed out while the fault simulation held that queue for ten minutes).
@Suite struct TerminalActivationTests {
    @Test func activationWritesTheServersCredentialAndNoAnchorPrivateKey() async throws {
        let server = try await ServerRig.start()
        defer { Task { await server.stop() } }
        let folder = server.directory.appendingPathComponent("terminal")
        let files = TerminalFiles(directory: DataDirectory(explicit: folder.path, role: "terminal"))
        let (settings, response) = try await files.activate(
            server: server.url.absoluteString, email: ServerRig.email, password: ServerRig.password, label: "Till 7",
            decisionTimeoutSeconds: 30, force: false)
        #expect(settings.server == server.url.absoluteString)
        #expect(settings.merchantID == server.merchant.id.rawValue)
        #expect(settings.currency == "EUR")
        #expect(!files.directory.exists(TerminalFiles.anchorKey))
        let identity = try files.loadIdentity()
        let anchor = try identity.credential.verify(trusting: [server.issuer.anchor], at: Ledger.now())
        #expect(anchor.keyID == server.issuer.anchor.keyID)
        #expect(identity.credential.terminalLabel == "Till 7")
        #expect(identity.credential.expiresAt - identity.credential.notBefore == 12 * 3600 + 60)
        let stored = try #require(
            try await server.ledger.terminal(publicKey: try .init(bytes: identity.credential.terminalKey)))
        #expect(stored.id.rawValue == response.terminalId)
        // Activating again into the same directory needs --force.
        await #expect(throws: CLIError.self) {
            _ = try await files.activate(
                server: server.url.absoluteString, email: ServerRig.email, password: ServerRig.password,
                label: "Till 7", decisionTimeoutSeconds: 30, force: false)
        }
        // A wrong password is refused with the server's code, and nothing is written.
        let other = TerminalFiles(directory: DataDirectory(explicit: folder.path + "-2", role: "terminal"))
        await #expect {
            _ = try await other.activate(
                server: server.url.absoluteString, email: ServerRig.email, password: "wrong password!",
                label: "Till 8", decisionTimeoutSeconds: 30, force: false)
        } throws: { error in
            "\(error)".contains("invalid_credentials")
        }
        #expect(!other.directory.exists(TerminalFiles.settings))
    }

    @Test func theCredentialIsRenewedWhenHalfIsUsedAndNeverForARevokedTerminal() async throws {
        let server = try await ServerRig.start()
        defer { Task { await server.stop() } }
        let folder = server.directory.appendingPathComponent("terminal")
        let files = TerminalFiles(directory: DataDirectory(explicit: folder.path, role: "terminal"))
        _ = try await files.activate(
            server: server.url.absoluteString, email: ServerRig.email, password: ServerRig.password, label: "Till 1",
            decisionTimeoutSeconds: 30, force: false)
        let first = try files.loadIdentity()
        let logger = Logger(label: "test")
        // Fresh: nothing to do, no request made.
        let (same, renewedEarly) = try await files.renewCredentialIfDue(
            identity: first, now: Ledger.now(), logger: logger)
        #expect(!renewedEarly)
        #expect(same.credential == first.credential)
        // Past half of its validity: renewed and written.
        let later = first.credential.notBefore + (first.credential.expiresAt - first.credential.notBefore) * 6 / 10
        try await Task.sleep(for: .seconds(1.1))
        let (renewed, didRenew) = try await files.renewCredentialIfDue(identity: first, now: later, logger: logger)
        #expect(didRenew)
        #expect(renewed.credential.expiresAt > first.credential.expiresAt)
        #expect(try files.loadIdentity().credential == renewed.credential)
        // Revoked: refused, with the reason.
        let terminal = try #require(try await server.ledger.terminals().first)
        try await server.ledger.revokeTerminal(terminal.id)
        await #expect {
            _ = try await files.renewCredentialIfDue(identity: renewed, now: Ledger.now(), force: true, logger: logger)
        } throws: { error in
            "\(error)".contains("terminal_revoked")
        }
        // And the revocation is what wallets receive.
        let revoked = try await server.client().revocations()
        #expect(revoked == [terminal.keyID.hexString])
    }
}

/// A serving terminal renews its credential without a restart, and new connections get it.
@Suite struct CredentialRenewalServiceTests {
    @Test func aServingTerminalPutsTheRenewedCredentialInUse() async throws {
        let server = try await ServerRig.start()
        defer { Task { await server.stop() } }
        let folder = server.directory.appendingPathComponent("terminal")
        let files = TerminalFiles(directory: DataDirectory(explicit: folder.path, role: "terminal"))
        _ = try await files.activate(
            server: server.url.absoluteString, email: ServerRig.email, password: ServerRig.password, label: "Till 1",
            decisionTimeoutSeconds: 30, force: false)
        let first = try files.loadIdentity()
        let simulation = RadioSimulation(seed: 9, wallClockAtStart: Ledger.now())
        let service = TerminalRadioService(
            radio: try simulation.addDevice(name: "terminal"), identity: first,
            processor: ServerPaymentProcessor(
                client: server.client(signingWith: first.signingKey), anchor: server.issuer.signingKey.publicKey),
            journal: try SQLiteTerminalJournal(path: folder.appendingPathComponent("journal.sqlite").path))
        // The service's clock says half of the credential is used up.
        let later = first.credential.notBefore + (first.credential.expiresAt - first.credential.notBefore) * 6 / 10
        try await Task.sleep(for: .seconds(1.1))
        let renewal = CredentialRenewalService(
            files: files, service: service, logger: Logger(label: "test"), retryAfter: .milliseconds(100),
            clock: { later })
        let task = Task { try await renewal.run() }
        var renewed = false
        for _ in 0..<100 where !renewed {
            try await Task.sleep(for: .milliseconds(50))
            renewed = service.identity.credential.expiresAt > first.credential.expiresAt
        }
        task.cancel()
        _ = await task.result
        #expect(renewed)
        #expect(
            service.identity.signingKey.publicKey.x963Representation == first.signingKey.publicKey.x963Representation)
        #expect(try files.loadIdentity().credential == service.identity.credential)
        // A credential for another key is refused.
        let stranger = try TerminalIdentity.sandbox()
        #expect(throws: SecureChannelError.credentialKeyMismatch) {
            try service.replaceCredential(stranger.credential)
        }
    }
}
