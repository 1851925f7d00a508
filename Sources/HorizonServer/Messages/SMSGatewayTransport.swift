import AsyncHTTPClient
import Foundation
import HorizonCore
import NIOCore

/// SMS posted to an HTTP gateway (an SMS provider's API or a gateway on the shop's network):
/// one POST per message to `url`, the body made from a template with `{to}` and `{text}`, and
/// the credential as an `Authorization` header. Any 2xx answer means the gateway took it.
public struct SMSGatewayTransport: MessageTransport {
    public enum Encoding: String, Sendable, Codable, CaseIterable {
        /// The template is JSON (`{"to": "{to}", "text": "{text}"}`): values are JSON-escaped.
        case json
        /// The template is a form (`to={to}&text={text}`): values are percent-encoded.
        case form

        var contentType: String {
            switch self {
            case .json: "application/json"
            case .form: "application/x-www-form-urlencoded"
            }
        }
    }

    public let url: String
    public let bodyTemplate: String
    public let encoding: Encoding
    /// The whole `Authorization` header value (`Bearer …`, `Basic …`); nil sends none.
    public let authorization: String?
    public let timeout: Duration
    let client: HTTPClient

    public init(
        url: String, bodyTemplate: String, encoding: Encoding, authorization: String?,
        timeout: Duration = .seconds(10), client: HTTPClient = .shared
    ) {
        self.url = url
        self.bodyTemplate = bodyTemplate
        self.encoding = encoding
        self.authorization = authorization
        self.timeout = timeout
        self.client = client
    }

    /// `Bearer CREDENTIAL`, or for basic `Basic base64(USER:PASSWORD)` (the credential is `USER:PASSWORD`).
    public static func authorization(scheme: String, credential: String) -> String {
        scheme == "basic" ? "Basic " + Data(credential.utf8).base64EncodedString() : "Bearer " + credential
    }

    /// The request body for one message.
    public func body(to recipient: String, text: String) -> String {
        bodyTemplate.replacingOccurrences(of: "{to}", with: escaped(recipient))
            .replacingOccurrences(of: "{text}", with: escaped(text))
    }

    func escaped(_ value: String) -> String {
        switch encoding {
        case .json:
            // A JSON string's content: what JSONEncoder writes between the quotes.
            let encoded = (try? JSONEncoder().encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
            return String(encoded.dropFirst().dropLast())
        case .form:
            var allowed = CharacterSet.alphanumerics.intersection(
                CharacterSet(charactersIn: Unicode.Scalar(0)..<Unicode.Scalar(128)))
            allowed.insert(charactersIn: "-._~")
            return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
        }
    }

    /// The SMS is the body alone: a subject is for mail.
    public func deliver(to recipient: String, subject: String, body text: String, at time: UnixTime)
        async throws(MessageDeliveryError)
    {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: encoding.contentType + "; charset=utf-8")
        request.headers.add(name: "User-Agent", value: "horizon-server")
        if let authorization { request.headers.add(name: "Authorization", value: authorization) }
        request.body = .bytes(ByteBuffer(string: body(to: recipient, text: text)))
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        let status: Int
        let answer: String
        do {
            let response = try await client.execute(request, timeout: .milliseconds(milliseconds))
            status = Int(response.status.code)
            let collected = try? await response.body.collect(upTo: 64 * 1024)
            answer = collected.map { String(buffer: $0) } ?? ""
        } catch let error as HTTPClientError where error == .deadlineExceeded {
            throw .gatewayUnreachable("no answer within \(timeout.components.seconds) s from \(url)")
        } catch {
            throw .gatewayUnreachable("\(url): \(MessageDeliveryError.oneLine(String(describing: error)))")
        }
        guard (200..<300).contains(status) else {
            throw .gatewayRejected(status: status, body: MessageDeliveryError.oneLine(answer, limit: 200))
        }
    }
}
