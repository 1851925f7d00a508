import AsyncHTTPClient
import Foundation
import NIOCore

extension HorizonServerClient {
    /// Asks the server's `/health` and returns the time its answer carries in the `Date` header
    /// (whole seconds): that the server answers, and what its clock says, for a device that
    /// checks its own clock against the server's.
    public func serverTime(timeout: Duration = .seconds(5)) async throws(ServerClientError) -> Date {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        var request = HTTPClientRequest(url: serverURL.appendingPathComponent("health").absoluteString)
        request.method = .GET
        let dateText: String?
        do {
            let response = try await Self.http.execute(request, timeout: .milliseconds(max(1, milliseconds)))
            // Read to the end, so the connection goes back to the pool.
            _ = try await response.body.collect(upTo: 64 * 1024)
            guard response.status == .ok else {
                throw ServerClientError.invalidResponse("the server's /health answered HTTP \(response.status.code)")
            }
            dateText = response.headers.first(name: "Date")
        } catch {
            throw Self.transportError(error, server: serverURL)
        }
        guard let dateText, let date = Self.httpDate(dateText) else {
            throw .invalidResponse("the server's answer carries no Date header to compare clocks with")
        }
        return date
    }

    /// An HTTP date (RFC 9110's IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT").
    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
    }
}
