import ArgumentParser
import AsyncHTTPClient
import Crypto
import Foundation
import HorizonServerClient
import NIOCore
import Synchronization

/// `horizon-bench intent-latency`: server-driven collection's budget, a POS's intent reaching the
/// terminal, measured against a running `horizon-server` (Benchmarks/intent-latency.sh starts one).
/// A terminal key is activated for the merchant and keeps its intent connection as `serve` does;
/// each run creates an intent for it and times from the create request's start until the pushed
/// intent is claimed (`collecting`: the moment the terminal starts advertising), then cancels it.
struct IntentLatency: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "intent-latency",
        abstract: "Time from a POS's intent created to the terminal collecting it (median; budget 200 ms).")

    @Option(help: "The server (plain http only to this machine).") var server: String
    @Option(help: "The merchant admin's e-mail.") var email: String
    @Option(help: "A file holding the merchant admin's password.") var passwordFile: String
    @Option(help: "Intents to time.") var intents = 50
    @Option(help: "Where to write the JSON result.") var output = "Benchmarks/results/intent-latency-latest.json"

    static let budgetMilliseconds = 200.0

    func drive() async throws {
        let password = try String(contentsOfFile: passwordFile, encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let url = try HorizonServerClient.url(server)
        let key = P256.Signing.PrivateKey()
        let terminal = try await HorizonServerClient(serverURL: url, signingKey: key).activateTerminal(
            email: email, password: password, label: "Bench till \(Int.random(in: 1000...9999))", key: key)
        let token =
            try await Self.json(
                url, "/v1/merchant/sessions", method: "POST",
                body: #"{"email": "\#(email)", "password": "\#(password)"}"#)["token"] as? String ?? ""
        let signed = HorizonServerClient(serverURL: url, signingKey: key)
        let (pushes, push) = AsyncStream.makeStream(of: (String, ContinuousClock.Instant).self)
        let connection = TerminalIntentConnection(serverURL: url, signingKey: key)
        let connected = Task {
            await connection.run { action in
                if case .collect(let intent) = action { push.yield((intent.id, .now)) }
            }
        }
        defer { connected.cancel() }
        var iterator = pushes.makeAsyncIterator()
        var pushed: [Double] = []
        var collecting: [Double] = []
        var run = 0
        while collecting.count < intents {
            run += 1
            let started = ContinuousClock.now
            let created = try await Self.json(
                url, "/v1/merchant/payment-intents", method: "POST",
                body:
                    #"{"amount": 100, "currency": "\#(terminal.currency)", "reference": "BENCH-\#(run)", "terminalId": "\#(terminal.terminalId)"}"#,
                token: token, headers: ["Idempotency-Key": "bench-\(UUID().uuidString)"])
            guard let id = created["id"] as? String else {
                // The connection is not up yet: the server says the terminal is offline.
                try await Task.sleep(for: .milliseconds(100))
                continue
            }
            guard let (pushedID, arrived) = await iterator.next(), pushedID == id else {
                throw ValidationError("the intent pushed is not the one created")
            }
            _ = try await signed.collectPaymentIntent(id: id)
            let claimed = ContinuousClock.now
            pushed.append(Self.milliseconds(arrived - started))
            collecting.append(Self.milliseconds(claimed - started))
            _ = try await Self.json(url, "/v1/merchant/payment-intents/\(id)/cancel", method: "POST", token: token)
        }
        let median = Self.median(collecting)
        let result: [String: Any] = [
            "measurement": "intent created -> terminal collecting",
            "intents": intents,
            "medianPushMilliseconds": Self.median(pushed),
            "medianCollectingMilliseconds": median,
            "p90CollectingMilliseconds": Self.percentile(collecting, 0.9),
            "generatedAt": ISO8601DateFormatter().string(from: Date()),
            // The same shape as every benchmark's budget lines (BENCHMARKS.md's table reads them).
            "budget": [
                [
                    "item": "server-driven collection: a POS's intent created -> the terminal collecting it (median)",
                    "measured": median, "limit": Self.budgetMilliseconds, "unit": "ms",
                    "met": median < Self.budgetMilliseconds,
                ] as [String: Any]
            ],
        ]
        let data = try JSONSerialization.data(withJSONObject: result, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: URL(fileURLWithPath: output))
        print(
            "intent created -> terminal collecting: median \(String(format: "%.1f", median)) ms over \(intents) (pushed: \(String(format: "%.1f", Self.median(pushed))) ms); budget < 200 ms: \(median < Self.budgetMilliseconds ? "met" : "NOT met")"
        )
    }

    static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }

    static func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction + 0.5))]
    }

    /// One JSON request; the answer's object (an error envelope included).
    static func json(
        _ url: URL, _ path: String, method: String, body: String? = nil, token: String? = nil,
        headers: [String: String] = [:]
    ) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: url.absoluteString.trimmingCharacters(in: ["/"]) + path)
        if method == "POST" { request.method = .POST }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        if let token { request.headers.add(name: "Authorization", value: "Bearer " + token) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return (try? JSONSerialization.jsonObject(with: Data(buffer: bytes))) as? [String: Any] ?? [:]
    }
}
