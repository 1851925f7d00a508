import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonRadioCLISupport
import HorizonRoles
import HorizonSecureChannel
import HorizonServerClient
import HorizonServiceClients
import HorizonSettlement
import HorizonStores
import Logging
import ServiceLifecycle

/// `offline list|forward`: the payments this terminal accepted while its server was
/// unreachable, and sending them to the server, each exactly once.
struct OfflineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offline",
        abstract: "The payments accepted offline (server unreachable) and their forwarding to the server.",
        discussion: """
            An activated terminal that cannot reach its server accepts a payment against the wallet's daily token, \
            within the offline limits in terminal.json ("offline": perPaymentMinorUnits 5000, totalStoredMinorUnits \
            20000, maximumStoredCount 20, maximumAgeHours 24 by default). Each is kept in journal.sqlite as stored, \
            then forwarding, then settled or declined. `horizon-terminal serve` forwards them when the server answers \
            again and every few minutes; `offline forward` does it now, when no other horizon-terminal runs on \
            the data directory.
            """,
        subcommands: [List.self, Forward.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the offline payments, oldest first, with their state.")

        @Flag(help: "Print the list as JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let journal = try global.terminalFiles.openJournal()
            let payments: [StoredOfflinePayment]
            do { payments = try journal.offlinePayments() } catch { throw CLIError("\(error)") }
            let rows = payments.map(OfflinePaymentRow.init)
            if json {
                try Console().json(rows)
                return
            }
            guard !rows.isEmpty else {
                print("no offline payments")
                return
            }
            for row in rows {
                var line =
                    "\(row.paymentId)  \(row.state.padding(toLength: 10, withPad: " ", startingAt: 0))  \(row.acceptedAt)  \(row.total.formatted) (tip \(row.tip.formattedAmount))"
                if let code = row.declineCode { line += "  declined \(code): \(row.declineReason ?? "")" }
                print(line)
            }
            print(OfflineStatus(payments).summaryLine)
        }
    }

    struct Forward: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send the stored offline payments to the server now, oldest first, each exactly once.")

        @Flag(help: "Print the result as JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try CrashInjection.validate(for: "terminal")
            let files = try global.lockedTerminalFiles()
            let journal = try files.openJournal()
            let logger = Logs.logger("horizon.terminal", verbose: global.verbose)
            let forwarder = CrashInjection.forwarder(
                wrapping: try makeOfflineForwarder(files: files, identity: try files.loadIdentity(), logger: logger))
            let forwarding = OfflineForwarding(
                store: journal, forwarder: forwarder, clock: { UnixTime(Date().timeIntervalSince1970) })
            let report: OfflineForwardReport
            do { report = try await forwarding.forwardStored() } catch { throw CLIError("\(error)") }
            if json {
                try Console().json(
                    OfflineForwardSummary(
                        settled: report.settled.map(\.description),
                        declined: report.declined.map {
                            ["paymentId": $0.paymentID.description, "code": $0.code, "reason": $0.reason]
                        },
                        outstanding: report.outstanding, interruption: report.interruption))
            } else {
                print(report.description)
            }
            if let interruption = report.interruption {
                throw CommandFailure("the server did not answer (\(interruption)); the rest stays stored")
            }
        }
    }
}

/// The one place the terminal's offline forwarder is made: the server's offline settlement
/// endpoint (`POST /v1/payments/offline`) through `HorizonServerClient`, signed with the
/// terminal's key.
func makeOfflineForwarder(
    files: TerminalFiles, identity: TerminalIdentity, logger: Logger
) throws -> any OfflinePaymentForwarder {
    guard let client = try files.serverClient(identity: identity) else {
        throw CLIError("this terminal settles in its own ledger (sandbox); it has no server to forward to")
    }
    // The server's answers count only when signed by the anchor pinned at activation.
    let anchor = try KeyFiles.readPublic(at: files.directory.file(TerminalFiles.anchorPublicKey))
    return ServerOfflineForwarder(client: client, anchor: anchor, logger: logger)
}

struct OfflinePaymentRow: Encodable {
    let paymentId: String
    let state: String
    let acceptedAt: String
    let amount: JSONMoney
    let tip: JSONMoney
    let total: JSONMoney
    let tokenId: String
    let forwardAttempts: Int
    let declineCode: String?
    let declineReason: String?

    init(_ payment: StoredOfflinePayment) {
        let record = payment.record
        paymentId = record.paymentID.description
        state = payment.state.rawValue
        acceptedAt = OfflineStatus.format(record.acceptedAt)
        amount = JSONMoney(record.amount)
        tip = JSONMoney(record.tip)
        total = JSONMoney((try? record.amount.adding(record.tip)) ?? record.amount)
        tokenId = record.tokenID.hexString
        forwardAttempts = payment.forwardAttempts
        declineCode = payment.declineCode
        declineReason = payment.declineReason
    }
}

struct OfflineForwardSummary: Encodable {
    let settled: [String]
    let declined: [[String: String]]
    let outstanding: Int
    let interruption: String?
}

/// Online/offline and the stored offline payments, for `status`.
struct OfflineStatus: Encodable {
    /// "online", "offline", or "sandbox" (settles in its own ledger).
    private(set) var server: String
    /// The server an activated terminal settles through, once `checkingServer` asked it.
    private(set) var serverURL: String?
    let lastServerContact: String?
    let lastServerFailure: String?
    let storedCount: Int
    /// The totals of the payments not yet forwarded, one per currency.
    let storedTotals: [JSONMoney]
    let oldestStored: String?
    let settledCount: Int
    let declinedCount: Int

    init(_ payments: [StoredOfflinePayment], contact: ServerContact? = nil, activated: Bool = true) {
        let summary = OfflinePaymentsSummary(payments)
        server = !activated ? "sandbox" : (contact?.isOnline == true ? "online" : "offline")
        lastServerContact = contact?.lastReached.map(Self.format)
        lastServerFailure = contact?.lastUnreachable.map(Self.format)
        storedCount = summary.outstandingCount
        storedTotals = summary.outstandingTotals.sorted { $0.key < $1.key }.map { code, units in
            JSONMoney(minorUnits: units, currency: code)
        }
        oldestStored = summary.oldestAcceptedAt.map(Self.format)
        settledCount = summary.settledCount
        declinedCount = summary.declinedCount
    }

    /// The terminal's own data: nil when it is not initialised (status still reports the radio).
    static func read(_ files: TerminalFiles) -> OfflineStatus? {
        guard let settings = try? files.loadSettings(), let journal = try? files.openJournal(),
            let payments = try? journal.offlinePayments()
        else { return nil }
        return OfflineStatus(payments, contact: try? journal.serverContact(), activated: settings.server != nil)
    }

    /// The same, with `server` as the server answers now: the journal only knows how the last
    /// call went, which may be hours old. Any answer, a refusal too, is online; silence within
    /// three seconds is offline.
    func checkingServer(_ files: TerminalFiles) async -> OfflineStatus {
        guard server != "sandbox", let url = try? files.loadSettings().server,
            let serverURL = try? HorizonServerClient.url(url)
        else { return self }
        var checked = self
        checked.serverURL = url
        do throws(ServerClientError) {
            _ = try await HorizonServerClient(serverURL: serverURL, timeout: .seconds(3)).anchor()
            checked.server = "online"
        } catch {
            if case .refused = error { checked.server = "online" } else { checked.server = "offline" }
        }
        return checked
    }

    var serverLine: String {
        switch (server, serverURL) {
        case ("sandbox", _): return "server    none (sandbox: settles in its own ledger)"
        case ("online", let url?): return "server    online: \(url) answers"
        case ("online", nil): return "server    online (last answer \(lastServerContact ?? "?"))"
        case ("offline", let url?):
            let last = lastServerContact.map { "last answer \($0)" } ?? "it never answered this terminal"
            return
                "server    offline: \(url) does not answer (\(last)); payments are accepted offline within the limits"
        default:
            let last = lastServerContact.map { "last answer \($0)" } ?? "never answered"
            let failure = lastServerFailure.map { ", unreachable at \($0)" } ?? ""
            return "server    offline (\(last)\(failure))"
        }
    }

    var summaryLine: String {
        guard storedCount > 0 else {
            return "offline   nothing stored (\(settledCount) forwarded and settled, \(declinedCount) declined)"
        }
        let totals = storedTotals.map(\.formatted).joined(separator: ", ")
        return
            "offline   \(storedCount) stored, total \(totals), oldest \(oldestStored ?? "?") (\(settledCount) settled, \(declinedCount) declined)"
    }

    static func format(_ time: UnixTime) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(time)))
    }
}

/// While `serve` runs: forwards the stored offline payments after each server call
/// that got an answer and every `interval`, one run at a time.
struct OfflineForwardingService: Service {
    let forwarding: OfflineForwarding
    let serverAnswered: AsyncStream<Void>
    let interval: Duration
    let logger: Logger

    func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in serverAnswered { await forward(forwarding) }
            }
            group.addTask {
                while !Task.isCancelled {
                    await forward(forwarding)
                    try? await Task.sleep(for: interval)
                }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }
    }

    private func forward(_ forwarding: OfflineForwarding) async {
        do {
            guard try forwarding.hasOutstanding() else { return }
            let report = try await forwarding.forwardStored()
            if !report.skipped { logger.notice("\(report)") }
        } catch {
            logger.error("offline payments could not be forwarded: \(error)")
        }
    }
}
