import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonServiceClients

/// `doctor`: a checklist of what a wallet needs, each line ok, warn or fail.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Check the adapter, bluetoothd, the keys, the registration, the server, the daily token, the clock and the disk.",
        discussion: """
            Each line says ok, warn or fail and why. Exits 0 when nothing fails (warnings included), 1 otherwise. \
            The server, its clock and the daily token are checked for a wallet registered with a server; no PIN \
            is asked (with one set, the daily token is not read).
            """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func run() async throws {
        let files = global.walletFiles
        var checks = [await HorizonRadioCLISupport.Doctor.adapter(radio)]
        checks.append(HorizonRadioCLISupport.Doctor.bluetoothd(radio, servesAsTerminal: false))
        checks += await walletChecks(files)
        checks.append(HorizonRadioCLISupport.Doctor.disk(files.directory))
        try HorizonRadioCLISupport.Doctor.report(checks)
    }

    private func walletChecks(_ files: WalletFiles) async -> [DoctorCheck] {
        guard files.directory.exists(WalletFiles.walletKey) else {
            return [
                DoctorCheck(
                    .fail, "keys",
                    "no wallet in \(files.directory.path): run `horizon-wallet register --server URL …` or `horizon-wallet init --trust FILE`."
                )
            ]
        }
        let vault = files.keyVault()
        var checks: [DoctorCheck] = []
        do {
            _ = try files.loadPublicKey()
            let anchors = try files.loadTrustAnchors()
            checks.append(
                DoctorCheck(
                    .ok, "keys",
                    "the wallet's key is \(vault.isPINSet ? "sealed under a PIN" : "present (no PIN: `horizon-wallet pin set`)"); \(anchors.count) trusted issuer\(anchors.count == 1 ? "" : "s")."
                ))
        } catch {
            checks.append(DoctorCheck(.fail, "keys", "\(error)."))
        }
        let account: WalletAccount?
        do { account = try WalletServer.account(files) } catch {
            return checks + [DoctorCheck(.fail, "registration", "\(error).")]
        }
        guard let account else {
            if let pending = try? WalletServer.pending(files) {
                let next =
                    switch (pending.kind, pending.byLink) {
                    case (.registration, true):
                        "`horizon-wallet verify PUK`, the mailed link, then `horizon-wallet activation-status`"
                    case (.restoration, true): "`horizon-wallet verify PUK`, then `horizon-wallet reactivate TOKEN`"
                    default: "`horizon-wallet verify` with the codes you received"
                    }
                checks.append(
                    DoctorCheck(
                        .warn, pending.kind == .registration ? "registration" : "restoration",
                        "started at \(pending.server), not finished: \(next)."))
            } else {
                checks.append(
                    DoctorCheck(.ok, "registration", "none: a sandbox wallet, paying terminals that enrol it."))
            }
            checks.append(DoctorCheck(.ok, "server", "none: a sandbox wallet has no server to ask."))
            checks.append(DoctorCheck(.ok, "clock", "not compared: no server."))
            return checks
        }
        checks.append(
            DoctorCheck(
                .ok, "registration", "account \(account.walletId) at \(account.server), issuer \(account.anchorName)."))
        guard let url = URL(string: account.server) else {
            return checks + [DoctorCheck(.fail, "server", "\(account.server) in account.json is not a URL.")]
        }
        checks += await HorizonRadioCLISupport.Doctor.server(url)
        checks.append(dailyToken(files, vault: vault))
        return checks
    }

    /// The daily token kept for offline payments (read from the wallet's cache, not fetched).
    private func dailyToken(_ files: WalletFiles, vault: WalletKeyVault) -> DoctorCheck {
        guard !vault.isPINSet else {
            return DoctorCheck(
                .warn, "token", "not read: the key is sealed under a PIN; `horizon-wallet token` shows it.")
        }
        do {
            let key = try vault.unlock(pin: { "" })
            guard let session = try WalletSession.open(files, signingKey: key) else {
                return DoctorCheck(.ok, "token", "none needed: a sandbox wallet.")
            }
            let client = DailyTokenClient(
                identityClient: session.identity, cache: session.cache, trustAnchors: try files.loadTrustAnchors())
            guard let token = client.currentToken else {
                return DoctorCheck(
                    .warn, "token",
                    "no valid daily token kept: offline payments need one; `horizon-wallet token` fetches it.")
            }
            return DoctorCheck(
                .ok, "token",
                "daily token valid until \(HorizonRadioCLISupport.Doctor.date(token.token.expiresAt)), \(token.remainingAllowance) left for offline payments."
            )
        } catch {
            return DoctorCheck(.fail, "token", "cannot read the daily token: \(error).")
        }
    }
}
