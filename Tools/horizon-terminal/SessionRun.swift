import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonRoles
import Logging
import Synchronization

/// Runs one cashier session (a payment or a redemption) in the foreground: live state, Ctrl-C
/// cancels, give up when no wallet comes, and linger until the wallet has hung up.
struct SessionRun: Sendable {
    let label: String
    let json: Bool
    let console: Console
    let logger: Logger
    let service: TerminalRadioService
    let waitForWallet: Int

    /// Shows the wallets and the states of the session `collect` runs until it returns. The first
    /// SIGINT or SIGTERM (Ctrl-C) cancels it, and so does --wait-for-wallet passing; either way
    /// the host tells the wallet, and a request it already executed is still returned.
    func run<Value: Sendable>(
        states: AsyncStream<HostState>, observeWallets: (@escaping @Sendable (WalletNotice) -> Void) -> Void,
        collect: @escaping @Sendable () async throws(HostError) -> Value
    ) async -> StateRelay.Outcome<Value> {
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
            case .decisionTimedOut(let code):
                logger.info("a wallet did not decide in time", metadata: ["code": "\(code)"])
                if !json {
                    console.line(
                        "the wallet with code \(code) did not decide in time; the session stays open (Ctrl-C cancels)")
                }
            case .requestDeclined(let code, let decline, let reason):
                logger.info("a wallet's request was declined", metadata: ["code": "\(code)", "decline": "\(decline)"])
                if !json {
                    console.line(
                        "the wallet with code \(code) was declined (\(reason.sanitizedForDisplay)); nothing was charged; the session stays open (Ctrl-C cancels)"
                    )
                }
            }
        }
        let waitForWallet = Duration.seconds(self.waitForWallet)
        let gaveUp = Mutex(false)
        var outcome =
            (try? await withInterruptCancellation {
                await StateRelay.collect(
                    states: states,
                    show: { state in
                        logger.debug("terminal state: \(state)")
                        if !json { console.status("\(label) — \(state)") }
                    },
                    { () async throws(HostError) -> Value in
                        // --wait-for-wallet as a task-group timeout: the sale is cancelled then,
                        // and its own answer (cancelled, or executed after all) comes back.
                        do {
                            return try await cancelling(after: waitForWallet, collect)
                        } catch let error as HostError {
                            // Cancelled, but not by Ctrl-C (this task is not): --wait-for-wallet passed.
                            if error == .cancelled, !Task.isCancelled { gaveUp.withLock { $0 = true } }
                            throw error
                        } catch {
                            throw .cancelled  // `cancelling` throws only what `collect` threw
                        }
                    })
            }) ?? StateRelay.Outcome(result: .failure(.cancelled), lastState: nil)
        outcome.noWalletWithinSeconds = gaveUp.withLock { $0 } ? self.waitForWallet : nil
        await service.lingerWhileWalletsConnected()
        return outcome
    }
}

extension TerminalRadioService {
    /// Lets the wallet read the last message and hang up before this device leaves the air, for
    /// 5 s at most.
    func lingerWhileWalletsConnected() async {
        let connections = openConnections
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = await connections.first(where: { $0 == 0 }) }
            group.addTask { try? await Task.sleep(for: .seconds(5)) }
            await group.next()
            group.cancelAll()
        }
    }
}

/// Relays a host's states to a display (the cashier's screen, a control-socket client) while a
/// sale runs, in order: every state up to the session's end is shown before the sale's answer.
enum StateRelay {
    struct Outcome<Value: Sendable>: Sendable {
        let result: Result<Value, HostError>
        /// The last state shown; nil when no session opened (the host refused to start).
        let lastState: HostState?
        /// Set when the session ended because no wallet paid within --wait-for-wallet seconds.
        var noWalletWithinSeconds: Int? = nil

        /// What to tell the cashier about `error`: that no wallet came, when that was why.
        func message(for error: HostError, noun: String, verb: String) -> String {
            if let seconds = noWalletWithinSeconds, error == .cancelled {
                return "no wallet \(verb) within \(seconds) s"
            }
            return error.cliMessage(noun: noun)
        }
    }

    /// Runs `collect` while `show` sees each state of `states` but idle, up to the finished one.
    static func collect<Value: Sendable>(
        states: AsyncStream<HostState>, show: @escaping @Sendable (HostState) async -> Void,
        _ collect: @escaping @Sendable () async throws(HostError) -> Value
    ) async -> Outcome<Value> {
        // Unstructured, so that the caller's cancellation (Ctrl-C, a shutdown) does not cut the
        // relay before the state that says how the cancelled session ended.
        let relay = Task { () -> HostState? in
            var last: HostState?
            for await state in states where state != .idle {
                last = state
                await show(state)
                if state.isFinished { break }
            }
            return last
        }
        let result: Result<Value, HostError>
        do throws(HostError) {
            result = .success(try await collect())
        } catch {
            result = .failure(error)
        }
        return Outcome(result: result, lastState: await drain(relay))
    }

    /// The relay's last state once it has shown what is already queued. A session that ended
    /// queued its finished state before `collect` returned, so this is at once; a start the host
    /// refused queued nothing, which the grace period bounds. Shielded from the caller's
    /// cancellation like the relay.
    private static func drain(_ relay: Task<HostState?, Never>) async -> HostState? {
        await Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    await withTaskCancellationHandler {
                        _ = await relay.value
                    } onCancel: {
                        relay.cancel()
                    }
                }
                group.addTask { try? await Task.sleep(for: .milliseconds(500)) }
                _ = await group.next()
                group.cancelAll()
            }
            return await relay.value
        }.value
    }
}
