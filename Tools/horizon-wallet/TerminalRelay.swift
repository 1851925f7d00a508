import ArgumentParser
import Crypto
import Foundation
import HorizonCLISupport
import HorizonRadio
import HorizonRadioCLISupport
import HorizonRoles
import HorizonSecureChannel
import HorizonServiceClients
import HorizonSimulatedRadio
import Synchronization

/// `--via-terminal` (the request proxy): for a wallet without a route to its server.
/// The command's server requests are sealed to the server's gateway key (kept by
/// `horizon-wallet token` while online, checked against the pinned anchor) and sent as proxy
/// requests over the secure channel to the nearest terminal advertising a session; the terminal
/// posts them to the gateway and hands back the sealed answers. It reads neither.
struct TerminalRelayOptions: ParsableArguments {
    @Flag(
        help:
            "Send this command's server requests through the nearest terminal (sealed to the server's gateway; the terminal cannot read them), for a wallet without network."
    )
    var viaTerminal = false

    @Option(help: "Seconds to look for a terminal advertising a session, with --via-terminal.")
    var terminalTimeout = 15

    @OptionGroup var radio: RadioOptions

    func validate() throws {
        guard (1...600).contains(terminalTimeout) else {
            throw ValidationError("--terminal-timeout must be 1 to 600 seconds")
        }
    }
}

/// The radio, payment client and request proxy a `--via-terminal` command relays through; kept
/// for the command's life and shut down with `close()`.
final class TerminalRelay: Sendable {
    let radio: any DeviceRadio
    let client: PaymentClient
    let coordinator: RequestProxyClientCoordinator
    private let relayed = Mutex(0)

    private init(radio: any DeviceRadio, client: PaymentClient, coordinator: RequestProxyClientCoordinator) {
        self.radio = radio
        self.client = client
        self.coordinator = coordinator
    }

    /// How many requests went through the terminal and got their answer.
    var relayedCount: Int { relayed.withLock { $0 } }

    /// Looks for a terminal and routes every request of `identity` through it from now on.
    static func open(
        _ options: TerminalRelayOptions, identity: IdentityClient, key: P256.Signing.PrivateKey, cache: Cache,
        files: WalletFiles, verbose: Bool
    ) async throws -> TerminalRelay {
        let anchors = try files.loadTrustAnchors()
        let keys = GatewayKeyConfigClient(identityClient: identity, cache: cache, trustAnchors: anchors)
        guard let keyConfiguration = keys.currentKeyConfiguration else {
            throw CLIError(
                "this wallet has not kept its server's gateway key, which requests through a terminal are sealed to: run `horizon-wallet token` once while online (it keeps the key with the daily token)"
            )
        }
        let logger = Logs.logger("horizon.wallet", verbose: verbose)
        let radio = try await options.radio.open(name: "wallet", defaultPosition: Position(x: 0.3, y: 0), logger: logger)
        let client = PaymentClient(
            radio: radio, identity: WalletIdentity(signingKey: key), trustAnchors: anchors, logger: logger)
        let coordinator = RequestProxyClientCoordinator(proxyClientConnectors: [client.connector], logger: logger)
        coordinator.configureRequestProxyClient()
        let relay = TerminalRelay(radio: radio, client: client, coordinator: coordinator)
        do {
            try client.start()
        } catch {
            relay.close()
            throw CLIError("the radio cannot scan for terminals: \(error)")
        }
        guard await relay.hearsATerminal(within: .seconds(options.terminalTimeout)) else {
            relay.close()
            throw CLIError(
                "no terminal advertising a session was heard in \(options.terminalTimeout) s; requests through a terminal need one nearby that is taking a payment (horizon-terminal pay) and is activated with the server"
            )
        }
        identity.routeThroughGateway(
            GatewayRoute(keyConfiguration: keyConfiguration) { [relay] sealed in
                let answer = try await relay.coordinator.relay(sealed)
                relay.relayed.withLock { $0 += 1 }
                return answer
            })
        return relay
    }

    /// Whether a terminal's session becomes a candidate within `limit` (the relay connects to the
    /// nearest one heard).
    private func hearsATerminal(within limit: Duration) async -> Bool {
        let candidates = client.candidates()
        let heard: Bool? = await value(within: limit) {
            for await _ in candidates { return true }
            return nil
        }
        return heard ?? false
    }

    /// What the wallet says under an answer that came through the terminal.
    var note: String {
        "(through a nearby terminal: \(relayedCount) request(s) relayed sealed to the server's gateway; the terminal could not read them)"
    }

    func close() {
        client.stop()
        radio.shutdown()
    }
}
