import ArgumentParser
import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// The cryptography `horizon-server` must do to settle one payment, called directly on
/// swift-crypto with nothing around it: the denominator of "server CPU per payment within 2.5x
/// of its cryptography".
///
/// It repeats what the server does for `POST /v1/payments` (the signed-request middleware, then
/// `submitPayment`), on inputs of the same sizes (a real submission as the terminal sends it,
/// built once beforehand), each key decoded once:
///
/// | operation | count | where |
/// |---|---|---|
/// | SHA-256 | 3 | the request body (its digest is a signed line), the terminal's key (the Confirm names its digest), the Confirm's signed bytes (the ledger's content digest) |
/// | public key decoding | 2 | the terminal's key (from the `HorizonSignature` header), the wallet's (from the Confirm) |
/// | ECDSA P-256 verify | 2 | the terminal's request signature, the wallet's Confirm signature |
/// | ECDSA P-256 sign | 1 | the answer (`SettlementSignature`, with the issuer key the terminal pinned) |
final class ServerCryptoBaseline {
    static let inventory = ["sha256": 3, "publicKeyDecoding": 2, "ecdsaVerify": 2, "ecdsaSign": 1]

    private let issuerKey = P256.Signing.PrivateKey()
    private let terminalKeyBytes: [UInt8]
    private let walletKeyBytes: [UInt8]
    /// The submission's JSON body, as the terminal sends it.
    let body: [UInt8]
    /// The request's signed lines (label, method, path, time, nonce, the body's digest).
    let requestSignedBytes: [UInt8]
    private let requestSignature: [UInt8]
    let confirmSignedBytes: [UInt8]
    private let confirmSignature: [UInt8]
    /// The bytes of the answer the server signs (`SettlementSignature.signedBytes`).
    let resultSignedBytes: [UInt8]

    init() throws {
        let terminalKey = P256.Signing.PrivateKey()
        let walletKey = P256.Signing.PrivateKey()
        terminalKeyBytes = Array(terminalKey.publicKey.x963Representation)
        walletKeyBytes = Array(walletKey.publicKey.x963Representation)
        var random = SystemRandomNumberGenerator()
        let currency = try Currency(code: "EUR")
        let unsigned = try Confirm(
            sessionID: SessionID.random(using: &random),
            terminalKeyDigest: DigestBytes(bytes: Array(SHA256.hash(data: terminalKeyBytes))),
            walletKey: PublicKeyBytes(bytes: walletKeyBytes),
            offerDigest: DigestBytes(bytes: Array(SHA256.hash(data: Data("offer".utf8)))),
            amount: Money(minorUnits: 1250, currency: currency), tip: Money(minorUnits: 150, currency: currency),
            paymentID: PaymentID.random(using: &random), walletNonce: Nonce.random(using: &random),
            expiresAt: Shop.wallClock + 3600)
        confirmSignedBytes = unsigned.signedBytes
        confirmSignature = Array(try walletKey.signature(for: confirmSignedBytes).rawRepresentation)
        let confirm = unsigned.withSignature(try SignatureBytes(bytes: confirmSignature))
        // The body the scale-out driver's terminals send (the same submission, JSON-encoded).
        body = Array(try JSONEncoder().encode(ScaleOutRun.submission(confirm)))
        let signature = try RequestSignature.sign(
            method: "POST", path: "/v1/payments", body: body, with: terminalKey, time: Shop.wallClock)
        requestSignedBytes = RequestSignature.signedBytes(
            method: "POST", path: "/v1/payments", time: signature.time, nonce: signature.nonce, body: body)
        requestSignature = signature.signature
        var result = Components.Schemas.PaymentResult(
            paymentId: confirm.paymentID.bytes.hexString, outcome: .approved, amount: 1250, tip: 150, currency: "EUR",
            sessionId: Int64(bitPattern: confirm.sessionID.rawValue), settledAt: Shop.wallClock,
            transactionType: .payment)
        result.reference = 1_234_567
        result.bonusPointsEarned = 12
        result.bonusPointsBalance = 1200
        resultSignedBytes = SettlementSignature.signedBytes(result)
    }

    /// The server's cryptography for one payment. Throws if a check fails, which would mean
    /// this replay is not doing the work it claims to.
    func runOnce() throws {
        // The signed-request middleware: the body's digest, the terminal's key, its signature.
        _ = SHA256.hash(data: body)
        let terminalPublic = try P256.Signing.PublicKey(x963Representation: terminalKeyBytes)
        guard
            terminalPublic.isValidSignature(
                try P256.Signing.ECDSASignature(rawRepresentation: requestSignature), for: requestSignedBytes)
        else { throw BenchmarkError("request signature") }
        // The submission: the wallet's signature over its Confirm, the terminal it names, the
        // ledger's content digest.
        let walletPublic = try P256.Signing.PublicKey(x963Representation: walletKeyBytes)
        guard
            walletPublic.isValidSignature(
                try P256.Signing.ECDSASignature(rawRepresentation: confirmSignature), for: confirmSignedBytes)
        else { throw BenchmarkError("confirmation signature") }
        _ = SHA256.hash(data: terminalKeyBytes)
        _ = SHA256.hash(data: confirmSignedBytes)
        // The answer, signed with the issuer key.
        _ = try issuerKey.signature(for: resultSignedBytes)
    }

    /// Process CPU of `iterations` runs, one reading each, in milliseconds (after a warm-up).
    func measure(iterations: Int) throws -> [Double] {
        for _ in 0..<min(iterations, 20) { try runOnce() }
        var readings: [Double] = []
        readings.reserveCapacity(iterations)
        for _ in 0..<iterations {
            let start = Clocks.processCPU()
            try runOnce()
            readings.append(Double(Clocks.processCPU() - start) / 1_000_000)
        }
        return readings
    }
}

/// `horizon-bench server-crypto`: the server's cryptography per payment alone, as a median over
/// many iterations (Benchmarks/server-throughput.sh runs it beside each level's payments).
struct ServerCrypto: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "server-crypto",
        abstract: "Time the cryptography horizon-server must do for one payment, alone (median CPU per payment).",
        discussion: """
            Two ECDSA P-256 verifications (the terminal's request signature, the wallet's Confirm), one \
            signature (the server's answer), two public key decodings and three SHA-256 digests, on inputs \
            of a real submission's sizes. Writes --result-file (JSON) and prints one line.
            """)

    // Not --iterations: that is the parent command's option, which ArgumentParser would give it.
    @Option(help: "Payments' worth of cryptography to time, one reading each.")
    var repetitions = 2000

    @Option(help: "Where to write the JSON result.")
    var resultFile = "Benchmarks/results/server-crypto-latest.json"

    mutating func validate() throws {
        guard (1...1_000_000).contains(repetitions) else {
            throw ValidationError("--repetitions must be 1 to 1000000")
        }
    }

    struct Result: Codable {
        let generatedAt: String
        let machine: MachineDescription
        let iterations: Int
        /// What one payment's server-side cryptography is (`ServerCryptoBaseline.inventory`).
        let cryptoOperations: [String: Int]
        let inputBytes: [String: Int]
        let serverCryptoMilliseconds: Summary
        /// The median of `serverCryptoMilliseconds`: what the budget line divides by.
        let serverCryptoMillisecondsPerPayment: Double
    }

    func run() throws {
        #if DEBUG
            Progress.note("warning: this is a debug build; build with -c release for numbers that mean something")
        #endif
        let baseline = try ServerCryptoBaseline()
        let readings = try baseline.measure(iterations: repetitions)
        let summary = Summary(readings)
        let result = Result(
            generatedAt: ISO8601DateFormatter().string(from: Date()), machine: .current(), iterations: repetitions,
            cryptoOperations: ServerCryptoBaseline.inventory,
            inputBytes: [
                "requestBody": baseline.body.count, "requestSignedLines": baseline.requestSignedBytes.count,
                "confirmSigned": baseline.confirmSignedBytes.count, "resultSigned": baseline.resultSignedBytes.count,
            ],
            serverCryptoMilliseconds: summary, serverCryptoMillisecondsPerPayment: summary.median)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let url = URL(fileURLWithPath: resultFile)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try encoder.encode(result).write(to: url)
        print(
            "server cryptography per payment: median \(summary.median.formatted(3)) ms, p90 \(summary.p90.formatted(3)) ms over \(repetitions) repetitions"
        )
    }
}

/// The CPU time of another process on this machine (a server the benchmark did not start), in
/// nanoseconds: user and system, every thread, including those that ended. Its per-process CPU
/// clock counts in nanoseconds; /proc/PID/stat's clock ticks (10 ms) are the fallback.
enum ProcessCPU {
    static func nanoseconds(of pid: Int32) -> Int64? {
        var clock = clockid_t()
        var spec = timespec()
        if clock_getcpuclockid(pid, &clock) == 0, clock_gettime(clock, &spec) == 0 {
            return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
        }
        // Fields 14 and 15 (utime, stime) after the command name, which is in parentheses and may hold spaces.
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int64(fields[11]), let system = Int64(fields[12]) else { return nil }
        let ticks = Int64(sysconf(Int32(_SC_CLK_TCK)))
        return (user + system) * 1_000_000_000 / max(ticks, 1)
    }
}
