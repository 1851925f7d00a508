import Foundation
import HorizonCore

/// What an endpoint's address and description may be, for the API and the dashboard alike.
enum WebhookEndpointRules {
    /// An endpoint's address: `https://` with a host, or `http://` to this machine (a receiver
    /// under test or a local bridge), at most 2048 characters.
    static func checkURL(_ text: String) throws -> String {
        let refused = APIError(
            .invalidRequest, "url must be an https:// address (or http:// to localhost) of at most 2048 characters")
        guard text.utf8.count <= 2048, !text.containsControlOrFormatCharacters, let url = URL(string: text),
            let host = url.host, !host.isEmpty, url.user == nil
        else { throw refused }
        switch url.scheme?.lowercased() {
        case "https": return text
        case "http" where isLoopback(host): return text
        default: throw refused
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return host == "localhost" || host == "::1" || host.hasPrefix("127.")
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
