import HorizonCore
import Testing

@Suite("Hexadecimal text")
struct HexTests {
    @Test func encodesLowerCaseTwoDigitsPerByte() {
        #expect([UInt8]().hexString == "")
        #expect([0x00].hexString == "00")
        #expect([0x0A, 0xFF, 0x10, 0x7E].hexString == "0aff107e")
        #expect([UInt8](0...255).hexString.count == 512)
        #expect(ArraySlice<UInt8>([1, 2, 3]).hexString == "010203")
    }

    @Test func roundTripOfEveryByte() {
        let all = [UInt8](0...255)
        #expect([UInt8](hexString: all.hexString) == all)
        #expect([UInt8](hexString: all.hexString.uppercased()) == all)
    }

    @Test func parsesEitherCase() {
        #expect([UInt8](hexString: "DEADbeef") == [0xDE, 0xAD, 0xBE, 0xEF])
        #expect([UInt8](hexString: "") == [])
        #expect([UInt8](hexString: "00ff") == [0x00, 0xFF])
    }

    @Test(
        "refuses anything but pairs of hex digits",
        arguments: ["0", "abc", "0g", "g0", "zz", "0x00", " 00", "00 ", "0 0", "-1", "１２", "é0", "ab\n", "a\u{301}"])
    func refuses(text: String) {
        #expect([UInt8](hexString: text) == nil)
    }
}
