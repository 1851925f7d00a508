import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonServerClient
import HorizonSimulatedRadio
import Logging
import ServiceLifecycle

/// `radio`: serves the simulated radio room that terminals and wallets in other processes join.
public struct RadioCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "radio",
        abstract: "Run the simulated radio that lets a terminal and a wallet in different processes pay each other.",
        discussion: """
            Programs started with --radio simulated (the default) join this room through its Unix socket and \
            start it themselves when it is not running. Positions (--position) set each device's place; RSSI \
            follows distance. A program that exits is a device switched off.
            """)

    @Option(help: "The socket to listen on (default: as --radio-socket of the other commands).")
    public var socket: String?

    @Option(help: "Seed of the radio's noise (same seed, same noise).")
    public var seed: UInt64 = 1

    @Option(help: "Exit after this many seconds with no device connected (0: never).")
    public var idleExit: Int = 0

    /// Set by `RadioServerLauncher`: a pipe on which this server says "ready" once its socket
    /// accepts devices, so the launcher waits for that line instead of probing the socket.
    @Option(help: .hidden) public var readyFd: Int32?

    public init() {}

    public mutating func validate() throws {
        guard idleExit >= 0 else { throw ValidationError("--idle-exit must be 0 or more seconds") }
        if let readyFd, readyFd <= STDERR_FILENO { throw ValidationError("--ready-fd must be above 2") }
    }

    public func run() async throws {
        var options = RadioOptions()
        options.radioSocket = socket
        let logger = Logs.logger("horizon.radio", verbose: false)
        // SIGTERM or SIGINT: the server stops, removing its socket and lock; the devices of the
        // room see their links end, as at power off. The socket is made by the service, once the
        // group traps those signals: one that comes as soon as the socket exists is a shutdown,
        // never a kill that leaves the socket file behind.
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    RadioServerService(
                        path: options.socketPath, seed: seed, idleExit: idleExit > 0 ? .seconds(idleExit) : nil,
                        readyFd: readyFd)
                ], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

/// The simulated radio's server as a service: it listens, says so, and serves until the group
/// shuts down, or until it exits by itself after --idle-exit without devices (which ends the group).
struct RadioServerService: Service {
    let path: String
    let seed: UInt64
    let idleExit: Duration?
    let readyFd: Int32?

    func run() async throws {
        let server: RadioServer
        do {
            server = try RadioServer(socketPath: path, seed: seed, idleExit: idleExit)
        } catch {
            throw CLIError("cannot listen on \(path): \(error)")
        }
        print("simulated radio listening on \(path)")
        if let readyFd {
            _ = write(readyFd, RadioServerLauncher.readyLine, RadioServerLauncher.readyLine.utf8.count)
            close(readyFd)
        }
        await withTaskCancellationOrGracefulShutdownHandler {
            await server.run()
        } onCancelOrGracefulShutdown: {
            server.stop()
        }
    }
}

/// Options every command has.
public struct GlobalOptions: ParsableArguments {
    @Option(help: "The data directory (default: $XDG_DATA_HOME/horizon/<program>, i.e. ~/.local/share/horizon/...).")
    public var dataDir: String?

    @Flag(help: "Log what happens underneath (radio, handshake, state changes) to standard error.")
    public var verbose = false

    @Flag(
        name: .customLong("insecure-lab-http"),
        help:
            "Allow http:// to a server on another machine (a lab without TLS only: passwords, codes and answers travel in clear and can be forged). Without it, http:// is for 127.0.0.1, ::1 and localhost only."
    )
    public var insecureLabHTTP = false

    public init() {}

    public func validate() throws {
        if insecureLabHTTP {
            let program = CommandLine.arguments.first.map { URL(fileURLWithPath: $0).lastPathComponent } ?? "horizon"
            TransportSecurity.allowInsecureLabHTTP(program: program)
        }
    }
}
