import AsyncHTTPClient
import Foundation
import HorizonCore
import HorizonLedger
import HorizonServerClient

/// `payment-cpu --through-server`: the terminal settles each payment through a running `horizon-server`
/// (`ServerPaymentProcessor`, `POST /v1/payments` signed with the terminal's key) instead of its
/// in-process ledger, as an activated terminal does. The process's CPU is then the terminal's
/// and the wallet's share of a payment; the server's own CPU is its process's, not counted here
/// (`Benchmarks/terminal-share.sh` reads it from /proc).
final class RemoteSettlement: Sendable {
    let url: URL
    let enrolled: ServerEnrollment.Enrolled
    let processor: ServerPaymentProcessor
    private let http: HTTPClient
    private let ledger: Ledger

    private init(url: URL, enrolled: ServerEnrollment.Enrolled, http: HTTPClient, ledger: Ledger) {
        self.url = url
        self.enrolled = enrolled
        self.http = http
        self.ledger = ledger
        processor = ServerPaymentProcessor(
            client: HorizonServerClient(serverURL: url, signingKey: enrolled.terminal.signingKey, httpClient: http),
            anchor: enrolled.anchor)
    }

    /// Activates a terminal and registers a wallet holding enough for `payments` payments.
    static func prepare(server: String, database: String, email: String, passwordFile: String, payments: Int)
        throws -> RemoteSettlement
    {
        let url: URL
        do { url = try HorizonServerClient.url(server) } catch { throw BenchmarkError("--through-server: \(error)") }
        let password = try ServerEnrollment.password(file: passwordFile, option: "--through-server-password-file")
        let topUp = Int64(payments + 10) * (Shop.amount.minorUnits + Shop.tip.minorUnits)
        let outcome = ExternalWork.wait { () async -> Result<RemoteSettlement, BenchmarkError> in
            let http = HorizonServerClient.makeHTTPClient(connectionsPerServer: 2)
            let ledger: Ledger
            do { ledger = try await ServerEnrollment.openLedger(database) } catch {
                try? await http.shutdown()
                return .failure(error as? BenchmarkError ?? BenchmarkError("\(error)"))
            }
            do {
                let enrollment = ServerEnrollment(
                    urls: [url], http: http, ledger: ledger, email: email, password: password,
                    currency: Shop.amount.currency)
                let enrolled = try await enrollment.enroll(0, label: "payment-cpu", topUp: topUp)
                return .success(RemoteSettlement(url: url, enrolled: enrolled, http: http, ledger: ledger))
            } catch {
                await ledger.close()
                try? await http.shutdown()
                return .failure(error as? BenchmarkError ?? BenchmarkError("\(error)"))
            }
        }
        return try outcome.get()
    }

    func close() {
        let http = http
        let ledger = ledger
        ExternalWork.wait {
            await ledger.close()
            try? await http.shutdown()
        }
    }
}
