import HorizonCore
import Testing

@Suite("Money and currencies")
struct MoneyTests {
    // MARK: Parsing accepted amounts

    struct Accepted: Sendable, CustomTestStringConvertible {
        let text: String
        let code: String
        let minorUnits: Int64
        var testDescription: String { "\(code) \"\(text)\"" }
    }

    @Test(
        "parses what people type with the currency's exponent",
        arguments: [
            Accepted(text: "12.50", code: "EUR", minorUnits: 1250),
            Accepted(text: "12.5", code: "EUR", minorUnits: 1250),
            Accepted(text: "12", code: "EUR", minorUnits: 1200),
            Accepted(text: "0", code: "EUR", minorUnits: 0),
            Accepted(text: "0.01", code: "EUR", minorUnits: 1),
            Accepted(text: "0.1", code: "USD", minorUnits: 10),
            Accepted(text: "007.05", code: "EUR", minorUnits: 705),
            Accepted(text: "1200", code: "JPY", minorUnits: 1200),
            Accepted(text: "0", code: "JPY", minorUnits: 0),
            Accepted(text: "1.234", code: "KWD", minorUnits: 1234),
            Accepted(text: "1.2", code: "KWD", minorUnits: 1200),
            Accepted(text: "0.005", code: "KWD", minorUnits: 5),
            Accepted(text: "10000000000000", code: "EUR", minorUnits: 1_000_000_000_000_000),
            Accepted(text: "10000000000000.00", code: "EUR", minorUnits: 1_000_000_000_000_000),
            Accepted(text: "1000000000000000", code: "JPY", minorUnits: 1_000_000_000_000_000),
            // Leading zeros carry no value and do not count against the 16-digit range.
            Accepted(text: "00000000000000000001", code: "EUR", minorUnits: 100),
            Accepted(text: "00000000000000000000", code: "EUR", minorUnits: 0),
            Accepted(text: "00000000000000000000.05", code: "EUR", minorUnits: 5),
            Accepted(text: "0000000000000000000012.50", code: "EUR", minorUnits: 1250),
            Accepted(text: "0000010000000000000", code: "EUR", minorUnits: 1_000_000_000_000_000),
            Accepted(text: "00001000000000000000", code: "JPY", minorUnits: 1_000_000_000_000_000),
            Accepted(text: "000000000000000000000000000000000000000000000001", code: "JPY", minorUnits: 1),
        ])
    func parsesAcceptedAmounts(_ sample: Accepted) throws {
        let currency = try Currency(code: sample.code)
        let money = try Money.parse(sample.text, currency: currency)
        #expect(money.minorUnits == sample.minorUnits)
        #expect(money.currency == currency)
        #expect(money == (try Money(minorUnits: sample.minorUnits, currency: currency)))
    }

    // MARK: Parsing refused amounts

    @Test(
        "refuses more decimals than the currency has",
        arguments: [
            ("12.505", "EUR"), ("0.001", "EUR"), ("12.500", "EUR"), ("1.5", "JPY"), ("1200.0", "JPY"),
            ("1.2345", "KWD"),
        ])
    func refusesTooManyDecimals(text: String, code: String) throws {
        let currency = try Currency(code: code)
        #expect(throws: MoneyError.tooManyDecimals(text, currency)) {
            try Money.parse(text, currency: currency)
        }
    }

    @Test(
        "refuses ambiguous or malformed text",
        arguments: [
            "", "12.", ".5", ".", "-1", "+1", "1,50", "1,000", "1e3", " 12", "12 ", "１２", "1.2.3", "12..5",
            "abc", "0x10", "1_000", "12.5€", "€12.50", "1.-5", "1.+5", "٣", "12.٥",
        ])
    func refusesUnparseable(text: String) {
        #expect(throws: MoneyError.unparseable(text, .eur)) {
            try Money.parse(text, currency: .eur)
        }
    }

    @Test("JPY refuses a trailing dot and an empty amount as unparseable, not as too many decimals")
    func jpyUnparseable() {
        #expect(throws: MoneyError.unparseable("1200.", .jpy)) { try Money.parse("1200.", currency: .jpy) }
        #expect(throws: MoneyError.unparseable("", .jpy)) { try Money.parse("", currency: .jpy) }
    }

    @Test(
        "refuses amounts above the system maximum",
        arguments: [
            ("10000000000000.01", "EUR"),  // one minor unit above 10^15
            ("10000000000001", "EUR"),
            ("9999999999999999", "EUR"),  // 16 whole digits, still fits Int64 after scaling
            ("99999999999999999", "EUR"),  // 17 whole digits
            ("9999999999999999", "KWD"),  // would overflow Int64 after scaling by 10^3
            ("1000000000000001", "JPY"),
            ("99999999999999999999999999", "JPY"),
            // 17 significant digits stay out of range, leading zeros or not.
            ("10000000000000000", "EUR"),
            ("00010000000000000000", "EUR"),
            ("0000000099999999999999999.99", "EUR"),
            ("00000000000000000000000000000000000000000000000099999999999999999", "JPY"),
        ])
    func refusesHugeAmounts(text: String, code: String) throws {
        let currency = try Currency(code: code)
        #expect(throws: MoneyError.outOfRange) { try Money.parse(text, currency: currency) }
    }

    @Test func errorDescriptionsExplainTheProblem() throws {
        #expect(
            MoneyError.unparseable("1,50", .eur).description
                == "'1,50' is not an amount; write digits with an optional '.' and up to 2 decimal(s), e.g. 12.55")
        #expect(
            MoneyError.unparseable("x", .jpy).description
                == "'x' is not an amount; write digits with an optional '.' and up to 0 decimal(s), e.g. 1200")
        #expect(
            MoneyError.tooManyDecimals("1.5", .jpy).description
                == "'1.5' has more decimals than JPY allows (0); amounts are never rounded")
        #expect(MoneyError.currencyMismatch(.eur, .usd).description == "cannot combine EUR with USD")
        #expect(MoneyError.outOfRange.description == "the amount is larger than the system handles (10^15 minor units)")
    }

    // MARK: Construction

    @Test func initialiserChecksRange() throws {
        #expect(throws: WireError.negativeAmount(field: "amount")) { try Money(minorUnits: -1, currency: .eur) }
        #expect(throws: WireError.negativeAmount(field: "amount")) {
            try Money(minorUnits: .min, currency: .eur)
        }
        #expect(throws: WireError.amountOutOfRange(field: "amount")) {
            try Money(minorUnits: Money.maximumMinorUnits + 1, currency: .eur)
        }
        #expect(throws: WireError.amountOutOfRange(field: "amount")) {
            try Money(minorUnits: .max, currency: .jpy)
        }
        let maximum = try Money(minorUnits: Money.maximumMinorUnits, currency: .eur)
        #expect(maximum.minorUnits == 1_000_000_000_000_000)
        let zero = try Money(minorUnits: 0, currency: .jpy)
        #expect(zero == Money.zero(.jpy))
        #expect(Money.zero(.eur).minorUnits == 0)
        #expect(Money.zero(.eur).currency == .eur)
    }

    // MARK: Arithmetic

    @Test func addingSameCurrency() throws {
        let a = try Money(minorUnits: 1250, currency: .eur)
        let b = try Money(minorUnits: 200, currency: .eur)
        let sum = try a.adding(b)
        #expect(sum == (try Money(minorUnits: 1450, currency: .eur)))
        #expect(try Money.zero(.eur).adding(a) == a)
        let upToMax = try Money(minorUnits: Money.maximumMinorUnits - 1, currency: .eur)
        let one = try Money(minorUnits: 1, currency: .eur)
        #expect(try upToMax.adding(one).minorUnits == Money.maximumMinorUnits)
    }

    @Test func addingRefusesOverflowAndMixedCurrencies() throws {
        let maximum = try Money(minorUnits: Money.maximumMinorUnits, currency: .eur)
        let one = try Money(minorUnits: 1, currency: .eur)
        #expect(throws: MoneyError.outOfRange) { try maximum.adding(one) }
        #expect(throws: MoneyError.outOfRange) { try maximum.adding(maximum) }
        let dollars = try Money(minorUnits: 1, currency: .usd)
        #expect(throws: MoneyError.currencyMismatch(.eur, .usd)) { try one.adding(dollars) }
        #expect(throws: MoneyError.currencyMismatch(.usd, .eur)) { try dollars.adding(one) }
        // Even zero of another currency is refused.
        #expect(throws: MoneyError.currencyMismatch(.eur, .jpy)) { try one.adding(.zero(.jpy)) }
    }

    // MARK: Formatting

    @Test(
        "formats with the currency's decimals",
        arguments: [
            (Int64(1250), "EUR", "12.50"), (5, "EUR", "0.05"), (0, "EUR", "0.00"), (10, "EUR", "0.10"),
            (100, "EUR", "1.00"), (1_000_000_000_000_000, "EUR", "10000000000000.00"), (1200, "JPY", "1200"),
            (0, "JPY", "0"), (1234, "KWD", "1.234"), (5, "KWD", "0.005"), (1000, "KWD", "1.000"),
            (40, "KWD", "0.040"),
        ])
    func formatting(minorUnits: Int64, code: String, expected: String) throws {
        let currency = try Currency(code: code)
        let money = try Money(minorUnits: minorUnits, currency: currency)
        #expect(money.formattedAmount == expected)
        #expect(money.description == "\(expected) \(code)")
        // What is printed parses back to the same amount.
        #expect(try Money.parse(money.formattedAmount, currency: currency) == money)
    }

    // MARK: Currencies

    @Test func knownCurrencies() throws {
        #expect(Currency.eur.code == "EUR")
        #expect(Currency.eur.exponent == 2)
        #expect(Currency.usd.exponent == 2)
        #expect(Currency.jpy.exponent == 0)
        #expect(try Currency(code: "EUR") == .eur)
        #expect(try Currency(code: "JPY") == .jpy)
        #expect(try Currency(code: "KWD").exponent == 3)
        #expect(try Currency(code: "ISK").exponent == 0)
        #expect(Currency.eur.description == "EUR")
        for (code, exponent) in Currency.supported {
            let currency = try Currency(code: code)
            #expect(currency.exponent == exponent)
            #expect(currency.code == code)
            #expect(code.count == 3 && code.allSatisfy { $0.isASCII && $0.isUppercase })
        }
    }

    @Test("refuses unsupported codes", arguments: ["XXX", "eur", "Eur", "", "EURO", "EU", " EUR", "BTC"])
    func unsupportedCurrency(code: String) {
        #expect(throws: WireError.unsupportedCurrency(code)) { try Currency(code: code) }
    }

    @Test func unsupportedCurrencyDescription() {
        #expect(WireError.unsupportedCurrency("XXX").description == "unsupported currency 'XXX'")
    }
}
