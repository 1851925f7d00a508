import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServiceClients
import Testing

/// `MerchantServiceClient` against the server listening on a loopback port: the
/// merchant service over real HTTP, signed with the terminal's key, every bad input answered
/// with its exact code.
@Suite("MerchantServiceClient against a live server", .serialized)
struct MerchantServiceClientTests {
    /// A bakery with an activated till, a registered and funded wallet, and the live server's URL.
    struct Shop: Sendable {
        let server: TestServer
        let url: URL
        let till: TerminalKey
        let tillID: String
        let wallet: P256.Signing.PrivateKey
        let walletID: WalletID

        /// The server client signed by `key` (the till's unless told), on the server's clock.
        func serverClient(_ key: P256.Signing.PrivateKey? = nil) -> HorizonServerClient {
            let clock = server.clock
            return HorizonServerClient(serverURL: url, signingKey: key ?? till.key, clock: { clock.now })
        }

        func merchantClient(_ key: P256.Signing.PrivateKey? = nil) -> MerchantServiceClient {
            MerchantServiceClient(server: serverClient(key))
        }

        /// A payment the wallet signed, submitted by the till; returns its id (hex).
        @discardableResult
        func pay(_ amount: Int64, tip: Int64 = 0, registerUser: String = "", currency: Currency = .eur)
            async throws -> (id: String, approved: Bool)
        {
            let confirm = try WalletSigned.confirm(
                by: wallet, for: till.key.publicKey, amount: amount, tip: tip, currency: currency)
            let submission = Components.Schemas.PaymentSubmission(
                confirmation: Data(SessionMessage.confirm(confirm).encoded()).base64EncodedString(),
                paymentId: confirm.paymentID.bytes.hexString, sessionId: Int64(bitPattern: confirm.sessionID.rawValue),
                walletKey: Data(confirm.walletKey.bytes).base64EncodedString(), amount: amount, tip: tip,
                currency: currency.code, registerUser: registerUser)
            let result = try await serverClient().submitPayment(submission)
            return (result.paymentId, result.outcome == .approved)
        }

        /// A bonus redemption of `points`, submitted by the till; returns its id (hex).
        func redeem(points: Int64) async throws -> String {
            let redeem = try WalletSigned.redeem(by: wallet, for: till.key.publicKey, points: points)
            let submission = Components.Schemas.RedemptionSubmission(
                redemption: Data(SessionMessage.redeem(redeem).encoded()).base64EncodedString(),
                redemptionId: redeem.redemptionID.bytes.hexString,
                sessionId: Int64(bitPattern: redeem.sessionID.rawValue),
                walletKey: Data(redeem.walletKey.bytes).base64EncodedString(), transactionType: .bonus,
                item: redeem.item, quantity: points, value: 0, currency: "EUR")
            let result = try await serverClient().submitRedemption(submission)
            #expect(result.outcome == .approved, "\(result)")
            return result.paymentId
        }
    }

    /// Runs `body` with a shop on a live server.
    func withShop(_ body: @Sendable (Shop) async throws -> Void) async throws {
        let server = try await TestServer()
        let bakery = try await server.addMerchant()
        let till = TerminalKey()
        let activation = try await server.activate(till)
        let wallet = P256.Signing.PrivateKey()
        let walletRecord = try await server.ledger.createWallet(
            name: "Wendy", publicKey: try PublicKeyBytes(bytes: Array(wallet.publicKey.x963Representation)))
        try await server.ledger.deposit(try Money(minorUnits: 100_00, currency: .eur), to: walletRecord.id)
        _ = bakery
        try await server.withLiveServer { client in
            let port = try #require(client.port)
            let url = try #require(URL(string: "http://127.0.0.1:\(port)"))
            try await body(
                Shop(
                    server: server, url: url, till: till, tillID: activation.terminalId, wallet: wallet,
                    walletID: walletRecord.id))
        }
    }

    /// The code of the server's refusal `body` ends with.
    func refusal(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch let error as MerchantServiceError {
            return error.code ?? "\(error)"
        } catch {
            return "\(error)"
        }
    }

    @Test func startLoadsProgramsAndRegisterUsersAndTellsTheIdentityIsReady() async throws {
        try await withShop { shop in
            let bakery = try #require(try await shop.server.ledger.merchants().first)
            try await shop.server.ledger.addRegisterUser(id: "007", name: "James", to: bakery.id)
            try await shop.server.ledger.addRegisterUser(id: "001", name: "Ada", to: bakery.id)
            try await shop.server.ledger.setBonusRule(pointsPerMajorUnit: 3, for: bakery.id)
            let merchant = shop.merchantClient()
            var events = merchant.identityEvents.makeAsyncIterator()

            // Not started: nothing is asked.
            await #expect(throws: MerchantServiceError.stopped) { try await merchant.fetchRegisterUsers() }
            try await merchant.start()
            #expect(await events.next() == .didGetReady)
            #expect(await merchant.isIdentityReady)
            #expect(await merchant.registerUsers.map(\.id) == ["001", "007"])
            #expect(await merchant.hasBonusProgram)
            #expect(await !merchant.hasGoldProgram)
            #expect(await !merchant.hasCouponProgram)
            #expect(await merchant.bonusProgramDetails == .init(pointsPerMajorUnit: 3, currency: "EUR"))

            try await merchant.selectRegisterUser(id: "007")
            #expect(await merchant.selectedRegisterUser?.name == "James")
            await #expect(throws: MerchantServiceError.unknownRegisterUser("042")) {
                try await merchant.selectRegisterUser(id: "042")
            }
            // A coupon issued makes a coupon program; the rule at 0 ends the bonus program.
            try await shop.server.ledger.issueCoupon(
                code: "WELCOME", to: shop.walletID, at: bakery.id, description: "A croissant",
                value: try Money(minorUnits: 2_00, currency: .eur), expiresAt: shop.server.clock.now + 86_400)
            try await shop.server.ledger.setBonusRule(pointsPerMajorUnit: 0, for: bakery.id)
            #expect(try await merchant.updateBonusProgramDetails().pointsPerMajorUnit == 0)
            #expect(await !merchant.hasBonusProgram)
            #expect(await merchant.hasCouponProgram)

            await merchant.stop()
            await #expect(throws: MerchantServiceError.stopped) { _ = try await merchant.terminals() }
            await merchant.reset()
            #expect(await merchant.registerUsers.isEmpty)
            #expect(await merchant.selectedRegisterUser == nil)
        }
    }

    @Test func registerUsersAreCheckedWithExactErrors() async throws {
        try await withShop { shop in
            let merchant = shop.merchantClient()
            try await merchant.start()
            let ada = try await merchant.addRegisterUser(id: "ada-1", name: "  Ada  ")
            #expect(ada.name == "Ada" && ada.id == "ada-1")
            try await merchant.selectRegisterUser(id: "ada-1")

            #expect(
                await refusal { _ = try await merchant.addRegisterUser(id: "ada-1", name: "Other Ada") }
                    == "register_user_exists")
            #expect(
                await refusal { _ = try await merchant.addRegisterUser(id: "bob", name: "   ") }
                    == "register_user_name_invalid")
            #expect(
                await refusal {
                    _ = try await merchant.addRegisterUser(id: "bob", name: String(repeating: "b", count: 65))
                }
                    == "register_user_name_invalid")
            #expect(
                await refusal { _ = try await merchant.addRegisterUser(id: "bob smith", name: "Bob") }
                    == "register_user_id_invalid")
            #expect(
                await refusal { _ = try await merchant.addRegisterUser(id: "", name: "Bob") }
                    == "register_user_id_invalid")
            #expect(
                await refusal { _ = try await merchant.renameRegisterUser(id: "nobody", name: "Bob") }
                    == "register_user_not_found")
            // 64 bytes is the limit, inclusive.
            let long = String(repeating: "é", count: 32)
            #expect(try await merchant.addRegisterUser(id: "bob", name: long).name == long)

            let renamed = try await merchant.renameRegisterUser(id: "ada-1", name: "Ada L.")
            #expect(renamed.name == "Ada L.")
            #expect(await merchant.selectedRegisterUser?.name == "Ada L.")
            #expect(try await merchant.fetchRegisterUsers().map(\.name) == ["Ada L.", long])

            try await merchant.removeRegisterUser(id: "ada-1")
            #expect(await merchant.selectedRegisterUser == nil)
            #expect(await refusal { try await merchant.removeRegisterUser(id: "ada-1") } == "register_user_not_found")
            #expect(try await merchant.fetchRegisterUsers().map(\.id) == ["bob"])
        }
    }

    @Test func transactionsArePagedAndFilteredByDateTypeAndRegisterUser() async throws {
        try await withShop { shop in
            let start = shop.server.clock.now
            var ids: [String] = []
            for (index, user) in ["ada", "bob", "ada", "bob", "ada"].enumerated() {
                ids.append(try await shop.pay(Int64(index + 1) * 1_00, registerUser: user).id)
                shop.server.clock.advance(100)
            }
            let redemption = try await shop.redeem(points: 2)
            let merchant = shop.merchantClient()
            try await merchant.start()

            // Newest first, two at a time: 2 + 2 + 2, the last page without a cursor.
            var seen: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let page = try await merchant.transactions(.init(limit: 2, cursor: cursor))
                seen += page.transactions.map(\.paymentId)
                cursor = page.nextCursor
                pages += 1
            } while cursor != nil
            #expect(pages == 3)
            #expect(seen == [redemption] + ids.reversed())
            // The wallet's account id (the same at every merchant) is not the merchant's to see.
            let listed = String(decoding: try JSONEncoder().encode(try await merchant.transactions()), as: UTF8.self)
            #expect(listed.contains(ids[0]) && !listed.contains(shop.walletID.rawValue), "\(listed)")

            let adas = try await merchant.transactions(.init(registerUserID: "ada"))
            #expect(adas.transactions.map(\.paymentId) == [ids[4], ids[2], ids[0]])
            #expect(adas.transactions.allSatisfy { $0.registerUser == "ada" && $0.transactionType == .payment })
            let bonus = try await merchant.transactions(.init(type: .bonus))
            #expect(bonus.transactions.map(\.paymentId) == [redemption])
            #expect(bonus.transactions.first?.quantity == 2)
            let payments = try await merchant.transactions(.init(type: .payment))
            #expect(payments.transactions.count == 5)
            // from is inclusive, to exclusive: the second and third payments.
            let window = try await merchant.transactions(
                .init(
                    from: Date(timeIntervalSince1970: TimeInterval(start + 100)),
                    to: Date(timeIntervalSince1970: TimeInterval(start + 300))))
            #expect(window.transactions.map(\.paymentId) == [ids[2], ids[1]])

            // Past the end: a cursor before the oldest transaction (reference 1) is an empty page.
            let beyond = Data("tx1:1".utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
            let empty = try await merchant.transactions(.init(cursor: beyond))
            #expect(empty.transactions.isEmpty && empty.nextCursor == nil)
            #expect(
                await refusal { _ = try await merchant.transactions(.init(cursor: "not-a-cursor")) } == "invalid_cursor"
            )
            #expect(await refusal { _ = try await merchant.transactions(.init(limit: 0)) } == "invalid_request")
            #expect(await refusal { _ = try await merchant.transactions(.init(limit: 201)) } == "invalid_request")
            #expect(
                await refusal {
                    _ = try await merchant.transactions(
                        .init(from: Date(timeIntervalSince1970: 2_000), to: Date(timeIntervalSince1970: 1_000)))
                } == "invalid_request")
            let details = try await merchant.transaction(paymentID: ids[0])
            #expect(details.transaction.amount == 1_00 && details.refundableAmount == 1_00 && details.refunds.isEmpty)
            #expect(
                await refusal { _ = try await merchant.transaction(paymentID: String(repeating: "0", count: 32)) }
                    == "payment_not_found")
        }
    }

    @Test func refundsAreIdempotentAndRefusedWithExactCodes() async throws {
        try await withShop { shop in
            // Refunds are the merchant admin's: a till's key pays nothing out.
            let merchant = try await MerchantServiceClient.signIn(
                serverURL: shop.url, email: TestServer.email, password: TestServer.password)
            try await merchant.start()
            let paid = try await shop.pay(10_00, tip: 1_00)
            let declined = try await shop.pay(500_00)
            #expect(paid.approved && !declined.approved)
            let redemption = try await shop.redeem(points: 1)

            let refundID = MerchantServiceClient.makeRefundID()
            let first = try await merchant.refund(paymentID: paid.id, amount: 4_00, currency: "EUR", refundID: refundID)
            #expect(first.amount == 4_00 && first.destination == "horizon_balance" && first.bonusPointsReversed == 3)
            let replay = try await merchant.refund(
                paymentID: paid.id, amount: 4_00, currency: "EUR", refundID: refundID)
            #expect(replay == first)
            #expect(
                try await shop.server.ledger.balance(of: shop.walletID, in: .eur)
                    == (try Money(minorUnits: 100_00 - 11_00 + 4_00, currency: .eur)))

            let cases: [(String, Int64, String, String, String)] = [
                (paid.id, 5_00, "EUR", refundID, "idempotency_conflict"),
                (paid.id, 7_01, "EUR", "r-too-much", "refund_exceeds_remaining"),
                (paid.id, 1_00, "USD", "r-dollars", "currency_mismatch"),
                (paid.id, 0, "EUR", "r-zero", "refund_amount_invalid"),
                (paid.id, 1_00, "EUR", "r with space", "refund_id_invalid"),
                (declined.id, 1_00, "EUR", "r-declined", "payment_not_refundable"),
                (redemption, 1_00, "EUR", "r-redemption", "payment_not_refundable"),
                (String(repeating: "ab", count: 16), 1_00, "EUR", "r-unknown", "payment_not_found"),
            ]
            for (payment, amount, currency, id, code) in cases {
                #expect(
                    await refusal {
                        _ = try await merchant.refund(
                            paymentID: payment, amount: amount, currency: currency, refundID: id)
                    } == code, "\(id)")
            }
            let rest = try await merchant.refund(paymentID: paid.id, amount: 7_00, currency: "EUR", refundID: "r-rest")
            // 7 points were due, but the wallet spent 1 of its 10 on the redemption: 6 are left to take.
            #expect(rest.bonusPointsReversed == 6)
            let bakery = try #require(try await shop.server.ledger.merchants().first)
            #expect(try await shop.server.ledger.bonusPoints(of: shop.walletID, at: bakery.id) == 0)
            #expect(try await merchant.refunds(paymentID: paid.id).map(\.refundId) == [refundID, "r-rest"])
            let details = try await merchant.transaction(paymentID: paid.id)
            #expect(details.refundableAmount == 0 && details.transaction.refundedAmount == 11_00)
            #expect(details.refunds.map(\.amount) == [4_00, 7_00])
            #expect(try await LedgerAudit.violations(in: shop.server.ledger.store) == [])
        }
    }

    @Test func terminalsAreListedAndRevokedAndARevokedIdentityIsInvalidated() async throws {
        try await withShop { shop in
            let second = TerminalKey()
            shop.server.clock.advance(10)  // terminals are listed by activation time
            let secondID = try await shop.server.activate(second, label: "Till 2").terminalId
            let stranger = try await shop.server.addMerchant(
                name: "Other Shop", email: "owner@other.example", password: "another long password")
            let strangerTill = TerminalKey()
            let strangerTerminal = try await shop.server.ledger.activateTerminal(
                merchant: stranger.id, label: "Their till",
                publicKey: try PublicKeyBytes(bytes: Array(strangerTill.key.publicKey.x963Representation)),
                keyID: [1, 2, 3, 4, 5, 6, 7, 8], credentialExpiresAt: shop.server.clock.now + 3600)

            let merchant = shop.merchantClient()
            var events = merchant.identityEvents.makeAsyncIterator()
            try await merchant.start()
            #expect(await events.next() == .didGetReady)
            let terminals = try await merchant.terminals()
            #expect(terminals.map(\.terminalId) == [shop.tillID, secondID])
            #expect(terminals.map(\.isCaller) == [true, false])
            #expect(terminals.allSatisfy { $0.revokedAt == nil })

            // Revoking is the merchant admin's: a till may not lock the others out.
            let admin = try await MerchantServiceClient.signIn(
                serverURL: shop.url, email: TestServer.email, password: TestServer.password)
            try await admin.start()
            let revoked = try await admin.revokeTerminal(id: secondID)
            #expect(revoked.revokedAt == shop.server.clock.now)
            // Again: answered as it is, revoked at the first time.
            shop.server.clock.advance(5)
            #expect(try await admin.revokeTerminal(id: secondID).revokedAt == revoked.revokedAt)
            #expect(
                await refusal { _ = try await admin.revokeTerminal(id: strangerTerminal.id.rawValue) }
                    == "terminal_not_found")
            #expect(try await shop.server.ledger.terminal(strangerTerminal.id).revokedAt == nil)

            // The revoked till's own client is refused and told its identity is invalid.
            let secondClient = shop.merchantClient(second.key)
            var secondEvents = secondClient.identityEvents.makeAsyncIterator()
            #expect(await refusal { try await secondClient.start() } == "terminal_revoked")
            let secondEvent = await secondEvents.next()
            guard case .didInvalidateIdentity(let secondReason)? = secondEvent else {
                Issue.record("expected an invalidation, got \(String(describing: secondEvent))")
                return
            }
            #expect(secondReason.code == "terminal_revoked")
            #expect(await !secondClient.isIdentityReady)

            // The admin revokes the first till: its next answer invalidates its identity; what it
            // had loaded is gone.
            _ = try await admin.revokeTerminal(id: shop.tillID)
            #expect(await refusal { _ = try await merchant.fetchRegisterUsers() } == "terminal_revoked")
            let event = await events.next()
            guard case .didInvalidateIdentity(let reason) = event else {
                Issue.record("expected an invalidation, got \(String(describing: event))")
                return
            }
            #expect(reason.code == "terminal_revoked")
            #expect(await !merchant.isIdentityReady)
            #expect(await merchant.bonusProgramDetails == nil)
        }
    }
}

extension MerchantServiceClientTests {
    /// A terminal's key settles payments and reads its merchant's records, but it cannot pay money
    /// out or lock the other tills out: a signed refund or revocation is refused with
    /// `admin_required`, and nothing moves.
    @Test func aTerminalsKeyCannotRefundOrRevoke() async throws {
        try await withShop { shop in
            let paid = try await shop.pay(10_00)
            let second = TerminalKey()
            let secondID = try await shop.server.activate(second, label: "Till 2").terminalId
            let till = shop.merchantClient()
            try await till.start()
            #expect(
                await refusal {
                    _ = try await till.refund(paymentID: paid.id, amount: 1_00, currency: "EUR", refundID: "r-till")
                } == "admin_required")
            #expect(await refusal { _ = try await till.revokeTerminal(id: secondID) } == "admin_required")
            // Another till's key is refused alike, even for itself.
            let other = shop.merchantClient(second.key)
            try await other.start()
            #expect(await refusal { _ = try await other.revokeTerminal(id: shop.tillID) } == "admin_required")
            #expect(try await till.transaction(paymentID: paid.id).refunds.isEmpty)
            #expect(try await till.terminals().allSatisfy { $0.revokedAt == nil })
            #expect(
                try await shop.server.ledger.balance(of: shop.walletID, in: .eur)
                    == (try Money(minorUnits: 100_00 - 10_00, currency: .eur)))
        }
    }

    /// The merchant's admin uses the merchant service without a terminal (an admin
    /// session, `Authorization: Bearer`), sees only its own merchant, and the session ends at
    /// sign-out or when its lifetime is over.
    @Test func anAdminSignsInWithoutATerminalAndSeesOnlyItsOwnMerchant() async throws {
        try await withShop { shop in
            let paid = try await shop.pay(7_00)
            let stranger = try await shop.server.addMerchant(
                name: "Other Shop", email: "owner@other.example", password: "another long password")

            let admin = try await MerchantServiceClient.signIn(
                serverURL: shop.url, email: TestServer.email, password: TestServer.password)
            try await admin.start()
            #expect(try await admin.addRegisterUser(id: "042", name: "Ann").name == "Ann")
            #expect(try await admin.fetchRegisterUsers().map(\.id) == ["042"])
            #expect(try await admin.transactions().transactions.map(\.paymentId) == [paid.id])
            let terminals = try await admin.terminals()
            #expect(terminals.map(\.terminalId) == [shop.tillID])
            #expect(terminals.map(\.isCaller) == [false], "an admin session is no terminal")

            // Another merchant's admin: the bakery's payment does not exist for it.
            let other = try await MerchantServiceClient.signIn(
                serverURL: shop.url, email: "owner@other.example", password: "another long password")
            try await other.start()
            #expect(try await other.transactions().transactions.isEmpty)
            #expect(await refusal { _ = try await other.transaction(paymentID: paid.id) } == "payment_not_found")
            #expect(try await other.fetchRegisterUsers().isEmpty)
            _ = stranger

            // Wrong password, a made-up token, a lifetime out of range.
            #expect(
                await refusal {
                    _ = try await MerchantServiceClient.signIn(
                        serverURL: shop.url, email: TestServer.email, password: "wrong")
                } == "invalid_credentials")
            let forged = MerchantServiceClient(
                server: HorizonServerClient(serverURL: shop.url, adminSessionToken: "made-up-token"))
            #expect(await refusal { try await forged.start() } == "unauthenticated")
            #expect(
                await refusal {
                    _ = try await MerchantServiceClient.signIn(
                        serverURL: shop.url, email: TestServer.email, password: TestServer.password,
                        lifetime: .seconds(30))
                } == "invalid_request")

            // Signed out: the token is refused. A short session ends by itself.
            try await admin.signOut()
            #expect(await refusal { try await admin.start() } == "unauthenticated")
            let short = try await MerchantServiceClient.signIn(
                serverURL: shop.url, email: TestServer.email, password: TestServer.password, lifetime: .seconds(60))
            try await short.start()
            shop.server.clock.advance(61)
            #expect(await refusal { _ = try await short.fetchRegisterUsers() } == "unauthenticated")
            // The till's own key still works, as before.
            let till = shop.merchantClient()
            try await till.start()
            #expect(try await till.fetchRegisterUsers().map(\.id) == ["042"])
        }
    }
}
