import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Server-driven collection with real programs: a server, an activated terminal running `serve`
/// (one connection to its server, no register on its socket) and a wallet on the simulated radio.
/// A POS creates an intent for the terminal; the terminal collects it, the wallet pays, the intent
/// succeeds with its order reference. A cancel while collecting stops the sale at the till; a
/// terminal that is not connected cannot be given one.
@Suite("Server-driven collection with real programs", .serialized, .offTheCooperativePool)
struct IntentCollectionProgramTests {
    static let password = "correct horse battery staple"

    /// The POS's side: the merchant admin's session, the terminal's id, plain HTTP.
    struct POS {
        let url: String
        let token: String
        let terminalID: String

        init(port: Int) throws {
            url = "http://127.0.0.1:\(port)"
            let session = try JSONHTTP.request(
                url + "/v1/merchant/sessions", method: "POST",
                json:
                    #"{"email": "\#(RemoteLedgerRig.email)", "password": "\#(IntentCollectionProgramTests.password)"}"#)
            token = try #require(session.object["token"] as? String, "\(session.body)")
            let terminals = try JSONHTTP.request(url + "/v1/merchant/terminals", token: token)
            let list = try #require(terminals.object["terminals"] as? [[String: Any]], "\(terminals.body)")
            terminalID = try #require(list.first?["terminalId"] as? String)
        }

        func create(_ reference: String, amount: Int = 1250) throws -> JSONHTTP.Response {
            try JSONHTTP.request(
                url + "/v1/merchant/payment-intents", method: "POST",
                json:
                    #"{"amount": \#(amount), "currency": "EUR", "reference": "\#(reference)", "terminalId": "\#(terminalID)"}"#,
                token: token, headers: ["Idempotency-Key": reference])
        }

        func intent(_ id: String) throws -> [String: Any] {
            try JSONHTTP.request(url + "/v1/merchant/payment-intents/\(id)", token: token).object
        }

        func cancel(_ id: String) throws -> JSONHTTP.Response {
            try JSONHTTP.request(url + "/v1/merchant/payment-intents/\(id)/cancel", method: "POST", token: token)
        }
    }

    @Test func anIntentIsCollectedPaidAndSucceedsWithItsReferenceAndACancelStopsTheSale() async throws {
        let rig = try RemoteLedgerRig()
        let pos = try POS(port: rig.port)
        // Not running serve: the terminal keeps no connection, so it cannot be given one.
        let offline = try pos.create("ORDER-0")
        #expect(offline.status == 409 && offline.body.contains("terminal_offline"), "\(offline.body)")

        let control = rig.sandbox.path("control.sock")
        let service = try startService(terminalDir: rig.terminalDir, socket: rig.socket, control: control)
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the service answers")
        var created: JSONHTTP.Response?
        #expect(
            await eventually {
                created = try? pos.create("ORDER-1")
                return created?.status == 201
            }, "the terminal connected: \(created?.body ?? "")")
        let id = try #require(created?.object["id"] as? String)
        // The POS needed no socket on the terminal box: the till advertises the intent's amount.
        #expect(await eventually { paymentState(at: control) == "waiting for a wallet" })
        #expect(try pos.intent(id)["status"] as? String == "collecting")
        let wallet = try Programs.run(
            "horizon-wallet",
            ["pay", "--yes", "--json", "--data-dir", rig.walletDir, "--radio-socket", rig.socket, "--timeout", "20"])
        #expect(wallet.status == 0, "\(wallet.standardError)")
        #expect(wallet.standardOutput.contains(id), "the wallet paid under the intent's id: \(wallet.standardOutput)")
        #expect(await eventually { (try? pos.intent(id)["status"] as? String) == "succeeded" })
        let paid = try pos.intent(id)
        let payment = try #require(paid["payment"] as? [String: Any], "\(paid)")
        #expect(payment["orderReference"] as? String == "ORDER-1")
        #expect(payment["amount"] as? Int == 1250)

        // Cancel while collecting: the sale at the till stops, the intent is canceled.
        #expect(await eventually { paymentState(at: control) == "idle" })
        let second = try pos.create("ORDER-2")
        let secondID = try #require(second.object["id"] as? String, "\(second.body)")
        #expect(await eventually { paymentState(at: control) == "waiting for a wallet" })
        let canceled = try pos.cancel(secondID)
        #expect(canceled.status == 200, "\(canceled.body)")
        #expect(await eventually { paymentState(at: control) == "idle" }, "the sale stopped at the till")
        #expect(try pos.intent(secondID)["status"] as? String == "canceled")
        // Once settled, a cancel is refused.
        let late = try pos.cancel(id)
        #expect(late.status == 409 && late.body.contains("payment_intent_not_cancelable"), "\(late.body)")

        // `status REF` on the register socket: the collected intent from the journal (its
        // reference journaled with it), confirmed by the server; the canceled one, which no wallet
        // confirmed here, from the server; an unknown reference from neither.
        let collected = try controlAnswer("status ORDER-1", at: control)
        #expect(collected.first == "id \(id.lowercased())", "\(collected)")
        #expect(collected.contains("reference ORDER-1") && collected.contains("source journal"), "\(collected)")
        #expect(collected.contains("result paid 12.50 0.00 12.50"), "\(collected)")
        #expect(collected.last == "server succeeded", "the intent's status: \(collected)")
        let fromServer = try controlAnswer("status ORDER-2", at: control)
        #expect(
            fromServer == [
                "id \(secondID.lowercased())", "type payment", "reference ORDER-2", "amount 12.50 EUR", "source server",
                "result canceled",
            ], "\(fromServer)")
        #expect(try controlAnswer("status \(secondID)", at: control) == fromServer)
        #expect(
            try controlAnswer("status ORDER-404", at: control) == [
                "error unknown order reference ORDER-404: no payment with it here nor at the server"
            ])
        // The command answers the same from the journal and the server, as JSON too.
        let command = try Programs.run(
            "horizon-terminal", ["status", "ORDER-2", "--json", "--data-dir", rig.terminalDir])
        #expect(command.status == 0, "\(command.standardError)")
        let object = try JSONSerialization.jsonObject(with: Data(command.standardOutput.utf8)) as? [String: String]
        #expect(object?["result"] == "canceled" && object?["source"] == "server", "\(command.standardOutput)")
    }

    /// Every line the service answers `request` with.
    private func controlAnswer(_ request: String, at control: String) throws -> [String] {
        let connection = try LineConnection.connect(to: control)
        connection.setReadTimeout(seconds: 20)
        connection.send(request)
        var lines: [String] = []
        while let line = connection.readLine() { lines.append(line) }
        return lines
    }
}

/// JSON over HTTP with URLSession, waited for on this (non-pool) thread.
enum JSONHTTP {
    struct Response: @unchecked Sendable {
        let status: Int
        let body: String
        var object: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
        }
    }

    static func request(
        _ url: String, method: String = "GET", json: String? = nil, token: String? = nil,
        headers: [String: String] = [:]
    ) throws -> Response {
        var request = URLRequest(url: try #require(URL(string: url)))
        request.httpMethod = method
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(json.utf8)
        }
        if let token { request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Response?
        URLSession.shared.dataTask(with: request) { data, response, _ in
            result = Response(
                status: (response as? HTTPURLResponse)?.statusCode ?? 0,
                body: String(decoding: data ?? Data(), as: UTF8.self))
            done.signal()
        }.resume()
        _ = done.wait(timeout: .now() + 30)
        return try #require(result, "no answer from \(url)")
    }
}
