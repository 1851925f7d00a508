internal import CDBus

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The D-Bus naming and typing rules, checked with libdbus's own validators.
///
/// Every name and signature is checked before it is handed to libdbus, because libdbus treats an
/// invalid one passed to its API as a programming error and aborts the process. A string with an
/// embedded NUL would be silently cut short by C, so it is refused here too.
enum DBusSyntax {
    /// The type codes of D-Bus's basic (non-container) types, the only ones allowed as dictionary keys.
    static let basicTypeCodes: Set<Character> = ["y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g", "h"]

    static func isValidString(_ value: String) -> Bool {
        guard !value.utf8.contains(0) else { return false }
        return value.withCString { dbus_validate_utf8($0, nil) != 0 }
    }

    static func isValidObjectPath(_ value: String) -> Bool {
        guard !value.utf8.contains(0) else { return false }
        return value.withCString { dbus_validate_path($0, nil) != 0 }
    }

    static func isValidInterface(_ value: String) -> Bool {
        guard !value.utf8.contains(0) else { return false }
        return value.withCString { dbus_validate_interface($0, nil) != 0 }
    }

    static func isValidMember(_ value: String) -> Bool {
        guard !value.utf8.contains(0) else { return false }
        return value.withCString { dbus_validate_member($0, nil) != 0 }
    }

    static func isValidErrorName(_ value: String) -> Bool {
        guard !value.utf8.contains(0) else { return false }
        return value.withCString { dbus_validate_error_name($0, nil) != 0 }
    }

    static func isValidBusName(_ value: String) -> Bool {
        guard !value.utf8.contains(0) else { return false }
        return value.withCString { dbus_validate_bus_name($0, nil) != 0 }
    }

    /// Any sequence of complete types, including the empty signature.
    static func isValidSignature(_ value: String) -> Bool {
        guard !value.utf8.contains(0) else { return false }
        return value.withCString { dbus_signature_validate($0, nil) != 0 }
    }

    /// Exactly one complete type.
    static func isValidSingleSignature(_ value: String) -> Bool {
        guard !value.utf8.contains(0) else { return false }
        return value.withCString { dbus_signature_validate_single($0, nil) != 0 }
    }

    static func isOpenDescriptor(_ descriptor: Int32) -> Bool {
        descriptor >= 0 && fcntl(descriptor, F_GETFD) >= 0
    }

    /// Splits a valid signature into its complete types (`"sa{sv}(ii)"` → `["s", "a{sv}", "(ii)"]`);
    /// nil if it is not a valid signature.
    static func completeTypes(of signature: String) -> [String]? {
        guard isValidSignature(signature) else { return nil }
        var types: [String] = []
        var current = ""
        var depth = 0
        for character in signature {
            current.append(character)
            switch character {
            case "a": continue
            case "(", "{": depth += 1
            case ")", "}": depth -= 1
            default: break
            }
            if depth == 0 {
                types.append(current)
                current = ""
            }
        }
        return current.isEmpty ? types : nil
    }

    /// Checks an identifier and says which rule it breaks.
    static func require(_ valid: Bool, _ what: String, _ value: String) throws(DBusError) {
        guard valid else { throw .invalidArguments("invalid D-Bus \(what) '\(value)'") }
    }

    /// Text libdbus accepts as an error message: valid UTF-8 without NUL (a NUL would end it early).
    static func sanitizedMessage(_ message: String) -> String {
        let cleaned = String(message.unicodeScalars.filter { $0 != "\0" }.map(Character.init))
        return isValidString(cleaned) ? cleaned : "(unprintable message)"
    }
}
