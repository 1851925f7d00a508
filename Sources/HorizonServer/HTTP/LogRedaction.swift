import Foundation
import HorizonLedger
import OpenAPIRuntime

/// What the server's log may say about a failure. Never the failure's own `String(reflecting:)`:
/// the generated code's `ServerError` carries the whole request (its `Authorization` and `Cookie`
/// headers) and the decoded body (passwords, one-time codes, card numbers, keys), and a decoding
/// error can quote the value it refused. The log gets the error's type and the server's own words
/// about it, which name no value a client sent.
enum LogRedaction {
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as ServerError:
            return "\(error.operationID): \(describe(error.underlyingError))"
        case let error as LedgerError:
            return "LedgerError: \(error.description)"
        case let error as Readiness.TimedOut:
            return error.description
        case let error as APIError:
            return "APIError: \(error.code.rawValue)"
        case let error as DecodingError:
            let path: [any CodingKey]
            switch error {
            case .keyNotFound(let key, let context): path = context.codingPath + [key]
            case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
                path = context.codingPath
            @unknown default: path = []
            }
            return "DecodingError at \"\(path.map(\.stringValue).joined(separator: "."))\""
        default:
            return "\(type(of: error))"
        }
    }
}
