import Foundation
import HorizonTestSupport
import Testing

/// One payment, one trace: the wallet's confirmation, the terminal's collection and its request
/// to the server, the server's request, settlement and ledger transaction, exported by three
/// processes to one OTLP/HTTP collector and joined by the ids the payment id derives and the
/// traceparent the terminal signs.
@Suite("Traces across the wallet, the terminal and the server", .serialized, .offTheCooperativePool)
struct TracesAcrossProgramsTests {
    struct Span {
        let service: String
        let name: String
        let traceID: String
        let spanID: String
        let parentSpanID: String?
        let attributes: [String: String]
    }

    static func spans(_ bodies: [Data]) -> [Span] {
        bodies.flatMap { body -> [Span] in
            let json = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
            let resources = json["resourceSpans"] as? [[String: Any]] ?? []
            return resources.flatMap { resource -> [Span] in
                let resourceAttributes = (resource["resource"] as? [String: Any])?["attributes"] as? [[String: Any]]
                let service = Self.attributes(resourceAttributes ?? [])["service.name"] ?? ""
                let scopes = resource["scopeSpans"] as? [[String: Any]] ?? []
                return scopes.flatMap { scope -> [Span] in
                    (scope["spans"] as? [[String: Any]] ?? []).map { span in
                        Span(
                            service: service, name: span["name"] as? String ?? "",
                            traceID: span["traceId"] as? String ?? "", spanID: span["spanId"] as? String ?? "",
                            parentSpanID: span["parentSpanId"] as? String,
                            attributes: Self.attributes(span["attributes"] as? [[String: Any]] ?? []))
                    }
                }
            }
        }
    }

    static func attributes(_ list: [[String: Any]]) -> [String: String] {
        var values: [String: String] = [:]
        for entry in list {
            guard let key = entry["key"] as? String, let value = entry["value"] as? [String: Any] else { continue }
            values[key] = (value["stringValue"] as? String) ?? (value["intValue"] as? String)
        }
        return values
    }

    static func environment(_ receiver: String, _ service: String) -> [String: String] {
        ["OTEL_EXPORTER_OTLP_ENDPOINT": receiver, "OTEL_SERVICE_NAME": service]
    }

    @Test func onePaymentIsOneTraceWithSpansFromAllThreePrograms() throws {
        let receiver = try OTLPReceiver()
        let rig = try RemoteLedgerRig(serverEnvironment: Self.environment(receiver.baseURL, "test-server"))
        let round = try rig.pay(
            "12.50", walletTimeout: 30, terminalEnvironment: Self.environment(receiver.baseURL, "test-terminal"),
            walletEnvironment: Self.environment(receiver.baseURL, "test-wallet"))
        round.expectPaid()
        let paymentID = try #require(try rig.transactions().last?.id)

        // The programs send within a fraction of a second of a span's end (and at their exit).
        let names: Set = ["confirm payment", "collect payment", "settle with server", "POST /v1/payments", "settle"]
        var spans: [Span] = []
        for _ in 0..<100 {
            spans = Self.spans(receiver.received)
            if names.isSubset(of: Set(spans.map(\.name))), spans.contains(where: { $0.name == "ledger transaction" }) {
                break
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        let payment = spans.filter {
            $0.name != "ledger transaction" || $0.attributes["horizon.payment_id"] == paymentID
        }
        let byName = Dictionary(payment.map { ($0.name, $0) }) { first, _ in first }
        let trace = try #require(byName["confirm payment"]?.traceID, "\(spans.map(\.name))")
        let inTrace = spans.filter { $0.traceID == trace }
        #expect(Set(inTrace.map(\.service)) == ["test-wallet", "test-terminal", "test-server"])
        #expect(Set(inTrace.map(\.name)).isSuperset(of: names.union(["ledger transaction"])), "\(inTrace.map(\.name))")

        // Each span's parent is the one before it, across the three processes.
        let confirm = try #require(byName["confirm payment"])
        #expect(confirm.service == "test-wallet" && confirm.parentSpanID == nil)
        #expect(confirm.attributes["horizon.payment_id"] == paymentID)
        #expect(confirm.attributes["horizon.amount_minor_units"] == "1250")
        #expect(confirm.attributes["horizon.outcome"] == "approved")
        let collect = try #require(byName["collect payment"])
        #expect(collect.service == "test-terminal" && collect.parentSpanID == confirm.spanID)
        let settleWithServer = try #require(byName["settle with server"])
        #expect(settleWithServer.parentSpanID == collect.spanID)
        #expect(settleWithServer.attributes["horizon.outcome"] == "approved")
        let request = try #require(byName["POST /v1/payments"])
        #expect(request.service == "test-server" && request.parentSpanID == settleWithServer.spanID)
        let settle = try #require(byName["settle"])
        #expect(settle.parentSpanID == request.spanID && settle.attributes["horizon.outcome"] == "approved")
        let ledger = try #require(inTrace.first { $0.name == "ledger transaction" })
        #expect(ledger.parentSpanID == settle.spanID)
        // No personal data: the wallet's registration (name, e-mail, phone) appears in no span.
        let text = receiver.received.map { String(decoding: $0, as: UTF8.self) }.joined()
        for personal in ["Alex", "alex@example.com", RemoteLedgerRig.phone, "owner@corner.example"] {
            #expect(!text.contains(personal))
        }

        // A collector that is down: the payment goes through as quickly, traces are dropped.
        let dead = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"]
        let before = receiver.received.count
        let second = try rig.pay("1.00", walletTimeout: 30, terminalEnvironment: dead, walletEnvironment: dead)
        second.expectPaid()
        #expect(second.terminalSeconds < 20, "the register waited \(second.terminalSeconds) s")
        try rig.expectSettledExactlyOnce(amounts: ["12.50", "1.00"], balance: 100_00 - 13_50)
        // The server still exports its own spans of that payment; the terminal and wallet send nothing.
        Thread.sleep(forTimeInterval: 0.5)
        let later = Self.spans(Array(receiver.received.dropFirst(before)))
        #expect(Set(later.map(\.service)).isSubset(of: ["test-server"]), "\(later.map(\.service))")
    }
}
