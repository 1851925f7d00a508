import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonRoles
import HorizonSecureChannel
import HorizonStores

/// The merchant's offline limits in `terminal.json`, under `"offline"`; every field is
/// optional and a missing one takes the default:
///
///     "offline": { "perPaymentMinorUnits": 5000, "totalStoredMinorUnits": 20000,
///                  "maximumStoredCount": 20, "maximumAgeHours": 24, "enabled": true }
///
/// Amounts are in minor units of the terminal's currency, like `startingBalanceMinorUnits`.
/// Offline acceptance applies to an activated terminal only (a sandbox terminal settles in its
/// own ledger, which is never unreachable); `"enabled": false` turns it off.
public struct OfflineSettings: Codable, Sendable, Equatable {
    public var enabled: Bool?
    public var perPaymentMinorUnits: Int64?
    public var totalStoredMinorUnits: Int64?
    public var maximumStoredCount: Int?
    public var maximumAgeHours: Int?

    public init(
        enabled: Bool? = nil, perPaymentMinorUnits: Int64? = nil, totalStoredMinorUnits: Int64? = nil,
        maximumStoredCount: Int? = nil, maximumAgeHours: Int? = nil
    ) {
        self.enabled = enabled
        self.perPaymentMinorUnits = perPaymentMinorUnits
        self.totalStoredMinorUnits = totalStoredMinorUnits
        self.maximumStoredCount = maximumStoredCount
        self.maximumAgeHours = maximumAgeHours
    }

    /// The limits these settings give in `currency`: a limit that is not positive is refused
    /// with the field named.
    public func limits(for currency: Currency) throws -> OfflineLimits {
        var limits = OfflineLimits.defaults(for: currency)
        func positive<T: BinaryInteger>(_ value: T?, _ field: String) throws -> T? {
            guard let value else { return nil }
            guard value > 0 else { throw CLIError("terminal.json: offline.\(field) must be greater than zero") }
            return value
        }
        do {
            if let units = try positive(perPaymentMinorUnits, "perPaymentMinorUnits") {
                limits.perPayment = try Money(minorUnits: units, currency: currency)
            }
            if let units = try positive(totalStoredMinorUnits, "totalStoredMinorUnits") {
                limits.totalStored = try Money(minorUnits: units, currency: currency)
            }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("terminal.json: an offline limit is out of range: \(error)")
        }
        if let count = try positive(maximumStoredCount, "maximumStoredCount") { limits.maximumStoredCount = count }
        if let hours = try positive(maximumAgeHours, "maximumAgeHours") { limits.maximumAge = Int64(hours) * 3600 }
        return limits
    }
}

extension TerminalFiles {
    /// How the terminal accepts payments while its server is unreachable: for an activated
    /// terminal whose settings do not turn it off, the limits from `terminal.json` and the
    /// anchor it trusts (`anchor.pub`: the server's issuer key, which signs daily tokens).
    public func offlineAcceptance(journal: SQLiteTerminalJournal) throws -> OfflineAcceptanceConfiguration? {
        let settings = try loadSettings()
        guard settings.server != nil, settings.offline?.enabled != false else { return nil }
        guard let currency = try? Currency(code: settings.currency) else {
            throw CLIError("\(directory.file(Self.settings).path) names an unsupported currency '\(settings.currency)'")
        }
        let limits = try (settings.offline ?? OfflineSettings()).limits(for: currency)
        let anchor = try KeyFiles.readPublic(at: directory.file(Self.anchorPublicKey))
        return OfflineAcceptanceConfiguration(
            limits: limits, trustAnchors: [TrustAnchor(publicKey: anchor, name: "server")], store: journal)
    }
}
