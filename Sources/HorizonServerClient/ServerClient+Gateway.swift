import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonObliviousHTTP
import OpenAPIRuntime

/// The Oblivious HTTP gateway: the wallet's requests sealed to the server's gateway key and carried by a
/// relay (a terminal over the radio); the terminal's side of the relay; the signed key
/// configuration.
extension HorizonServerClient {
    /// A client whose every request goes sealed through `relay` (RFC 9458): the request, signed
    /// with `signingKey` as usual, is encoded as binary HTTP, padded, sealed to
    /// `gatewayKeyConfiguration` (verify it against the anchor first: `SignedGatewayKeyConfiguration`)
    /// and handed to `relay`, whose answer is opened and decoded as if the server had answered
    /// directly. `serverURL` names the server the gateway serves (its path and authority).
    ///
    /// Nothing is retried: a relay failure after the bytes were handed over is
    /// `ServerClientError.relayOutcomeUnknown`; a request that could not be sealed or is too
    /// large is `notRelayed` (nothing was sent).
    public init(
        serverURL: URL, signingKey: P256.Signing.PrivateKey? = nil,
        gatewayKeyConfiguration: ObliviousHTTPKeyConfiguration,
        relay: @escaping @Sendable ([UInt8]) async throws -> [UInt8],
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        let transport = ObliviousRelayTransport(
            configuration: gatewayKeyConfiguration, relay: relay, clock: clock)
        self.init(serverURL: serverURL, signingKey: signingKey, transport: transport, clock: clock)
    }

    /// The gateway's key configuration and the issuer's signature over it (unverified: check it
    /// with `verified(by:)` against the pinned anchor before sealing to it).
    public func gatewayKeyConfiguration() async throws(ServerClientError) -> SignedGatewayKeyConfiguration {
        let output = try await call { try await client.getGatewayKeyConfig() }
        switch output {
        case .ok(let ok):
            let body = try Self.json { try ok.body.json }
            guard body.label == SignedGatewayKeyConfiguration.label else {
                throw .invalidResponse(
                    "the gateway key configuration is labelled \(body.label), not \(SignedGatewayKeyConfiguration.label)"
                )
            }
            guard let configuration = Data(base64Encoded: body.keyConfig),
                let signature = Data(base64Encoded: body.signature)
            else { throw .invalidResponse("the gateway key configuration or its signature is not base64") }
            do {
                return SignedGatewayKeyConfiguration(
                    configuration: try ObliviousHTTPKeyConfiguration(decoding: Array(configuration)),
                    signature: Array(signature))
            } catch {
                throw .invalidResponse("\(error)")
            }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// The terminal's side of the relay: posts a wallet's sealed request to the gateway, signed
    /// with this terminal's key, and returns the sealed answer. The terminal cannot read either.
    public func forwardToGateway(_ sealed: [UInt8]) async throws(ServerClientError) -> [UInt8] {
        let output = try await call { try await client.relayThroughGateway(body: .messageOhttpReq(HTTPBody(sealed))) }
        switch output {
        case .ok(let ok):
            let body: HTTPBody
            do { body = try ok.body.messageOhttpRes } catch {
                throw .invalidResponse("the gateway's answer is not message/ohttp-res")
            }
            do { return Array(try await Data(collecting: body, upTo: ObliviousHTTP.maximumSealedBytes)) } catch {
                throw .invalidResponse("the gateway's answer is larger than \(ObliviousHTTP.maximumSealedBytes) bytes")
            }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }
}

/// An OpenAPI transport that sends each request sealed through a relay (see
/// `HorizonServerClient.init(serverURL:signingKey:gatewayKeyConfiguration:relay:clock:)`).
struct ObliviousRelayTransport: ClientTransport {
    let configuration: ObliviousHTTPKeyConfiguration
    let relay: @Sendable ([UInt8]) async throws -> [UInt8]
    let clock: @Sendable () -> Int64

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (
        HTTPResponse, HTTPBody?
    ) {
        let content: [UInt8]
        if let body {
            do { content = Array(try await Data(collecting: body, upTo: ObliviousHTTP.maximumSealedBytes)) } catch {
                throw ServerClientError.notRelayed(
                    "the request body is larger than \(ObliviousHTTP.maximumSealedBytes) bytes, more than a relay carries"
                )
            }
        } else {
            content = []
        }
        // The path the wallet signed: the base URL's path and the operation's (see RequestSigningMiddleware).
        let base = baseURL.path.hasSuffix("/") ? String(baseURL.path.dropLast()) : baseURL.path
        var fields: [HTTPHeaderField] = request.headerFields.map {
            HTTPHeaderField(name: $0.name.canonicalName, value: $0.value)
        }
        // The gateway refuses a sealed request dated outside its window (replay protection).
        fields.removeAll { $0.name == "date" }
        fields.append(HTTPHeaderField(name: "date", value: HTTPDate.format(clock())))
        let authority = baseURL.host.map { host in baseURL.port.map { "\(host):\($0)" } ?? host } ?? ""
        let inner = BinaryHTTPRequest(
            method: request.method.rawValue, scheme: baseURL.scheme ?? "https", authority: authority,
            path: base + (request.path ?? "/"), headerFields: fields, content: content)
        let sealed: [UInt8]
        let opener: ObliviousResponseOpener
        do { (sealed, opener) = try ObliviousHTTP.seal(inner, to: configuration) } catch {
            throw ServerClientError.notRelayed("\(error)")
        }
        let answer: [UInt8]
        do { answer = try await relay(sealed) } catch {
            throw ServerClientError.relayOutcomeUnknown("the relay failed: \(error)")
        }
        let response: BinaryHTTPResponse
        do { response = try opener.openResponse(answer) } catch {
            throw ServerClientError.relayOutcomeUnknown("the relay's answer is not the server's: \(error)")
        }
        var headerFields = HTTPFields()
        for field in response.headerFields {
            guard let name = HTTPField.Name(field.name) else { continue }
            headerFields.append(HTTPField(name: name, value: field.value))
        }
        return (
            HTTPResponse(status: .init(code: response.status), headerFields: headerFields),
            HTTPBody(response.content)
        )
    }
}
