import AsyncHTTPClient
import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonSecureChannel
import HorizonServerClient

/// Terminals and wallets enrolled with running `horizon-server` processes through their real
/// endpoints, as devices would be: a terminal activated with the merchant admin's e-mail and
/// password, a wallet registered with the one-time code the sandbox "texted" (read from the
/// servers' database outbox) and topped up there. Used by `scale-out` and by `payment-cpu
/// --server`.
struct ServerEnrollment: Sendable {
    let urls: [URL]
    let http: HTTPClient
    /// The servers' database: the outbox holds the codes; top-ups are posted here.
    let ledger: Ledger
    let email: String
    let password: String
    let currency: Currency
    /// Names this run's wallets, so a database used before does not collide.
    let runID = String(UInt32.random(in: 0...UInt32.max), radix: 16)

    struct Enrolled: Sendable {
        let terminal: TerminalIdentity
        /// The key the server's issuer signs credentials with: what wallets trust.
        let anchor: P256.Signing.PublicKey
        let walletKey: P256.Signing.PrivateKey
        let walletID: WalletID
    }

    func client(_ server: Int, key: P256.Signing.PrivateKey? = nil, timeout: Duration = .seconds(30))
        -> HorizonServerClient
    {
        HorizonServerClient(serverURL: urls[server % urls.count], signingKey: key, httpClient: http, timeout: timeout)
    }

    /// Terminal `index` and its wallet, holding `topUp` minor units.
    func enroll(_ index: Int, label: String, topUp: Int64) async throws -> Enrolled {
        let terminalKey = P256.Signing.PrivateKey()
        let terminal: TerminalIdentity
        let anchor: P256.Signing.PublicKey
        do {
            let response = try await client(index).activateTerminal(
                email: email, password: password, label: "\(label) till \(index)", key: terminalKey)
            guard let bytes = Data(base64Encoded: response.credential),
                let anchorBytes = Data(base64Encoded: response.anchor.publicKey)
            else {
                throw BenchmarkError("the server's credential or anchor key is not base64")
            }
            terminal = try TerminalIdentity(
                signingKey: terminalKey, credential: TerminalCredential.decode(Array(bytes)))
            anchor = try P256.Signing.PublicKey(x963Representation: anchorBytes)
        } catch let error as BenchmarkError {
            throw error
        } catch {
            throw BenchmarkError(
                "terminal \(index) could not be activated (check --email and --password-file): \(error)")
        }
        let walletKey = P256.Signing.PrivateKey()
        let phone = "+49151" + String(format: "%08d", (Int(runID, radix: 16) ?? 0) % 100_000 * 1000 + index % 1000)
        let walletID: WalletID
        do {
            let sent = try await client(index + 1).registerWallet(
                name: "\(label) wallet \(index)", email: "bench-\(runID)-\(index)@wallets.example", phone: phone,
                key: walletKey)
            let smsCode = try await oneTimeCode(to: phone)
            let emailCode = try await oneTimeCode(to: "bench-\(runID)-\(index)@wallets.example")
            walletID = WalletID(
                rawValue: try await client(index).verifyWalletRegistration(
                    id: sent.registrationId, smsCode: smsCode, emailCode: emailCode
                ).walletId)
            try await ledger.deposit(try Money(minorUnits: topUp, currency: currency), to: walletID)
        } catch let error as BenchmarkError {
            throw error
        } catch {
            throw BenchmarkError("wallet \(index) could not be registered and topped up: \(error)")
        }
        return Enrolled(terminal: terminal, anchor: anchor, walletKey: walletKey, walletID: walletID)
    }

    /// The code the sandbox "texted": the newest message to `phone` in the outbox.
    func oneTimeCode(to phone: String) async throws -> String {
        let marker = "code is "
        for message in try await ledger.outbox(recipient: phone, limit: 1) {
            guard let range = message.body.range(of: marker) else { continue }
            let code = message.body[range.upperBound...].prefix(while: \.isNumber)
            if !code.isEmpty { return String(code) }
        }
        throw BenchmarkError(
            "no registration code for \(phone) in the database's outbox (is the database the servers'?)")
    }

    /// The merchant admin's password, the first line of `file` (named by `option` in errors).
    static func password(file: String, option: String) throws -> String {
        do {
            return try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .newlines)
        } catch {
            throw BenchmarkError("cannot read \(option) \(file): \(error.localizedDescription)")
        }
    }

    /// The ledger of a servers' database given as `sqlite:PATH` or a postgres:// URL.
    static func openLedger(_ database: String) async throws -> Ledger {
        do {
            if database.hasPrefix("sqlite:") { return try await Ledger.sqlite(path: String(database.dropFirst(7))) }
            return try await Ledger.postgres(url: database)
        } catch {
            throw BenchmarkError("cannot open the servers' database \(database): \(error)")
        }
    }
}
