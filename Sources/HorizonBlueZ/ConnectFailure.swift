import HorizonRadio

/// How often and how patiently the wallet retries a connect that bluetoothd failed transiently.
public struct BlueZConnectRetryPolicy: Sendable {
    public var maximumAttempts: Int
    public var initialBackoff: Duration

    public init(maximumAttempts: Int = 4, initialBackoff: Duration = .milliseconds(250)) {
        self.maximumAttempts = maximumAttempts
        self.initialBackoff = initialBackoff
    }

    /// Doubles after each attempt: 250 ms, 500 ms, 1 s by default.
    func backoff(afterAttempt attempt: Int) -> Duration {
        initialBackoff * (1 << min(max(attempt - 1, 0), 6))
    }
}

/// Why one connect attempt failed, and whether another may succeed.
enum ConnectFailure: Error {
    case bluez(BlueZError, doing: String)
    case droppedDuringDiscovery
    case notAHorizonTerminal
    case timedOut

    init(_ error: BlueZError, doing action: String) { self = .bluez(error, doing: action) }

    /// The failures a second attempt cured when they were measured: bluetoothd busy with
    /// another connect, the controller aborting the connection, the link lost while services
    /// were discovered.
    var isTransient: Bool {
        switch self {
        case .droppedDuringDiscovery: return true
        case .notAHorizonTerminal, .timedOut: return false
        case .bluez(let error, _):
            switch error.kind {
            case .inProgress, .notConnected: return true
            case .failed: return error.reason != nil
            default: return false
            }
        }
    }

    func radioError(peer: PeerAddress, attempts: Int) -> RadioError {
        switch self {
        case .timedOut: return .connectionTimedOut(peer)
        case .droppedDuringDiscovery:
            return .backend(
                name: BlueZError.Kind.failed.errorName ?? "",
                message: "the connection to \(peer) dropped during service discovery \(attempts) times")
        case .notAHorizonTerminal:
            return .backend(
                name: "org.horizon.Error.NotATerminal",
                message: "\(peer) does not offer the Horizon payment service")
        case .bluez(let error, let action):
            switch error.kind {
            case .unknownObject, .doesNotExist: return .peerNotFound(peer)
            case .noReply, .timedOut: return .connectionTimedOut(peer)
            default: return .bluez(error, doing: action)
            }
        }
    }
}
