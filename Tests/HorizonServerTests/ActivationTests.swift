import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonLedger
import HorizonSecureChannel
import HorizonServer
import HummingbirdTesting
import Testing

/// Terminal activation with the merchant admin's e-mail and password and the key's proof.
@Suite("Terminal activation")
struct ActivationTests {
    @Test func activationIssuesACredentialTheAnchorVouchesFor() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant(name: "Corner Bakery")
        let key = TerminalKey()
        let (created, anchorResponse) = try await server.withClient { client in
            let created = try await client.send(
                .post, "/v1/terminals/activate", json: key.activation(label: "  Till 2, Market St "))
            let anchor = try await client.send(.get, "/v1/anchor")
            return (created, anchor)
        }
        #expect(created.status == .created, "\(created.text)")
        #expect(created.headers[.requestID] != nil)
        let response = try JSONDecoder().decode(Components.Schemas.TerminalCredentialResponse.self, from: created.data)
        #expect(response.merchantId == merchant.id.rawValue)
        #expect(response.merchantName == "Corner Bakery")
        #expect(response.label == "Till 2, Market St")
        #expect(response.notBefore == server.clock.now - 60)
        #expect(response.expiresAt == server.clock.now + 3600)

        // The anchor GET /v1/anchor publishes is the one that signed the credential.
        #expect(anchorResponse.status == .ok)
        let anchor = try JSONDecoder().decode(Components.Schemas.Anchor.self, from: anchorResponse.data)
        #expect(anchor == response.anchor)
        #expect(anchor.name == "Test Issuer")
        #expect(anchor.fingerprint == server.issuer.fingerprint)
        let anchorKey = try P256.Signing.PublicKey(
            x963Representation: try #require(Data(base64Encoded: anchor.publicKey)))
        let trust = TrustAnchor(publicKey: anchorKey, name: anchor.name)
        #expect(trust.keyID.map { String(format: "%02x", $0) }.joined() == anchor.keyId)

        let credential = try TerminalCredential.decode(Array(try #require(Data(base64Encoded: response.credential))))
        _ = try credential.verify(trusting: [trust], at: server.clock.now)
        #expect(credential.merchantID == merchant.id.rawValue)
        #expect(credential.merchantName == "Corner Bakery")
        #expect(credential.terminalLabel == "Till 2, Market St")
        #expect(credential.terminalKey == Array(key.key.publicKey.x963Representation))
        #expect(credential.expiresAt - credential.notBefore == 3600 + 60)
        // Another anchor does not vouch for it, and it is worthless after it expires.
        #expect(throws: SecureChannelError.self) {
            try credential.verify(
                trusting: [TrustAnchor(publicKey: P256.Signing.PrivateKey().publicKey)], at: server.clock.now)
        }
        #expect(throws: SecureChannelError.self) {
            try credential.verify(trusting: [trust], at: server.clock.now + 3601)
        }

        let terminals = try await server.ledger.terminals()
        #expect(terminals.count == 1)
        #expect(terminals.first?.id.rawValue == response.terminalId)
        #expect(terminals.first?.merchantID == merchant.id)
        #expect(terminals.first?.label == "Till 2, Market St")
        #expect(terminals.first?.keyID == credential.terminalKeyID)
        #expect(terminals.first?.credentialExpiresAt == response.expiresAt)
        #expect(terminals.first?.revokedAt == nil)
    }

    @Test func theConfiguredValidityIsUsed() async throws {
        var configuration = ServerConfiguration.testing()
        configuration.credentialValidity = 86_400
        let server = try await TestServer(configuration: configuration)
        try await server.addMerchant()
        let response = try await server.activate(TerminalKey())
        #expect(response.expiresAt == server.clock.now + 86_400)
    }

    @Test func aWrongPasswordAndAnUnknownEmailGetTheSameAnswer() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let before = try await server.state()
        let (wrongPassword, unknownEmail) = try await server.withClient { client in
            let wrong = try await client.send(
                .post, "/v1/terminals/activate", json: TerminalKey().activation(password: "not the password"))
            let unknown = try await client.send(
                .post, "/v1/terminals/activate", json: TerminalKey().activation(email: "nobody@bakery.example"))
            return (wrong, unknown)
        }
        let first = try expectError(
            wrongPassword, .unauthorized, "invalid_credentials", "the e-mail or the password is wrong")
        let second = try expectError(
            unknownEmail, .unauthorized, "invalid_credentials", "the e-mail or the password is wrong")
        #expect(first.message == second.message)
        #expect(wrongPassword.headers[.retryAfter] == nil && unknownEmail.headers[.retryAfter] == nil)
        // No terminal. Failures are counted per e-mail whether it exists or not (the sign-in
        // back-off), not in the account's own row.
        let after = try await server.state()
        #expect(after.terminals.isEmpty)
        #expect(after.logins == before.logins)
        #expect(after.merchants == before.merchants)
        #expect(try await server.ledger.login(adminEmail: TestServer.email)?.merchant.id == merchant.id)
    }

    @Test func theEmailIsMatchedWithoutCaseOrSurroundingSpace() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        let response = try await server.withClient { client in
            try await client.send(
                .post, "/v1/terminals/activate", json: TerminalKey().activation(email: " Owner@Bakery.EXAMPLE "))
        }
        #expect(response.status == .created, "\(response.text)")
    }

    @Test func repeatedFailuresHoldSignInsBackLongerEachTime() async throws {
        let server = try await TestServer(configuration: .testing(loginAttemptsBeforeLock: 3))
        let merchant = try await server.addMerchant()
        let wrong = TerminalKey().activation(password: "not the password")
        try await server.withClient { client in
            for attempt in 1...2 {
                let response = try await client.send(.post, "/v1/terminals/activate", json: wrong)
                try expectError(response, .unauthorized, "invalid_credentials", "the e-mail or the password is wrong")
                _ = attempt
            }
            // The third failure holds sign-ins back for the first period.
            let third = try await client.send(.post, "/v1/terminals/activate", json: wrong)
            try expectError(
                third, .tooManyRequests, "account_locked",
                "too many wrong sign-ins for this e-mail or from this address; try again in 60 s")
            #expect(third.headers[.retryAfter] == "60")

            // While locked even the right password is refused, and nothing is counted or activated.
            server.clock.advance(20)
            let locked = try await server.state()
            let right = try await client.send(.post, "/v1/terminals/activate", json: TerminalKey().activation())
            try expectError(right, .tooManyRequests, "account_locked", "try again in 40 s")
            #expect(right.headers[.retryAfter] == "40")
            #expect(try await server.state() == locked)

            // After the lock, one more failure locks twice as long.
            server.clock.advance(41)
            let fourth = try await client.send(.post, "/v1/terminals/activate", json: wrong)
            try expectError(fourth, .tooManyRequests, "account_locked", "try again in 120 s")
            #expect(fourth.headers[.retryAfter] == "120")

            // Once it has passed, the right password works and the count starts again.
            server.clock.advance(121)
            let success = try await client.send(.post, "/v1/terminals/activate", json: TerminalKey().activation())
            #expect(success.status == .created, "\(success.text)")
            let reset = try #require(try await server.ledger.login(adminEmail: TestServer.email))
            #expect(reset.merchant.id == merchant.id)

            // A new failure is the first of a new series, not a lock.
            let again = try await client.send(.post, "/v1/terminals/activate", json: wrong)
            try expectError(again, .unauthorized, "invalid_credentials", "the e-mail or the password is wrong")
        }
    }

    @Test func theSameKeyActivatedTwiceIsRefused() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        let key = TerminalKey()
        _ = try await server.activate(key)
        let before = try await server.state()
        let response = try await server.withClient { client in
            try await client.send(.post, "/v1/terminals/activate", json: key.activation(label: "Till 9"))
        }
        try expectError(response, .conflict, "already_exists", "a terminal with this key already exists")
        #expect(try await server.state() == before)
    }

    @Test func aRevokedKeyCannotBeActivatedAgain() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        let key = TerminalKey()
        let activated = try await server.activate(key)
        try await server.ledger.revokeTerminal(TerminalID(rawValue: activated.terminalId))
        let response = try await server.withClient { client in
            try await client.send(.post, "/v1/terminals/activate", json: key.activation())
        }
        try expectError(response, .conflict, "already_exists", "a terminal with this key already exists")
        #expect(try await server.ledger.terminals().count == 1)
    }
}
