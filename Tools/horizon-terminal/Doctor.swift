import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonSecureChannel

/// `doctor`: a checklist of what a terminal needs, each line ok, warn or fail.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the adapter, bluetoothd, the server, the credential, the clock and the disk.",
        discussion: """
            Each line says ok, warn or fail and why. Exits 0 when nothing fails (warnings included), 1 otherwise. \
            The server, its clock and the credential's renewal are checked for an activated terminal; a sandbox \
            terminal settles in its own ledger.
            """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func run() async throws {
        let files = global.terminalFiles
        var checks = [await HorizonRadioCLISupport.Doctor.adapter(radio)]
        checks.append(HorizonRadioCLISupport.Doctor.bluetoothd(radio, servesAsTerminal: true))
        checks += await terminalChecks(files)
        checks.append(HorizonRadioCLISupport.Doctor.disk(files.directory))
        try HorizonRadioCLISupport.Doctor.report(checks)
    }

    private func terminalChecks(_ files: TerminalFiles) async -> [DoctorCheck] {
        guard files.directory.exists(TerminalFiles.settings) else {
            return [
                DoctorCheck(
                    .fail, "terminal",
                    "none in \(files.directory.path): run `horizon-terminal init` (sandbox) or `horizon-terminal activate --server URL`."
                )
            ]
        }
        let settings: TerminalSettings
        let identity: TerminalIdentity
        do {
            settings = try files.loadSettings()
            identity = try files.loadIdentity()
        } catch {
            return [DoctorCheck(.fail, "terminal", "\(error).")]
        }
        var checks: [DoctorCheck] = []
        let credential = identity.credential
        let now = Int64(Date().timeIntervalSince1970)
        let until = HorizonRadioCLISupport.Doctor.date(credential.expiresAt)
        if now < credential.notBefore {
            checks.append(
                DoctorCheck(
                    .fail, "credential",
                    "not valid before \(HorizonRadioCLISupport.Doctor.date(credential.notBefore)): is this clock right?"))
        } else if now >= credential.expiresAt {
            checks.append(
                DoctorCheck(
                    .fail, "credential",
                    settings.server == nil
                        ? "expired at \(until): run `horizon-terminal init --force` for a new sandbox."
                        : "expired at \(until): it is renewed when the terminal next reaches the server, if the server still accepts it."
                ))
        } else if let server = settings.server {
            let renewal = credential.notBefore + (credential.expiresAt - credential.notBefore) / 2
            let renewalText = HorizonRadioCLISupport.Doctor.date(renewal)
            checks.append(
                now < renewal
                    ? DoctorCheck(
                        .ok, "credential",
                        "valid until \(until); renewed from \(renewalText) on, while the terminal reaches \(server).")
                    : DoctorCheck(
                        .warn, "credential",
                        "valid until \(until), renewal due since \(renewalText): it is renewed while `serve` runs and the server answers."
                    ))
        } else {
            checks.append(DoctorCheck(.ok, "credential", "the sandbox's own, valid until \(until)."))
        }
        guard let server = settings.server else {
            checks.append(DoctorCheck(.ok, "server", "none: a sandbox terminal settles in its own ledger."))
            checks.append(DoctorCheck(.ok, "clock", "not compared: no server."))
            return checks
        }
        guard let url = URL(string: server) else {
            return checks + [DoctorCheck(.fail, "server", "\(server) in terminal.json is not a URL.")]
        }
        return checks + (await HorizonRadioCLISupport.Doctor.server(url))
    }
}
