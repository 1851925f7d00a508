internal import CDBus

/// D-Bus type codes as libdbus's `int` type arguments.
enum TypeCode {
    static let invalid: Int32 = 0
    static let byte = code("y")
    static let boolean = code("b")
    static let int16 = code("n")
    static let uint16 = code("q")
    static let int32 = code("i")
    static let uint32 = code("u")
    static let int64 = code("x")
    static let uint64 = code("t")
    static let double = code("d")
    static let string = code("s")
    static let objectPath = code("o")
    static let signature = code("g")
    static let unixFD = code("h")
    static let array = code("a")
    static let variant = code("v")
    static let structure = code("r")
    static let dictEntry = code("e")

    private static func code(_ character: Unicode.Scalar) -> Int32 { Int32(character.value) }
}

/// A reference-counted libdbus message. libdbus's message reference counting is atomic and a
/// message is not modified once built or received, so sharing one between threads is safe.
final class Message: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Adopts a reference the caller already holds (from `dbus_message_new_*` or a steal).
    init(adopting pointer: OpaquePointer) { self.pointer = pointer }

    /// Takes a new reference to a message libdbus lends us (inside a filter, for example).
    init(retaining pointer: OpaquePointer) {
        dbus_message_ref(pointer)
        self.pointer = pointer
    }

    deinit { dbus_message_unref(pointer) }

    var type: Int32 { dbus_message_get_type(pointer) }
    var path: String? { dbus_message_get_path(pointer).map { String(cString: $0) } }
    var interface: String? { dbus_message_get_interface(pointer).map { String(cString: $0) } }
    var member: String? { dbus_message_get_member(pointer).map { String(cString: $0) } }
    var sender: String? { dbus_message_get_sender(pointer).map { String(cString: $0) } }
    var destination: String? { dbus_message_get_destination(pointer).map { String(cString: $0) } }
    var errorName: String? { dbus_message_get_error_name(pointer).map { String(cString: $0) } }
    var signature: String { dbus_message_get_signature(pointer).map { String(cString: $0) } ?? "" }
    var expectsReply: Bool { dbus_message_get_no_reply(pointer) == 0 }

    /// Marks a call whose reply nobody will read, so the peer need not send one.
    func setNoReply() { dbus_message_set_no_reply(pointer, 1) }

    /// A method call; every name is validated first (libdbus aborts on invalid ones).
    static func methodCall(
        destination: String?, path: String, interface: String?, method: String, arguments: [DBusValue]
    ) throws(DBusError) -> Message {
        if let destination { try DBusSyntax.require(DBusSyntax.isValidBusName(destination), "bus name", destination) }
        try DBusSyntax.require(DBusSyntax.isValidObjectPath(path), "object path", path)
        if let interface { try DBusSyntax.require(DBusSyntax.isValidInterface(interface), "interface name", interface) }
        try DBusSyntax.require(DBusSyntax.isValidMember(method), "method name", method)
        let created = path.withCString { path in
            method.withCString { method in
                withOptionalCString(destination) { destination in
                    withOptionalCString(interface) { interface in
                        dbus_message_new_method_call(destination, path, interface, method)
                    }
                }
            }
        }
        guard let created else { throw DBusError.noMemory }
        let message = Message(adopting: created)
        try message.append(arguments)
        return message
    }

    static func signal(path: String, interface: String, name: String, arguments: [DBusValue], destination: String?)
        throws(DBusError) -> Message
    {
        try DBusSyntax.require(DBusSyntax.isValidObjectPath(path), "object path", path)
        try DBusSyntax.require(DBusSyntax.isValidInterface(interface), "interface name", interface)
        try DBusSyntax.require(DBusSyntax.isValidMember(name), "signal name", name)
        if let destination { try DBusSyntax.require(DBusSyntax.isValidBusName(destination), "bus name", destination) }
        let created = path.withCString { path in
            interface.withCString { interface in
                name.withCString { name in dbus_message_new_signal(path, interface, name) }
            }
        }
        guard let created else { throw DBusError.noMemory }
        let message = Message(adopting: created)
        if let destination {
            guard destination.withCString({ dbus_message_set_destination(message.pointer, $0) }) != 0 else {
                throw DBusError.noMemory
            }
        }
        try message.append(arguments)
        return message
    }

    /// The reply to this method call carrying `values`.
    func methodReturn(_ values: [DBusValue]) throws(DBusError) -> Message {
        guard let created = dbus_message_new_method_return(pointer) else { throw DBusError.noMemory }
        let message = Message(adopting: created)
        try message.append(values)
        return message
    }

    /// The error reply to this method call; an invalid error name becomes `Failed` (libdbus would abort).
    func errorReply(_ error: DBusError) -> Message? {
        let name = DBusSyntax.isValidErrorName(error.name) ? error.name : DBusError.Name.failed
        let text = DBusSyntax.isValidErrorName(error.name) ? error.message : "\(error.name): \(error.message)"
        let created = name.withCString { name in
            DBusSyntax.sanitizedMessage(text).withCString { text in dbus_message_new_error(pointer, name, text) }
        }
        return created.map { Message(adopting: $0) }
    }

    // MARK: Arguments

    /// Appends `values` after checking them all, so a bad value leaves no half-written message.
    func append(_ values: [DBusValue]) throws(DBusError) {
        for value in values { try value.validate() }
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(pointer, &iterator)
        for value in values { try Self.write(value, to: &iterator) }
    }

    /// Every argument of the message. Throws (never crashes) on a type this layer does not know.
    func arguments() throws(DBusError) -> [DBusValue] {
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(pointer, &iterator) != 0 else { return [] }
        var values: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iterator) != TypeCode.invalid {
            values.append(try Self.read(&iterator, depth: 0))
            dbus_message_iter_next(&iterator)
        }
        return values
    }

    /// The `DBusError` an error reply carries: its name and its first argument if that is a string.
    func asError() -> DBusError {
        let name = errorName ?? DBusError.Name.failed
        var text = ""
        var iterator = DBusMessageIter()
        if dbus_message_iter_init(pointer, &iterator) != 0, dbus_message_iter_get_arg_type(&iterator) == TypeCode.string
        {
            var value = DBusBasicValue()
            dbus_message_iter_get_basic(&iterator, &value)
            if let string = value.str { text = String(cString: string) }
        }
        return DBusError(name: name, message: text)
    }

    // MARK: Writing

    private static func write(_ value: DBusValue, to iterator: inout DBusMessageIter) throws(DBusError) {
        let written: Bool
        switch value {
        case .byte(let byte): written = appendBasic(&iterator, TypeCode.byte, byte)
        case .boolean(let bool): written = appendBasic(&iterator, TypeCode.boolean, dbus_bool_t(bool ? 1 : 0))
        case .int16(let number): written = appendBasic(&iterator, TypeCode.int16, number)
        case .uint16(let number): written = appendBasic(&iterator, TypeCode.uint16, number)
        case .int32(let number): written = appendBasic(&iterator, TypeCode.int32, number)
        case .uint32(let number): written = appendBasic(&iterator, TypeCode.uint32, number)
        case .int64(let number): written = appendBasic(&iterator, TypeCode.int64, number)
        case .uint64(let number): written = appendBasic(&iterator, TypeCode.uint64, number)
        case .double(let number): written = appendBasic(&iterator, TypeCode.double, number)
        case .string(let string): written = appendString(&iterator, TypeCode.string, string)
        case .objectPath(let path): written = appendString(&iterator, TypeCode.objectPath, path)
        case .signature(let signature): written = appendString(&iterator, TypeCode.signature, signature)
        case .unixFileDescriptor(let descriptor):
            // libdbus duplicates the descriptor; ours stays open until its owner releases it.
            guard let raw = descriptor.rawValue else { throw .invalidArguments("file descriptor is closed") }
            written = appendBasic(&iterator, TypeCode.unixFD, raw)
        case .array(let element, let items):
            try writeContainer(&iterator, TypeCode.array, element) { (sub) throws(DBusError) in
                if element == "y" {
                    let bytes = items.compactMap(\.byte)
                    let appended = bytes.withUnsafeBufferPointer { buffer -> dbus_bool_t in
                        var base = buffer.baseAddress
                        return withUnsafeMutablePointer(to: &base) {
                            dbus_message_iter_append_fixed_array(&sub, TypeCode.byte, $0, Int32(buffer.count))
                        }
                    }
                    guard appended != 0 else { throw DBusError.noMemory }
                } else {
                    for item in items { try write(item, to: &sub) }
                }
            }
            return
        case .dictionary(let key, let valueType, let entries):
            try writeContainer(&iterator, TypeCode.array, "{" + key + valueType + "}") { (sub) throws(DBusError) in
                for entry in entries {
                    try writeContainer(&sub, TypeCode.dictEntry, nil) { (pair) throws(DBusError) in
                        try write(entry.key, to: &pair)
                        try write(entry.value, to: &pair)
                    }
                }
            }
            return
        case .structure(let fields):
            try writeContainer(&iterator, TypeCode.structure, nil) { (sub) throws(DBusError) in
                for field in fields { try write(field, to: &sub) }
            }
            return
        case .variant(let inner):
            try writeContainer(&iterator, TypeCode.variant, inner.signature) { (sub) throws(DBusError) in
                try write(inner, to: &sub)
            }
            return
        }
        guard written else { throw DBusError.noMemory }
    }

    private static func appendBasic<T>(_ iterator: inout DBusMessageIter, _ type: Int32, _ value: T) -> Bool {
        var copy = value
        return withUnsafePointer(to: &copy) { dbus_message_iter_append_basic(&iterator, type, $0) } != 0
    }

    private static func appendString(_ iterator: inout DBusMessageIter, _ type: Int32, _ string: String) -> Bool {
        string.withCString { characters in
            var pointer: UnsafePointer<CChar>? = characters
            return withUnsafePointer(to: &pointer) { dbus_message_iter_append_basic(&iterator, type, $0) } != 0
        }
    }

    /// Opens a container, fills it with `body`, and closes it; abandons it if `body` throws, as
    /// libdbus requires of every opened container.
    private static func writeContainer(
        _ iterator: inout DBusMessageIter, _ type: Int32, _ contained: String?,
        _ body: (inout DBusMessageIter) throws(DBusError) -> Void
    ) throws(DBusError) {
        var sub = DBusMessageIter()
        let opened = withOptionalCString(contained) { dbus_message_iter_open_container(&iterator, type, $0, &sub) }
        guard opened != 0 else { throw DBusError.noMemory }
        do {
            try body(&sub)
        } catch {
            dbus_message_iter_abandon_container(&iterator, &sub)
            throw error
        }
        guard dbus_message_iter_close_container(&iterator, &sub) != 0 else { throw DBusError.noMemory }
    }

    // MARK: Reading

    /// The value at `iterator`. libdbus has already validated the message against its signature
    /// (and the nesting limits), so this only meets well-formed data; a type code it does not know
    /// still becomes an error rather than a trap.
    private static func read(_ iterator: inout DBusMessageIter, depth: Int) throws(DBusError) -> DBusValue {
        guard depth <= DBusValue.maximumDepth else {
            throw .invalidArguments("value nested deeper than \(DBusValue.maximumDepth) containers")
        }
        let type = dbus_message_iter_get_arg_type(&iterator)
        switch type {
        case TypeCode.byte: return .byte(basic(&iterator).byt)
        case TypeCode.boolean: return .boolean(basic(&iterator).bool_val != 0)
        case TypeCode.int16: return .int16(basic(&iterator).i16)
        case TypeCode.uint16: return .uint16(basic(&iterator).u16)
        case TypeCode.int32: return .int32(basic(&iterator).i32)
        case TypeCode.uint32: return .uint32(basic(&iterator).u32)
        case TypeCode.int64: return .int64(Int64(basic(&iterator).i64))
        case TypeCode.uint64: return .uint64(UInt64(basic(&iterator).u64))
        case TypeCode.double: return .double(basic(&iterator).dbl)
        case TypeCode.string: return .string(try basicString(&iterator))
        case TypeCode.objectPath: return .objectPath(try basicString(&iterator))
        case TypeCode.signature: return .signature(try basicString(&iterator))
        case TypeCode.unixFD:
            // libdbus hands out a duplicate that we own from here on.
            let descriptor = basic(&iterator).fd
            guard descriptor >= 0 else { throw .invalidArguments("message carries an invalid file descriptor") }
            return .unixFileDescriptor(DBusFileDescriptor(owning: descriptor))
        case TypeCode.array:
            return try readArray(&iterator, depth: depth)
        case TypeCode.structure:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &sub)
            var fields: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != TypeCode.invalid {
                fields.append(try read(&sub, depth: depth + 1))
                dbus_message_iter_next(&sub)
            }
            guard !fields.isEmpty else { throw .invalidArguments("empty structure") }
            return .structure(fields)
        case TypeCode.variant:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &sub)
            guard dbus_message_iter_get_arg_type(&sub) != TypeCode.invalid else {
                throw .invalidArguments("empty variant")
            }
            return .variant(try read(&sub, depth: depth + 1))
        default:
            throw .invalidArguments("unsupported D-Bus type code \(type)")
        }
    }

    private static func readArray(_ iterator: inout DBusMessageIter, depth: Int) throws(DBusError) -> DBusValue {
        let signature = currentSignature(&iterator)
        guard signature.hasPrefix("a"), signature.count >= 2 else {
            throw .invalidArguments("array with unreadable signature '\(signature)'")
        }
        let element = String(signature.dropFirst())
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(&iterator, &sub)
        if element == "y" {
            var base: UnsafeMutableRawPointer? = nil
            var count: Int32 = 0
            withUnsafeMutablePointer(to: &base) { dbus_message_iter_get_fixed_array(&sub, $0, &count) }
            guard count > 0, let base else { return .array(elementSignature: "y", []) }
            let buffer = UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: Int(count))
            return .array(elementSignature: "y", buffer.map { .byte($0) })
        }
        if element.hasPrefix("{"), element.hasSuffix("}") {
            let inner = String(element.dropFirst().dropLast())
            guard let types = DBusSyntax.completeTypes(of: inner), types.count == 2 else {
                throw .invalidArguments("invalid dictionary type '\(signature)'")
            }
            var entries: [(key: DBusValue, value: DBusValue)] = []
            while dbus_message_iter_get_arg_type(&sub) == TypeCode.dictEntry {
                var pair = DBusMessageIter()
                dbus_message_iter_recurse(&sub, &pair)
                let key = try read(&pair, depth: depth + 2)
                guard dbus_message_iter_next(&pair) != 0 else {
                    throw .invalidArguments("dictionary entry without value")
                }
                let value = try read(&pair, depth: depth + 2)
                entries.append((key: key, value: value))
                dbus_message_iter_next(&sub)
            }
            return .dictionary(keySignature: types[0], valueSignature: types[1], entries)
        }
        var items: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&sub) != TypeCode.invalid {
            items.append(try read(&sub, depth: depth + 1))
            dbus_message_iter_next(&sub)
        }
        return .array(elementSignature: element, items)
    }

    private static func basic(_ iterator: inout DBusMessageIter) -> DBusBasicValue {
        var value = DBusBasicValue()
        dbus_message_iter_get_basic(&iterator, &value)
        return value
    }

    private static func basicString(_ iterator: inout DBusMessageIter) throws(DBusError) -> String {
        guard let characters = basic(&iterator).str else { throw .invalidArguments("missing string") }
        return String(cString: characters)
    }

    /// The complete type at `iterator` ("a{sv}" for an array of string-variant entries).
    private static func currentSignature(_ iterator: inout DBusMessageIter) -> String {
        guard let characters = dbus_message_iter_get_signature(&iterator) else { return "" }
        defer { dbus_free(characters) }
        return String(cString: characters)
    }
}

/// Runs `body` with a C string for `string`, or with NULL when it is nil.
func withOptionalCString<Result>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> Result) -> Result {
    if let string { string.withCString { body($0) } } else { body(nil) }
}
