import Crypto
import Foundation

/// Invitation codes as people type them: letters and digits in groups ("K7QM-4XRD-9TWP"),
/// compared without case, spaces or dashes. Only a hash of a code is stored; a generated code
/// has 60 random bits, from an alphabet without 0/O and 1/I/L so that none is misread.
public enum InvitationCodes {
    static let alphabet = Array("23456789ABCDEFGHJKMNPQRSTUVWXYZ")

    /// A new code of 12 characters in groups of four.
    public static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let characters = (0..<12).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }
        return stride(from: 0, to: 12, by: 4).map { String(characters[$0..<$0 + 4]) }.joined(separator: "-")
    }

    /// The code in upper case without spaces and dashes; nil unless that is 4 to 32 ASCII
    /// letters and digits.
    public static func normalized(_ text: String) -> String? {
        guard text.utf8.count <= 64 else { return nil }  // the contract's maxLength
        let kept = text.uppercased().filter { $0 != "-" && $0 != " " }
        guard (4...32).contains(kept.count), kept.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            return nil
        }
        return kept
    }

    /// What the ledger keeps of a normalised code.
    public static func hash(_ normalized: String) -> [UInt8] {
        Array(SHA256.hash(data: Array("horizon/invitation-code/v1\n\(normalized)".utf8)))
    }

    /// The first characters the operator's list shows.
    public static func hint(_ normalized: String) -> String { String(normalized.prefix(4)) + "…" }
}
