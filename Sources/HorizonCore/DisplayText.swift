/// Text that came from the other side (a terminal's merchant name, label, cashier and items, a
/// wallet's coupon code, an error message, a control-socket request) made safe to print: control
/// characters (C0, DEL, C1 — among them ESC, which starts terminal escape sequences) and the
/// Unicode bidirectional controls (which can make a line read in another order than it is stored,
/// e.g. "12.00" shown as "00.21") each become U+FFFD. Everything else, accents and scripts
/// included, is kept.
extension String {
    public var sanitizedForDisplay: String {
        guard unicodeScalars.contains(where: \.isUnsafeForDisplay) else { return self }
        var result = String.UnicodeScalarView()
        for scalar in unicodeScalars {
            result.append(scalar.isUnsafeForDisplay ? "\u{FFFD}" : scalar)
        }
        return String(result)
    }
}

extension Unicode.Scalar {
    /// Controls and bidi overrides, embeddings, isolates and marks.
    var isUnsafeForDisplay: Bool {
        switch value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

extension String {
    /// Whether the text holds a control character (Unicode category Cc) or a format character
    /// (Cf: bidi overrides and isolates, zero-width characters): every name refuses both, so a
    /// name cannot read as something other than what is stored.
    public var containsControlOrFormatCharacters: Bool {
        unicodeScalars.contains {
            $0.properties.generalCategory == .control || $0.properties.generalCategory == .format
        }
    }
}
