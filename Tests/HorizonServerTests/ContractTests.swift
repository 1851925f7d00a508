import Crypto
import Foundation
import HTTPTypes
import HorizonServer
import HummingbirdTesting
import Testing

/// The server against `openapi.yaml`: the committed generated code is from this document, and
/// every operation it lists is served.
@Suite("OpenAPI contract")
struct ServerContractTests {
    static let apiDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/HorizonAPI")

    @Test func theGeneratedCodeIsFromThisDocument() throws {
        let document = try Data(contentsOf: Self.apiDirectory.appendingPathComponent("openapi.yaml"))
        let config = try Data(contentsOf: Self.apiDirectory.appendingPathComponent("openapi-generator-config.yaml"))
        let digest = SHA256.hash(data: document + config).map { String(format: "%02x", $0) }.joined()
        let recorded = try String(
            contentsOf: Self.apiDirectory.appendingPathComponent("Generated/openapi.sha256"), encoding: .utf8
        ).split(separator: "\n").map(String.init)
        #expect(
            recorded.first == digest,
            "openapi.yaml or its generator config changed without regenerating: run Tools/generate-api.sh")
    }

    /// Generated code is never edited by hand: each file is as the generator wrote it, and
    /// nothing was added or removed beside them.
    @Test func theGeneratedFilesAreAsGenerated() throws {
        let generated = Self.apiDirectory.appendingPathComponent("Generated")
        let lines = try String(contentsOf: generated.appendingPathComponent("openapi.sha256"), encoding: .utf8)
            .split(separator: "\n").dropFirst()
        var recorded: [String: String] = [:]
        for line in lines {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else {
                Issue.record("not a digest line: \(line)")
                continue
            }
            recorded[parts[1].trimmingCharacters(in: .whitespaces)] = String(parts[0])
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: generated.path).filter {
            $0.hasSuffix(".swift")
        }
        #expect(
            Set(files) == Set(recorded.keys),
            "files in Generated/ differ from the generator's: run Tools/generate-api.sh")
        for file in files {
            let data = try Data(contentsOf: generated.appendingPathComponent(file))
            let digest = SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
            #expect(
                recorded[file] == digest,
                "Generated/\(file) was edited by hand: change openapi.yaml and run Tools/generate-api.sh")
        }
    }

    /// A concrete path for a path template: each `{parameter}` segment becomes `0123…` (32 hex
    /// digits, a well-formed id that names nothing).
    static func concrete(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map {
            $0.hasPrefix("{") && $0.hasSuffix("}") ? "0123456789abcdef0123456789abcdef" : String($0)
        }.joined(separator: "/")
    }

    /// Every `path` + method of the document, read from its `paths:` section.
    static func operations() throws -> [(method: HTTPRequest.Method, path: String)] {
        let text = try String(contentsOf: apiDirectory.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        var operations: [(HTTPRequest.Method, String)] = []
        var inPaths = false
        var path: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "paths:" {
                inPaths = true
                continue
            }
            guard inPaths else { continue }
            if !line.isEmpty, !line.hasPrefix(" ") { break }  // the next top-level key
            if line.hasPrefix("  /"), line.hasSuffix(":"), !line.hasPrefix("   ") {
                path = String(line.dropFirst(2).dropLast())
            } else if let path, line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":") {
                let word = line.trimmingCharacters(in: .whitespaces).dropLast().lowercased()
                if ["get", "put", "post", "delete", "patch", "head", "options"].contains(word) {
                    operations.append((HTTPRequest.Method(rawValue: word.uppercased())!, path))
                }
            }
        }
        return operations
    }

    @Test func everyOperationOfTheDocumentIsServed() async throws {
        let operations = try Self.operations()
        #expect(operations.count >= 7, "the document's paths could not be read")
        #expect(operations.contains { $0.method == .post && $0.path == "/v1/terminals/credential" })
        let server = try await TestServer()
        try await server.withClient { client in
            for (method, path) in operations {
                let response = try await client.send(method, Self.concrete(path))
                #expect(
                    response.status != .notFound && response.status != .methodNotAllowed,
                    "\(method) \(path): \(response.status) \(response.text)")
                #expect(response.headers[.requestID] != nil)
            }
        }
    }

    @Test func nothingIsServedThatTheDocumentDoesNotList() async throws {
        let operations = try Self.operations()
        let listed = Set(operations.map { "\($0.method.rawValue) \($0.path)" })
        let server = try await TestServer()
        try await server.withClient { client in
            for path in Set(operations.map(\.path)) {
                for method in [HTTPRequest.Method.get, .post, .put, .delete, .patch, .options]
                where !listed.contains("\(method.rawValue) \(path)") {
                    let response = try await client.send(method, Self.concrete(path))
                    #expect(response.status == .methodNotAllowed, "\(method) \(path)")
                    #expect(response.headers[.allow] != nil, "\(method) \(path)")
                }
            }
        }
    }
}
