import ArgumentParser
import AsyncHTTPClient
import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import HorizonServerClient
import Synchronization

/// `horizon-bench scale-out`: the long scale-out proof against real server
/// processes (Tools/scale-out.sh starts them). Terminals are activated and wallets registered
/// through the servers' own endpoints; every payment id is signed by its wallet, submitted by its
/// terminal to every server at once, retried, and then the database is read back.
struct ScaleOut: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale-out",
        abstract: "Drive several Horizon server processes on one database and prove every payment ran exactly once.",
        discussion: """
            Needs running servers on one database and a merchant whose admin signs in with --email and --password-file: Tools/scale-out.sh sets all of that up (run that instead). Then:

            1. activates --terminals terminals through the activation endpoint (keys made here, kept in memory);
            2. registers one wallet per terminal through the registration endpoints (the one-time code read from the database's outbox, where the sandbox sends it) and tops it up (a deposit, as `horizon-server wallets top-up` does);
            3. each terminal pays its share of --payments one after another: every payment is signed by its wallet and sent to every --server at once (--copies times each), each copy retried on the next server until answered; every --timeout-every'th payment first goes out with a client timeout of --timeout-ms (the answer is abandoned; the server may still execute it); after the answers, --late-retries more;
            4. checks from the database: one transaction row per id, approved, with the answered reference and the signed amount, tip and wallet; nothing else for the merchant; postings sum to zero per currency; no negative wallet; each wallet debited exactly its payments, the merchant credited their total; LedgerAudit finds nothing.

            Prints a summary and progress (standard error), writes --result-file (JSON), exits 1 if any check fails.
            """)

    @Option(name: .customLong("server"), help: "A server's base URL; repeat for each process (at least one).")
    var servers: [String] = []

    @Option(help: "The servers' database, to check from: postgres://… or sqlite:PATH.")
    var database: String

    @Option(help: "The merchant admin's e-mail.")
    var email: String

    @Option(help: "A file holding the merchant admin's password (one line).")
    var passwordFile: String

    @Option(help: "The merchant's currency (ISO 4217).")
    var currency = "EUR"

    @Option(help: "Payments in all (shared round-robin among the terminals).")
    var payments = 1000

    @Option(help: "Terminals, each with its own wallet, paying in parallel.")
    var terminals = 10

    @Option(help: "Submissions of each id sent at once to each server.")
    var copies = 1

    @Option(help: "Late retries of each id after it was answered.")
    var lateRetries = 1

    @Option(help: "Every this many payments, one first goes out with a client timeout it cannot meet (0: never).")
    var timeoutEvery = 10

    @Option(help: "The deliberate client timeout, in milliseconds.")
    var timeoutMs = 2

    @Option(help: "Attempts per copy before giving up on an unanswered submission.")
    var maximumAttempts = 40

    @Option(
        help:
            "A pause between one terminal's payments, in milliseconds (0: none): keeps a run going while something is done to the servers."
    )
    var pauseMs = 0

    @Option(help: "With --pause-ms: pause only until this file exists, then go on at full speed.")
    var pauseUntilFile: String?

    @Flag(
        help:
            "Add a check that no submission failed at all (Tools/scale-out.sh --rolling-upgrade: a drained and restarted server must cost the terminals nothing)."
    )
    var expectNoFailures = false

    // Not --output: that is the parent command's option, which ArgumentParser would give it.
    @Option(help: "Where to write the JSON result.")
    var resultFile = "Benchmarks/results/scale-out-latest.json"

    @Option(help: "A note on how the servers were run, for the result (Tools/scale-out.sh sets it).")
    var setup: String?

    @Option(
        name: .customLong("server-pid"),
        help: ArgumentHelp(
            "A server process on this machine whose CPU time to read just before and after the payments; repeat for each (Tools/scale-out.sh passes them). The result then has the servers' CPU per payment.",
            valueName: "pid"))
    var serverPIDs: [Int32] = []

    @Option(
        help: ArgumentHelp(
            "Hold payments from this number on until --hold-until-file exists (Tools/scale-out.sh --kill-restart: the kill then comes at this point however fast the run is).",
            valueName: "n"))
    var holdAt: Int?

    @Option(help: "The file whose creation ends the hold (with --hold-at).")
    var holdUntilFile: String?

    @Option(
        help: ArgumentHelp(
            "A file that will hold the time (seconds since 1970) the database's primary was killed (Tools/scale-out.sh --failover writes it); the summary then counts the payments approved before it, those left unanswered and their retries.",
            valueName: "file"))
    var primaryKilledFile: String?

    mutating func validate() throws {
        guard !servers.isEmpty else { throw ValidationError("give at least one --server URL") }
        for server in servers {
            do { _ = try HorizonServerClient.url(server) } catch { throw ValidationError("--server: \(error)") }
        }
        guard (1...1_000_000).contains(payments) else { throw ValidationError("--payments must be 1 to 1000000") }
        guard (1...500).contains(terminals) else { throw ValidationError("--terminals must be 1 to 500") }
        guard (1...10).contains(copies) else { throw ValidationError("--copies must be 1 to 10") }
        guard (0...10).contains(lateRetries) else { throw ValidationError("--late-retries must be 0 to 10") }
        guard timeoutEvery >= 0 else { throw ValidationError("--timeout-every must be 0 or more") }
        guard (1...10_000).contains(timeoutMs) else { throw ValidationError("--timeout-ms must be 1 to 10000") }
        guard (0...60_000).contains(pauseMs) else { throw ValidationError("--pause-ms must be 0 to 60000") }
        guard (1...1000).contains(maximumAttempts) else {
            throw ValidationError("--maximum-attempts must be 1 to 1000")
        }
        guard (holdAt == nil) == (holdUntilFile == nil) else {
            throw ValidationError("--hold-at and --hold-until-file go together")
        }
        if let holdAt, !(0..<payments).contains(holdAt) {
            throw ValidationError("--hold-at must be 0 to --payments - 1")
        }
        for pid in serverPIDs where ProcessCPU.nanoseconds(of: pid) == nil {
            throw ValidationError("--server-pid \(pid): no such process whose CPU time can be read")
        }
        guard database.hasPrefix("sqlite:") || database.hasPrefix("postgres://") || database.hasPrefix("postgresql://")
        else { throw ValidationError("--database must be sqlite:PATH or a postgres:// URL") }
    }

    func run() async throws { try await drive() }

    /// The run itself (main.swift calls it by this name: see there).
    func drive() async throws {
        let money: Currency
        do { money = try Currency(code: currency.uppercased()) } catch {
            throw ValidationError("--currency \(self.currency) is not a supported ISO 4217 currency")
        }
        let password = try ServerEnrollment.password(file: passwordFile, option: "--password-file")
        let urls = try servers.map { text in
            do { return try HorizonServerClient.url(text) } catch { throw BenchmarkError("\(error)") }
        }
        let ledger = try await ServerEnrollment.openLedger(database)
        // A connection per simulated terminal and copy in flight, as that many devices would
        // have: the process's shared client keeps 8 per server, which would cap the load at 8.
        let http = HorizonServerClient.makeHTTPClient(connectionsPerServer: terminals * max(1, copies) + 8)
        do {
            let report = try await ScaleOutRun(
                command: self,
                enrollment: ServerEnrollment(
                    urls: urls, http: http, ledger: ledger, email: email, password: password, currency: money)
            ).run()
            await ledger.close()
            try? await http.shutdown()
            try write(report)
            print(report.table())
            if !report.passed {
                Progress.note(
                    "scale-out: FAILED (\(report.checks.filter { !$0.passed }.map(\.name).joined(separator: "; ")))")
                throw ExitCode(1)
            }
        } catch {
            await ledger.close()
            try? await http.shutdown()
            throw error
        }
    }

    func write(_ report: ScaleOutReport) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let url = URL(fileURLWithPath: resultFile)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try encoder.encode(report).write(to: url)
        Progress.note("scale-out: wrote \(resultFile)")
    }
}

/// One run: setup through the endpoints, the payments, the checks.
struct ScaleOutRun {
    let command: ScaleOut
    /// The servers, the run's own HTTP client (a connection for each terminal) and the database.
    let enrollment: ServerEnrollment
    var urls: [URL] { enrollment.urls }
    var ledger: Ledger { enrollment.ledger }
    var currency: Currency { enrollment.currency }

    struct Participant: Sendable {
        let terminal: TerminalIdentity
        let walletKey: P256.Signing.PrivateKey
        let walletID: WalletID
        let topUp: Int64
    }

    func run() async throws -> ScaleOutReport {
        let started = Date()
        Progress.note("scale-out: activating \(command.terminals) terminals and registering their wallets")
        let plan = (0..<command.payments).map { Self.terms(of: $0) }
        var owed = [Int64](repeating: 0, count: command.terminals)
        for (index, terms) in plan.enumerated() { owed[index % command.terminals] += terms.amount + terms.tip }
        let participants = try await withThrowingTaskGroup(of: (Int, Participant).self) { group in
            for index in 0..<command.terminals {
                let topUp = owed[index] + 1_000
                group.addTask {
                    let enrolled = try await enrollment.enroll(index, label: "Scale-out", topUp: topUp)
                    return (
                        index,
                        Participant(
                            terminal: enrolled.terminal, walletKey: enrolled.walletKey, walletID: enrolled.walletID,
                            topUp: topUp)
                    )
                }
            }
            var found: [Int: Participant] = [:]
            for try await (index, participant) in group { found[index] = participant }
            return (0..<command.terminals).compactMap { found[$0] }
        }
        let merchantID = try await merchant()

        Progress.note(
            "scale-out: \(command.payments) payments from \(command.terminals) terminals to \(urls.count) servers at once"
        )
        let tally = ScaleOutTally()
        let progress = Task {
            let start = ContinuousClock.now
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                if Task.isCancelled { break }
                let snapshot = tally.snapshot()
                let seconds = (ContinuousClock.now - start).seconds
                Progress.note(
                    "scale-out: \(snapshot.done)/\(command.payments) payments, \(snapshot.sent) submissions, "
                        + "\(Int(Double(snapshot.done) / max(seconds, 0.001)))/s, failures so far \(snapshot.failed)")
            }
        }
        // The servers' CPU over exactly the payments (not the set-up before nor the checks after).
        let serverCPUBefore = command.serverPIDs.map(ProcessCPU.nanoseconds(of:))
        let drive = ContinuousClock.now
        let hold = ScaleOutHold()
        let records = await withTaskGroup(of: [ScaleOutPayment].self) { group in
            for index in 0..<command.terminals {
                let participant = participants[index]
                let mine = stride(from: index, to: command.payments, by: command.terminals).map { ($0, plan[$0]) }
                group.addTask {
                    var records: [ScaleOutPayment] = []
                    for (number, terms) in mine {
                        if let holdAt = command.holdAt, let file = command.holdUntilFile, number >= holdAt {
                            await hold.wait(at: holdAt, until: file)
                        }
                        records.append(await pay(number, terms, participant, tally: tally))
                        let pausing = command.pauseUntilFile.map { !FileManager.default.fileExists(atPath: $0) } ?? true
                        if command.pauseMs > 0, pausing {
                            try? await Task.sleep(for: .milliseconds(command.pauseMs))
                        }
                    }
                    return records
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        let elapsed = (ContinuousClock.now - drive).seconds
        let serverCPUAfter = command.serverPIDs.map(ProcessCPU.nanoseconds(of:))
        progress.cancel()
        Progress.note("scale-out: \(records.count) payments in \(elapsed.formatted(1)) s; checking the database")

        var killedAt: Date?
        if let file = command.primaryKilledFile {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8),
                let seconds = Double(text.trimmingCharacters(in: .whitespacesAndNewlines))
            else { throw BenchmarkError("\(file) holds no time: the primary was not killed during the run") }
            killedAt = Date(timeIntervalSince1970: seconds)
        }
        let checks = try await ScaleOutChecks(
            ledger: ledger, merchant: merchantID, records: records, participants: participants,
            currency: currency, primaryKilledAt: killedAt
        ).run()
        let snapshot = tally.snapshot()
        var results = checks.results
        if command.expectNoFailures {
            let failures = snapshot.failures.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
            results.append(
                CheckResult(
                    name: "no submission failed", passed: failures.isEmpty,
                    detail: failures.isEmpty ? "ok" : "failed submissions: " + failures.joined(separator: ", ")))
        }
        return ScaleOutReport(
            generatedAt: ISO8601DateFormatter().string(from: started), machine: .current(),
            setup: command.setup ?? "servers given on the command line",
            servers: urls.map(\.absoluteString), terminals: command.terminals, payments: records.count,
            copiesPerServer: command.copies, lateRetries: command.lateRetries, timeoutEvery: command.timeoutEvery,
            timeoutMilliseconds: command.timeoutMs, submissions: snapshot.sent,
            duplicatesSent: snapshot.sent - records.count, deliberateTimeouts: snapshot.deliberateTimeouts,
            answers: snapshot.answers, retriesAfterFailure: snapshot.retries, failuresByKind: snapshot.failures,
            executions: checks.executions, conflictingAnswers: checks.conflictingAnswers,
            seconds: elapsed, paymentsPerSecond: Double(records.count) / max(elapsed, 0.001),
            paymentLatencyMilliseconds: Summary(records.compactMap(\.firstAnswerMilliseconds)),
            requestLatencyMilliseconds: Summary(snapshot.requestMilliseconds),
            failover: checks.failover,
            serverCPU: ScaleOutServerCPU(before: serverCPUBefore, after: serverCPUAfter, payments: records.count),
            checks: results)
    }

    /// Amount and tip of payment `number`: varied, so a payment booked under another id shows.
    static func terms(of number: Int) -> (amount: Int64, tip: Int64) {
        (Int64(100 + (number * 37) % 900), Int64((number % 4) * 25))
    }

    func client(_ server: Int, key: P256.Signing.PrivateKey? = nil, timeout: Duration = .seconds(30))
        -> HorizonServerClient
    {
        enrollment.client(server, key: key, timeout: timeout)
    }

    func merchant() async throws -> MerchantID {
        guard let merchant = try await ledger.merchant(adminEmail: command.email) else {
            throw BenchmarkError("no merchant with admin e-mail \(command.email) in \(command.database)")
        }
        return merchant.id
    }

    /// One payment as a terminal that keeps trying: the deliberate timeout, then every server at
    /// once, each copy retried until answered, then the late retries.
    func pay(_ number: Int, _ terms: (amount: Int64, tip: Int64), _ participant: Participant, tally: ScaleOutTally)
        async
        -> ScaleOutPayment
    {
        var record = ScaleOutPayment(
            number: number, wallet: participant.walletID.rawValue, amount: terms.amount, tip: terms.tip)
        let submission: Components.Schemas.PaymentSubmission
        do {
            let signed = try signedConfirm(participant, terms)
            record.paymentID = signed.paymentID.bytes.hexString
            submission = Self.submission(signed)
        } catch {
            record.failures.append("could not sign: \(error)")
            tally.finished(failed: true)
            return record
        }
        let key = participant.terminal.signingKey
        if command.timeoutEvery > 0, number % command.timeoutEvery == 0 {
            // The answer is abandoned: the server may or may not have executed it; the copies
            // below must get the one stored result either way.
            let impatient = client(number, key: key, timeout: .milliseconds(command.timeoutMs))
            let answer = await attempt(impatient, submission)
            tally.sent(deliberateTimeout: true)
            if case .answered(let result, let milliseconds) = answer {
                record.answers.append(result.reference)
                record.approved = record.approved && result.outcome == .approved
                tally.answered(milliseconds)
            } else {
                tally.failed(answer.kind, retried: false)
            }
        }
        let start = ContinuousClock.now
        let copies = urls.count * command.copies
        let answers = await withTaskGroup(of: CopyOutcome.self) { group in
            for copy in 0..<copies {
                group.addTask {
                    await submitUntilAnswered(submission, key: key, firstServer: copy, start: start, tally: tally)
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        for _ in 0..<command.lateRetries {
            let late = await submitUntilAnswered(
                submission, key: key, firstServer: number + 1, start: start, tally: tally)
            record.lateAnswers.append(late.reference)
            if let failure = late.failure { record.failures.append("late retry: \(failure)") }
            if !late.approved { record.approved = false }
        }
        for answer in answers {
            record.answers.append(answer.reference)
            record.unansweredAttempts += answer.unansweredAttempts
            if answer.approved, let at = answer.answeredAt {
                record.firstApprovedAt = min(record.firstApprovedAt ?? at, at)
            }
            if !answer.approved { record.approved = false }
            if let failure = answer.failure { record.failures.append(failure) }
            if let firstAnswer = answer.milliseconds {
                record.firstAnswerMilliseconds = min(record.firstAnswerMilliseconds ?? .infinity, firstAnswer)
            }
        }
        tally.finished(failed: !record.failures.isEmpty)
        return record
    }

    /// What became of one copy of a submission.
    struct CopyOutcome: Sendable {
        /// The answered reference; nil when never answered or refused.
        let reference: Int64?
        let approved: Bool
        /// From `start` (all copies going out) to this copy's answer.
        let milliseconds: Double?
        /// Why it got no usable answer.
        let failure: String?
        /// Attempts that got no answer (a timeout, a cut connection, 503) before the last one.
        var unansweredAttempts = 0
        /// When the answer came (wall clock: compared with when the primary was killed).
        var answeredAt: Date?
    }

    /// Sends one copy until a server answers it, moving to the next server after each failure.
    func submitUntilAnswered(
        _ submission: Components.Schemas.PaymentSubmission, key: P256.Signing.PrivateKey, firstServer: Int,
        start: ContinuousClock.Instant, tally: ScaleOutTally
    ) async -> CopyOutcome {
        var last = "never sent"
        for attempt in 0..<command.maximumAttempts {
            let answer = await self.attempt(client(firstServer + attempt, key: key), submission)
            tally.sent(deliberateTimeout: false)
            switch answer {
            case .answered(let result, let milliseconds):
                tally.answered(milliseconds)
                return CopyOutcome(
                    reference: result.reference, approved: result.outcome == .approved,
                    milliseconds: (ContinuousClock.now - start).milliseconds, failure: nil,
                    unansweredAttempts: attempt, answeredAt: Date())
            case .refused(let status, let code, let message) where status < 500 && status != 429:
                // A refusal a retry cannot change (payment_conflict, terms_mismatch): a failure.
                tally.failed(answer.kind, retried: false)
                return CopyOutcome(
                    reference: nil, approved: false, milliseconds: nil,
                    failure: "refused \(status) \(code): \(message)",
                    unansweredAttempts: attempt)
            default:
                last = answer.description
                tally.failed(answer.kind, retried: attempt + 1 < command.maximumAttempts)
                // Back off a little, growing: a server being restarted needs a moment.
                try? await Task.sleep(for: .milliseconds(min(10 * (attempt + 1), 500)))
            }
        }
        return CopyOutcome(
            reference: nil, approved: false, milliseconds: nil,
            failure: "no answer after \(command.maximumAttempts) attempts; last: \(last)",
            unansweredAttempts: command.maximumAttempts)
    }

    enum Answer: CustomStringConvertible {
        case answered(Components.Schemas.PaymentResult, milliseconds: Double)
        case refused(status: Int, code: String, message: String)
        case timedOut
        case unreachable(String)
        case other(String)

        var kind: String {
            switch self {
            case .answered: "answered"
            case .refused(let status, let code, _): "refused \(status) \(code)"
            case .timedOut: "timed out"
            case .unreachable: "unreachable"
            case .other: "other"
            }
        }

        var description: String {
            switch self {
            case .answered: "answered"
            case .refused(let status, let code, let message): "refused \(status) \(code): \(message)"
            case .timedOut: "timed out"
            case .unreachable(let reason): "unreachable: \(reason)"
            case .other(let reason): reason
            }
        }
    }

    func attempt(_ client: HorizonServerClient, _ submission: Components.Schemas.PaymentSubmission) async -> Answer {
        let start = ContinuousClock.now
        do {
            let result = try await client.submitPayment(submission)
            return .answered(result, milliseconds: (ContinuousClock.now - start).milliseconds)
        } catch {
            switch error {
            case .refused(let status, let code, let message, _):
                return .refused(status: status, code: code, message: message)
            case .timedOut: return .timedOut
            case .unreachable(let reason): return .unreachable(reason)
            default: return .other("\(error)")
            }
        }
    }

    /// A Confirm as the wallet signs it (amount, tip, a fresh payment id) for this terminal.
    func signedConfirm(_ participant: Participant, _ terms: (amount: Int64, tip: Int64)) throws -> Confirm {
        var generator = SystemRandomNumberGenerator()
        let unsigned = try Confirm(
            sessionID: SessionID.random(using: &generator),
            terminalKeyDigest: DigestBytes(bytes: participant.terminal.keyDigest),
            walletKey: PublicKeyBytes(bytes: Array(participant.walletKey.publicKey.x963Representation)),
            offerDigest: DigestBytes(bytes: Array(SHA256.hash(data: Data("scale-out offer".utf8)))),
            amount: Money(minorUnits: terms.amount, currency: currency),
            tip: Money(minorUnits: terms.tip, currency: currency),
            paymentID: PaymentID.random(using: &generator), walletNonce: Nonce.random(using: &generator),
            expiresAt: Ledger.now() + 3600)
        let signature = try participant.walletKey.signature(for: unsigned.signedBytes)
        return unsigned.withSignature(try SignatureBytes(bytes: Array(signature.rawRepresentation)))
    }

    /// What the terminal submits: the wallet's signed Confirm and the terms it states.
    static func submission(_ confirm: Confirm) -> Components.Schemas.PaymentSubmission {
        .init(
            confirmation: Data(SessionMessage.confirm(confirm).encoded()).base64EncodedString(),
            paymentId: confirm.paymentID.bytes.hexString, sessionId: Int64(bitPattern: confirm.sessionID.rawValue),
            walletKey: Data(confirm.walletKey.bytes).base64EncodedString(), amount: confirm.amount.minorUnits,
            tip: confirm.tip.minorUnits, currency: confirm.amount.currency.code, registerUser: "scale-out")
    }
}

/// What the driver saw of one payment.
struct ScaleOutPayment: Sendable {
    let number: Int
    let wallet: String
    let amount: Int64
    let tip: Int64
    var paymentID = ""
    /// The reference of every answer (nil: that copy was never answered or was refused).
    var answers: [Int64?] = []
    var lateAnswers: [Int64?] = []
    var approved = true
    var failures: [String] = []
    var firstAnswerMilliseconds: Double?
    /// Submissions of this id that got no answer (retried with the same id).
    var unansweredAttempts = 0
    /// When the terminal first had an approval for it.
    var firstApprovedAt: Date?
}

/// Counters the progress line and the summary read, shared by every terminal's task.
final class ScaleOutTally: Sendable {
    struct State: Sendable {
        var sent = 0
        var deliberateTimeouts = 0
        var answers = 0
        var retries = 0
        var done = 0
        var failed = 0
        var failures: [String: Int] = [:]
        var requestMilliseconds: [Double] = []
    }

    private let state = Mutex(State())

    func sent(deliberateTimeout: Bool) {
        state.withLock {
            $0.sent += 1
            if deliberateTimeout { $0.deliberateTimeouts += 1 }
        }
    }

    func answered(_ milliseconds: Double) {
        state.withLock {
            $0.answers += 1
            $0.requestMilliseconds.append(milliseconds)
        }
    }

    func failed(_ kind: String, retried: Bool) {
        state.withLock {
            $0.failures[kind, default: 0] += 1
            if retried { $0.retries += 1 }
        }
    }

    func finished(failed: Bool) {
        state.withLock {
            $0.done += 1
            if failed { $0.failed += 1 }
        }
    }

    func snapshot() -> State { state.withLock { $0 } }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    var milliseconds: Double { seconds * 1000 }
}

/// Holds every terminal's next payment at one point of the run until a file exists: what lets
/// Tools/scale-out.sh SIGKILL a server at a known point however fast the machine is (payments
/// still in flight on other terminals are cut by the kill; payments after it meet the dead server
/// until it is restarted).
final class ScaleOutHold: Sendable {
    private let announced = Mutex(false)

    func wait(at number: Int, until file: String) async {
        let first = announced.withLock { announced in
            defer { announced = true }
            return !announced
        }
        if first { Progress.note("scale-out: holding at payment \(number) until \(file) exists") }
        while !FileManager.default.fileExists(atPath: file) {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}
