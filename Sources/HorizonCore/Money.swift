/// An ISO 4217 currency with its minor-unit exponent (EUR 2: cents; JPY 0; KWD 3).
public struct Currency: Hashable, Sendable, CustomStringConvertible {
    public let code: String
    public let exponent: Int

    /// Currencies Horizon settles. Codes outside it are refused, never guessed.
    public static let supported: [String: Int] = [
        "EUR": 2, "USD": 2, "GBP": 2, "CHF": 2, "SEK": 2, "NOK": 2, "DKK": 2, "PLN": 2, "CZK": 2,
        "HUF": 2, "RON": 2, "BGN": 2, "CAD": 2, "AUD": 2, "NZD": 2, "SGD": 2, "HKD": 2, "CNY": 2,
        "INR": 2, "BRL": 2, "MXN": 2, "ZAR": 2, "TRY": 2, "ILS": 2, "AED": 2,
        "JPY": 0, "KRW": 0, "ISK": 0, "CLP": 0, "VND": 0,
        "KWD": 3, "BHD": 3, "OMR": 3, "JOD": 3, "TND": 3,
    ]

    public static let eur = Currency(uncheckedCode: "EUR", exponent: 2)
    public static let usd = Currency(uncheckedCode: "USD", exponent: 2)
    public static let jpy = Currency(uncheckedCode: "JPY", exponent: 0)

    private init(uncheckedCode: String, exponent: Int) {
        self.code = uncheckedCode
        self.exponent = exponent
    }

    /// The currency for an ISO 4217 alphabetic code (upper case, three letters).
    public init(code: String) throws(WireError) {
        guard let exponent = Currency.supported[code] else { throw .unsupportedCurrency(code) }
        self.init(uncheckedCode: code, exponent: exponent)
    }

    public var description: String { code }

    /// Minor units in one major unit: 100 for EUR, 1 for JPY, 1000 for KWD (exponents are 0 to 3).
    public var minorUnitsPerMajorUnit: Int64 {
        var unit: Int64 = 1
        for _ in 0..<exponent { unit *= 10 }
        return unit
    }
}

/// An amount of money in integer minor units. There are no floats anywhere near money.
public struct Money: Hashable, Sendable, CustomStringConvertible {
    /// The largest amount the system handles (10^15 minor units): far above any real payment,
    /// and far enough below `Int64.max` that an amount plus a tip cannot overflow.
    public static let maximumMinorUnits: Int64 = 1_000_000_000_000_000

    public let minorUnits: Int64
    public let currency: Currency

    public init(minorUnits: Int64, currency: Currency) throws(WireError) {
        guard minorUnits >= 0 else { throw .negativeAmount(field: "amount") }
        guard minorUnits <= Money.maximumMinorUnits else { throw .amountOutOfRange(field: "amount") }
        self.minorUnits = minorUnits
        self.currency = currency
    }

    public static func zero(_ currency: Currency) -> Money {
        // Zero is always in range.
        Money(checkedMinorUnits: 0, currency: currency)
    }

    private init(checkedMinorUnits: Int64, currency: Currency) {
        self.minorUnits = checkedMinorUnits
        self.currency = currency
    }

    /// The sum of two amounts in the same currency, refusing mixed currencies and overflow.
    public func adding(_ other: Money) throws(MoneyError) -> Money {
        guard other.currency == currency else { throw .currencyMismatch(currency, other.currency) }
        let (sum, overflow) = minorUnits.addingReportingOverflow(other.minorUnits)
        guard !overflow, sum <= Money.maximumMinorUnits else { throw .outOfRange }
        return Money(checkedMinorUnits: sum, currency: currency)
    }

    /// Parses an amount as a person types it ("12.50", "12.5", "12") with the currency's exponent.
    ///
    /// Ambiguous or lossy input is refused rather than rounded: more decimals than the currency
    /// has, thousands separators, commas, signs, exponents, empty parts ("12." or ".5").
    public static func parse(_ text: String, currency: Currency) throws(MoneyError) -> Money {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, let whole = parts.first, !whole.isEmpty,
            whole.allSatisfy({ $0.isASCII && $0.isNumber })
        else { throw .unparseable(text, currency) }
        var fraction = Substring("")
        if parts.count == 2 {
            fraction = parts[1]
            guard !fraction.isEmpty, fraction.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw .unparseable(text, currency)
            }
            guard fraction.count <= currency.exponent else { throw .tooManyDecimals(text, currency) }
        }
        // Leading zeros carry no value; only significant digits count against the range.
        let significant = whole.drop(while: { $0 == "0" })
        guard significant.count <= 16 else { throw .outOfRange }
        let padded = fraction + String(repeating: "0", count: currency.exponent - fraction.count)
        guard let units = Int64((significant.isEmpty ? "0" : significant) + padded) else { throw .outOfRange }
        guard units <= Money.maximumMinorUnits else { throw .outOfRange }
        return Money(checkedMinorUnits: units, currency: currency)
    }

    /// "12.50 EUR", "1200 JPY".
    public var description: String { "\(formattedAmount) \(currency.code)" }

    /// The amount with the currency's decimals and no code: "12.50".
    public var formattedAmount: String {
        guard currency.exponent > 0 else { return String(minorUnits) }
        let divisor = currency.minorUnitsPerMajorUnit
        let fraction = String(minorUnits % divisor)
        let padding = String(repeating: "0", count: currency.exponent - fraction.count)
        return "\(minorUnits / divisor).\(padding)\(fraction)"
    }
}

/// Why an amount could not be formed or combined.
public enum MoneyError: Error, Equatable, Sendable, CustomStringConvertible {
    case unparseable(String, Currency)
    case tooManyDecimals(String, Currency)
    case outOfRange
    case currencyMismatch(Currency, Currency)

    public var description: String {
        switch self {
        case .unparseable(let text, let currency):
            "'\(text)' is not an amount; write digits with an optional '.' and up to \(currency.exponent) decimal(s), e.g. \(MoneyError.example(currency))"
        case .tooManyDecimals(let text, let currency):
            "'\(text)' has more decimals than \(currency.code) allows (\(currency.exponent)); amounts are never rounded"
        case .outOfRange: "the amount is larger than the system handles (10^15 minor units)"
        case .currencyMismatch(let lhs, let rhs): "cannot combine \(lhs.code) with \(rhs.code)"
        }
    }

    fileprivate static func example(_ currency: Currency) -> String {
        currency.exponent == 0 ? "1200" : "12." + String(repeating: "5", count: currency.exponent)
    }
}
