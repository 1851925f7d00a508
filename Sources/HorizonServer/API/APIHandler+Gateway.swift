import Foundation
import HorizonAPI
import HorizonObliviousHTTP
import Logging
import OpenAPIRuntime

/// The Oblivious HTTP gateway: the signed key configuration, and the relay of sealed wallet requests.
extension APIHandler {
    func getGatewayKeyConfig(_ input: Operations.GetGatewayKeyConfig.Input) async throws
        -> Operations.GetGatewayKeyConfig.Output
    {
        let signed = gateway.signedConfiguration
        return .ok(
            .init(
                body: .json(
                    .init(
                        keyConfig: Data(signed.configuration.encoded()).base64EncodedString(),
                        signature: Data(signed.signature).base64EncodedString(),
                        label: SignedGatewayKeyConfiguration.label))))
    }

    func relayThroughGateway(_ input: Operations.RelayThroughGateway.Input) async throws
        -> Operations.RelayThroughGateway.Output
    {
        let terminal = try await signingTerminal()
        if let wait = gateway.relayLimiter.take(for: terminal.id.rawValue, at: rateLimitClock()) {
            let seconds = max(1, Int(wait.components.seconds) + (wait.components.attoseconds > 0 ? 1 : 0))
            metrics.record(event: "gateway_relay_limited")
            throw APIError(
                .rateLimited,
                "terminal \(terminal.id) relayed its \(gateway.relaysPerMinute) requests of this minute; retry after \(seconds) s",
                headers: [.retryAfter: "\(seconds)"])
        }
        guard case .messageOhttpReq(let body) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be a sealed request (Content-Type: message/ohttp-req)")
        }
        let sealed: [UInt8]
        do { sealed = Array(try await Data(collecting: body, upTo: ObliviousHTTP.maximumSealedBytes)) } catch {
            throw APIError(
                .payloadTooLarge, "a sealed request is at most \(ObliviousHTTP.maximumSealedBytes) bytes")
        }
        let opened: ObliviousHTTPGateway.OpenedRequest
        do { opened = try gateway.gateway.open(sealed) } catch {
            metrics.record(event: "gateway_request_invalid")
            throw APIError(.gatewayRequestInvalid, "the sealed request cannot be opened: \(error)")
        }
        let logger = RequestScope.current?.logger ?? .init(label: "horizon.server.gateway")
        let response = await innerResponse(to: opened, logger: logger)
        let answer: [UInt8]
        do { answer = try opened.responseSealer.seal(response) } catch {
            // Too large even after the inner handler's own limit (headers): answer that, sealed.
            answer = try opened.responseSealer.seal(
                Self.sealedError(
                    APIError(
                        .gatewayResponseTooLarge,
                        "the answer is larger than a relayed answer may be; ask for less or send the request directly when online"
                    )))
        }
        metrics.record(event: "gateway_relayed")
        return .ok(.init(body: .messageOhttpRes(HTTPBody(answer))))
    }

    /// The inner request's response, or the refusal that takes its place; never thrown, so that
    /// every outcome travels sealed to the wallet alone.
    func innerResponse(to opened: ObliviousHTTPGateway.OpenedRequest, logger: Logger) async -> BinaryHTTPResponse {
        let request: BinaryHTTPRequest
        do { request = try BinaryHTTPRequest(decoding: opened.plaintext) } catch {
            return Self.sealedError(APIError(.invalidRequest, "the sealed request is not binary HTTP: \(error)"))
        }
        // A sealed request travels whole: there is no interim response to send, so an expectation
        // (`expect: 100-continue`) cannot be met and is refused (RFC 9458 section 5, RFC 9110 section 10.1.1).
        guard !request.headerFields.contains(where: { $0.name == "expect" }) else {
            return Self.sealedError(
                APIError(.invalidRequest, "a relayed request cannot carry an expect field; send it without one"))
        }
        let now = self.now()
        guard let dateText = request.value(of: "date"), let date = HTTPDate.parse(dateText) else {
            return Self.sealedError(
                APIError(
                    .invalidRequest, "a relayed request needs a date field (an HTTP date) to be checked for replay"))
        }
        // Compared without arithmetic on the caller's value, which could overflow.
        guard date >= now - gateway.window, date <= now + gateway.window else {
            return Self.sealedError(
                APIError(
                    .gatewayRequestExpired,
                    "the relayed request is dated \(dateText), more than \(gateway.window) s from the server's clock; check the device's clock and send a new request"
                ))
        }
        // The replay window lives in the database: every server process, and this one after a
        // restart, refuses a sealed request that one of them served.
        let fresh: Bool
        do {
            fresh = try await ledger.recordGatewayRequest(
                opened.encapsulatedKey, expiresAt: date + gateway.window, at: now)
        } catch {
            return Self.sealedError(APIError(error))
        }
        guard fresh else {
            metrics.record(event: "gateway_request_replayed")
            return Self.sealedError(
                APIError(
                    .gatewayRequestReplayed,
                    "this sealed request was already received once and was not served again; whether the first one changed anything, ask (e.g. the balance or the history)"
                ))
        }
        guard request.path.hasPrefix("/v1/"), request.path != "/v1/gateway", !request.path.hasPrefix("/v1/gateway?")
        else {
            return Self.sealedError(
                APIError(.invalidRequest, "a relayed request must be to an API path under /v1/ other than the gateway"))
        }
        logger.debug("relayed request", metadata: ["path": "\(request.path.prefix { $0 != "?" })"])
        do { return try await gateway.serve(request, logger: logger) } catch let error as APIError {
            return Self.sealedError(error)
        } catch {
            return Self.sealedError(
                APIError(.internalError, "the server could not complete the relayed request; send it again later"))
        }
    }

    /// An error as the inner response: the one envelope, as a direct request would get it.
    static func sealedError(_ error: APIError) -> BinaryHTTPResponse {
        let requestID = RequestScope.current?.id ?? ""
        var fields = [HTTPHeaderField(name: "content-type", value: "application/json; charset=utf-8")]
        for field in error.headers { fields.append(.init(name: field.name.canonicalName, value: field.value)) }
        return BinaryHTTPResponse(
            status: error.status.code, headerFields: fields, content: error.jsonBody(requestID: requestID))
    }
}
