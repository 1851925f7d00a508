import Foundation
import HorizonCore
import HorizonLedger

/// The server's own checks of a card before any processor sees it: the number (length, brand,
/// Luhn check digit), the expiry and the CVC. Each refusal has its own stable code and says
/// what to correct; none repeats the number or the CVC.
enum CardCheck {
    /// How far ahead an expiry may be: cards are issued for a few years, so anything further
    /// is a typing mistake.
    static let longestValidity = 20

    static func details(
        cardholder: String, number: String, expiry: String, cvc: String, at time: UnixTime
    ) throws(APIError) -> CardDetails {
        let digits = try self.number(number)
        let brand = try self.brand(of: digits)
        let (month, year) = try self.expiry(expiry, at: time)
        try self.cvc(cvc, brand: brand)
        return CardDetails(
            number: digits, expiryMonth: month, expiryYear: year, cvc: cvc, cardholder: cardholder, brand: brand)
    }

    /// The longest card number as typed, separators included (the contract's `maxLength`).
    static let longestTypedNumber = 32

    /// The digits of a card number typed with or without spaces or dashes.
    static func number(_ typed: String) throws(APIError) -> String {
        guard typed.unicodeScalars.count <= longestTypedNumber else {
            throw APIError(
                .cardNumberInvalid,
                "the card number must be at most \(longestTypedNumber) characters with its spaces and dashes")
        }
        let digits = typed.filter { $0 != " " && $0 != "-" }
        guard digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw APIError(
                .cardNumberInvalid, "the card number may contain only digits (spaces and dashes are ignored)")
        }
        guard (13...19).contains(digits.count) else {
            throw APIError(
                .cardNumberInvalid,
                "the card number must be 13 to 19 digits (got \(digits.count)); check it on the card")
        }
        guard luhnIsValid(digits) else {
            throw APIError(
                .cardNumberInvalid,
                "the card number is not valid (its check digit is wrong); check for a mistyped digit")
        }
        return digits
    }

    /// The Luhn (mod 10) check every card number carries in its last digit.
    static func luhnIsValid(_ digits: String) -> Bool {
        var sum = 0
        for (index, character) in digits.reversed().enumerated() {
            guard let digit = character.wholeNumberValue else { return false }
            if index % 2 == 1 {
                let doubled = digit * 2
                sum += doubled > 9 ? doubled - 9 : doubled
            } else {
                sum += digit
            }
        }
        return sum % 10 == 0
    }

    /// The network by the number's prefix and length (ISO/IEC 7812 issuer ranges).
    static func brand(of digits: String) throws(APIError) -> CardBrand {
        let two = Int(digits.prefix(2)) ?? 0
        let four = Int(digits.prefix(4)) ?? 0
        if digits.hasPrefix("4"), [13, 16, 19].contains(digits.count) { return .visa }
        if (51...55).contains(two) || (2221...2720).contains(four), digits.count == 16 { return .mastercard }
        if two == 34 || two == 37, digits.count == 15 { return .amex }
        throw APIError(
            .cardBrandUnsupported, "only Visa, Mastercard and American Express cards can be added; use one of those")
    }

    /// MM/YY (or MM/YYYY): valid through the end of that month, not past, at most 20 years ahead.
    static func expiry(_ typed: String, at time: UnixTime) throws(APIError) -> (month: Int, year: Int) {
        let parts = typed.trimmingCharacters(in: .whitespaces).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 2, parts[1].count == 2 || parts[1].count == 4,
            parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let month = Int(parts[0]), let typedYear = Int(parts[1])
        else {
            throw APIError(.cardExpiryInvalid, "the expiry must be MM/YY as printed on the card, e.g. 04/29")
        }
        guard (1...12).contains(month) else {
            throw APIError(.cardExpiryInvalid, "the expiry's month must be 01 to 12 (got \(parts[0]))")
        }
        let year = parts[1].count == 2 ? 2000 + typedYear : typedYear
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let today = calendar.dateComponents([.year, .month], from: Date(timeIntervalSince1970: TimeInterval(time)))
        let (thisYear, thisMonth) = (today.year ?? 1970, today.month ?? 1)
        if year < thisYear || (year == thisYear && month < thisMonth) {
            throw APIError(
                .cardExpired,
                "the card expired at the end of \(parts[0])/\(String(format: "%02d", year % 100)); use a card that is still valid"
            )
        }
        guard year <= thisYear + longestValidity else {
            throw APIError(
                .cardExpiryInvalid,
                "the expiry \(typed) is more than \(longestValidity) years ahead; check the year on the card")
        }
        return (month, year)
    }

    /// 3 digits on the back, or 4 on the front of an American Express card.
    static func cvc(_ typed: String, brand: CardBrand) throws(APIError) {
        let length = brand == .amex ? 4 : 3
        guard typed.count == length, typed.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw APIError(
                .cardCVCInvalid,
                brand == .amex
                    ? "the CVC of an American Express card is the 4 digits printed on its front"
                    : "the CVC must be the 3 digits printed on the back of the card")
        }
    }
}
