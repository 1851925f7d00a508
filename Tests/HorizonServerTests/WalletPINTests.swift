import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import HorizonServerClient
import HorizonServiceClients
import HummingbirdTesting
import Testing

/// The wallet PIN counted by the server, tried as an attacker would: another wallet's keys on
/// every operation, brute force with and without the library, a replayed proof, bad bytes, and a
/// copied key file without the server's share.
@Suite("Wallet PIN counted by the server", .offTheCooperativePool)
struct WalletPINTests {
    static let pin = "246810"
    /// A low scrypt cost: speed is not under test.
    static let cost = PINStretchCost(logN: 10)

    struct Scene {
        let server: TestServer
        let alice: FundedWallet
        let bob: FundedWallet

        static func make() async throws -> Scene {
            let server = try await TestServer()
            return Scene(
                server: server, alice: try await server.fundedWallet(100_00, name: "Alice"),
                bob: try await server.fundedWallet(100_00, name: "Bob"))
        }

        func url(_ client: any TestClientProtocol) throws -> URL {
            let port = try #require(client.port)
            return try #require(URL(string: "http://127.0.0.1:\(port)"))
        }

        func pins(_ client: any TestClientProtocol) throws -> WalletPINClient {
            let clock = server.clock
            return WalletPINClient(serverURL: try url(client), timeout: .seconds(30), cost: cost, clock: { clock.now })
        }

        func signed(_ client: any TestClientProtocol, by key: P256.Signing.PrivateKey) throws -> HorizonServerClient {
            let clock = server.clock
            return HorizonServerClient(
                serverURL: try url(client), signingKey: key, timeout: .seconds(30), clock: { clock.now })
        }

        /// A proof made without the library's rules: any key's signature over the right lines.
        func rawProof(_ sealed: ServerSealedWalletKey, by key: P256.Signing.PrivateKey, nonce: String) throws
            -> (proof: [UInt8], time: Int64)
        {
            let time = server.clock.now
            let bytes = ServerSealedWalletKey.proofBytes(
                deviceKey: Data(sealed.deviceKey.publicKey.x963Representation).base64EncodedString(), time: time,
                nonce: nonce)
            return (Array(try key.signature(for: bytes).rawRepresentation), time)
        }
    }

    static func nonce() -> String { (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() }

    @Test func theLibrarySetsProvesChangesAndDeactivatesThePIN() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let pins = try scene.pins(client)
            let key = scene.alice.key
            let sealed = try await pins.setPIN(Self.pin, for: key)
            #expect(try await pins.state(key).pinSet)
            #expect(try await pins.state(key).pinless == false)
            #expect(try await pins.unlock(sealed, pin: Self.pin).rawRepresentation == key.rawRepresentation)
            await #expect(throws: WalletPINError.wrongPIN(remainingBeforeBlock: 9, retryAfter: 0)) {
                try await pins.unlock(sealed, pin: "135790")
            }
            // The right PIN clears the count.
            _ = try await pins.unlock(sealed, pin: Self.pin)
            #expect(try await pins.state(key).wrongProofs == 0)

            let (same, changed) = try await pins.changePIN(sealed, current: Self.pin, new: "9876543")
            #expect(same.rawRepresentation == key.rawRepresentation)
            // The old file's device key no longer proves anything.
            await #expect(throws: WalletPINError.notSet) { try await pins.unlock(sealed, pin: Self.pin) }
            #expect(try await pins.unlock(changed, pin: "9876543").rawRepresentation == key.rawRepresentation)
            await #expect(throws: WalletPINError.unacceptablePIN("a PIN must have 6 to 64 characters")) {
                try await pins.changePIN(changed, current: "9876543", new: "12345")
            }

            let opened = try await pins.deactivatePIN(changed, pin: "9876543")
            #expect(opened.rawRepresentation == key.rawRepresentation)
            let state = try await pins.state(key)
            #expect(state.pinless && !state.pinSet && state.pinlessPaymentLimit == 50_00)
            await #expect(throws: WalletPINError.notSet) { try await pins.unlock(changed, pin: "9876543") }
            #expect(try await scene.server.ledger.isWalletPinless(scene.alice.id))
        }
    }

    @Test func bruteForceIsCountedByTheServerEvenWithoutTheLibrary() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let pins = try scene.pins(client)
            let sealed = try await pins.setPIN(Self.pin, for: scene.alice.key)
            // The attacker holds the file's device key and signs proofs with keys of its own
            // choosing (no scrypt, no library): each is counted.
            let device = try scene.signed(client, by: sealed.deviceKey)
            var results: [Components.Schemas.WalletPINProofResult] = []
            for _ in 0..<3 {
                let nonce = Self.nonce()
                let (proof, time) = try scene.rawProof(sealed, by: P256.Signing.PrivateKey(), nonce: nonce)
                results.append(try await device.proveWalletPIN(proof: proof, time: time, nonce: nonce))
            }
            #expect(results.map(\.result) == [.wrong, .wrong, .wrong])
            #expect(results.map(\.remainingBeforeBlock) == [9, 8, 7])
            #expect(results.map(\.retryAfter) == [0, 0, 30])
            // While backing off even the right PIN is not tried, and nothing is counted.
            await #expect(throws: WalletPINError.backingOff(retryAfter: 30)) {
                try await pins.unlock(sealed, pin: Self.pin)
            }
            var failures = 3
            while failures < 10 {
                scene.server.clock.advance(3600)
                let nonce = Self.nonce()
                let (proof, time) = try scene.rawProof(sealed, by: P256.Signing.PrivateKey(), nonce: nonce)
                let result = try await device.proveWalletPIN(proof: proof, time: time, nonce: nonce)
                failures += 1
                #expect(result.result == (failures == 10 ? .blocked : .wrong))
            }
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id)?.failures == 10)
            // Blocked: the right PIN opens nothing, however long one waits.
            scene.server.clock.advance(30 * 86_400)
            await #expect(throws: WalletPINError.blocked) { try await pins.unlock(sealed, pin: Self.pin) }
            // A PIN set again with the wallet's key (after a restoration) starts from zero.
            let again = try await pins.setPIN(Self.pin, for: scene.alice.key)
            _ = try await pins.unlock(again, pin: Self.pin)
        }
    }

    @Test func aCopiedKeyFileWithoutTheShareOpensNothingAndTellsNothing() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let pins = try scene.pins(client)
            let sealed = try await pins.setPIN(Self.pin, for: scene.alice.key)
            let copy = try ServerSealedWalletKey.decode(pem: sealed.pem)
            // Without the server the right PIN and a wrong one fail alike: nothing in the file
            // checks a guess.
            for guess in [Self.pin, "000000", "135790"] {
                let stretched = try copy.stretch(guess)
                #expect(throws: WalletPINError.damaged("the server's share does not open it")) {
                    try copy.open(stretched, share: [UInt8](repeating: 0, count: 32))
                }
            }
            // The file holds neither the share nor the PIN key the server checks proofs with.
            let record = try #require(try await scene.server.ledger.walletPIN(of: scene.alice.id))
            let file = copy.encoded()
            #expect(!Self.contains(file, record.pinKey))
            #expect(!Self.contains(file, Array(scene.alice.key.rawRepresentation)))
            // A damaged copy is refused before any PIN is spent on it.
            var damaged = file
            damaged[40] ^= 1
            #expect(throws: WalletPINError.damaged("its checksum does not match its contents")) {
                try ServerSealedWalletKey.decode(damaged)
            }
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id)?.failures == 0)
        }
    }

    /// Runs `body`, which must be refused with this status and code.
    static func expectRefused(
        _ status: Int, _ code: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () async throws -> Void
    ) async throws {
        do {
            try await body()
            Issue.record("\(what)", sourceLocation: sourceLocation)
        } catch let error as ServerClientError {
            guard case .refused(status, code, _, _) = error else {
                Issue.record("\(what): \(error)", sourceLocation: sourceLocation)
                return
            }
        }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }

    @Test func anotherWalletsKeysGetNothing() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let pins = try scene.pins(client)
            let alices = try await pins.setPIN(Self.pin, for: scene.alice.key)
            let bobs = try await pins.setPIN("112233", for: scene.bob.key)

            // Bob's wallet key is no device key: no PIN proves with it.
            let asBob = try scene.signed(client, by: scene.bob.key)
            let nonce = Self.nonce()
            let proof = try alices.proof(try alices.stretch(Self.pin), time: scene.server.clock.now, nonce: nonce)
            await #expect(throws: ServerClientError.self) {
                try await asBob.proveWalletPIN(proof: proof, time: scene.server.clock.now, nonce: nonce)
            }
            // Bob's device key with Alice's right PIN: checked against Bob's PIN, counted for Bob.
            let bobsDevice = try scene.signed(client, by: bobs.deviceKey)
            let crossed = try await bobsDevice.proveWalletPIN(
                proof: proof, time: scene.server.clock.now, nonce: Self.nonce())
            #expect(crossed.result == .wrong && crossed.share == nil)
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id)?.failures == 0)
            #expect(try await scene.server.ledger.walletPIN(of: scene.bob.id)?.failures == 1)
            // Bob cannot take Alice's device key for his PIN, nor touch hers.
            try await Self.expectRefused(409, "already_exists", "Bob took Alice's device key") {
                _ = try await asBob.setWalletPIN(
                    deviceKey: Array(alices.deviceKey.publicKey.x963Representation),
                    pinKey: Array(P256.Signing.PrivateKey().publicKey.x963Representation),
                    share: [UInt8](repeating: 1, count: 32))
            }
            _ = try await asBob.deactivateWalletPIN()
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id) != nil)
            #expect(try await scene.server.ledger.isWalletPinless(scene.alice.id) == false)
            _ = try await pins.unlock(alices, pin: Self.pin)
            // A key no wallet registered reads and changes nothing.
            let stranger = try scene.signed(client, by: P256.Signing.PrivateKey())
            try await Self.expectRefused(403, "wallet_unknown", "a stranger's key read a PIN") {
                _ = try await stranger.walletPIN()
            }
            try await Self.expectRefused(403, "wallet_unknown", "a stranger's key made a wallet pinless") {
                _ = try await stranger.deactivateWalletPIN()
            }
            // An unsigned proof is refused before anything is looked up.
            let unsigned = HorizonServerClient(serverURL: try scene.url(client), timeout: .seconds(30))
            try await Self.expectRefused(401, "unauthenticated", "an unsigned proof was taken") {
                _ = try await unsigned.proveWalletPIN(proof: proof, time: scene.server.clock.now, nonce: Self.nonce())
            }
        }
    }

    @Test func aReplayedProofIsRefusedAndNotCounted() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let pins = try scene.pins(client)
            let sealed = try await pins.setPIN(Self.pin, for: scene.alice.key)
            let device = try scene.signed(client, by: sealed.deviceKey)
            let nonce = Self.nonce()
            let time = scene.server.clock.now
            let proof = try sealed.proof(try sealed.stretch(Self.pin), time: time, nonce: nonce)
            #expect(try await device.proveWalletPIN(proof: proof, time: time, nonce: nonce).result == .proven)
            // The same proof in a newly signed request: its nonce was used.
            try await Self.expectRefused(401, "request_replayed", "a replayed proof released the share") {
                _ = try await device.proveWalletPIN(proof: proof, time: time, nonce: nonce)
            }
            // The identical request, byte for byte.
            let rawNonce = Self.nonce()
            let rawProof = try sealed.proof(try sealed.stretch(Self.pin), time: time, nonce: rawNonce)
            let body = #"{"nonce":"\#(rawNonce)","proof":"\#(Data(rawProof).base64EncodedString())","time":\#(time)}"#
            let authorization = try RequestSignature.sign(
                method: "POST", path: "/v1/wallet/pin/proofs", body: Data(body.utf8), with: sealed.deviceKey,
                time: time
            ).headerValue
            let first = try await client.send(
                .post, "/v1/wallet/pin/proofs", json: body, headers: [.authorization: authorization])
            #expect(first.status == .ok)
            let again = try await client.send(
                .post, "/v1/wallet/pin/proofs", json: body, headers: [.authorization: authorization])
            try expectError(again, .unauthorized, "request_replayed", "already received once")
            // A proof made outside the signature window.
            let old = time - 3600
            let stale = try sealed.proof(try sealed.stretch(Self.pin), time: old, nonce: nonce)
            try await Self.expectRefused(401, "request_expired", "a stale proof was taken") {
                _ = try await device.proveWalletPIN(proof: stale, time: old, nonce: Self.nonce())
            }
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id)?.failures == 0)
        }
    }

    @Test func badBytesAreRefused() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let pins = try scene.pins(client)
            let sealed = try await pins.setPIN(Self.pin, for: scene.alice.key)
            let time = scene.server.clock.now
            func signed(_ method: String, _ path: String, _ body: String, key: P256.Signing.PrivateKey) throws
                -> HTTPFields
            {
                [
                    .authorization: try RequestSignature.sign(
                        method: method, path: path, body: Data(body.utf8), with: key, time: time
                    ).headerValue
                ]
            }
            let point = P256.Signing.PrivateKey().publicKey.x963Representation.base64EncodedString()
            let share = Data(repeating: 7, count: 32).base64EncodedString()
            let setups: [(String, String)] = [
                (#"{"deviceKey":"not base64!","pinKey":"\#(point)","share":"\#(share)"}"#, "deviceKey must be"),
                (
                    #"{"deviceKey":"\#(Data(repeating: 4, count: 65).base64EncodedString())","pinKey":"\#(point)","share":"\#(share)"}"#,
                    "not a point on P-256"
                ),
                (
                    #"{"deviceKey":"\#(P256.Signing.PrivateKey().publicKey.x963Representation.base64EncodedString())","pinKey":"\#(point)","share":"\#(Data(repeating: 7, count: 31).base64EncodedString())"}"#,
                    "share must be 32 bytes"
                ),
                (#"{"deviceKey":"\#(point)","pinKey":"\#(point)","share":"\#(share)"}"#, "a key of its own"),
            ]
            for (body, message) in setups {
                let response = try await client.send(
                    .put, "/v1/wallet/pin", json: body,
                    headers: try signed("PUT", "/v1/wallet/pin", body, key: scene.bob.key))
                try expectError(response, .badRequest, "invalid_request", message)
            }
            let proofs: [(String, String)] = [
                (#"{"nonce":"\#(Self.nonce())","proof":"AAAA","time":\#(time)}"#, "raw P-256 signature"),
                (
                    #"{"nonce":"ZZ","proof":"\#(Data(repeating: 1, count: 64).base64EncodedString())","time":\#(time)}"#,
                    "nonce must be 32 hex digits"
                ),
            ]
            for (body, message) in proofs {
                let response = try await client.send(
                    .post, "/v1/wallet/pin/proofs", json: body,
                    headers: try signed("POST", "/v1/wallet/pin/proofs", body, key: sealed.deviceKey))
                #expect(response.status == .badRequest, "\(response.text)")
                #expect(response.text.contains(message))
            }
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id)?.failures == 0)
            #expect(try await scene.server.ledger.walletPIN(of: scene.bob.id) == nil)
            // 64 bytes that are no valid signature are a wrong guess like any other: counted.
            let garbage = try await scene.signed(client, by: sealed.deviceKey).proveWalletPIN(
                proof: [UInt8](repeating: 0xFF, count: 64), time: time, nonce: Self.nonce())
            #expect(garbage.result == .wrong)
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id)?.failures == 1)
        }
    }

    /// Moves `wallet`'s account to `key` as a restoration does (PUK and token checked by hash).
    static func restore(_ wallet: FundedWallet, to key: P256.Signing.PrivateKey, on scene: Scene) async throws {
        let ledger = scene.server.ledger
        let email = "\(wallet.id.rawValue.lowercased())@example.com"
        try await ledger.store.transaction { db in
            try await db.query(
                "UPDATE wallets SET email = ?, phone = ? WHERE id = ?",
                [.text(email), .text("+4915112345679"), .text(wallet.id.rawValue)])
        }
        let newKey = try PublicKeyBytes(bytes: Array(key.publicKey.x963Representation))
        let id = RegistrationID.generate()
        let now = scene.server.clock.now
        _ = try await ledger.startRestoration(
            id: id, email: email, publicKey: newKey, codeHash: [1, 2, 3], reactivationLink: ([9, 9, 9], 86_400),
            at: now)
        _ = try await ledger.submitRestorationPuk(
            id, pukHash: [1, 2, 3], key: newKey, tokenHash: [4, 5, 6], lifetime: 86_400, at: now)
        _ = try await ledger.reactivateWallet(id, tokenHash: [4, 5, 6], key: newKey, at: now)
    }

    /// The lost device keeps its sealed key file and its device key, and its owner's PIN may be
    /// known to whoever has it: once the account is reactivated on a new device, that PIN must
    /// release nothing, blocked or not, and the new device's PIN is the only one.
    @Test func afterAReactivationTheOldDevicesPINIsRefused() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let pins = try scene.pins(client)
            let old = try await pins.setPIN(Self.pin, for: scene.alice.key)
            #expect(try await pins.unlock(old, pin: Self.pin).rawRepresentation == scene.alice.key.rawRepresentation)
            // Some wrong tries on the old PIN: the new device does not inherit them.
            for guess in ["000000", "000001"] { _ = try? await pins.unlock(old, pin: guess) }
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id)?.failures == 2)

            let new = P256.Signing.PrivateKey()
            try await Self.restore(scene.alice, to: new, on: scene)
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id) == nil)
            await #expect(throws: WalletPINError.notSet) { try await pins.unlock(old, pin: Self.pin) }
            // Signed by hand with the old device key and the right PIN's key: still no share.
            let nonce = Self.nonce()
            let time = scene.server.clock.now
            let proof = try old.proof(try old.stretch(Self.pin), time: time, nonce: nonce)
            let oldDevice = try scene.signed(client, by: old.deviceKey)
            do throws(ServerClientError) {
                let answer = try await oldDevice.proveWalletPIN(proof: proof, time: time, nonce: nonce)
                Issue.record("the old PIN was answered after the reactivation: \(answer)")
            } catch {
                #expect(error.code == "pin_not_set", "\(error)")
            }
            #expect(try await pins.state(new).pinSet == false)

            // The new device sets its own PIN from zero; the old one stays refused.
            let fresh = try await pins.setPIN("97531975", for: new)
            #expect(try await pins.state(new).wrongProofs == 0)
            #expect(try await pins.unlock(fresh, pin: "97531975").rawRepresentation == new.rawRepresentation)
            await #expect(throws: WalletPINError.notSet) { try await pins.unlock(old, pin: Self.pin) }
        }
    }

    /// The restoration steps straight on the ledger (PUK and token known by hash); declaring the
    /// key pinless goes to the server as the server's backend does (on the test server's clock).
    final class LedgerRestoration: IdentityBackend {
        let scene: Scene
        let pins: WalletPINClient
        let id = RegistrationID.generate()
        init(_ scene: Scene, pins: WalletPINClient) {
            self.scene = scene
            self.pins = pins
        }
        struct Unused: Error {}
        func register(_ user: RegistrationUserData, invitationCode: String?, key: P256.Signing.PrivateKey)
            async throws -> String
        { throw Unused() }
        func submitRegistrationPuk(id: String, puk: String, key: P256.Signing.PrivateKey) async throws -> Bool {
            throw Unused()
        }
        func isRegistrationActive(id: String, key: P256.Signing.PrivateKey) async throws -> Bool { throw Unused() }
        func confirmActivationLink(_ link: String) async throws { throw Unused() }
        private func bytes(_ key: P256.Signing.PrivateKey) throws -> PublicKeyBytes {
            try PublicKeyBytes(bytes: Array(key.publicKey.x963Representation))
        }
        func requestRestorationPuk(email: String, key: P256.Signing.PrivateKey) async throws -> String {
            _ = try await scene.server.ledger.startRestoration(
                id: id, email: email, publicKey: try bytes(key), codeHash: [1, 2, 3],
                reactivationLink: ([9, 9, 9], 86_400), at: scene.server.clock.now)
            return id.rawValue
        }
        func submitRestorationPuk(id: String, puk: String, key: P256.Signing.PrivateKey) async throws {
            _ = try await scene.server.ledger.submitRestorationPuk(
                RegistrationID(rawValue: id), pukHash: [1, 2, 3], key: try bytes(key), tokenHash: [4, 5, 6],
                lifetime: 86_400, at: scene.server.clock.now)
        }
        func reactivate(id: String, token: String, key: P256.Signing.PrivateKey) async throws {
            _ = try await scene.server.ledger.reactivateWallet(
                RegistrationID(rawValue: id), tokenHash: [4, 5, 6], key: try bytes(key), at: scene.server.clock.now)
        }
        func declarePinless(key: P256.Signing.PrivateKey) async throws {
            try await pins.declarePinless(key)
        }
    }

    /// The reference's pinless restoration, with either kind of vault: the account, which had a
    /// PIN on the lost device, is pinless at the server once the new device is reactivated, so
    /// its payments are limited; the old PIN is gone.
    @Test(arguments: [false, true])
    func aPinlessRestorationMakesTheRestoredWalletPinless(_ serverCountedVault: Bool) async throws {
        let scene = try await Scene.make()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("wallet-pin-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        try await scene.server.withLiveServer { client in
            let pins = try scene.pins(client)
            _ = try await pins.setPIN(Self.pin, for: scene.alice.key)
            #expect(try await scene.server.ledger.isWalletPinless(scene.alice.id) == false)
            let email = "alice-\(serverCountedVault)@example.com"
            try await scene.server.ledger.store.transaction { db in
                try await db.query(
                    "UPDATE wallets SET email = ?, phone = ? WHERE id = ?",
                    [.text(email), .text("+4915112345679"), .text(scene.alice.id.rawValue)])
            }
            let vault: any IdentityKeyVault =
                serverCountedVault
                ? ServerCountedFileVault(file: directory.appendingPathComponent("wallet-key.pem"), pins: pins)
                : MemoryVault()
            let clock = scene.server.clock
            let identity = IdentityClient(serverURL: try scene.url(client))
            let procedure = IdentityProcedure(
                identity: identity, backend: LedgerRestoration(scene, pins: pins), vault: vault,
                clock: { clock.now })
            try await procedure.start()
            try await procedure.requestPinlessRestoration()
            try await procedure.requestRestorationPukWithEmail(email)
            try await procedure.requestRestorationWithPuk("12345678")
            try await procedure.reactivatePinlessWithReactivationToken("token")
            #expect(await procedure.state == .unlocked)
            #expect(try vault.stored() == .pinless)
            let key = try #require(try vault.load(pin: nil))
            let restoredKey = try PublicKeyBytes(bytes: Array(key.publicKey.x963Representation))
            #expect(try await scene.server.ledger.wallet(forKey: restoredKey)?.id == scene.alice.id)
            #expect(try await scene.server.ledger.isWalletPinless(scene.alice.id))
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id) == nil)
            let state = try await pins.state(key)
            #expect(state.pinless && !state.pinSet && state.pinlessPaymentLimit == 50_00)
        }
    }

    /// A backend the procedure never needs here: the wallet is registered already.
    struct NoRegistration: IdentityBackend {
        struct Unused: Error {}
        func register(_ user: RegistrationUserData, invitationCode: String?, key: P256.Signing.PrivateKey)
            async throws -> String
        { throw Unused() }
        func submitRegistrationPuk(id: String, puk: String, key: P256.Signing.PrivateKey) async throws -> Bool {
            throw Unused()
        }
        func isRegistrationActive(id: String, key: P256.Signing.PrivateKey) async throws -> Bool { throw Unused() }
        func confirmActivationLink(_ link: String) async throws { throw Unused() }
        func requestRestorationPuk(email: String, key: P256.Signing.PrivateKey) async throws -> String {
            throw Unused()
        }
        func submitRestorationPuk(id: String, puk: String, key: P256.Signing.PrivateKey) async throws {
            throw Unused()
        }
        func reactivate(id: String, token: String, key: P256.Signing.PrivateKey) async throws { throw Unused() }
    }

    @Test func theIdentityProcedureProvesChangesAndDeactivatesThePINAtTheServer() async throws {
        let scene = try await Scene.make()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("wallet-pin-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        try await scene.server.withLiveServer { client in
            let pins = try scene.pins(client)
            let vault = ServerCountedFileVault(file: directory.appendingPathComponent("wallet-key.pem"), pins: pins)
            try await vault.protect(scene.alice.key, pin: Self.pin)
            #expect(try vault.stored() == .pinProtected)
            let clock = scene.server.clock
            let identity = IdentityClient(serverURL: try scene.url(client))
            let procedure = IdentityProcedure(
                identity: identity, backend: NoRegistration(), vault: vault, clock: { clock.now })
            try await procedure.start()
            #expect(await procedure.state == .awaitingUserPINUnlock)
            #expect(identity.publicKey == nil)

            // Each wrong PIN is counted by the server; its back-off is the procedure's block.
            await #expect(throws: IdentityProcedureError.failed("wrong PIN")) { try await procedure.provePIN("000000") }
            #expect(await procedure.state == .failedUserPINProof)
            try? await procedure.provePIN("000001")
            try? await procedure.provePIN("000002")
            #expect(await procedure.state == .blockedWithWrongPIN)
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id)?.failures == 3)
            await #expect(throws: IdentityProcedureError.self) { try await procedure.provePIN(Self.pin) }
            clock.advance(30)
            await procedure.timePassed(now: clock.now)
            try await procedure.provePIN(Self.pin)
            #expect(await procedure.state == .unlocked)
            #expect(identity.publicKey?.rawRepresentation == scene.alice.key.publicKey.rawRepresentation)

            // Change: the PIN proven at the server, the new one applied there.
            try await procedure.requestChangeOfPIN()
            try await procedure.provePIN(Self.pin)
            try await procedure.choosePIN("97531975")
            try await procedure.confirmPIN("97531975")
            #expect(await procedure.state == .unlocked)
            try await procedure.lock()
            await #expect(throws: IdentityProcedureError.self) { try await procedure.provePIN(Self.pin) }
            try await procedure.provePIN("97531975")

            // Deactivation: pinless on the device and at the server.
            try await procedure.deactivatePin()
            try await procedure.provePIN("97531975")
            #expect(await procedure.state == .unlocked)
            #expect(try vault.stored() == .pinless)
            #expect(try await scene.server.ledger.isWalletPinless(scene.alice.id))
            #expect(try await scene.server.ledger.walletPIN(of: scene.alice.id) == nil)
        }
    }

    @Test func theServerSettingSetsThePinlessLimit() throws {
        var configuration = ServerConfiguration()
        #expect(configuration.ledgerOptions.pinlessPaymentLimit == 50_00)
        configuration.pinlessPaymentLimit = 0
        #expect(configuration.ledgerOptions.pinlessPaymentLimit == nil)
        configuration.pinlessPaymentLimit = 20_00
        #expect(configuration.ledgerOptions.pinlessPaymentLimit == 20_00)
        configuration.pinlessPaymentLimit = -1
        #expect(throws: ServerSetupError.self) { try configuration.validate() }
    }
}
