import Foundation
import HorizonServerClient
import Testing

/// Plain HTTP only to this machine: every client of the server (terminal, wallet services,
/// merchant service) goes through `HorizonServerClient`, whose transport refuses `http://` to
/// any other host before a byte is sent.
@Suite("Transport security")
struct TransportSecurityTests {
    @Test func loopbackIsThisMachineOnly() {
        for host in ["127.0.0.1", "127.1.2.3", "localhost", "LOCALHOST", "::1", "[::1]"] {
            #expect(TransportSecurity.isLoopback(host), "\(host)")
        }
        for host in [
            "128.0.0.1", "10.0.0.1", "192.168.1.2", "localhost.example", "127.0.0.1.example", "127.0.0.256", "::2",
            "example.com", "", "127.0.0",
        ] {
            #expect(!TransportSecurity.isLoopback(host), "\(host)")
        }
    }

    @Test func plainHTTPToAnotherHostIsRefusedBeforeAnythingIsSent() async throws {
        #expect(throws: ServerClientError.self) { try HorizonServerClient.url("http://192.0.2.10:8080") }
        #expect(TransportSecurity.refusal(for: try #require(URL(string: "https://192.0.2.10"))) == nil)
        #expect(TransportSecurity.refusal(for: try #require(URL(string: "http://127.0.0.1:8080"))) == nil)
        #expect(TransportSecurity.refusal(for: try #require(URL(string: "http://[::1]:8080"))) == nil)
        // A client made with such a URL anyway (a stored setting, a service client) sends nothing.
        let client = HorizonServerClient(serverURL: try #require(URL(string: "http://192.0.2.10:9")))
        let started = ContinuousClock.now
        do {
            _ = try await client.anchor()
            Issue.record("an http:// request to another host was sent")
        } catch {
            guard case .insecureServerURL(let reason) = error else {
                Issue.record("unexpected: \(error)")
                return
            }
            #expect(reason.contains("use https://"))
        }
        #expect(ContinuousClock.now - started < .seconds(2), "it tried to connect")
    }
}
