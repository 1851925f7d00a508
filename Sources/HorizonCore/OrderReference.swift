/// The merchant's own reference for a sale (its point-of-sale order number), as the register
/// gives it to the terminal: at most 100 characters, as a payment intent's reference at the
/// server, of printable text in one word (the register socket separates its words by spaces).
public enum OrderReference {
    public static let maximumCharacters = 100

    /// What a reference must be, for error messages.
    public static let rule =
        "a reference is 1 to \(maximumCharacters) characters of printable text without spaces"

    /// Whether `text` may be an order reference at the terminal. Bytes that were not UTF-8 (read
    /// as U+FFFD) are refused, so the reference stored is the one the register sent.
    public static func isValid(_ text: String) -> Bool {
        guard !text.isEmpty, text.unicodeScalars.count <= maximumCharacters, !text.containsControlOrFormatCharacters
        else { return false }
        return !text.unicodeScalars.contains { $0.properties.isWhitespace || $0 == "\u{FFFD}" }
    }
}
