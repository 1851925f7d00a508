import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonServerClient
import HorizonServiceClients

/// The merchant commands as the merchant's admin rather than through a terminal's credential:
/// `--admin-email` signs in with the admin's password instead of using this
/// terminal's key, so they work from any machine, with no terminal set up there.
struct AdminSignInOptions: ParsableArguments {
    @Option(
        help:
            "Sign in as the merchant's admin with this e-mail instead of using this terminal's key (no terminal needed; see --server)."
    )
    var adminEmail: String?

    @Option(help: "With --admin-email: read the admin's password from this file instead of asking.")
    var passwordFile: String?

    @Option(
        help:
            "With --admin-email: the Horizon server, e.g. http://127.0.0.1:8080 (default: the one this terminal was activated with)."
    )
    var server: String?

    /// A command-line sign-in ends by itself soon after the command: nothing outlives it for long.
    static let sessionLifetime: Duration = .seconds(300)

    func validate() throws {
        if adminEmail == nil, passwordFile != nil || server != nil {
            throw ValidationError("--password-file and --server go with --admin-email")
        }
    }

    /// The merchant service: as the admin with `--admin-email`, else as this terminal (nil for
    /// the single-box sandbox, whose commands use the in-process ledger).
    func merchantService(_ global: GlobalOptions) async throws -> MerchantServiceClient? {
        guard let adminEmail else { return try await global.merchantService() }
        let configured =
            global.terminalFiles.directory.exists(TerminalFiles.settings)
            ? try global.terminalFiles.loadSettings().server : nil
        guard let serverText = server ?? configured else {
            throw CLIError(
                "--admin-email needs the server: pass --server URL (this data directory holds no terminal activated with one)"
            )
        }
        let url: URL
        do { url = try HorizonServerClient.url(serverText) } catch { throw CLIError("\(error)") }
        let password = try readSecret(prompt: "Password for \(adminEmail): ", file: passwordFile)
        let client: MerchantServiceClient
        do {
            client = try await MerchantServiceClient.signIn(
                serverURL: url, email: adminEmail, password: password, lifetime: Self.sessionLifetime)
            try await client.start()
        } catch {
            throw CLIError(Self.advice(for: error, server: serverText))
        }
        return client
    }

    static func advice(for error: MerchantServiceError, server: String) -> String {
        switch error.code {
        case "invalid_credentials": "\(error)\nCheck the admin's e-mail and password."
        case "account_locked", "rate_limited": "\(error)\nWait, then sign in again."
        default: GlobalOptions.advice(for: error, server: server)
        }
    }
}
