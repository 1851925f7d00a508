import HorizonCore
import Testing

@Suite("Text from the other side, made safe to print")
struct DisplayTextTests {
    @Test func ordinaryTextIsKeptAsItIs() {
        for text in ["Café Horizon", "Till 2, Market St", "東京の店", "Ωmega — 12.50 €", ""] {
            #expect(text.sanitizedForDisplay == text)
        }
    }

    @Test func controlCharactersAndEscapeSequencesAreReplaced() {
        #expect("Caf\u{1B}[31mé".sanitizedForDisplay == "Caf\u{FFFD}[31mé")
        #expect("line\nbreak\ttab\r".sanitizedForDisplay == "line\u{FFFD}break\u{FFFD}tab\u{FFFD}")
        #expect("nul\u{0}del\u{7F}c1\u{9B}".sanitizedForDisplay == "nul\u{FFFD}del\u{FFFD}c1\u{FFFD}")
        // An OSC sequence that would set the terminal's title loses its ESC and BEL.
        #expect("\u{1B}]0;pwned\u{7}".sanitizedForDisplay == "\u{FFFD}]0;pwned\u{FFFD}")
    }

    @Test func bidiControlsAreReplaced() throws {
        // "RLO" would show "12.00" as "00.21".
        #expect("pay \u{202E}00.21".sanitizedForDisplay == "pay \u{FFFD}00.21")
        for scalar: UInt32 in [0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x2066, 0x2067, 0x2068, 0x2069] {
            let text = "a" + String(Character(try #require(Unicode.Scalar(scalar)))) + "b"
            #expect(text.sanitizedForDisplay == "a\u{FFFD}b", "U+\(String(scalar, radix: 16))")
        }
    }
}
