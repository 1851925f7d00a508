import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport

/// Helpers for the tests that drive `horizon-terminal serve` through its control socket.

/// `horizon-terminal serve` of the terminal in `terminalDir`, on the simulated radio at `socket`,
/// listening at `control`; stop it with `stop` or a signal.
func startService(terminalDir: String, socket: String, control: String) throws -> RunningProgram {
    try Programs.start(
        "horizon-terminal",
        ["serve", "--data-dir", terminalDir, "--radio-socket", socket, "--control-socket", control])
}

/// Whether `condition` holds within `limit`, looking every 50 ms.
func eventually(within limit: Duration = .seconds(15), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return condition()
}

/// The service's `payment <state>` answer to `status` on its control socket, or nil.
func paymentState(at control: String) -> String? {
    guard let connection = try? LineConnection.connect(to: control) else { return nil }
    connection.setReadTimeout(seconds: 2)
    connection.send("status")
    while let line = connection.readLine() {
        if line.hasPrefix("payment ") { return String(line.dropFirst(8)) }
    }
    return nil
}

/// A program a test leaves running (a failed expectation) does not outlive it.
func stop(_ program: RunningProgram) {
    if program.process.isRunning { kill(program.process.processIdentifier, SIGKILL) }
}
