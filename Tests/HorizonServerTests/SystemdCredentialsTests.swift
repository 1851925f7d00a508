import Foundation
import HorizonAPI
import HorizonServerClient
import Testing

/// Keys as systemd credentials (`LoadCredentialEncrypted=issuer.pem:…` puts the decrypted file
/// in `$CREDENTIALS_DIRECTORY`): the server uses them, and its data directory need not hold them.
@Suite("Keys from systemd credentials", .serialized)
struct SystemdCredentialsTests {
    @Test func theServerUsesTheIssuerAndGatewayKeysFromItsCredentials() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        let credentials = sandbox.path("credentials")
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        let before = try ServerProcess.run(["anchor", "--json", "--data-dir", data])
        let anchor = try #require(
            try JSONSerialization.jsonObject(with: Data(before.output.utf8)) as? [String: Any], "\(before.errors)")
        let fingerprint = try #require(anchor["fingerprint"] as? String)
        let publicKey = try #require(anchor["publicKey"] as? String)

        // The keys leave the data directory for the credentials directory.
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        for name in ["issuer.pem", "gateway-key.pem"] {
            try FileManager.default.moveItem(atPath: "\(data)/\(name)", toPath: "\(credentials)/\(name)")
        }
        let gatewayKey = try Data(contentsOf: URL(fileURLWithPath: "\(credentials)/gateway-key.pem"))
        let environment = ["CREDENTIALS_DIRECTORY": credentials]

        // Without the credentials there is no issuer key; with them, the same anchor.
        #expect(try ServerProcess.run(["anchor", "--json", "--data-dir", data]).status != 0)
        let fromCredentials = try ServerProcess(["anchor", "--json", "--data-dir", data], environment: environment)
        #expect(fromCredentials.wait(timeout: 30) == 0, "\(fromCredentials.errors)")
        #expect(fromCredentials.output.contains(fingerprint))

        let server = try ServerProcess(
            ["serve", "--listen", "127.0.0.1:0", "--data-dir", data], environment: environment)
        defer { server.kill() }
        let line = try #require(
            server.waitForOutput(prefix: "listening on http://127.0.0.1:", timeout: 30), "\(server.errors)")
        let url = try #require(URL(string: String(line.dropFirst("listening on ".count))), "\(line)")
        let served = try await HorizonServerClient(serverURL: url).anchor()
        #expect(served.publicKey == publicKey)
        // The gateway key was read from the credentials: none was made in the data directory,
        // and the credential is unchanged.
        #expect(!FileManager.default.fileExists(atPath: "\(data)/gateway-key.pem"))
        #expect(!FileManager.default.fileExists(atPath: "\(data)/issuer.pem"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(credentials)/gateway-key.pem")) == gatewayKey)
    }
}
