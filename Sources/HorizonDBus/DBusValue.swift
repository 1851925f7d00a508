/// One D-Bus value of any type, as it travels in a message.
///
/// Containers carry the signatures of their elements, so an empty array or dictionary still
/// marshals with the right type (BlueZ rejects `a{sv}` sent as anything else, even when empty).
/// Every value knows its own `signature`. Values are checked before they reach libdbus
/// (`validate()`), because libdbus aborts the process on some malformed input rather than
/// returning an error, and the bus daemon disconnects a client that sends an invalid message.
public indirect enum DBusValue: Sendable, Equatable, CustomStringConvertible {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    /// An object path such as `/org/bluez/hci0`.
    case objectPath(String)
    /// A type signature such as `a{sv}`.
    case signature(String)
    /// A Unix file descriptor (`h`); see `DBusFileDescriptor` for who closes it.
    case unixFileDescriptor(DBusFileDescriptor)
    /// An array whose elements all have the single complete type `elementSignature`.
    case array(elementSignature: String, [DBusValue])
    /// A dictionary (`a{kv}`), its entries in wire order; `keySignature` must be a basic type.
    case dictionary(keySignature: String, valueSignature: String, [(key: DBusValue, value: DBusValue)])
    /// A structure (`(…)`) of one or more fields.
    case structure([DBusValue])
    /// A variant (`v`): a value that carries its own signature.
    case variant(DBusValue)

    /// The value's D-Bus type signature (one complete type).
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFileDescriptor: "h"
        case .array(let element, _): "a" + element
        case .dictionary(let key, let value, _): "a{" + key + value + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }

    public static func == (lhs: DBusValue, rhs: DBusValue) -> Bool {
        switch (lhs, rhs) {
        case (.byte(let a), .byte(let b)): a == b
        case (.boolean(let a), .boolean(let b)): a == b
        case (.int16(let a), .int16(let b)): a == b
        case (.uint16(let a), .uint16(let b)): a == b
        case (.int32(let a), .int32(let b)): a == b
        case (.uint32(let a), .uint32(let b)): a == b
        case (.int64(let a), .int64(let b)): a == b
        case (.uint64(let a), .uint64(let b)): a == b
        case (.double(let a), .double(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.objectPath(let a), .objectPath(let b)): a == b
        case (.signature(let a), .signature(let b)): a == b
        case (.unixFileDescriptor(let a), .unixFileDescriptor(let b)): a == b
        case (.array(let sa, let a), .array(let sb, let b)): sa == sb && a == b
        case (.dictionary(let ka, let va, let a), .dictionary(let kb, let vb, let b)):
            ka == kb && va == vb && a.count == b.count
                && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case (.structure(let a), .structure(let b)): a == b
        case (.variant(let a), .variant(let b)): a == b
        default: false
        }
    }

    public var description: String {
        switch self {
        case .byte(let value): "\(value)"
        case .boolean(let value): "\(value)"
        case .int16(let value): "\(value)"
        case .uint16(let value): "\(value)"
        case .int32(let value): "\(value)"
        case .uint32(let value): "\(value)"
        case .int64(let value): "\(value)"
        case .uint64(let value): "\(value)"
        case .double(let value): "\(value)"
        case .string(let value): "\"\(value)\""
        case .objectPath(let value): value
        case .signature(let value): "<\(value)>"
        case .unixFileDescriptor(let value): value.description
        case .array(let element, let items):
            element == "y" ? "ay[\(items.count)]" : "[" + items.map(\.description).joined(separator: ", ") + "]"
        case .dictionary(_, _, let entries):
            "{" + entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .structure(let fields): "(" + fields.map(\.description).joined(separator: ", ") + ")"
        case .variant(let inner): "<\(inner.signature)> \(inner)"
        }
    }
}

// MARK: Typed accessors

extension DBusValue {
    public var byte: UInt8? { if case .byte(let value) = self { value } else { nil } }
    public var boolean: Bool? { if case .boolean(let value) = self { value } else { nil } }
    public var int16: Int16? { if case .int16(let value) = self { value } else { nil } }
    public var uint16: UInt16? { if case .uint16(let value) = self { value } else { nil } }
    public var int32: Int32? { if case .int32(let value) = self { value } else { nil } }
    public var uint32: UInt32? { if case .uint32(let value) = self { value } else { nil } }
    public var int64: Int64? { if case .int64(let value) = self { value } else { nil } }
    public var uint64: UInt64? { if case .uint64(let value) = self { value } else { nil } }
    public var double: Double? { if case .double(let value) = self { value } else { nil } }
    public var string: String? { if case .string(let value) = self { value } else { nil } }
    public var objectPath: String? { if case .objectPath(let value) = self { value } else { nil } }
    public var signatureValue: String? { if case .signature(let value) = self { value } else { nil } }
    public var fileDescriptor: DBusFileDescriptor? {
        if case .unixFileDescriptor(let value) = self { value } else { nil }
    }
    /// The value inside a variant (one level).
    public var variant: DBusValue? { if case .variant(let value) = self { value } else { nil } }
    /// The value with every level of variant removed.
    public var unwrapped: DBusValue {
        var value = self
        while case .variant(let inner) = value { value = inner }
        return value
    }
    public var structure: [DBusValue]? { if case .structure(let fields) = self { fields } else { nil } }
    /// The elements of an array (not of a dictionary).
    public var array: [DBusValue]? { if case .array(_, let items) = self { items } else { nil } }
    /// The entries of a dictionary, in wire order.
    public var dictionary: [(key: DBusValue, value: DBusValue)]? {
        if case .dictionary(_, _, let entries) = self { entries } else { nil }
    }

    /// The bytes of an `ay`.
    public var bytes: [UInt8]? {
        guard case .array("y", let items) = self else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(items.count)
        for item in items {
            guard case .byte(let value) = item else { return nil }
            bytes.append(value)
        }
        return bytes
    }

    /// The strings of an `as`, or the paths of an `ao`.
    public var strings: [String]? {
        guard case .array(let element, let items) = self, element == "s" || element == "o" else { return nil }
        var strings: [String] = []
        for item in items {
            switch item {
            case .string(let value), .objectPath(let value): strings.append(value)
            default: return nil
            }
        }
        return strings
    }

    /// The entries of an `a{sv}` (or any `a{s…}`), values with their variant removed. A repeated key
    /// keeps its last value, as most D-Bus bindings do.
    public var stringVariantDictionary: [String: DBusValue]? {
        guard case .dictionary(let key, _, let entries) = self, key == "s" || key == "o" else { return nil }
        var result: [String: DBusValue] = [:]
        for entry in entries {
            switch entry.key {
            case .string(let name), .objectPath(let name): result[name] = entry.value.variant ?? entry.value
            default: return nil
            }
        }
        return result
    }

    /// The entries of an `a{qv}` (BlueZ's ManufacturerData), values with their variant removed.
    public var uint16VariantDictionary: [UInt16: DBusValue]? {
        guard case .dictionary("q", _, let entries) = self else { return nil }
        var result: [UInt16: DBusValue] = [:]
        for entry in entries {
            guard case .uint16(let key) = entry.key else { return nil }
            result[key] = entry.value.variant ?? entry.value
        }
        return result
    }

    /// An `a{sa{sv}}`: interface name to its properties (InterfacesAdded, one object of GetManagedObjects).
    public var interfacesAndProperties: [String: [String: DBusValue]]? {
        guard case .dictionary(let key, _, let entries) = self, key == "s" else { return nil }
        var result: [String: [String: DBusValue]] = [:]
        for entry in entries {
            guard case .string(let name) = entry.key, let properties = entry.value.stringVariantDictionary else {
                return nil
            }
            result[name] = properties
        }
        return result
    }

    /// An `a{oa{sa{sv}}}` (GetManagedObjects' reply): object path to its interfaces and their properties.
    public var managedObjects: [String: [String: [String: DBusValue]]]? {
        guard case .dictionary("o", _, let entries) = self else { return nil }
        var result: [String: [String: [String: DBusValue]]] = [:]
        for entry in entries {
            guard case .objectPath(let path) = entry.key, let interfaces = entry.value.interfacesAndProperties else {
                return nil
            }
            result[path] = interfaces
        }
        return result
    }
}

// MARK: Builders

extension DBusValue {
    /// An `ay`.
    public static func byteArray(_ bytes: some Sequence<UInt8>) -> DBusValue {
        .array(elementSignature: "y", bytes.map { .byte($0) })
    }

    /// An `as`.
    public static func stringArray(_ strings: [String]) -> DBusValue {
        .array(elementSignature: "s", strings.map { .string($0) })
    }

    /// An `ao`.
    public static func objectPathArray(_ paths: [String]) -> DBusValue {
        .array(elementSignature: "o", paths.map { .objectPath($0) })
    }

    /// An `a{sv}`; every value is wrapped in a variant, and keys go out sorted so messages are reproducible.
    public static func stringVariantDictionary(_ entries: [String: DBusValue]) -> DBusValue {
        .dictionary(
            keySignature: "s", valueSignature: "v",
            entries.sorted { $0.key < $1.key }.map { (key: .string($0.key), value: .variant($0.value)) })
    }

    /// An `a{qv}` (BlueZ's ManufacturerData, with `ay` values); keys go out sorted.
    public static func uint16VariantDictionary(_ entries: [UInt16: DBusValue]) -> DBusValue {
        .dictionary(
            keySignature: "q", valueSignature: "v",
            entries.sorted { $0.key < $1.key }.map { (key: .uint16($0.key), value: .variant($0.value)) })
    }

    /// An `a{sa{sv}}`: interface name to its properties.
    public static func interfacesAndProperties(_ interfaces: [String: [String: DBusValue]]) -> DBusValue {
        .dictionary(
            keySignature: "s", valueSignature: "a{sv}",
            interfaces.sorted { $0.key < $1.key }.map {
                (key: .string($0.key), value: .stringVariantDictionary($0.value))
            })
    }

    /// An `a{oa{sa{sv}}}`: object path to its interfaces and their properties.
    public static func managedObjects(_ objects: [String: [String: [String: DBusValue]]]) -> DBusValue {
        .dictionary(
            keySignature: "o", valueSignature: "a{sa{sv}}",
            objects.sorted { $0.key < $1.key }.map {
                (key: .objectPath($0.key), value: .interfacesAndProperties($0.value))
            })
    }
}

// MARK: Validation

extension DBusValue {
    /// The largest `ay` libdbus accepts (the D-Bus limit on an array's size, 64 MiB).
    static let maximumArrayBytes = 64 * 1024 * 1024
    /// D-Bus limits the nesting of containers (arrays, structures, dictionary entries, variants)
    /// in one message to 64 levels in total.
    static let maximumDepth = 64

    /// Checks everything libdbus would abort on or the bus would reject, so that marshalling can
    /// only fail for lack of memory: valid signatures, elements matching their array's element type,
    /// basic dictionary keys, strings without NUL, valid object paths, open file descriptors, no
    /// empty structures, nesting within the D-Bus limits.
    public func validate() throws(DBusError) {
        try validate(depth: 0)
    }

    func validate(depth: Int) throws(DBusError) {
        guard depth <= Self.maximumDepth else {
            throw .invalidArguments("value nested deeper than \(Self.maximumDepth) containers")
        }
        switch self {
        case .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double:
            return
        case .string(let value):
            guard DBusSyntax.isValidString(value) else {
                throw .invalidArguments("string is not valid D-Bus UTF-8 (contains NUL?): \(value.debugDescription)")
            }
        case .objectPath(let value):
            guard DBusSyntax.isValidObjectPath(value) else { throw .invalidArguments("invalid object path '\(value)'") }
        case .signature(let value):
            guard DBusSyntax.isValidSignature(value) else { throw .invalidArguments("invalid signature '\(value)'") }
        case .unixFileDescriptor(let descriptor):
            guard let raw = descriptor.rawValue, DBusSyntax.isOpenDescriptor(raw) else {
                throw .invalidArguments("file descriptor is closed or was taken")
            }
        case .array(let element, let items):
            guard DBusSyntax.isValidSingleSignature(element) else {
                throw .invalidArguments("invalid array element signature '\(element)'")
            }
            guard DBusSyntax.isValidSingleSignature("a" + element) else {
                throw .invalidArguments("array type 'a\(element)' is nested too deeply")
            }
            if element == "y" {
                guard items.count <= Self.maximumArrayBytes else {
                    throw .invalidArguments("byte array of \(items.count) bytes exceeds the D-Bus limit")
                }
            }
            for item in items {
                guard item.signature == element else {
                    throw .invalidArguments("array of '\(element)' holds a value of type '\(item.signature)'")
                }
                try item.validate(depth: depth + 1)
            }
        case .dictionary(let key, let value, let entries):
            guard key.count == 1, let code = key.first, DBusSyntax.basicTypeCodes.contains(code) else {
                throw .invalidArguments("dictionary key type '\(key)' is not a basic type")
            }
            guard DBusSyntax.isValidSingleSignature("a{" + key + value + "}") else {
                throw .invalidArguments("invalid dictionary type 'a{\(key)\(value)}'")
            }
            for entry in entries {
                guard entry.key.signature == key, entry.value.signature == value else {
                    throw .invalidArguments(
                        "dictionary a{\(key)\(value)} holds an entry of types '\(entry.key.signature)' and "
                            + "'\(entry.value.signature)'")
                }
                try entry.key.validate(depth: depth + 2)
                try entry.value.validate(depth: depth + 2)
            }
        case .structure(let fields):
            guard !fields.isEmpty else { throw .invalidArguments("a D-Bus structure needs at least one field") }
            guard DBusSyntax.isValidSingleSignature(signature) else {
                throw .invalidArguments("invalid structure type '\(signature)'")
            }
            for field in fields { try field.validate(depth: depth + 1) }
        case .variant(let inner):
            try inner.validate(depth: depth + 1)
        }
    }
}
