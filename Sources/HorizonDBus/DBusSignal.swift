/// A signal received from the bus.
public struct DBusSignal: Sendable, Equatable, CustomStringConvertible {
    /// The sender's unique name (`:1.42`), or `org.freedesktop.DBus` for the bus itself.
    public let sender: String
    public let path: String
    public let interface: String
    public let member: String
    /// Set when the signal was sent to us alone rather than broadcast.
    public let destination: String?
    public let arguments: [DBusValue]

    public init(
        sender: String, path: String, interface: String, member: String, destination: String? = nil,
        arguments: [DBusValue]
    ) {
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
        self.destination = destination
        self.arguments = arguments
    }

    public var description: String { "\(interface).\(member) from \(sender) at \(path) \(arguments)" }

    /// `org.freedesktop.DBus.Properties.PropertiesChanged`: the interface, the changed properties
    /// (variants removed) and the names of properties invalidated without a value.
    public var propertiesChanged: (interface: String, changed: [String: DBusValue], invalidated: [String])? {
        guard interface == DBusInterfaceName.properties, member == "PropertiesChanged", arguments.count == 3,
            let name = arguments[0].string, let changed = arguments[1].stringVariantDictionary,
            let invalidated = arguments[2].strings
        else { return nil }
        return (name, changed, invalidated)
    }

    /// `org.freedesktop.DBus.ObjectManager.InterfacesAdded`: the object and its new interfaces' properties.
    public var interfacesAdded: (path: String, interfaces: [String: [String: DBusValue]])? {
        guard interface == DBusInterfaceName.objectManager, member == "InterfacesAdded", arguments.count == 2,
            let path = arguments[0].objectPath, let interfaces = arguments[1].interfacesAndProperties
        else { return nil }
        return (path, interfaces)
    }

    /// `org.freedesktop.DBus.ObjectManager.InterfacesRemoved`: the object and the interfaces it lost.
    public var interfacesRemoved: (path: String, interfaces: [String])? {
        guard interface == DBusInterfaceName.objectManager, member == "InterfacesRemoved", arguments.count == 2,
            let path = arguments[0].objectPath, let interfaces = arguments[1].strings
        else { return nil }
        return (path, interfaces)
    }
}

/// The standard interfaces every D-Bus peer implements or understands.
public enum DBusInterfaceName {
    public static let properties = "org.freedesktop.DBus.Properties"
    public static let introspectable = "org.freedesktop.DBus.Introspectable"
    public static let peer = "org.freedesktop.DBus.Peer"
    public static let objectManager = "org.freedesktop.DBus.ObjectManager"
    /// The bus daemon's own interface (RequestName, AddMatch, NameOwnerChanged, …).
    public static let bus = "org.freedesktop.DBus"
    /// Signals libdbus synthesises locally (Disconnected).
    static let local = "org.freedesktop.DBus.Local"
}

/// Which signals a subscription wants: the D-Bus match rule sent to the bus daemon (so it routes
/// them to us) and the same test applied locally (so each stream gets only its own).
///
/// `sender` may be a well-known name such as `org.bluez`: signals carry the sender's unique name,
/// so the connection follows the name's owner (GetNameOwner, then NameOwnerChanged) to match them.
public struct DBusMatchRule: Sendable, Hashable, CustomStringConvertible {
    public var sender: String?
    /// The exact object path.
    public var path: String?
    /// The object path and everything below it (`path_namespace`), such as `/org/bluez/hci0`.
    public var pathNamespace: String?
    public var interface: String?
    public var member: String?
    /// The first argument, when it is a string (PropertiesChanged's interface name, NameOwnerChanged's name).
    public var arg0: String?

    public init(
        sender: String? = nil, path: String? = nil, pathNamespace: String? = nil, interface: String? = nil,
        member: String? = nil, arg0: String? = nil
    ) {
        self.sender = sender
        self.path = path
        self.pathNamespace = pathNamespace
        self.interface = interface
        self.member = member
        self.arg0 = arg0
    }

    /// PropertiesChanged, optionally only from `sender`, at `path` or below `pathNamespace`, for `interface`.
    public static func propertiesChanged(
        sender: String? = nil, path: String? = nil, pathNamespace: String? = nil, interface: String? = nil
    ) -> DBusMatchRule {
        DBusMatchRule(
            sender: sender, path: path, pathNamespace: pathNamespace, interface: DBusInterfaceName.properties,
            member: "PropertiesChanged", arg0: interface)
    }

    /// ObjectManager's InterfacesAdded, sent from the manager object at `managerPath`.
    public static func interfacesAdded(sender: String? = nil, managerPath: String? = nil) -> DBusMatchRule {
        DBusMatchRule(
            sender: sender, path: managerPath, interface: DBusInterfaceName.objectManager, member: "InterfacesAdded")
    }

    /// ObjectManager's InterfacesRemoved, sent from the manager object at `managerPath`.
    public static func interfacesRemoved(sender: String? = nil, managerPath: String? = nil) -> DBusMatchRule {
        DBusMatchRule(
            sender: sender, path: managerPath, interface: DBusInterfaceName.objectManager, member: "InterfacesRemoved")
    }

    /// The rule in the bus daemon's syntax: `type='signal',sender='org.bluez',…`.
    public var description: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            // Inside quotes only the apostrophe is special; it is written as '\'' (close, escaped, reopen).
            parts.append("\(key)='" + value.replacingApostrophes() + "'")
        }
        add("sender", sender)
        add("path", path)
        add("path_namespace", pathNamespace)
        add("interface", interface)
        add("member", member)
        add("arg0", arg0)
        return parts.joined(separator: ",")
    }

    /// Checks every field, since an invalid rule is refused by the bus with a less helpful error.
    public func validate() throws(DBusError) {
        if let sender { try DBusSyntax.require(DBusSyntax.isValidBusName(sender), "bus name", sender) }
        if let path { try DBusSyntax.require(DBusSyntax.isValidObjectPath(path), "object path", path) }
        if let pathNamespace {
            try DBusSyntax.require(DBusSyntax.isValidObjectPath(pathNamespace), "object path", pathNamespace)
        }
        if path != nil, pathNamespace != nil {
            throw .invalidArguments("a match rule cannot have both path and path_namespace")
        }
        if let interface { try DBusSyntax.require(DBusSyntax.isValidInterface(interface), "interface name", interface) }
        if let member { try DBusSyntax.require(DBusSyntax.isValidMember(member), "member name", member) }
        if let arg0 { try DBusSyntax.require(DBusSyntax.isValidString(arg0), "string", arg0) }
    }

    /// Whether `sender` names one process by its unique name (or is the bus), so it compares directly.
    var senderIsUnique: Bool {
        guard let sender else { return true }
        return sender.hasPrefix(":") || sender == DBusInterfaceName.bus
    }

    /// Whether the signal's header (not its arguments) matches; `senderOwner` is the current
    /// unique name of a well-known `sender`.
    func matchesHeader(
        sender signalSender: String, path signalPath: String, interface signalInterface: String,
        member signalMember: String, senderOwner: String?
    ) -> Bool {
        if let sender, signalSender != sender, signalSender != senderOwner { return false }
        if let path, signalPath != path { return false }
        if let pathNamespace {
            let prefix = pathNamespace == "/" ? "/" : pathNamespace + "/"
            if signalPath != pathNamespace, !signalPath.hasPrefix(prefix) { return false }
        }
        if let interface, signalInterface != interface { return false }
        if let member, signalMember != member { return false }
        return true
    }

    /// Whether a signal matches, header and arguments.
    public func matches(_ signal: DBusSignal, senderOwner: String? = nil) -> Bool {
        guard
            matchesHeader(
                sender: signal.sender, path: signal.path, interface: signal.interface, member: signal.member,
                senderOwner: senderOwner)
        else { return false }
        if let arg0 { return signal.arguments.first?.string == arg0 }
        return true
    }
}

extension String {
    fileprivate func replacingApostrophes() -> String {
        var result = ""
        for character in self {
            if character == "'" { result += "'\\''" } else { result.append(character) }
        }
        return result
    }
}
