import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization

/// Which server URLs a client may speak to in clear. Over `http://` anyone on the path reads
/// passwords, one-time codes and session tokens and can forge the server's answers, so plain
/// HTTP is for this machine only (127.0.0.0/8, ::1, localhost); `https://` everywhere else. A
/// lab without TLS turns that off for the whole process (`--insecure-lab-http`), loudly.
public enum TransportSecurity {
    private static let labHTTP = Atomic<Bool>(false)

    /// Allows `http://` to any host in this process, and says so on standard error.
    public static func allowInsecureLabHTTP(program: String) {
        guard !labHTTP.exchange(true, ordering: .sequentiallyConsistent) else { return }
        let warning = """
            \(program): WARNING: --insecure-lab-http: http:// is allowed to servers on other machines. \
            Passwords, one-time codes and session tokens travel in clear, and anyone on the network \
            can read them and forge the server's answers. For a lab only, never with real money.

            """
        FileHandle.standardError.write(Data(warning.utf8))
    }

    public static var allowsInsecureLabHTTP: Bool { labHTTP.load(ordering: .sequentiallyConsistent) }

    /// Whether `host` is this machine: `localhost`, 127.0.0.0/8 or ::1.
    public static func isLoopback(_ host: String) -> Bool {
        var host = host.lowercased()
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" || host == "localhost." || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && part.allSatisfy(\.isNumber)
                && (Int(part) ?? 256) <= 255
        }
    }

    /// Why `url` may not be used, or nil when it may: `https://`, or `http://` to this machine
    /// (or to any host with the lab flag).
    public static func refusal(for url: URL) -> String? {
        guard url.scheme?.lowercased() == "http" else { return nil }
        let host = url.host ?? ""
        if isLoopback(host) || allowsInsecureLabHTTP { return nil }
        return
            "\(url.absoluteString) is plain http:// to another machine: use https:// (http:// is only for 127.0.0.1, ::1 or localhost; --insecure-lab-http allows it in a lab)"
    }
}

/// The HTTP transport, refusing a server URL `TransportSecurity` does not allow before anything
/// is sent.
struct CheckedTransport: ClientTransport {
    let base: any ClientTransport

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (
        HTTPResponse, HTTPBody?
    ) {
        if let reason = TransportSecurity.refusal(for: baseURL) { throw ServerClientError.insecureServerURL(reason) }
        return try await base.send(request, body: body, baseURL: baseURL, operationID: operationID)
    }
}
