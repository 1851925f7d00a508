import Foundation
import HorizonCore

/// What an endpoint's address and description may be, for the API and the dashboard alike.
enum WebhookEndpointRules {
    /// An endpoint's address: `https://` (or `http://` where private addresses are allowed, for a
    /// receiver on the shop's own network) with a host and no credentials, at most 2048
    /// characters, whose host is not (and does not resolve to) an address outside the public
    /// internet unless `policy` allows those.
    static func checkURL(_ text: String, policy: WebhookAddressPolicy) async throws -> String {
        guard text.utf8.count <= 2048, !text.containsControlOrFormatCharacters, let url = URL(string: text),
            let host = url.host, !host.isEmpty
        else { throw APIError(.invalidRequest, "url must be an https:// address of at most 2048 characters") }
        guard url.user == nil, url.password == nil else {
            throw APIError(.invalidRequest, "url must not carry a user name or password")
        }
        switch url.scheme?.lowercased() {
        case "https": break
        case "http" where policy.allowsPrivateAddresses: break
        case "http":
            throw APIError(
                .invalidRequest,
                "url must be an https:// address (http:// only where the server allows receivers on private addresses)")
        default: throw APIError(.invalidRequest, "url must be an https:// address")
        }
        if let reason = await policy.refusal(ofHost: host, refuseUnresolved: false) {
            throw APIError(
                .invalidRequest,
                "url must reach the public internet: \(reason) (see the server's webhooksAllowPrivateAddresses)")
        }
        return text
    }

    /// A description: up to 200 characters of printable text, trimmed.
    static func checkDescription(_ text: String) throws -> String {
        let description = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard description.unicodeScalars.count <= 200, !description.containsControlOrFormatCharacters else {
            throw APIError(.invalidRequest, "description must be at most 200 characters of printable text")
        }
        return description
    }

    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        return "we_" + (0..<8).map { _ in UInt8.random(in: 0...255, using: &generator) }.hexString
    }

}
