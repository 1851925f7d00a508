import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonServer
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// Restoration as the reference does it: the e-mail names the account, the PUK texted to its
/// phone is given back by the new device's key, and the one-time reactivation token mailed to
/// the address moves the account to that key, revoking the old one at that moment. On SQLite,
/// and on PostgreSQL when a test database is configured.
@Suite("Restoration by PUK and reactivation token")
struct ReactivationTests {
    static let stores = RegistrationLinkTests.stores

    @Test(arguments: stores)
    func reactivationMovesTheAccountToTheNewKeyAndRevokesTheOldOneAtThatMoment(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            let old = try await server.registeredDevice(client)
            let wallet = try #require(try await server.ledger.wallet(forKey: old.publicKeyBytes))
            let new = WalletDevice()
            let sent = try await server.startRestoration(new, client)
            #expect(sent.sentTo == ["sms the account's phone", "email a•••@example.com"])
            let puk = try await server.newestCode(to: "+4915112345678")
            // Until the token is used, the old device goes on working.
            let accepted = try await server.submitRestorationPuk(puk, sent.registrationId, new, client)
            #expect(accepted.status == .ok, "\(accepted.text)")
            let body = try JSONDecoder().decode(Components.Schemas.RestorationPukAccepted.self, from: accepted.data)
            #expect(body.reactivationExpiresAt == server.now + 86_400)
            #expect(try await server.ledger.wallet(forKey: old.publicKeyBytes) != nil)
            #expect(try await server.ledger.wallet(forKey: new.publicKeyBytes) == nil)
            #expect(
                try await server.ledger.outbox(recipient: "+4915112345678").first?.body == OutboxMessage.redactedBody)
            let token = try await server.reactivationToken()

            let reactivated = try await server.reactivate(token, sent.registrationId, new, client)
            #expect(reactivated.status == .ok, "\(reactivated.text)")
            let verified = try JSONDecoder().decode(Components.Schemas.WalletVerified.self, from: reactivated.data)
            #expect(verified.walletId == wallet.id.rawValue && verified.revokedKeys == 1)
            #expect(try await server.ledger.wallet(forKey: new.publicKeyBytes)?.id == wallet.id)
            #expect(try await server.ledger.wallet(forKey: old.publicKeyBytes) == nil)
            // The old key is refused from this moment, the new one answered for the same account.
            try expectError(
                try await server.signedSend(.get, "/v1/wallet/account", nil, old, client), .unauthorized,
                "wallet_key_revoked", "revoked")
            // Nor does it get a new offline allowance.
            try expectError(
                try await server.signedSend(.post, "/v1/wallet/daily-token", #"{"refresh": true}"#, old, client),
                .unauthorized, "wallet_key_revoked", "revoked")
            let account = try await server.signedSend(.get, "/v1/wallet/account", nil, new, client)
            #expect(account.status == .ok && account.text.contains(wallet.id.rawValue), "\(account.text)")
            #expect(
                try await server.ledger.outbox(recipient: "alice@example.com").first?.body
                    == OutboxMessage.redactedBody)
        }
    }

    @Test(arguments: stores)
    func anotherWalletsKeyCannotGiveThePukOrTheToken(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            _ = try await server.registeredDevice(client)
            let new = WalletDevice()
            let sent = try await server.startRestoration(new, client)
            let puk = try await server.newestCode(to: "+4915112345678")
            let mallory = WalletDevice()
            _ = try await server.ledger.createWallet(name: "Mallory", publicKey: mallory.publicKeyBytes)
            for key in [mallory, WalletDevice()] {
                try expectError(
                    try await server.submitRestorationPuk(puk, sent.registrationId, key, client), .notFound,
                    "registration_not_found", "there is no such restoration")
            }
            try expectError(
                try await client.send(
                    .post, "/v1/wallets/restorations/\(sent.registrationId)/puk", json: #"{"puk": "\#(puk)"}"#),
                .unauthorized, "unauthenticated", "signed with the new device's key")
            #expect(try await server.column("failed_attempts", sent.registrationId) == 0)
            #expect(try await server.submitRestorationPuk(puk, sent.registrationId, new, client).status == .ok)
            let token = try await server.reactivationToken()
            // The mailed token is of no use to any other key, even one that knows it.
            for key in [mallory, WalletDevice()] {
                try expectError(
                    try await server.reactivate(token, sent.registrationId, key, client), .notFound,
                    "registration_not_found", "there is no such restoration")
            }
            try expectError(
                try await client.send(
                    .post, "/v1/wallets/restorations/\(sent.registrationId)/reactivate",
                    json: #"{"token": "\#(token)"}"#), .unauthorized, "unauthenticated",
                "signed with the new device's key")
            #expect(try await server.column("link_failed_attempts", sent.registrationId) == 0)
            #expect(try await server.ledger.wallet(forKey: mallory.publicKeyBytes)?.name == "Mallory")
            #expect(try await server.reactivate(token, sent.registrationId, new, client).status == .ok)
        }
    }

    @Test(arguments: stores)
    func aTokenWorksOnceAndExpiresAndAPukIsNotTakenTwice(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            _ = try await server.registeredDevice(client)
            let new = WalletDevice()
            var sent = try await server.startRestoration(new, client)
            var puk = try await server.newestCode(to: "+4915112345678")
            #expect(try await server.submitRestorationPuk(puk, sent.registrationId, new, client).status == .ok)
            // The right PUK again mails no second token.
            try expectError(
                try await server.submitRestorationPuk(puk, sent.registrationId, new, client), .conflict,
                "registration_used", "used already")
            let token = try await server.reactivationToken()
            #expect(try await server.reactivate(token, sent.registrationId, new, client).status == .ok)
            try expectError(
                try await server.reactivate(token, sent.registrationId, new, client), .conflict, "registration_used",
                "used already")

            // A later restoration's token outlives its lifetime: refused, the account unchanged.
            let later = WalletDevice()
            sent = try await server.startRestoration(later, client)
            puk = try await server.newestCode(to: "+4915112345678")
            #expect(try await server.submitRestorationPuk(puk, sent.registrationId, later, client).status == .ok)
            let late = try await server.reactivationToken()
            server.advance(86_400)
            try expectError(
                try await server.reactivate(late, sent.registrationId, later, client), .gone, "registration_expired",
                "expired")
            #expect(try await server.ledger.wallet(forKey: later.publicKeyBytes) == nil)
            #expect(try await server.ledger.wallet(forKey: new.publicKeyBytes) != nil)

            // And a PUK outlives its 10 minutes.
            let slow = WalletDevice()
            sent = try await server.startRestoration(slow, client)
            puk = try await server.newestCode(to: "+4915112345678")
            server.advance(600)
            try expectError(
                try await server.submitRestorationPuk(puk, sent.registrationId, slow, client), .gone,
                "registration_expired", "expired")
        }
    }

    @Test(arguments: stores)
    func guessedPuksAndTokensLockTheRestoration(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            let old = try await server.registeredDevice(client)
            var new = WalletDevice()
            var sent = try await server.startRestoration(new, client)
            var puk = try await server.newestCode(to: "+4915112345678")
            let wrongPuk = puk == "00000000" ? "00000001" : "00000000"
            for left in [4, 3, 2, 1] {
                try expectError(
                    try await server.submitRestorationPuk(wrongPuk, sent.registrationId, new, client), .badRequest,
                    "registration_code_invalid", "\(left) more wrong")
            }
            try expectError(
                try await server.submitRestorationPuk(wrongPuk, sent.registrationId, new, client), .forbidden,
                "registration_locked", "locked")
            try expectError(
                try await server.submitRestorationPuk(puk, sent.registrationId, new, client), .forbidden,
                "registration_locked", "locked")

            new = WalletDevice()
            sent = try await server.startRestoration(new, client)
            puk = try await server.newestCode(to: "+4915112345678")
            // A token before the PUK: no token is right yet, and the try counts.
            let guess = String(repeating: "A", count: 43)
            try expectError(
                try await server.reactivate(guess, sent.registrationId, new, client), .badRequest,
                "registration_code_invalid", "4 more wrong")
            #expect(try await server.submitRestorationPuk(puk, sent.registrationId, new, client).status == .ok)
            let token = try await server.reactivationToken()
            for _ in 0..<3 {
                _ = try await server.reactivate(guess, sent.registrationId, new, client)
            }
            try expectError(
                try await server.reactivate(guess, sent.registrationId, new, client), .forbidden, "registration_locked",
                "locked")
            try expectError(
                try await server.reactivate(token, sent.registrationId, new, client), .forbidden, "registration_locked",
                "locked")
            #expect(try await server.ledger.wallet(forKey: old.publicKeyBytes) != nil)
            #expect(try await server.ledger.wallet(forKey: new.publicKeyBytes) == nil)
        }
    }

    @Test(arguments: stores)
    func badBytesReplaysAndTheOtherFlowsCompleteNothing(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            let old = try await server.registeredDevice(client)
            let new = WalletDevice()
            let sent = try await server.startRestoration(new, client)
            let puk = try await server.newestCode(to: "+4915112345678")
            let id = sent.registrationId
            for (path, body, message) in [
                ("/v1/wallets/restorations/\(id)/puk", #"{"puk": "12ab5678"}"#, "8 digits"),
                ("/v1/wallets/restorations/\(id)/puk", #"{"puk": 12345678}"#, "puk"),
                ("/v1/wallets/restorations/\(id)/reactivate", #"{"token": "short"}"#, "43 characters"),
                (
                    "/v1/wallets/restorations/\(id)/reactivate", #"{"token": "\#(String(repeating: "é", count: 43))"}"#,
                    "43 characters"
                ),
                ("/v1/wallets/restorations/\(id)/reactivate", #"{"token": "x", "extra": 1}"#, "extra"),
            ] {
                let response = try await server.signedSend(.post, path, body, new, client)
                #expect(response.status == .badRequest, "\(path) \(body): \(response.text)")
                #expect(response.text.contains(message), "\(response.text)")
            }
            for bad in ["r_00", "../registrations", String(repeating: "r", count: 64)] {
                let response = try await server.submitRestorationPuk(puk, bad, new, client)
                #expect(response.status == .notFound || response.status == .badRequest, "\(bad): \(response.text)")
            }
            // The restoration's PUK completes nothing through the older one-code verify.
            try expectError(
                try await client.send(.post, "/v1/wallets/restorations/\(id)/verify", json: #"{"code": "\#(puk)"}"#),
                .notFound, "registration_not_found", "no such restoration")
            // A signed request replayed as it was is refused, so a recorded PUK submission is of no use.
            let path = "/v1/wallets/restorations/\(id)/puk"
            let body = #"{"puk": "\#(puk)"}"#
            let headers: HTTPFields = [
                .authorization: try signedAuthorization(
                    new.key, method: .post, path: path, bodyBytes: Array(body.utf8), time: server.now),
                .contentType: "application/json",
            ]
            let first = try await client.executeRequest(
                uri: path, method: .post, headers: headers, body: ByteBuffer(string: body))
            #expect(first.status == .ok, "\(first.text)")
            let replayed = try await client.executeRequest(
                uri: path, method: .post, headers: headers, body: ByteBuffer(string: body))
            #expect(replayed.status == .unauthorized && replayed.text.contains("request_replayed"), "\(replayed.text)")
            // The reactivation token is no activation link: its page refuses it.
            let token = try await server.reactivationToken()
            let page = try await client.executeRequest(
                uri: ActivationPath.path, method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                body: ByteBuffer(string: "registration=\(id)&token=\(token)"))
            #expect(page.status != .ok)
            #expect(try await server.ledger.wallet(forKey: old.publicKeyBytes) != nil)
            #expect(try await server.reactivate(token, id, new, client).status == .ok)
        }
    }
}

extension LinkServer {
    /// A wallet registered by PUK and link with alice@example.com and +4915112345678.
    func registeredDevice(_ client: any TestClientProtocol) async throws -> WalletDevice {
        let device = WalletDevice()
        let sent = try await start(device, client)
        let (puk, link) = try await pukAndLink()
        #expect(try await submitPuk(puk, sent.registrationId, device, client).status == .ok)
        #expect(try await confirm(link, client).status == .ok)
        return device
    }

    func startRestoration(
        _ device: WalletDevice, _ client: any TestClientProtocol, email: String = "alice@example.com"
    ) async throws -> Components.Schemas.OneTimeCodeSent {
        let fields = [
            "email": email, "publicKey": device.publicBase64, "reactivation": "link",
            "proof": try device.proof(WalletProof.restoration(email: email, publicKey: device.publicBase64)),
        ]
        let response = try await client.send(
            .post, "/v1/wallets/restorations", json: String(decoding: try JSONEncoder().encode(fields), as: UTF8.self))
        #expect(response.status == .accepted, "\(response.text)")
        return try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: response.data)
    }

    /// The 8 digits of the newest message to `recipient`.
    func newestCode(to recipient: String) async throws -> String {
        let message = try #require(try await ledger.outbox(recipient: recipient).first, "nothing sent to \(recipient)")
        return String(try #require(message.body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 8 }))
    }

    /// The token of the newest reactivation mail.
    func reactivationToken(email: String = "alice@example.com") async throws -> String {
        let mail = try #require(try await ledger.outbox(recipient: email).first, "nothing mailed to \(email)")
        return String(
            try #require(mail.body.split(whereSeparator: \.isWhitespace).first { $0.count == 43 }, "\(mail.body)"))
    }

    func submitRestorationPuk(_ puk: String, _ id: String, _ device: WalletDevice, _ client: any TestClientProtocol)
        async throws -> TestResponse
    {
        try await signedSend(.post, "/v1/wallets/restorations/\(id)/puk", #"{"puk": "\#(puk)"}"#, device, client)
    }

    func reactivate(_ token: String, _ id: String, _ device: WalletDevice, _ client: any TestClientProtocol)
        async throws -> TestResponse
    {
        try await signedSend(
            .post, "/v1/wallets/restorations/\(id)/reactivate", #"{"token": "\#(token)"}"#, device, client)
    }
}

extension OfflineSettlementTests {
    /// The lost phone, restored the reference's way: until the reactivation token is used the old
    /// device's offline payments are the wallet's; from that moment a terminal that accepts one
    /// offline (it cannot know yet) forwards a payment that is declined: the account, which
    /// keeps its balance on the new key, is not charged.
    @Test func anOfflinePaymentFromTheOldKeyAfterReactivationIsDeclined() async throws {
        try await withBakery(balance: 80_00) { bakery in
            let ledger = bakery.server.ledger
            try await ledger.store.transaction { db in
                try await db.query(
                    "UPDATE wallets SET email = ?, phone = ? WHERE id = ?",
                    [.text("bob@example.com"), .text("+4915112345679"), .text(bakery.walletID.rawValue)])
            }
            let token = try await bakery.token()
            let new = P256.Signing.PrivateKey()
            let newKey = try PublicKeyBytes(bytes: Array(new.publicKey.x963Representation))
            let id = RegistrationID.generate()
            let started = try await ledger.startRestoration(
                id: id, email: "bob@example.com", publicKey: newKey, codeHash: [1, 2, 3],
                reactivationLink: ([9, 9, 9], 86_400), at: bakery.server.clock.now)
            #expect(started.phone == "+4915112345679")
            _ = try await ledger.submitRestorationPuk(
                id, pukHash: [1, 2, 3], key: newKey, tokenHash: [4, 5, 6], lifetime: 86_400,
                at: bakery.server.clock.now)
            // Accepted offline before the reactivation: the wallet's to pay.
            let before = try bakery.confirm(20_00, for: bakery.tills[0])
            let acceptedBefore = bakery.server.clock.now
            bakery.server.clock.advance(60)
            let reactivatedAt = bakery.server.clock.now
            let result = try await ledger.reactivateWallet(id, tokenHash: [4, 5, 6], key: newKey, at: reactivatedAt)
            #expect(result.wallet.id == bakery.walletID && result.revokedKeys == 1)
            // Accepted in the very second of the reactivation: already refused.
            let after = try bakery.confirm(30_00, for: bakery.tills[1])
            let declined = try await bakery.forward(after, by: bakery.tills[1], token: token, acceptedAt: reactivatedAt)
            guard case .declined(let code, _) = declined.outcome else {
                Issue.record("accepted after the reactivation: declined, not \(declined.outcome)")
                return
            }
            #expect(code == .unknownWallet)
            #expect(try await bakery.balance() == (try Money(minorUnits: 80_00, currency: .eur)))
            let paid = try await bakery.forward(before, by: bakery.tills[0], token: token, acceptedAt: acceptedBefore)
            guard case .settled = paid.outcome else {
                Issue.record("accepted before the reactivation: settled, not \(paid.outcome)")
                return
            }
            #expect(try await bakery.balance() == (try Money(minorUnits: 60_00, currency: .eur)))
            #expect(try await ledger.wallet(forKey: newKey)?.id == bakery.walletID)
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }
}
