import Foundation
import HorizonCLISupport
import HorizonRoles
import Logging

/// Runs one cashier session (a payment or a redemption) in the foreground: live state, Ctrl-C
/// cancels, give up when no wallet comes, and linger until the wallet has read the answer.
struct SessionRun {
    let label: String
    let json: Bool
    let console: Console
    let logger: Logger
    let service: TerminalRadioService

    func run(
        observe: (@escaping @Sendable (HostState) -> Void) -> Void,
        observeWallets: (@escaping @Sendable (WalletNotice) -> Void) -> Void, cancel: @escaping @Sendable () -> Void,
        waitForWallet: Int, start: () throws -> Void
    ) throws {
        let finished = DispatchSemaphore(value: 0)
        let (label, json, console, logger) = (self.label, self.json, self.console, self.logger)
        // The code lets the cashier and the customer check they see the same session; a decline
        // is one wallet's word, so the session stays open (any central could send one).
        observeWallets { notice in
            switch notice {
            case .offered(let code):
                logger.info("wallet shown the offer", metadata: ["code": "\(code)"])
                if !json { console.line("wallet connected: confirmation code \(code) (the customer sees the same)") }
            case .declined(let code):
                logger.info("a wallet declined", metadata: ["code": "\(code)"])
                if !json {
                    console.line("the wallet with code \(code) declined; the session stays open (Ctrl-C cancels)")
                }
            }
        }
        observe { state in
            logger.debug("terminal state: \(state)")
            if !json { console.status("\(label) — \(state)") }
            if state.isFinished { finished.signal() }
        }
        try start()
        let interrupt = InterruptHandler(queue: DispatchQueue(label: "horizon.terminal.signals")) { _ in cancel() }
        if finished.wait(timeout: .now() + .seconds(waitForWallet)) == .timedOut {
            cancel()
            _ = finished.wait(timeout: .now() + .seconds(2))
        }
        // Let the wallet read the last message and hang up before this device leaves the air.
        let lingerUntil = Date().addingTimeInterval(5)
        while service.connectionCount > 0, Date() < lingerUntil { Thread.sleep(forTimeInterval: 0.02) }
        withExtendedLifetime(interrupt) {}
    }
}
