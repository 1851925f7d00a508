import Foundation
import Hummingbird
import NIOCore

/// Refuses a request with a NUL character (U+0000) anywhere a string comes from: the path, the
/// query, a form field or a JSON string (its `\u0000` escape included). No field of the API or
/// the dashboard accepts one, and the stores disagree about it (PostgreSQL refuses it with an
/// error, SQLite keeps it), so it is refused here, before any handler or database sees it: 400.
/// The gateway's sealed body is binary; the requests it opens come through here on their own.
struct TextMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    /// Bodies up to this size are checked (the body limit refuses larger ones later).
    let maximumBytes: Int

    static let refusal = APIError(
        .invalidRequest, "the request contains a NUL character (U+0000), which no field accepts")

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        if Self.hasNUL(encoded: request.uri.path) || Self.hasNUL(encoded: request.uri.query ?? "") {
            throw Self.refusal
        }
        let type = (request.headers[.contentType] ?? "").lowercased()
        guard !type.hasPrefix("message/ohttp-req") else { return try await next(request, context) }
        var request = request
        // Over the limit, the answer is the body limit's own (the body cannot be read twice).
        let body = try await BodyLimitMiddleware.collect(&request, upTo: maximumBytes)
        let bytes = body.readableBytesView
        if bytes.contains(0) { throw Self.refusal }
        if type.hasPrefix("application/x-www-form-urlencoded") {
            if Self.hasNUL(encoded: String(decoding: bytes, as: UTF8.self)) { throw Self.refusal }
        } else if Self.hasEscapedNUL(bytes) {
            throw Self.refusal
        } else if let field = Self.nullField(bytes) {
            // As for a null required field: a value of the wrong type, 400 malformed_json.
            throw APIError(
                .malformedJSON, "the field \"\(field)\" is null (no field of the API takes null; leave it out instead)")
        }
        return try await next(request, context)
    }

    /// The path of a `null` in a JSON body, if any. No request field of the API is nullable
    /// (`openapi.yaml`), and the generated decoder reads null as "left out", so a null would
    /// otherwise be taken for a choice the caller did not make.
    static func nullField(_ bytes: ByteBufferView) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.contains("null"),
            let value = try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        else { return nil }
        func walk(_ value: Any, _ path: String) -> String? {
            switch value {
            // A body that is null alone is not an object: the decoder says so.
            case is NSNull: return path.isEmpty ? nil : path
            case let array as [Any]:
                for (index, element) in array.enumerated() {
                    if let found = walk(element, "\(path)[\(index)]") { return found }
                }
                return nil
            case let object as [String: Any]:
                for (key, element) in object.sorted(by: { $0.key < $1.key }) {
                    if let found = walk(element, path.isEmpty ? key : "\(path).\(key)") { return found }
                }
                return nil
            default: return nil
            }
        }
        return walk(value, "")
    }

    /// Whether percent-encoded text holds a NUL, raw or as `%00`.
    static func hasNUL(encoded text: String) -> Bool {
        text.utf8.contains(0) || text.range(of: "%00", options: .caseInsensitive) != nil
    }

    /// Whether JSON text holds a string with a NUL (`\u0000`): a quick look for the escape, then
    /// the decoded strings, so an escaped backslash before `u0000` is not taken for one.
    static func hasEscapedNUL(_ bytes: ByteBufferView) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.range(of: "\\u0000", options: .caseInsensitive) != nil else { return false }
        guard let value = try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]) else {
            // Not JSON: the escape is there, and nothing reads it as anything else.
            return true
        }
        func walk(_ value: Any) -> Bool {
            switch value {
            case let string as String: return string.unicodeScalars.contains("\u{0}")
            case let array as [Any]: return array.contains(where: walk)
            case let object as [String: Any]:
                return object.contains { $0.key.unicodeScalars.contains("\u{0}") || walk($0.value) }
            default: return false
            }
        }
        return walk(value)
    }
}
