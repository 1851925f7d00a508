import Foundation
import HorizonCLISupport

/// Reads the programs' `--json` output through the types the programs print with, so that a
/// test fails when a shape drifts from the one contract.
enum JSONShapes {
    /// A money object (`{"minorUnits", "currency", "formatted"}`) inside an object read with
    /// `JSONSerialization`; nil when `value` is anything else.
    static func money(_ value: Any?) -> JSONMoney? {
        guard let value, JSONSerialization.isValidJSONObject(value),
            let data = try? JSONSerialization.data(withJSONObject: value)
        else { return nil }
        return try? JSONDecoder().decode(JSONMoney.self, from: data)
    }

    /// "12.50 EUR" for a money object, nil otherwise.
    static func formatted(_ value: Any?) -> String? { money(value)?.formatted }

    /// The rows of a transaction list (`{"transactions": [...], "nextCursor"}`).
    static func transactions(_ text: String) -> [[String: Any]] {
        let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        return object?["transactions"] as? [[String: Any]] ?? []
    }
}
