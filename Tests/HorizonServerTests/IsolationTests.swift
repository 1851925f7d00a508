import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonObliviousHTTP
import HorizonProtocol
import HorizonSecureChannel
import HorizonServer
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing

/// Every operation of `openapi.yaml` tried with no credentials, malformed,
/// expired, replayed and forged ones, a revoked terminal's, an unknown key's, a wallet's key,
/// another merchant's terminal and another wallet's registration: refused with the exact status
/// and code, nothing of the other tenant in the answer, nothing moved in the ledger.
///
/// The table below has one entry per operation id; an operation added to the document without
/// an entry fails `everyOperationHasAnEntry`.
@Suite("Authorisation and isolation")
struct IsolationTests {
    /// How an operation is protected, and why.
    enum Protection {
        /// Signed by an active terminal's key; `otherMerchant` is what merchant B's terminal gets
        /// when it sends merchant A's request.
        case terminalSigned(request: @Sendable (World) throws -> Request, otherMerchant: OtherMerchant)
        /// Signed by a wallet's registered, unrevoked key (wallet services);
        /// `otherWallet` is what wallet B gets when it sends wallet A's request.
        case walletSigned(request: @Sendable (World) throws -> Request, otherWallet: OtherWallet)
        /// Open to anyone, with the reason; `probe` tries what a stranger could (another
        /// tenant's e-mail, registration id or code) and checks the answers itself.
        case open(reason: String, probe: @Sendable (World, any TestClientProtocol) async throws -> Void)
    }

    /// Merchant operations only the merchant's admin may call (an admin session): a terminal's
    /// valid signature is refused with `admin_required`.
    static let adminOnly: Set<String> = [
        "createRefund", "revokeMerchantTerminal", "listApiKeys", "createApiKey", "rollApiKey", "revokeApiKey",
        "listWebhookEndpoints", "createWebhookEndpoint", "rollWebhookSecret", "deleteWebhookEndpoint",
        "listWebhookDeliveries", "getWebhookDelivery", "resendWebhookDelivery",
    ]

    /// Merchant operations a secret API key may call, with the scope it needs; the other
    /// merchant's key with every scope gets what the other merchant's admin gets. Every other
    /// merchant operation refuses any key.
    static let keyScoped: [String: String] = [
        "listMerchantTransactions": "transactions:read", "getMerchantTransaction": "transactions:read",
        "listRefunds": "transactions:read", "createRefund": "refunds:write",
        "createPaymentIntent": "intents:write", "listPaymentIntents": "intents:write transactions:read",
        "getPaymentIntent": "intents:write transactions:read", "cancelPaymentIntent": "intents:write",
        "listWebhookEndpoints": "webhooks:write", "createWebhookEndpoint": "webhooks:write",
        "rollWebhookSecret": "webhooks:write", "deleteWebhookEndpoint": "webhooks:write",
        "listWebhookDeliveries": "webhooks:write", "getWebhookDelivery": "webhooks:write",
        "resendWebhookDelivery": "webhooks:write", "emailMerchantReceipt": "transactions:read",
    ]

    enum OtherMerchant {
        /// Refused with this status and code.
        case refused(HTTPResponse.Status, String, String)
        /// Served, but about the signing terminal only (the operation has no other subject).
        case servesOnlyTheSigner(String)
        /// Served about the signer's own merchant (its own list, its own new row): `check` looks
        /// at the answer, that nothing of the other merchant is in it, and undoes what the
        /// signer's merchant itself wrote, so that the tables compare equal afterwards.
        case servesTheSignersOwn(check: @Sendable (World, TestResponse) async throws -> Void)
    }

    enum OtherWallet {
        /// Refused with this status and code.
        case refused(HTTPResponse.Status, String, String)
        /// Served, but about the signing wallet only (no request names a wallet): `check`
        /// looks at the answer B got.
        case servesOnlyTheSigner(String, check: @Sendable (World, TestResponse) throws -> Void)
    }

    struct Request: Sendable {
        let method: HTTPRequest.Method
        let path: String
        let body: String?
        /// A body that is not text (the gateway's sealed requests), and its media type.
        var binaryBody: [UInt8]? = nil
        var contentType = "application/json"
        /// Headers the operation needs besides the credential (a payment intent's Idempotency-Key).
        var headers: HTTPFields = [:]

        var bytes: [UInt8]? { binaryBody ?? body.map { Array($0.utf8) } }
    }

    static let table: [String: Protection] = [
        "getHealth": .open(reason: "liveness for load balancers; says nothing but ok") { world, client in
            let response = try await client.send(.get, "/health")
            #expect(response.status == .ok)
            #expect(try keys(of: response.data) == ["status"])
        },
        "getReadiness": .open(reason: "readiness for load balancers; says only the schema version") { world, client in
            let response = try await client.send(.get, "/ready")
            #expect(response.status == .ok)
            #expect(try keys(of: response.data) == ["schemaVersion", "status"])
        },
        "signInMerchantAdmin": .open(reason: "the merchant admin's e-mail and password are its credential") {
            world, client in
            // A's password with B's e-mail, B's with A's, a wrong one, an unknown e-mail: one answer.
            for (email, password) in [
                (World.shopEmail, TestServer.password), (TestServer.email, World.shopPassword),
                (TestServer.email, "wrong password"), ("nobody@nowhere.example", TestServer.password),
            ] {
                let response = try await client.send(
                    .post, "/v1/merchant/sessions", json: #"{"email": "\#(email)", "password": "\#(password)"}"#)
                try world.expectRefusal(
                    response, .unauthorized, "invalid_credentials", "the e-mail or the password is wrong",
                    "admin sign-in as \(email)")
            }
            // The right pair: a session of that merchant only.
            let response = try await client.send(
                .post, "/v1/merchant/sessions",
                json: #"{"email": "\#(World.shopEmail)", "password": "\#(World.shopPassword)"}"#)
            #expect(response.status == .created, "\(response.text)")
            let session = try JSONDecoder().decode(Components.Schemas.MerchantAdminSession.self, from: response.data)
            #expect(session.merchantId == world.shop.id.rawValue)
            world.expectNothingOfTheTenants(in: response.text, "the shop's admin session", except: ["the shop's id"])
        },
        "signOutMerchantAdmin": .open(reason: "ends the session whose token it carries, and no other") {
            world, client in
            for header in [nil, "Bearer not-a-session", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl"] {
                var headers: HTTPFields = [:]
                if let header { headers[.authorization] = header }
                let response = try await client.send(.delete, "/v1/merchant/sessions", headers: headers)
                try world.expectRefusal(
                    response, .unauthorized, "unauthenticated", "no admin session to end",
                    "sign out with \(header ?? "nothing")")
            }
            // B signs its own session out; A's session (held by the bakery's admin) still works.
            let bakery = try await client.send(
                .post, "/v1/merchant/sessions",
                json: #"{"email": "\#(TestServer.email)", "password": "\#(TestServer.password)"}"#)
            let bakeryToken = try JSONDecoder().decode(Components.Schemas.MerchantAdminSession.self, from: bakery.data)
                .token
            let shop = try await client.send(
                .post, "/v1/merchant/sessions",
                json: #"{"email": "\#(World.shopEmail)", "password": "\#(World.shopPassword)"}"#)
            let shopToken = try JSONDecoder().decode(Components.Schemas.MerchantAdminSession.self, from: shop.data)
                .token
            let out = try await client.send(
                .delete, "/v1/merchant/sessions", headers: [.authorization: "Bearer " + shopToken])
            #expect(out.status == .noContent, "\(out.text)")
            let stillIn = try await client.send(
                .get, "/v1/merchant/register-users", headers: [.authorization: "Bearer " + bakeryToken])
            #expect(stillIn.status == .ok, "\(stillIn.text)")
            let signedOut = try await client.send(
                .get, "/v1/merchant/register-users", headers: [.authorization: "Bearer " + shopToken])
            try world.expectRefusal(
                signedOut, .unauthorized, "unauthenticated", "this admin session is unknown or has ended",
                "after sign-out")
        },
        "getAnchor": .open(reason: "the public key wallets pin; public by nature") { world, client in
            let response = try await client.send(.get, "/v1/anchor")
            #expect(response.status == .ok)
            #expect(try keys(of: response.data) == ["fingerprint", "keyId", "name", "publicKey"])
            #expect(
                try JSONDecoder().decode(Components.Schemas.Anchor.self, from: response.data)
                    == world.server.issuer.anchorDescription)
        },
        "getRevocations": .open(reason: "every wallet needs it to refuse revoked terminals") { world, client in
            let response = try await client.send(.get, "/v1/revocations")
            #expect(response.status == .ok)
            let revocations = try JSONDecoder().decode(Components.Schemas.Revocations.self, from: response.data)
            // Key ids of revoked terminals only: no merchant, no label, no active terminal.
            #expect(revocations.terminalKeyIds == [world.revokedTill.keyIDHex])
            world.expectNothingOfTheTenants(in: response.text, "/v1/revocations")
        },
        "activateTerminal": .open(reason: "the merchant admin's e-mail and password are its credential") {
            world, client in
            // A's password with B's e-mail, B's with A's, a wrong one, an unknown e-mail: one answer.
            for (email, password) in [
                (World.shopEmail, TestServer.password), (TestServer.email, World.shopPassword),
                (TestServer.email, "wrong password"), ("nobody@nowhere.example", TestServer.password),
            ] {
                let response = try await client.send(
                    .post, "/v1/terminals/activate",
                    json: TerminalKey().activation(email: email, password: password))
                try world.expectRefusal(
                    response, .unauthorized, "invalid_credentials", "the e-mail or the password is wrong",
                    "activate as \(email)")
            }
            // A revoked terminal's key cannot come back through activation.
            let again = try await client.send(
                .post, "/v1/terminals/activate", json: world.revokedTill.activation(label: "Till 9"))
            try world.expectRefusal(
                again, .conflict, "already_exists", "already exists", "activate a revoked key")
        },
        "startWalletRegistration": .open(reason: "a new wallet has no credential yet; the proof of its key is checked")
        { world, client in
            // Another wallet's key: refused, and the answer names no wallet.
            let taken = try await client.send(
                .post, "/v1/wallets/registrations",
                json: try world.walletDevice.registration(email: "taken@example.com", phone: "+49 151 1234 5699"))
            try world.expectRefusal(
                taken, .conflict, "already_exists", "this public key is registered to a wallet already",
                "register another wallet's key")
            // A proof by another key than the one registered.
            let forged = try await client.send(
                .post, "/v1/wallets/registrations",
                json: try WalletDevice().registration(
                    email: "forged@example.com", phone: "+49 151 1234 5698",
                    overrides: ["publicKey": world.walletDevice.publicBase64]))
            try world.expectRefusal(
                forged, .unauthorized, "signature_invalid", "proof is not the wallet key's signature",
                "register with a forged proof")
        },
        "startWalletRestoration": .open(reason: "answers alike whether or not the e-mail has a wallet") {
            world, client in
            let known = try await client.send(
                .post, "/v1/wallets/restorations", json: try WalletDevice().restoration(email: World.walletEmail))
            let unknown = try await client.send(
                .post, "/v1/wallets/restorations", json: try WalletDevice().restoration(email: "nobody@example.com"))
            #expect(known.status == .accepted && unknown.status == .accepted, "\(known.text) \(unknown.text)")
            #expect(try keys(of: known.data) == keys(of: unknown.data))
            world.expectNothingOfTheTenants(in: known.text, "a restoration's start")
        },
        "verifyWalletRegistration": .open(reason: "the one-time code sent to the wallet's phone is its credential") {
            world, client in
            let x = world.registrationX
            let y = world.registrationY
            let z = world.restorationZ
            // Another registration's codes, a restoration's id on the registration path.
            @Sendable func smsCode(_ phone: String) async throws -> String {
                let message = try #require(try await world.server.ledger.outbox(recipient: phone).first)
                return String(
                    try #require(message.body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 8 }))
            }
            let ySMS = try await smsCode("+4915112345602")
            let crossed = try await client.send(
                .post, "/v1/wallets/registrations/\(x.id)/verify",
                json: #"{"smsCode": "\#(ySMS)", "emailCode": "\#(y.code)"}"#)
            try world.expectRefusal(
                crossed, .badRequest, "registration_code_invalid", "the code is wrong; 4 more wrong codes lock",
                "registration X with Y's code")
            let restoration = try await client.send(
                .post, "/v1/wallets/registrations/\(z.id)/verify",
                json: #"{"smsCode": "\#(z.code)", "emailCode": "\#(z.code)"}"#)
            try world.expectRefusal(
                restoration, .notFound, "registration_not_found", "there is no such registration",
                "a restoration's id and code on the registration path")
            for device in [world.deviceX, world.deviceY] {
                #expect(try await world.server.ledger.wallet(forKey: device.publicKeyBytes) == nil)
            }
        },
        "submitWalletRegistrationPuk": .open(
            reason: "signed by the key being registered, which has no wallet yet; the PUK texted to its phone proves it"
        ) { world, client in
            // Another wallet's key, and the registering key of another registration (one proven
            // by codes): both answered like an unknown registration; unsigned, refused first.
            let x = world.registrationX
            let path = "/v1/wallets/registrations/\(x.id)/puk"
            let body = #"{"puk": "\#(x.code)"}"#
            for key in [world.walletDevice.key, world.deviceY.key, world.deviceX.key] {
                let response = try await client.send(
                    .post, path, json: body,
                    headers: [
                        .authorization: try signedAuthorization(
                            key, method: .post, path: path, bodyBytes: Array(body.utf8), time: world.server.clock.now)
                    ])
                try world.expectRefusal(
                    response, .notFound, "registration_not_found", "there is no such registration",
                    "a PUK for registration X")
            }
            let unsigned = try await client.send(.post, path, json: body)
            try world.expectRefusal(
                unsigned, .unauthorized, "unauthenticated", "signed with the key being registered",
                "an unsigned PUK")
        },
        "getWalletRegistrationActivation": .open(
            reason: "signed by the key being registered, which has no wallet yet; says only what that key proved"
        ) { world, client in
            let path = "/v1/wallets/registrations/\(world.registrationX.id)"
            for key in [world.walletDevice.key, world.deviceY.key, world.deviceX.key] {
                let response = try await client.send(
                    .get, path,
                    headers: [
                        .authorization: try signedAuthorization(
                            key, method: .get, path: path, bodyBytes: nil, time: world.server.clock.now)
                    ])
                try world.expectRefusal(
                    response, .notFound, "registration_not_found", "there is no such registration",
                    "registration X's state")
            }
            let unsigned = try await client.send(.get, path)
            try world.expectRefusal(
                unsigned, .unauthorized, "unauthenticated", "signed with the key being registered",
                "an unsigned read of registration X")
        },
        "verifyWalletRestoration": .open(reason: "the one-time code sent to the account's e-mail is its credential") {
            world, client in
            let x = world.registrationX
            let z = world.restorationZ
            let crossed = try await client.send(
                .post, "/v1/wallets/restorations/\(z.id)/verify", json: #"{"code": "\#(x.code)"}"#)
            try world.expectRefusal(
                crossed, .badRequest, "registration_code_invalid", "the code is wrong; 4 more wrong codes lock",
                "restoration Z with X's code")
            let registration = try await client.send(
                .post, "/v1/wallets/restorations/\(x.id)/verify", json: #"{"code": "\#(x.code)"}"#)
            try world.expectRefusal(
                registration, .notFound, "registration_not_found", "there is no such restoration",
                "a registration's id and code on the restoration path")
        },
        "submitWalletRestorationPuk": .open(
            reason:
                "signed by the key the restoration was started with; the PUK texted to the account's phone proves it"
        ) { world, client in
            try await world.expectRestorationStepRefused(
                client, step: "puk", body: #"{"puk": "\#(world.restorationZ.code)"}"#, "a restoration PUK")
        },
        "reactivateWallet": .open(
            reason: "signed by the key the restoration was started with; the token mailed to the account proves it"
        ) { world, client in
            try await world.expectRestorationStepRefused(
                client, step: "reactivate", body: #"{"token": "\#(String(repeating: "A", count: 43))"}"#,
                "a reactivation token")
        },
        "renewTerminalCredential": .terminalSigned(
            request: { _ in Request(method: .post, path: "/v1/terminals/credential", body: nil) },
            otherMerchant: .servesOnlyTheSigner("a terminal renews its own credential; the request names no other")),
        "submitPayment": .terminalSigned(
            request: { world in
                Request(method: .post, path: "/v1/payments", body: try SubmissionFields(payment: world.payment).json())
            },
            otherMerchant: .refused(
                .unprocessableContent, "terms_mismatch", "the wallet signed for another terminal's key")
        ),
        "submitRedemption": .terminalSigned(
            request: { world in
                Request(
                    method: .post, path: "/v1/redemptions",
                    body: try SubmissionFields(redemption: world.redemption).json())
            },
            otherMerchant: .refused(
                .unprocessableContent, "terms_mismatch", "the wallet signed for another terminal's key")
        ),
        "getPayment": .terminalSigned(
            request: { world in
                Request(method: .get, path: "/v1/payments/\(world.payment.paymentID.bytes.hexString)", body: nil)
            },
            otherMerchant: .refused(.notFound, "payment_not_found", "was executed for this merchant")),
        // Offline settlement. The bakery's payment forwarded as accepted offline under
        // wallet A's daily token: the shop's till is refused (the wallet signed for the bakery's
        // till); the bakery's own till gets the stored online result back, nothing settles twice.
        "submitOfflinePayment": .terminalSigned(
            request: { world in
                Request(
                    method: .post, path: "/v1/payments/offline",
                    body: try SubmissionFields(payment: world.payment).json([
                        "dailyToken": Data(world.offlineToken).base64EncodedString(),
                        "acceptedAt": Int(world.server.clock.now),
                    ]))
            },
            otherMerchant: .refused(
                .unprocessableContent, "terms_mismatch", "the wallet signed for another terminal's key")),
        // Merchant service
        "listRegisterUsers": .terminalSigned(
            request: { _ in Request(method: .get, path: "/v1/merchant/register-users", body: nil) },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                #expect(response.status == .ok, "\(response.text)")
                let list = try JSONDecoder().decode(Components.Schemas.RegisterUserList.self, from: response.data)
                #expect(list.registerUsers.isEmpty, "the shop has no register users: \(response.text)")
                world.expectNothingOfTheTenants(in: response.text, "the shop's register users")
            }),
        "addRegisterUser": .terminalSigned(
            request: { _ in
                Request(method: .post, path: "/v1/merchant/register-users", body: #"{"id": "new-1", "name": "Nina"}"#)
            },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                // The id is the merchant's own namespace: the shop gets its own new-1, the bakery nothing.
                #expect(response.status == .created, "\(response.text)")
                #expect(try await world.server.ledger.registerUser(id: "new-1", of: world.bakery.id) == nil)
                #expect(try await world.server.ledger.removeRegisterUser(id: "new-1", from: world.shop.id))
                world.expectNothingOfTheTenants(in: response.text, "the shop's new register user")
            }),
        "renameRegisterUser": .terminalSigned(
            request: { _ in
                Request(method: .put, path: "/v1/merchant/register-users/007", body: #"{"name": "Jim"}"#)
            },
            otherMerchant: .refused(.notFound, "register_user_not_found", "this merchant has no register user 007")),
        "removeRegisterUser": .terminalSigned(
            request: { _ in Request(method: .delete, path: "/v1/merchant/register-users/099", body: nil) },
            otherMerchant: .refused(.notFound, "register_user_not_found", "this merchant has no register user 099")),
        "listMerchantTransactions": .terminalSigned(
            request: { _ in
                Request(method: .get, path: "/v1/merchant/transactions?limit=10&type=payment", body: nil)
            },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                #expect(response.status == .ok, "\(response.text)")
                let page = try JSONDecoder().decode(
                    Components.Schemas.MerchantTransactionPage.self, from: response.data)
                #expect(page.transactions.isEmpty && page.nextCursor == nil, "\(response.text)")
                world.expectNothingOfTheTenants(in: response.text, "the shop's transactions")
            }),
        "getMerchantTransaction": .terminalSigned(
            request: { world in
                Request(
                    method: .get, path: "/v1/merchant/transactions/\(world.payment.paymentID.bytes.hexString)",
                    body: nil)
            },
            otherMerchant: .refused(.notFound, "payment_not_found", "was executed for this merchant")),
        "emailMerchantReceipt": .terminalSigned(
            request: { world in
                Request(
                    method: .post,
                    path: "/v1/merchant/transactions/\(world.payment.paymentID.bytes.hexString)/receipt-email",
                    body: #"{"email": "customer@example.org"}"#)
            },
            otherMerchant: .refused(.notFound, "payment_not_found", "was executed for this merchant")),
        "listRefunds": .terminalSigned(
            request: { world in
                Request(
                    method: .get,
                    path: "/v1/merchant/transactions/\(world.payment.paymentID.bytes.hexString)/refunds", body: nil)
            },
            otherMerchant: .refused(.notFound, "payment_not_found", "was executed for this merchant")),
        "createRefund": .terminalSigned(
            request: { world in
                Request(
                    method: .post, path: "/v1/merchant/refunds",
                    body: """
                        {"refundId": "iso-1", "paymentId": "\(world.payment.paymentID.bytes.hexString)", \
                        "amount": 100, "currency": "EUR"}
                        """)
            },
            otherMerchant: .refused(.notFound, "payment_not_found", "was executed for this merchant")),
        "getMerchantPrograms": .terminalSigned(
            request: { _ in Request(method: .get, path: "/v1/merchant/programs", body: nil) },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                #expect(response.status == .ok, "\(response.text)")
                let programs = try JSONDecoder().decode(Components.Schemas.MerchantPrograms.self, from: response.data)
                // The bakery granted nothing either, but the shop's answer is the shop's rule.
                #expect(!programs.hasGoldProgram && !programs.hasCouponProgram)
                #expect(programs.bonusProgram.currency == world.shop.currency.code)
                world.expectNothingOfTheTenants(in: response.text, "the shop's programs")
            }),
        "listMerchantTerminals": .terminalSigned(
            request: { _ in Request(method: .get, path: "/v1/merchant/terminals", body: nil) },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                #expect(response.status == .ok, "\(response.text)")
                let list = try JSONDecoder().decode(Components.Schemas.MerchantTerminalList.self, from: response.data)
                #expect(list.terminals.map(\.terminalId) == [world.shopTillResponse.terminalId])
                // The shop's till is the caller when it asks itself; its admin session is no terminal.
                #expect(list.terminals.count == 1)
                world.expectNothingOfTheTenants(in: response.text, "the shop's terminals")
                #expect(!response.text.contains(world.revokedTillID), "the bakery's revoked till")
            }),
        "revokeMerchantTerminal": .terminalSigned(
            request: { world in
                Request(method: .post, path: "/v1/merchant/terminals/\(world.revokedTillID)/revoke", body: nil)
            },
            otherMerchant: .refused(.notFound, "terminal_not_found", "this merchant has no terminal")),
        // API keys: the other merchant's admin manages its own keys only.
        "listApiKeys": .terminalSigned(
            request: { _ in Request(method: .get, path: "/v1/merchant/api-keys", body: nil) },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                if response.status == .forbidden { return try world.expectAdminRequired(response, "listApiKeys") }
                #expect(response.status == .ok, "\(response.text)")
                let list = try JSONDecoder().decode(Components.Schemas.ApiKeyList.self, from: response.data)
                #expect(list.apiKeys.allSatisfy { !World.bakeryKeyIDs.contains($0.id) }, "\(response.text)")
                world.expectNothingOfTheTenants(in: response.text, "the shop's API keys")
            }),
        "createApiKey": .terminalSigned(
            request: { _ in
                Request(
                    method: .post, path: "/v1/merchant/api-keys",
                    body: #"{"name": "POS", "scopes": ["transactions:read"]}"#)
            },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                if response.status == .forbidden { return try world.expectAdminRequired(response, "createApiKey") }
                #expect(response.status == .created, "\(response.text)")
                let created = try JSONDecoder().decode(Components.Schemas.CreatedApiKey.self, from: response.data)
                #expect(
                    try await world.server.ledger.apiKeys(of: world.shop.id).contains { $0.id == created.apiKey.id })
                world.expectNothingOfTheTenants(in: response.text, "the shop's new API key")
            }),
        "rollApiKey": .terminalSigned(
            request: { _ in
                Request(method: .post, path: "/v1/merchant/api-keys/\(World.bakeryKeyIDs[0])/roll", body: nil)
            },
            otherMerchant: .refused(.notFound, "api_key_not_found", "this merchant has no active API key")),
        "revokeApiKey": .terminalSigned(
            request: { _ in
                Request(method: .post, path: "/v1/merchant/api-keys/\(World.bakeryKeyIDs[1])/revoke", body: nil)
            },
            otherMerchant: .refused(.notFound, "api_key_not_found", "this merchant has no API key")),
        // Payment intents: the other merchant reaches its own only (an idempotency key is per merchant).
        "createPaymentIntent": .terminalSigned(
            request: { _ in
                Request(
                    method: .post, path: "/v1/merchant/payment-intents",
                    body: #"{"amount": 990, "currency": "EUR", "reference": "order-1"}"#,
                    headers: [HTTPField.Name("Idempotency-Key")!: World.intentIdempotencyKey])
            },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                #expect(response.status == .created || response.status == .ok, "\(response.text)")
                let intent = try JSONDecoder().decode(Components.Schemas.PaymentIntent.self, from: response.data)
                #expect(intent.id != world.bakeryIntent.bytes.hexString)
                let id = try #require(try PaymentID(bytes: try #require([UInt8](hexString: intent.id))))
                #expect(
                    try await world.server.ledger.paymentIntent(id, of: world.shop.id, at: world.server.clock.now)
                        != nil)
                world.expectNothingOfTheTenants(
                    in: response.text, "the shop's payment intent", except: ["a transaction reference"])
            }),
        "listPaymentIntents": .terminalSigned(
            request: { _ in Request(method: .get, path: "/v1/merchant/payment-intents?reference=order-1", body: nil) },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                #expect(response.status == .ok, "\(response.text)")
                let list = try JSONDecoder().decode(Components.Schemas.PaymentIntentList.self, from: response.data)
                #expect(list.paymentIntents.allSatisfy { $0.id != world.bakeryIntent.bytes.hexString })
                world.expectNothingOfTheTenants(
                    in: response.text, "the shop's payment intents", except: ["a transaction reference"])
            }),
        "getPaymentIntent": .terminalSigned(
            request: { world in
                Request(
                    method: .get, path: "/v1/merchant/payment-intents/\(world.bakeryIntent.bytes.hexString)", body: nil)
            },
            otherMerchant: .refused(.notFound, "payment_intent_not_found", "this merchant has no payment intent")),
        "cancelPaymentIntent": .terminalSigned(
            request: { world in
                Request(
                    method: .post, path: "/v1/merchant/payment-intents/\(world.bakeryIntent.bytes.hexString)/cancel",
                    body: nil)
            },
            otherMerchant: .refused(.notFound, "payment_intent_not_found", "this merchant has no payment intent")),
        "streamTerminalPaymentIntents": .terminalSigned(
            request: { _ in Request(method: .get, path: "/v1/terminal/payment-intents/events?wait=1", body: nil) },
            otherMerchant: .servesTheSignersOwn { world, response in
                // The other till's own stream: ready, about itself, nothing of the bakery's.
                #expect(response.status == .ok, "\(response.text)")
                #expect(
                    response.text.hasPrefix(
                        "event: ready\ndata: {\"terminalId\":\"\(world.shopTillResponse.terminalId)\"}"))
                world.expectNothingOfTheTenants(
                    in: response.text, "the other merchant's intent stream", except: ["the shop's id"])
                // Its connection is recorded (for 15 s); undone so the tables compare equal.
                try await world.server.ledger.store.transaction { db in
                    try await db.query("DELETE FROM terminal_connections", [])
                }
            }),
        "collectPaymentIntent": .terminalSigned(
            request: { world in
                Request(
                    method: .post,
                    path: "/v1/terminal/payment-intents/\(world.bakeryIntent.bytes.hexString)/collect", body: nil)
            },
            otherMerchant: .refused(.notFound, "payment_intent_not_found", "this merchant has no payment intent")),
        // Webhooks: the other merchant manages its own endpoints and sees its own deliveries only.
        "listWebhookEndpoints": .terminalSigned(
            request: { _ in Request(method: .get, path: "/v1/merchant/webhook-endpoints", body: nil) },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                if response.status == .forbidden {
                    return try world.expectAdminRequired(response, "listWebhookEndpoints")
                }
                #expect(response.status == .ok, "\(response.text)")
                let list = try JSONDecoder().decode(Components.Schemas.WebhookEndpointList.self, from: response.data)
                #expect(list.webhookEndpoints.allSatisfy { !World.bakeryEndpointIDs.contains($0.id) })
                world.expectNothingOfTheTenants(in: response.text, "the shop's webhook endpoints")
            }),
        "createWebhookEndpoint": .terminalSigned(
            request: { _ in
                Request(
                    method: .post, path: "/v1/merchant/webhook-endpoints",
                    body: #"{"url": "https://shop.example/hooks", "eventTypes": ["payment.succeeded"]}"#)
            },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                if response.status == .forbidden {
                    return try world.expectAdminRequired(response, "createWebhookEndpoint")
                }
                #expect(response.status == .created, "\(response.text)")
                let created = try JSONDecoder().decode(
                    Components.Schemas.CreatedWebhookEndpoint.self, from: response.data)
                #expect(
                    try await world.server.ledger.webhookEndpoint(created.webhookEndpoint.id, of: world.shop.id) != nil)
                world.expectNothingOfTheTenants(in: response.text, "the shop's new webhook endpoint")
            }),
        "rollWebhookSecret": .terminalSigned(
            request: { _ in
                Request(
                    method: .post, path: "/v1/merchant/webhook-endpoints/\(World.bakeryEndpointIDs[0])/roll-secret",
                    body: nil)
            },
            otherMerchant: .refused(.notFound, "webhook_endpoint_not_found", "this merchant has no webhook endpoint")),
        "deleteWebhookEndpoint": .terminalSigned(
            request: { _ in
                Request(
                    method: .delete, path: "/v1/merchant/webhook-endpoints/\(World.bakeryEndpointIDs[1])", body: nil)
            },
            otherMerchant: .refused(.notFound, "webhook_endpoint_not_found", "this merchant has no webhook endpoint")),
        "listWebhookDeliveries": .terminalSigned(
            request: { _ in
                Request(
                    method: .get, path: "/v1/merchant/webhook-deliveries?endpointId=\(World.bakeryEndpointIDs[0])",
                    body: nil)
            },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                if response.status == .forbidden {
                    return try world.expectAdminRequired(response, "listWebhookDeliveries")
                }
                #expect(response.status == .ok, "\(response.text)")
                let list = try JSONDecoder().decode(Components.Schemas.WebhookDeliveryList.self, from: response.data)
                #expect(list.webhookDeliveries.isEmpty, "\(response.text)")
            }),
        "getWebhookDelivery": .terminalSigned(
            request: { _ in
                Request(method: .get, path: "/v1/merchant/webhook-deliveries/\(World.bakeryDeliveryID)", body: nil)
            },
            otherMerchant: .refused(.notFound, "webhook_delivery_not_found", "this merchant has no webhook delivery")),
        "resendWebhookDelivery": .terminalSigned(
            request: { _ in
                Request(
                    method: .post, path: "/v1/merchant/webhook-deliveries/\(World.bakeryDeliveryID)/resend", body: nil)
            },
            otherMerchant: .refused(.notFound, "webhook_delivery_not_found", "this merchant has no webhook delivery")),
        // The wallet PIN counted by the server
        "getWalletPIN": .walletSigned(
            request: { _ in Request(method: .get, path: "/v1/wallet/pin", body: nil) },
            otherWallet: .servesOnlyTheSigner("a wallet reads its own PIN state; the request names no wallet") {
                world, response in
                let state = try JSONDecoder().decode(Components.Schemas.WalletPINState.self, from: response.data)
                #expect(state.wrongProofs == 0, "\(response.text)")
            }),
        "setWalletPIN": .walletSigned(
            // Fresh keys each time: a device key names one wallet's PIN.
            request: { _ in
                let device = P256.Signing.PrivateKey().publicKey.x963Representation.base64EncodedString()
                let pin = P256.Signing.PrivateKey().publicKey.x963Representation.base64EncodedString()
                let share = Data(repeating: 9, count: 32).base64EncodedString()
                return Request(
                    method: .put, path: "/v1/wallet/pin",
                    body: #"{"deviceKey": "\#(device)", "pinKey": "\#(pin)", "share": "\#(share)"}"#)
            },
            otherWallet: .servesOnlyTheSigner("a wallet sets its own PIN only; the request names no wallet") {
                world, response in
                let state = try JSONDecoder().decode(Components.Schemas.WalletPINState.self, from: response.data)
                #expect(state.pinSet && !state.pinless, "\(response.text)")
            }),
        "deactivateWalletPIN": .walletSigned(
            request: { _ in Request(method: .delete, path: "/v1/wallet/pin", body: nil) },
            otherWallet: .servesOnlyTheSigner("a wallet makes itself pinless only; the request names no wallet") {
                world, response in
                let state = try JSONDecoder().decode(Components.Schemas.WalletPINState.self, from: response.data)
                #expect(state.pinless && !state.pinSet, "\(response.text)")
            }),
        "proveWalletPIN": .open(
            reason:
                "signed by the device key a PIN was set with, not by a wallet's key (still locked); it names no wallet, and a key no PIN was set with gets nothing"
        ) { world, client in
            let path = "/v1/wallet/pin/proofs"
            let now = world.server.clock.now
            let body =
                #"{"nonce": "\#(String(repeating: "a", count: 32))", "proof": "\#(Data(repeating: 1, count: 64).base64EncodedString())", "time": \#(now)}"#
            // Wallet keys, and a registering key: none is a device key.
            for key in [world.walletDevice.key, world.walletBDevice.key, world.deviceX.key] {
                let response = try await client.send(
                    .post, path, json: body,
                    headers: [
                        .authorization: try signedAuthorization(
                            key, method: .post, path: path, bodyBytes: Array(body.utf8), time: now)
                    ])
                try world.expectRefusal(response, .notFound, "pin_not_set", "no PIN was set", "a PIN proof")
            }
            let unsigned = try await client.send(.post, path, json: body)
            try world.expectRefusal(
                unsigned, .unauthorized, "unauthenticated", "signed with the device key", "an unsigned PIN proof")
        },
        // Wallet services
        "getWalletAccount": .walletSigned(
            request: { _ in Request(method: .get, path: "/v1/wallet/account", body: nil) },
            otherWallet: .servesOnlyTheSigner("a wallet reads its own data; the request names no wallet") {
                world, response in
                let data = try JSONDecoder().decode(Components.Schemas.WalletAccountData.self, from: response.data)
                #expect(data.walletId == world.walletB.rawValue && data.email == nil)
            }),
        "setWalletAccount": .walletSigned(
            // The name both wallets have already, so a served request changes no row.
            request: { _ in Request(method: .put, path: "/v1/wallet/account", body: #"{"name": "Alice"}"#) },
            otherWallet: .servesOnlyTheSigner("a wallet renames itself only") { world, response in
                let data = try JSONDecoder().decode(Components.Schemas.WalletAccountData.self, from: response.data)
                #expect(data.walletId == world.walletB.rawValue)
            }),
        "getWalletBalances": .walletSigned(
            request: { _ in Request(method: .get, path: "/v1/wallet/balances", body: nil) },
            otherWallet: .servesOnlyTheSigner("a wallet reads its own balances") { world, response in
                let balances = try JSONDecoder().decode(Components.Schemas.WalletBalances.self, from: response.data)
                #expect(balances.balances.isEmpty, "wallet B has no money: \(response.text)")
            }),
        "listWalletTransactions": .walletSigned(
            request: { _ in Request(method: .get, path: "/v1/wallet/transactions?limit=10", body: nil) },
            otherWallet: .servesOnlyTheSigner("a wallet lists its own transactions") { world, response in
                let page = try JSONDecoder().decode(Components.Schemas.WalletTransactionPage.self, from: response.data)
                #expect(page.transactions.isEmpty && page.nextCursor == nil, "\(response.text)")
            }),
        "getWalletTransaction": .walletSigned(
            request: { world in
                Request(
                    method: .get, path: "/v1/wallet/transactions/\(world.payment.paymentID.bytes.hexString)", body: nil)
            },
            otherWallet: .refused(.notFound, "transaction_not_found", "this wallet has no transaction")),
        "emailWalletReceipt": .walletSigned(
            request: { world in
                Request(
                    method: .post,
                    path: "/v1/wallet/transactions/\(world.payment.paymentID.bytes.hexString)/receipt-email",
                    body: nil)
            },
            otherWallet: .refused(.notFound, "transaction_not_found", "this wallet has no transaction")),
        "listWalletBonusPrograms": .walletSigned(
            request: { _ in Request(method: .get, path: "/v1/wallet/bonus-programs", body: nil) },
            otherWallet: .servesOnlyTheSigner("the programs anyone can join, with the signer's own points") {
                world, response in
                let list = try JSONDecoder().decode(Components.Schemas.BonusProgramList.self, from: response.data)
                // The bakery's program (wallet B joined it), never wallet A's 400 points.
                #expect(list.programs.map(\.points) == [0, 0], "\(response.text)")
                #expect(list.programs.first { $0.merchantId == world.bakery.id.rawValue }?.state == .joined)
            }),
        "setWalletBonusMembership": .walletSigned(
            // Wallet B joined already: its request changes no row; wallet A's own request joins.
            request: { world in
                Request(
                    method: .put, path: "/v1/wallet/bonus-programs/\(world.bakery.id.rawValue)/membership",
                    body: #"{"state": "joined"}"#)
            },
            otherWallet: .servesOnlyTheSigner("a wallet joins or leaves for itself only") { world, response in
                let program = try JSONDecoder().decode(Components.Schemas.BonusProgram.self, from: response.data)
                #expect(program.points == 0 && program.state == .joined, "\(response.text)")
            }),
        "listWalletGoldMemberships": .walletSigned(
            request: { _ in Request(method: .get, path: "/v1/wallet/gold-memberships", body: nil) },
            otherWallet: .servesOnlyTheSigner("a wallet lists its own memberships") { world, response in
                let list = try JSONDecoder().decode(Components.Schemas.GoldMembershipList.self, from: response.data)
                #expect(list.memberships.isEmpty, "\(response.text)")
            }),
        "listWalletCoupons": .walletSigned(
            request: { _ in Request(method: .get, path: "/v1/wallet/coupons", body: nil) },
            otherWallet: .servesOnlyTheSigner("a wallet lists its own coupons") { world, response in
                let list = try JSONDecoder().decode(Components.Schemas.CouponList.self, from: response.data)
                #expect(list.coupons.isEmpty, "\(response.text)")
            }),
        // Daily token. Wallet B asking gets its own token (its key, its account, its
        // zero allowance), never wallet A's; the token table is left out of the snapshot and
        // checked after.
        "issueDailyToken": .walletSigned(
            request: { _ in Request(method: .post, path: "/v1/wallet/daily-token", body: #"{"currency": "EUR"}"#) },
            otherWallet: .servesOnlyTheSigner("a wallet gets its own token only; the request names no wallet") {
                world, response in
                let answer = try JSONDecoder().decode(Components.Schemas.DailyTokenResponse.self, from: response.data)
                let token = try DailyToken.decode(Array(try #require(Data(base64Encoded: answer.token))))
                #expect(token.walletAccountID == world.walletB.rawValue)
                #expect(token.walletKey == Array(world.walletBDevice.key.publicKey.x963Representation))
                #expect(answer.allowance == 0 && token.allowance.minorUnits == 0, "wallet B holds no money")
            }),
        // Gateway. The key configuration is public; the relay is terminal-signed, any
        // active terminal may relay, and what it relays is sealed: the wallet's own signature
        // inside decides whose request it is (GatewayTests shows a wallet cannot act as another).
        "getGatewayKeyConfig": .open(reason: "the gateway's public key, signed by the issuer; public by nature") {
            world, client in
            let response = try await client.send(.get, "/v1/gateway/key-config")
            #expect(response.status == .ok)
            #expect(try keys(of: response.data) == ["keyConfig", "label", "signature"])
            world.expectNothingOfTheTenants(in: response.text, "/v1/gateway/key-config")
        },
        "relayThroughGateway": .terminalSigned(
            request: { world in
                Request(
                    method: .post, path: "/v1/gateway", body: nil,
                    binaryBody: try world.sealedBalanceRequest(), contentType: "message/ohttp-req")
            },
            otherMerchant: .servesTheSignersOwn { (world: World, response: TestResponse) async throws in
                // Any active terminal relays; the answer is sealed to the wallet, nothing readable.
                #expect(response.status == .ok, "\(response.text)")
                #expect(response.headers[.contentType] == "message/ohttp-res")
                #expect(ObliviousHTTP.sizeBuckets.contains(response.data.count))
                world.expectNothingOfTheTenants(in: response.text, "a relayed answer")
            }),
        // Cards and 3-D Secure. Wallet B adding a card adds it to wallet B (the card
        // tables are left out of the snapshot; wallet A's cards are checked after).
        "getPaymentCards": .walletSigned(
            request: { _ in Request(method: .get, path: "/v1/wallet/cards", body: nil) },
            otherWallet: .servesOnlyTheSigner("lists the signing wallet's own cards") { world, response in
                let list = try JSONDecoder().decode(Components.Schemas.PaymentCardList.self, from: response.data)
                #expect(!list.cards.contains { world.cards.all.contains($0.id) }, "\(response.text)")
            }),
        "addPaymentCard": .walletSigned(
            request: { _ in
                Request(
                    method: .post, path: "/v1/wallet/cards",
                    body: #"{"cardholder": "Wendy", "cardNumber": "4242424242424242", "expiry": "12/30", "cvc": "123"}"#
                )
            },
            otherWallet: .servesOnlyTheSigner("adds the card to the signing wallet; the request names no other") {
                world, response in
                let added = try JSONDecoder().decode(Components.Schemas.AddPaymentCardResult.self, from: response.data)
                #expect(!world.cards.all.contains(added.card.id))
            }),
        "updatePaymentCard": .walletSigned(
            request: { world in
                Request(method: .patch, path: "/v1/wallet/cards/\(world.cards.card)", body: #"{"active": false}"#)
            },
            otherWallet: .refused(.notFound, "card_not_found", "this wallet has no such card")),
        "removePaymentCard": .walletSigned(
            request: { world in
                Request(method: .delete, path: "/v1/wallet/cards/\(world.cards.cardToRemove)", body: nil)
            },
            otherWallet: .refused(.notFound, "card_not_found", "this wallet has no such card")),
        "executeAddPaymentCard": .walletSigned(
            request: { world in
                Request(
                    method: .post, path: "/v1/wallet/cards/\(world.cards.challengedCard)/3ds",
                    body: #"{"md": "\#(world.cards.challenge.md)", "paRes": "\#(world.cards.challenge.paRes ?? "")"}"#)
            },
            otherWallet: .refused(.notFound, "card_not_found", "this wallet has no such card")),
        "getCardChallenge": .walletSigned(
            request: { world in
                Request(method: .get, path: "/v1/wallet/card-challenges/\(world.cards.challenge.md)", body: nil)
            },
            otherWallet: .refused(.notFound, "card_challenge_not_found", "no 3-D Secure challenge with this MD")),
        "getStatusMessages": .open(reason: "what the operator tells every app; nothing of any tenant") {
            world, client in
            let response = try await client.send(.get, "/v1/status-messages")
            #expect(response.status == .ok)
            let list = try JSONDecoder().decode(Components.Schemas.StatusMessageList.self, from: response.data)
            #expect(list.messages.map(\.title) == ["Maintenance tonight"])
            world.expectNothingOfTheTenants(in: response.text, "/v1/status-messages")
        },
    ]

    /// The operation ids of `openapi.yaml`.
    static func operationIDs() throws -> [String] {
        let text = try String(
            contentsOf: ServerContractTests.apiDirectory.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        return text.split(separator: "\n").compactMap { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("operationId:") else { return nil }
            return trimmed.dropFirst("operationId:".count).trimmingCharacters(in: .whitespaces)
        }
    }

    @Test func everyOperationHasAnEntry() throws {
        let ids = try Self.operationIDs()
        #expect(ids.count == (try ServerContractTests.operations()).count, "an operation without an operationId?")
        #expect(
            Set(ids) == Set(Self.table.keys), "operations without an entry: \(Set(ids).subtracting(Self.table.keys))")
    }

    /// The credentials tried on every terminal-signed operation, and the refusal each gets.
    enum Credential: String, CaseIterable {
        case none, bearer, malformed, expired, future, replayed, forged, unknownKey, walletKey, revokedTerminal

        var expected: (HTTPResponse.Status, String, String) {
            switch self {
            case .none, .bearer:
                (.unauthorized, "unauthenticated", "this operation needs a request signed with the terminal's key")
            case .malformed: (.unauthorized, "unauthenticated", "the HorizonSignature header is malformed")
            case .expired, .future: (.unauthorized, "request_expired", "s from the server's clock")
            case .replayed: (.unauthorized, "request_replayed", "this signed request was already received once")
            case .forged: (.unauthorized, "signature_invalid", "the request's signature does not verify")
            case .unknownKey, .walletKey:
                (.forbidden, "terminal_unknown", "the signing key is not an activated terminal")
            case .revokedTerminal: (.forbidden, "terminal_revoked", "was revoked by its merchant")
            }
        }
    }

    /// The credentials tried on every wallet-signed operation, and the refusal each gets.
    enum WalletCredential: String, CaseIterable {
        case none, bearer, malformed, expired, future, replayed, forged, unknownKey, terminalKey, revokedWalletKey

        var expected: (HTTPResponse.Status, String, String) {
            switch self {
            case .none, .bearer:
                (.unauthorized, "unauthenticated", "this operation needs a request signed with the wallet's key")
            case .malformed: (.unauthorized, "unauthenticated", "the HorizonSignature header is malformed")
            case .expired, .future: (.unauthorized, "request_expired", "s from the server's clock")
            case .replayed: (.unauthorized, "request_replayed", "this signed request was already received once")
            case .forged: (.unauthorized, "signature_invalid", "the request's signature does not verify")
            case .unknownKey, .terminalKey:
                (.forbidden, "wallet_unknown", "the signing key is not a registered wallet")
            case .revokedWalletKey: (.unauthorized, "wallet_key_revoked", "this wallet key was revoked")
            }
        }

        /// The terminal credential whose header this one is made like (the key differs).
        var terminalCounterpart: Credential? {
            switch self {
            case .none: Credential.none
            case .bearer: .bearer
            case .malformed: .malformed
            case .expired: .expired
            case .future: .future
            case .replayed: .replayed
            case .forged: .forged
            case .unknownKey: .unknownKey
            case .terminalKey, .revokedWalletKey: nil
            }
        }
    }

    /// The Authorization header for a wallet's `request` under `credential` (nil: none).
    func walletAuthorization(
        _ credential: WalletCredential, _ request: Request, world: World, client: any TestClientProtocol
    ) async throws -> String? {
        let sign = { (key: P256.Signing.PrivateKey) throws -> String in
            try signedAuthorization(
                key, method: request.method, path: request.path, bodyBytes: request.bytes, time: world.server.clock.now)
        }
        switch credential {
        case .terminalKey: return try sign(world.till.key)
        case .revokedWalletKey: return try sign(world.revokedWalletDevice.key)
        default:
            guard let counterpart = credential.terminalCounterpart else { return nil }
            // The same malformed, expired, replayed or forged header, made with the wallet's key.
            return try await authorization(
                counterpart, request, world: world, client: client, key: world.walletDevice.key)
        }
    }

    /// The Authorization header for `request` under `credential` (nil: none).
    func authorization(
        _ credential: Credential, _ request: Request, world: World, client: any TestClientProtocol,
        key: P256.Signing.PrivateKey? = nil
    ) async throws -> String? {
        let now = world.server.clock.now
        let till = key ?? world.till.key
        func sign(_ key: P256.Signing.PrivateKey, time: Int64 = now, nonce: String? = nil) throws -> String {
            try signedAuthorization(
                key, method: request.method, path: request.path, bodyBytes: request.bytes, time: time, nonce: nonce)
        }
        switch credential {
        case .none: return nil
        case .bearer: return "Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl"
        case .malformed: return #"HorizonSignature key="not a key", time="1", nonce="00", signature="x""#
        case .expired: return try sign(till, time: now - 301)
        case .future: return try sign(till, time: now + 301)
        case .replayed:
            // The nonce is spent by another request of the same key first: its second use is refused
            // whatever it signs.
            let nonce = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            let first = try await client.send(
                .get, "/health",
                headers: [
                    .authorization: try signedAuthorization(
                        till, method: .get, path: "/health", body: nil, time: now, nonce: nonce)
                ])
            #expect(first.status == .ok)
            return try sign(till, nonce: nonce)
        case .forged:
            // The till's signature over another request (another path), put on this one.
            return try signedAuthorization(
                till, method: request.method, path: "/v1/anchor", bodyBytes: request.bytes, time: now)
        case .unknownKey: return try sign(P256.Signing.PrivateKey())
        case .walletKey: return try sign(world.walletDevice.key)
        case .revokedTerminal: return try sign(world.revokedTill.key)
        }
    }

    func send(_ request: Request, authorization: String?, client: any TestClientProtocol) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let authorization { headers[.authorization] = authorization }
        return try await client.send(request, headers: headers)
    }

    @Test func everyOperationRefusesWhoeverMayNotUseIt() async throws {
        let world = try await World.make()
        let ignored: Set<String> = [
            // What refused calls may change: spent nonces, counted wrong passwords, counted wrong codes.
            "request_nonces", "merchant_logins", "wallet_registrations",
            // Admin sign-ins: their sessions and counted attempts.
            "dashboard_sessions", "dashboard_sign_in_attempts", "sign_in_backoff",
            // Restoration starts queue a mail (to the account's own address).
            "outbox",
            // Wallet B's served card request adds a card of its own (checked below).
            "payment_cards", "card_challenges", "sandbox_card_tokens",
            // Wallet B's served token request records its own token (checked below).
            "daily_tokens",
            // A sealed request the gateway opened is remembered, so that its replay is refused.
            "gateway_replays",
            // The shop's own keys: made by its admin, their use noted (the bakery's are checked below).
            "api_keys",
            // The shop's own payment intent (the bakery's is checked below).
            "payment_intents",
            // The shop's own webhook endpoints (the bakery's, and its delivery, are checked below).
            "webhook_endpoints",
            // Wallet B's served PIN requests set or drop its own PIN (checked below).
            "wallet_pins",
        ]
        let bakeryKeys = try await world.server.ledger.apiKeys(of: world.bakery.id)
        let bakeryIntent = try await world.server.ledger.paymentIntent(
            world.bakeryIntent, of: world.bakery.id, at: world.server.clock.now)
        let bakeryEndpoints = try await world.server.ledger.webhookEndpoints(of: world.bakery.id)
        let bakeryDelivery = try await world.server.ledger.webhookDelivery(World.bakeryDeliveryID, of: world.bakery.id)
        #expect(bakeryEndpoints.count == 2 && bakeryDelivery?.attempts == 0)
        let before = try await tableSnapshot(world.server.ledger, excluding: ignored)
        let (refusals, walletRefusals, adminRequests, keyRequests) = try await world.server.withClient { client in
            var refusals = 0
            var walletRefusals = 0
            var adminRequests = 0
            var keyRequests = 0
            for (operation, protection) in Self.table.sorted(by: { $0.key < $1.key }) {
                switch protection {
                case .open(_, let probe):
                    try await probe(world, client)
                case .walletSigned(let makeRequest, let otherWallet):
                    let request = try makeRequest(world)
                    for credential in WalletCredential.allCases {
                        let header = try await walletAuthorization(credential, request, world: world, client: client)
                        let response = try await send(request, authorization: header, client: client)
                        let (status, code, message) = credential.expected
                        // A forged signature's refusal names the path the caller sent itself
                        // (for a membership, the merchant id it chose).
                        try world.expectRefusal(
                            response, status, code, message, "\(operation) with \(credential)",
                            except: ["the bakery's id"])
                        if status == .unauthorized {
                            #expect(
                                response.headers[.wwwAuthenticate] == "HorizonSignature", "\(operation) \(credential)")
                        }
                        walletRefusals += 1
                    }
                    let byWalletB = try await client.send(
                        request,
                        headers: [
                            .authorization: try signedAuthorization(
                                world.walletBDevice.key, method: request.method, path: request.path,
                                bodyBytes: request.bytes, time: world.server.clock.now)
                        ])
                    switch otherWallet {
                    case .refused(let status, let code, let message):
                        try world.expectRefusal(byWalletB, status, code, message, "\(operation) by wallet B")
                        walletRefusals += 1
                    case .servesOnlyTheSigner(_, let check):
                        #expect(byWalletB.status.kind == .successful, "\(operation) by wallet B: \(byWalletB.text)")
                        try check(world, byWalletB)
                        world.expectNothingOfTheTenants(
                            in: byWalletB.text, "\(operation) by wallet B",
                            except: ["the bakery's id", "the bakery's name", "the shop's id"])
                    }
                case .terminalSigned(let makeRequest, let otherMerchant):
                    let request = try makeRequest(world)
                    for credential in Credential.allCases {
                        let header = try await authorization(credential, request, world: world, client: client)
                        let response = try await send(request, authorization: header, client: client)
                        let (status, code, message) = credential.expected
                        try world.expectRefusal(response, status, code, message, "\(operation) with \(credential)")
                        if status == .unauthorized {
                            // The merchant service also offers the admin's session (Bearer) to a
                            // request that brought no signature; a bad signature is the
                            // signature check's refusal.
                            let offersBoth =
                                request.path.hasPrefix("/v1/merchant/")
                                && (credential == .none || credential == .bearer)
                            let challenge = offersBoth ? "HorizonSignature, Bearer" : "HorizonSignature"
                            #expect(
                                response.headers[.wwwAuthenticate] == challenge, "\(operation) \(credential)")
                        }
                        refusals += 1
                    }
                    // The other merchant's admin session gets what its terminal gets.
                    if request.path.hasPrefix("/v1/merchant/") {
                        let byShopAdmin = try await client.send(
                            request, headers: [.authorization: "Bearer " + (try await world.shopAdminToken(client))])
                        switch otherMerchant {
                        case .refused(let status, let code, let message):
                            try world.expectRefusal(
                                byShopAdmin, status, code, message, "\(operation) by the other merchant's admin")
                        case .servesOnlyTheSigner:
                            Issue.record("\(operation): a merchant operation serves its terminal only")
                        case .servesTheSignersOwn(let check):
                            try await check(world, byShopAdmin)
                        }
                        adminRequests += 1
                        // The other merchant's key with every scope: what its admin gets where a
                        // key is accepted, and a refusal of keys where none is.
                        let byShopKey = try await client.send(
                            request, headers: [.authorization: "Bearer " + world.shopAPIKey])
                        if Self.keyScoped[operation] != nil {
                            switch otherMerchant {
                            case .refused(let status, let code, let message):
                                try world.expectRefusal(
                                    byShopKey, status, code, message, "\(operation) by the other merchant's API key")
                            case .servesOnlyTheSigner:
                                Issue.record("\(operation): a merchant operation serves its terminal only")
                            case .servesTheSignersOwn(let check):
                                try await check(world, byShopKey)
                            }
                        } else if Self.adminOnly.contains(operation) {
                            try world.expectAdminRequired(byShopKey, "\(operation) by the other merchant's API key")
                        } else {
                            try world.expectRefusal(
                                byShopKey, .forbidden, "insufficient_scope", "an API key cannot call this operation",
                                "\(operation) by the other merchant's API key")
                        }
                        keyRequests += 1
                    }
                    let byShop = try await client.send(
                        request,
                        headers: [
                            .authorization: try signedAuthorization(
                                world.shopTill.key, method: request.method, path: request.path,
                                bodyBytes: request.bytes,
                                time: world.server.clock.now)
                        ])
                    switch otherMerchant {
                    case .refused where Self.adminOnly.contains(operation):
                        // A terminal's key may not pay money out or lock tills out, whoever's it is.
                        try world.expectRefusal(
                            byShop, .forbidden, "admin_required", "needs the merchant admin's session",
                            "\(operation) by the other merchant's till")
                        refusals += 1
                    case .refused(let status, let code, let message):
                        try world.expectRefusal(byShop, status, code, message, "\(operation) by the other merchant")
                        refusals += 1
                    case .servesOnlyTheSigner:
                        #expect(byShop.status == .ok, "\(operation): \(byShop.text)")
                        let credential = try JSONDecoder().decode(
                            Components.Schemas.TerminalCredentialResponse.self, from: byShop.data)
                        #expect(credential.merchantId == world.shop.id.rawValue)
                        #expect(credential.terminalId == world.shopTillResponse.terminalId)
                        world.expectNothingOfTheTenants(
                            in: byShop.text, "\(operation) by the other merchant", except: ["the shop's id"])
                    case .servesTheSignersOwn(let check):
                        try await check(world, byShop)
                    }
                }
            }
            return (refusals, walletRefusals, adminRequests, keyRequests)
        }
        #expect(adminRequests == 27, "every merchant-service operation was tried with the other admin's session")
        #expect(keyRequests == adminRequests, "every merchant-service operation was tried with the other's API key")
        // The bakery's keys are as they were: neither rolled nor revoked by anyone else.
        #expect(try await world.server.ledger.apiKeys(of: world.bakery.id) == bakeryKeys)
        #expect(
            try await world.server.ledger.paymentIntent(
                world.bakeryIntent, of: world.bakery.id, at: world.server.clock.now) == bakeryIntent)
        #expect(bakeryIntent?.status == .requiresCollection)
        // The bakery's webhook endpoints are as they were (no secret rolled, none deleted), and
        // its delivery was not sent again.
        #expect(try await world.server.ledger.webhookEndpoints(of: world.bakery.id) == bakeryEndpoints)
        #expect(
            try await world.server.ledger.webhookDelivery(World.bakeryDeliveryID, of: world.bakery.id)
                == bakeryDelivery)
        // The metrics (on their own listener) count by route and code after all this: no ids.
        world.expectNothingOfTheTenants(in: try await world.server.scrapeMetrics(), "/metrics")
        let signed = Self.table.values.filter { if case .terminalSigned = $0 { true } else { false } }
        let refusedByTheOtherMerchant = signed.filter {
            if case .terminalSigned(_, .refused) = $0 { true } else { false }
        }
        #expect(refusals == signed.count * Credential.allCases.count + refusedByTheOtherMerchant.count)
        let walletOperations = Self.table.values.filter {
            if case .walletSigned = $0 { true } else { false }
        }
        let refusedForWalletB = walletOperations.filter {
            if case .walletSigned(_, .refused) = $0 { true } else { false }
        }
        #expect(walletRefusals == walletOperations.count * WalletCredential.allCases.count + refusedForWalletB.count)
        // Wallet A's cards are as they were; wallet B's request added a card to wallet B only.
        let cardsOfA = try await world.server.ledger.paymentCards(of: world.walletID)
        #expect(
            Set(cardsOfA.map(\.id.rawValue))
                == Set([world.cards.card, world.cards.cardToRemove, world.cards.challengedCard]))
        #expect(try await world.server.ledger.paymentCards(of: world.walletB).count == 1)
        // No refused request got wallet A a token (it has only the one the world recorded for
        // offline payments); wallet B's request recorded one, for wallet B.
        let now = world.server.clock.now
        #expect(
            try await world.server.ledger.dailyTokens(of: world.walletID, validBetween: now - 60, and: now + 60).map(
                \.token) == [world.offlineToken])
        let tokensOfB = try await world.server.ledger.dailyTokens(
            of: world.walletB, validBetween: now - 60, and: now + 60)
        #expect(tokensOfB.map(\.walletKey) == [world.walletBDevice.publicKeyBytes])
        // No refused request set, dropped or counted wallet A's PIN, or made it pinless; wallet B's
        // own PIN requests changed wallet B only, and in whichever order they ran: B gets a PIN
        // again here (not pinless, as before), so that the snapshot compares the rest.
        #expect(try await world.server.ledger.walletPIN(of: world.walletID) == nil)
        #expect(try await world.server.ledger.isWalletPinless(world.walletID) == false)
        let device = P256.Signing.PrivateKey()
        try await world.server.ledger.setWalletPIN(
            world.walletB, deviceKey: try PublicKeyBytes(bytes: Array(device.publicKey.x963Representation)),
            pinKey: Array(P256.Signing.PrivateKey().publicKey.x963Representation), share: Array(repeating: 3, count: 32)
        )
        // Nothing moved: no posting, no transaction, no wallet, key, terminal or account changed
        // (renewal by the other merchant's own terminal updates its own row only).
        // (The other merchant's renewal on the same clock second leaves its row as it was.)
        let after = try await tableSnapshot(world.server.ledger, excluding: ignored)
        let changed = Set(after.keys).union(before.keys).filter { after[$0] != before[$0] }.sorted()
        #expect(changed.isEmpty, "tables changed by refused requests: \(changed)")
        #expect(
            try await world.server.ledger.balance(of: world.walletID, in: .eur)
                == (try Money(minorUnits: World.balance - 12_50 - 1_00, currency: .eur)))

        // The same requests signed by the till they belong to are served: every refusal above
        // was for the credential, not for a broken request.
        try await world.server.withClient { client in
            for (operation, protection) in Self.table {
                guard case .terminalSigned(let makeRequest, _) = protection else { continue }
                let request = try makeRequest(world)
                let response = try await client.send(
                    request,
                    headers: [
                        .authorization: try signedAuthorization(
                            world.till.key, method: request.method, path: request.path, bodyBytes: request.bytes,
                            time: world.server.clock.now)
                    ])
                guard Self.adminOnly.contains(operation) else {
                    // Collecting needs a waiting intent, and this loop's cancel may come first: then
                    // it is refused for the intent's state, never for the credential.
                    let stateRefusal =
                        operation == "collectPaymentIntent" && response.text.contains("payment_intent_not_collectable")
                    #expect(
                        response.status.kind == .successful || stateRefusal,
                        "\(operation) by its own till: \(response.text)")
                    continue
                }
                // Refunds and revocations are its merchant admin's, not its own till's.
                #expect(response.status == .forbidden, "\(operation) by its own till: \(response.text)")
                #expect(response.text.contains("admin_required"), "\(operation) by its own till: \(response.text)")
                let signIn = try await client.send(
                    .post, "/v1/merchant/sessions",
                    json: #"{"email": "\#(TestServer.email)", "password": "\#(TestServer.password)"}"#)
                let token = try JSONDecoder().decode(Components.Schemas.MerchantAdminSession.self, from: signIn.data)
                let byAdmin = try await client.send(request, headers: [.authorization: "Bearer " + token.token])
                #expect(byAdmin.status.kind == .successful, "\(operation) by its admin: \(byAdmin.text)")
            }
        }
        // The wallet operations signed by wallet A itself are served, about wallet A.
        try await world.server.withClient { client in
            for (operation, protection) in Self.table {
                guard case .walletSigned(let makeRequest, _) = protection else { continue }
                let request = try makeRequest(world)
                let response = try await client.send(
                    request,
                    headers: [
                        .authorization: try signedAuthorization(
                            world.walletDevice.key, method: request.method, path: request.path,
                            bodyBytes: request.bytes,
                            time: world.server.clock.now)
                    ])
                #expect(response.status.kind == .successful, "\(operation) by wallet A: \(response.text)")
                if operation == "getWalletTransaction" || operation == "listWalletTransactions" {
                    #expect(response.text.contains(world.payment.paymentID.bytes.hexString), "\(operation)")
                }
            }
        }
        // Payments and redemptions were replays of stored results: still one execution each.
        #expect(try await world.server.ledger.executionCount(of: world.payment.paymentID) == 1)
        #expect(try await world.server.ledger.executionCount(of: world.redemption.redemptionID) == 1)
    }
}

/// Two merchants (a bakery with two tills, one revoked; a shop with one), a registered wallet
/// that paid and redeemed at the bakery, two wallet registrations and a restoration under way.
final class World: Sendable {
    static let shopEmail = "owner@shop.example"
    static let shopPassword = "another long password"
    static let walletEmail = "wendy@example.com"
    static let balance: Int64 = 100_00

    let server: TestServer
    let bakery: Merchant
    let shop: Merchant
    let till: TerminalKey
    let tillResponse: Components.Schemas.TerminalCredentialResponse
    let revokedTill: TerminalKey
    let revokedTillID: String
    let shopTill: TerminalKey
    let shopTillResponse: Components.Schemas.TerminalCredentialResponse
    let walletDevice: WalletDevice
    let walletID: WalletID
    let payment: Confirm
    let redemption: Redeem
    let deviceX: WalletDevice
    let deviceY: WalletDevice
    let registrationX: (id: String, code: String)
    let registrationY: (id: String, code: String)
    let restorationZ: (id: String, code: String)
    /// A second registered wallet (B), which joined the bakery's bonus program, and a
    /// wallet whose key was revoked.
    let walletB: WalletID
    let walletBDevice: WalletDevice
    let revokedWalletDevice: WalletDevice
    /// Wallet A's cards.
    let cards: WorldCards
    /// Wallet A's daily token, recorded by the server, for forwarded offline payments.
    let offlineToken: [UInt8]
    /// The shop's admin session, once signed in.
    let shopAdminSession = Mutex<String?>(nil)
    /// The shop's secret API key with every scope.
    let shopAPIKey =
        "sk_"
        + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "+", with: "-")
    /// The bakery's API keys (one for the roll, one for the revocation the shop tries).
    static let bakeryKeyIDs = ["key_bakery_roll", "key_bakery_revoke"]
    /// The bakery's payment intent, waiting for collection.
    let bakeryIntent = try! PaymentID(bytes: Array(repeating: 0x77, count: 16))
    static let intentIdempotencyKey = "order-1-attempt-1"
    /// The bakery's webhook endpoints (one whose secret the shop tries to roll and whose
    /// delivery it tries to read and resend, one it tries to delete).
    static let bakeryEndpointIDs = ["we_bakery_roll", "we_bakery_delete"]
    /// The first webhook delivery of the world's database: the bakery's.
    static let bakeryDeliveryID: Int64 = 1

    private init(
        server: TestServer, bakery: Merchant, shop: Merchant,
        tillResponse: Components.Schemas.TerminalCredentialResponse,
        shopTillResponse: Components.Schemas.TerminalCredentialResponse, walletID: WalletID, payment: Confirm,
        redemption: Redeem, registrationX: (String, String), registrationY: (String, String),
        restorationZ: (String, String), till: TerminalKey, revokedTill: TerminalKey, revokedTillID: String,
        shopTill: TerminalKey,
        walletDevice: WalletDevice, deviceX: WalletDevice, deviceY: WalletDevice, walletB: WalletID,
        walletBDevice: WalletDevice, revokedWalletDevice: WalletDevice, cards: WorldCards, offlineToken: [UInt8]
    ) {
        self.offlineToken = offlineToken
        self.cards = cards
        self.walletB = walletB
        self.walletBDevice = walletBDevice
        self.revokedWalletDevice = revokedWalletDevice
        self.server = server
        self.bakery = bakery
        self.shop = shop
        self.tillResponse = tillResponse
        self.shopTillResponse = shopTillResponse
        self.walletID = walletID
        self.payment = payment
        self.redemption = redemption
        self.registrationX = registrationX
        self.registrationY = registrationY
        self.restorationZ = restorationZ
        self.till = till
        self.revokedTill = revokedTill
        self.revokedTillID = revokedTillID
        self.shopTill = shopTill
        self.walletDevice = walletDevice
        self.deviceX = deviceX
        self.deviceY = deviceY
    }

    static func make() async throws -> World {
        let server = try await TestServer()
        let bakery = try await server.addMerchant()
        let shop = try await server.addMerchant(name: "Other Shop", email: shopEmail, password: shopPassword)
        let till = TerminalKey()
        let revokedTill = TerminalKey()
        let shopTill = TerminalKey()
        let walletDevice = WalletDevice()
        let deviceX = WalletDevice()
        let deviceY = WalletDevice()
        let walletBDevice = WalletDevice()
        let revokedWalletDevice = WalletDevice()
        // Wallet B has the same name as wallet A, so that its served rename changes no row.
        let walletB = try await server.ledger.createWallet(name: "Alice", publicKey: walletBDevice.publicKeyBytes).id
        _ = try await server.ledger.setBonusMembership(.joined, of: walletB, at: bakery.id, time: server.clock.now)
        _ = try await server.ledger.createWallet(
            name: "Robin", publicKey: revokedWalletDevice.publicKeyBytes)
        #expect(try await server.ledger.revokeWalletKey(revokedWalletDevice.publicKeyBytes))
        _ = try await server.ledger.addStatusMessage(
            severity: .warning, title: "Maintenance tonight", body: "Payments pause 02:00 to 02:10 UTC.",
            at: server.clock.now)
        let tillResponse = try await server.activate(till)
        let revokedResponse = try await server.activate(revokedTill, label: "Till 2")
        #expect(try await server.ledger.revokeTerminal(TerminalID(rawValue: revokedResponse.terminalId)))
        // The bakery's cashiers, which the merchant service renames and removes.
        try await server.ledger.addRegisterUser(id: "007", name: "James", to: bakery.id)
        try await server.ledger.addRegisterUser(id: "099", name: "Moneypenny", to: bakery.id)
        let shopTillResponse = try await server.withClient { client in
            let response = try await client.send(
                .post, "/v1/terminals/activate",
                json: shopTill.activation(email: shopEmail, password: shopPassword, label: "Shop till"))
            #expect(response.status == .created, "\(response.text)")
            return try JSONDecoder().decode(Components.Schemas.TerminalCredentialResponse.self, from: response.data)
        }
        @Sendable func code(to email: String) async throws -> String {
            let message = try #require(
                try await server.ledger.outbox(recipient: email).first, "nothing sent to \(email)")
            return String(try #require(message.body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 8 }))
        }
        return try await server.withClient { client in
            // The wallet registers through the API, and is funded.
            func start(_ device: WalletDevice, _ email: String, _ phone: String) async throws -> (String, String) {
                let response = try await client.send(
                    .post, "/v1/wallets/registrations", json: try device.registration(email: email, phone: phone))
                #expect(response.status == .accepted, "\(response.text)")
                let sent = try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: response.data)
                return (sent.registrationId, try await code(to: email))
            }
            let (walletRegistration, walletCode) = try await start(walletDevice, walletEmail, "+49 151 1234 5600")
            let walletSMSCode = try await code(to: "+4915112345600")
            let verified = try await client.send(
                .post, "/v1/wallets/registrations/\(walletRegistration)/verify",
                json: #"{"smsCode": "\#(walletSMSCode)", "emailCode": "\#(walletCode)"}"#)
            #expect(verified.status == .created, "\(verified.text)")
            let walletID = WalletID(
                rawValue: try JSONDecoder().decode(Components.Schemas.WalletVerified.self, from: verified.data).walletId
            )
            try await server.ledger.deposit(try Money(minorUnits: balance, currency: .eur), to: walletID)
            try await server.ledger.addBonusPoints(500, to: walletID, at: bakery.id)
            let offlineToken = try await Self.recordDailyToken(of: walletDevice, walletID, server: server)

            // It pays and redeems at the bakery's till.
            let payment = try WalletSigned.confirm(
                by: walletDevice.key, for: till.key.publicKey, amount: 12_50, tip: 1_00)
            let paid = try await client.sendSigned(
                .post, "/v1/payments", json: try SubmissionFields(payment: payment).json(), by: till.key,
                time: server.clock.now)
            #expect(paid.status == .ok, "\(paid.text)")
            #expect(
                try JSONDecoder().decode(Components.Schemas.PaymentResult.self, from: paid.data).outcome == .approved,
                "\(paid.text)")
            let redemption = try WalletSigned.redeem(by: walletDevice.key, for: till.key.publicKey, points: 100)
            let redeemed = try await client.sendSigned(
                .post, "/v1/redemptions", json: try SubmissionFields(redemption: redemption).json(), by: till.key,
                time: server.clock.now)
            #expect(redeemed.status == .ok, "\(redeemed.text)")

            // Two more wallets are registering, and the first one is being restored on a new device.
            let x = try await start(deviceX, "xavier@example.com", "+49 151 1234 5601")
            let y = try await start(deviceY, "yvonne@example.com", "+49 151 1234 5602")
            let restore = try await client.send(
                .post, "/v1/wallets/restorations", json: try WalletDevice().restoration(email: walletEmail))
            #expect(restore.status == .accepted, "\(restore.text)")
            let z = (
                try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: restore.data).registrationId,
                try await code(to: walletEmail)
            )
            let cards = try await WorldCards.make(server: server, owner: walletID)
            for id in bakeryKeyIDs {
                _ = try await server.ledger.createAPIKey(
                    NewAPIKey(
                        id: id, secretHash: Array(SHA256.hash(data: Data(id.utf8))), secretPrefix: "sk_bake",
                        secretLast4: "abcd"), name: "Bakery POS", scopes: Set(APIKeyScope.allCases), for: bakery.id,
                    at: server.clock.now)
            }
            let world = World(
                server: server, bakery: bakery, shop: shop, tillResponse: tillResponse,
                shopTillResponse: shopTillResponse, walletID: walletID, payment: payment,
                redemption: redemption, registrationX: x, registrationY: y, restorationZ: z, till: till,
                revokedTill: revokedTill, revokedTillID: revokedResponse.terminalId, shopTill: shopTill,
                walletDevice: walletDevice, deviceX: deviceX,
                deviceY: deviceY, walletB: walletB, walletBDevice: walletBDevice,
                revokedWalletDevice: revokedWalletDevice, cards: cards, offlineToken: offlineToken)
            _ = try await server.ledger.createPaymentIntent(
                NewPaymentIntent(
                    paymentID: world.bakeryIntent, idempotencyKey: "bakery-order-1", requestDigest: [1],
                    orderReference: "order-1", amount: try Money(minorUnits: 990, currency: .eur), metadata: "{}",
                    terminalID: nil, expiresAt: server.clock.now + 86_400), merchant: bakery.id, at: server.clock.now
            ).get()
            _ = try await server.ledger.createAPIKey(
                NewAPIKey(
                    id: "key_shop", secretHash: Array(SHA256.hash(data: Data(world.shopAPIKey.utf8))),
                    secretPrefix: String(world.shopAPIKey.prefix(7)), secretLast4: String(world.shopAPIKey.suffix(4))),
                name: "Shop POS", scopes: Set(APIKeyScope.allCases), for: shop.id, at: server.clock.now)
            for (id, type) in zip(bakeryEndpointIDs, [WebhookEventType.terminalOffline, .paymentDeclined]) {
                _ = try await server.ledger.createWebhookEndpoint(
                    id: id, url: "https://bakery.example/hooks", description: "Bakery POS", eventTypes: [type],
                    secret: "whsec_bakery", for: bakery.id, at: server.clock.now)
            }
            _ = try await server.ledger.recordWebhookEvent(
                .terminalOffline, merchant: bakery.id, object: [:], at: server.clock.now)
            let delivery = try #require(try await server.ledger.webhookDeliveries(of: bakery.id).first)
            #expect(delivery.id == bakeryDeliveryID && delivery.endpointID == bakeryEndpointIDs[0])
            return world
        }
    }

    /// A daily token for the wallet, signed by the server's issuer and recorded as the
    /// server records the tokens it hands out.
    static func recordDailyToken(of device: WalletDevice, _ wallet: WalletID, server: TestServer) async throws
        -> [UInt8]
    {
        let now = server.clock.now
        let allowance = try Money(minorUnits: 50_00, currency: .eur)
        let revocation = DailyToken.RevocationState(revokedKeyIDs: [])
        let token = try DailyToken.issue(
            by: server.issuer.signingKey, walletKey: device.key.publicKey, walletAccountID: wallet.rawValue,
            allowance: allowance, issuedAt: now, expiresAt: now + 86_400, revocation: revocation)
        try await server.ledger.recordDailyToken(
            DailyTokenRecord(
                tokenID: token.tokenID, walletID: wallet, walletKey: device.publicKeyBytes, allowance: allowance,
                balanceAtIssue: balance, revocationDigest: revocation.digest, issuedAt: now,
                expiresAt: now + 86_400, token: token.encoded()))
        return token.encoded()
    }

    /// What no refusal, and no open operation, may show: the bakery's and the wallet's data and
    /// every one-time code.
    var secrets: [String: String] {
        [
            "the bakery's id": bakery.id.rawValue, "the bakery's name": bakery.name,
            "the bakery's e-mail": TestServer.email, "the bakery till's id": tillResponse.terminalId,
            "the bakery till's label": tillResponse.label, "the bakery till's credential": tillResponse.credential,
            "the bakery till's key id": till.keyIDHex, "the shop's id": shop.id.rawValue,
            "the wallet's id": walletID.rawValue, "the wallet's e-mail": World.walletEmail,
            "the wallet's phone": "+4915112345600",
            "registration X's code": registrationX.code, "registration Y's code": registrationY.code,
            "restoration Z's code": restorationZ.code, "a payment result": #""outcome""#,
            "a transaction reference": #""reference""#, "a balance": #""bonusPointsBalance""#,
        ]
    }

    func expectNothingOfTheTenants(
        in text: String, _ what: String, except: Set<String> = [], sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for (name, secret) in secrets where !secret.isEmpty && !except.contains(name) {
            #expect(!text.contains(secret), "\(what) shows \(name): \(text)", sourceLocation: sourceLocation)
        }
    }

    /// The refusal has this status, code and message, is the bare error envelope, and shows
    /// nothing of the tenants.
    func expectRefusal(
        _ response: TestResponse, _ status: HTTPResponse.Status, _ code: String, _ message: String, _ what: String,
        except: Set<String> = [], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(response.status == status, "\(what): \(response.text)", sourceLocation: sourceLocation)
        try expectError(response, status, code, message, sourceLocation: sourceLocation)
        let object = try #require(
            try JSONSerialization.jsonObject(with: response.data) as? [String: [String: Any]],
            sourceLocation: sourceLocation)
        #expect(Array(object.keys) == ["error"], sourceLocation: sourceLocation)
        // A refused offline forward carries the server's signature too: a terminal drops an owed
        // payment only on a refusal it can verify.
        let signed = what.hasPrefix("submitOfflinePayment ") && object["error"]?["signature"] is String
        #expect(
            object["error"]?.keys.sorted() == ["code", "message", "requestId"] + (signed ? ["signature"] : []),
            sourceLocation: sourceLocation)
        expectNothingOfTheTenants(in: response.text, what, except: except, sourceLocation: sourceLocation)
    }
}

private func keys(of data: Data) throws -> [String] {
    (try JSONSerialization.jsonObject(with: data) as? [String: Any])?.keys.sorted() ?? []
}

/// Wallet A's cards in the world: one to update, one to remove, and one after its
/// approved 3-D Secure challenge.
struct WorldCards: Sendable {
    let card: String
    let cardToRemove: String
    let challengedCard: String
    let challenge: CardChallenge

    var all: Set<String> { [card, cardToRemove, challengedCard] }

    static func make(server: TestServer, owner: WalletID) async throws -> WorldCards {
        let time = server.clock.now
        func visa(_ token: String) -> NewPaymentCard {
            NewPaymentCard(
                token: token, brand: .visa, lastFour: "4242", expiryMonth: 12, expiryYear: 2030, cardholder: "Wendy")
        }
        let ledger = server.ledger
        let card = try await ledger.addPaymentCard(visa("tok_world_1"), to: owner, at: time).card
        let cardToRemove = try await ledger.addPaymentCard(visa("tok_world_2"), to: owner, at: time).card
        let (challengedCard, opened) = try await ledger.addPaymentCard(
            visa("tok_world_3"), to: owner, challengeLifetime: 3600, at: time)
        let challenge = try await ledger.decideCardChallenge(md: try #require(opened).md, approve: true, at: time)
        return WorldCards(
            card: card.id.rawValue, cardToRemove: cardToRemove.id.rawValue, challengedCard: challengedCard.id.rawValue,
            challenge: challenge)
    }
}

// Gateway
extension World {
    /// Wallet A's balance request, signed by wallet A and sealed to the server's gateway key.
    func sealedBalanceRequest() throws -> [UInt8] {
        let path = "/v1/wallet/balances"
        let authorization = try signedAuthorization(
            walletDevice.key, method: .get, path: path, body: nil, time: server.clock.now)
        let request = BinaryHTTPRequest(
            method: "GET", scheme: "http", authority: "localhost", path: path,
            headerFields: [
                .init(name: "authorization", value: authorization),
                .init(name: "date", value: HTTPDate.format(server.clock.now)),
            ])
        return try ObliviousHTTP.seal(request, to: server.gatewayKey.gateway.configuration).sealed
    }
}

extension TestClientProtocol {
    /// Sends an isolation table request with its body and media type.
    func send(_ request: IsolationTests.Request, headers: HTTPFields) async throws -> TestResponse {
        var headers = headers
        headers.append(contentsOf: request.headers)
        if request.bytes != nil, headers[.contentType] == nil { headers[.contentType] = request.contentType }
        return try await executeRequest(
            uri: request.path, method: request.method, headers: headers,
            body: request.bytes.map { ByteBuffer(bytes: $0) })
    }
}

/// `signedAuthorization` over a body given as bytes (the gateway's sealed requests are not text).
func signedAuthorization(
    _ key: P256.Signing.PrivateKey, method: HTTPRequest.Method, path: String, bodyBytes: [UInt8]?, time: Int64,
    nonce: String? = nil
) throws -> String {
    let nonce = nonce ?? (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    let bytes = RequestSignature.signedBytes(
        method: method.rawValue, path: path, time: time, nonce: nonce, body: bodyBytes ?? [])
    return RequestSignature(
        publicKey: Array(key.publicKey.x963Representation), time: time, nonce: nonce,
        signature: Array(try key.signature(for: bytes).rawRepresentation)
    ).headerValue
}

extension World {
    /// A refusal because only the merchant's admin may do this.
    func expectAdminRequired(_ response: TestResponse, _ what: String) throws {
        try expectRefusal(response, .forbidden, "admin_required", "needs the merchant admin's session", what)
    }

    /// The shop's admin session, signed in once for the whole test.
    func shopAdminToken(_ client: any TestClientProtocol) async throws -> String {
        if let token = shopAdminSession.withLock({ $0 }) { return token }
        let response = try await client.send(
            .post, "/v1/merchant/sessions",
            json: #"{"email": "\#(World.shopEmail)", "password": "\#(World.shopPassword)"}"#)
        #expect(response.status == .created, "\(response.text)")
        let token = try JSONDecoder().decode(Components.Schemas.MerchantAdminSession.self, from: response.data).token
        shopAdminSession.withLock { $0 = token }
        return token
    }
}

extension World {
    /// A restoration step (`/v1/wallets/restorations/{id}/<step>`) on restoration Z (one proven
    /// by a mailed code, not started for a reactivation link) and on registration X, signed by
    /// another wallet's key and by other registrations' keys: answered like an unknown
    /// restoration; unsigned, refused first.
    func expectRestorationStepRefused(
        _ client: any TestClientProtocol, step: String, body: String, _ what: String
    ) async throws {
        for id in [restorationZ.id, registrationX.id] {
            let path = "/v1/wallets/restorations/\(id)/\(step)"
            for key in [walletDevice.key, deviceY.key, deviceX.key] {
                let response = try await client.send(
                    .post, path, json: body,
                    headers: [
                        .authorization: try signedAuthorization(
                            key, method: .post, path: path, bodyBytes: Array(body.utf8), time: server.clock.now)
                    ])
                try expectRefusal(
                    response, .notFound, "registration_not_found", "there is no such restoration", "\(what) for \(id)")
            }
            let unsigned = try await client.send(.post, path, json: body)
            try expectRefusal(
                unsigned, .unauthorized, "unauthenticated", "signed with the new device's key", "an unsigned \(what)")
        }
    }
}
