/// Method calls for exported objects: routing, the standard interfaces the connection implements
/// for every object (Properties, Introspectable, ObjectManager on manager roots), and the standard
/// errors for everything else. Runs on the connection's queue, from the message filter.
extension ConnectionCore {
    func handleMethodCall(_ message: Message) {
        let path = message.path ?? "/"
        let member = message.member ?? ""
        let interface = message.interface
        let (object, hasDescendants) = withState { state in
            (state.objects[path], state.objects.keys.contains { $0.isObjectPath(below: path) })
        }
        guard let object else {
            // A path with objects below it is a node of the tree: it can be introspected (that is
            // how tools walk down to the objects), and nothing else.
            if hasDescendants, member == "Introspect", interface == nil || interface == DBusInterfaceName.introspectable
            {
                sendReply([.string(introspectionXML(path: path, object: nil))], outputSignature: "s", to: message)
            } else {
                sendError(
                    DBusError(name: DBusError.Name.unknownObject, message: "No such object path '\(path)'"), to: message
                )
            }
            return
        }
        switch interface {
        case DBusInterfaceName.introspectable?:
            guard member == "Introspect" else { return unknownMethod(message, object: object) }
            introspect(message, object: object)
        case DBusInterfaceName.properties?:
            handleProperties(message, member: member, object: object)
        case DBusInterfaceName.objectManager? where object.isObjectManager:
            guard member == "GetManagedObjects" else { return unknownMethod(message, object: object) }
            getManagedObjects(message, root: object)
        case let name?:
            guard let target = object.interface(named: name) else {
                return sendError(
                    DBusError(
                        name: DBusError.Name.unknownInterface,
                        message: "No such interface '\(name)' at object path '\(path)'"), to: message)
            }
            guard let method = target.methods.first(where: { $0.name == member }) else {
                return unknownMethod(message, object: object)
            }
            invoke(method, message)
        case nil:
            // No interface given: the first method of that name, standard interfaces first.
            switch member {
            case "Introspect": introspect(message, object: object)
            case "Get", "GetAll", "Set": handleProperties(message, member: member, object: object)
            case "GetManagedObjects" where object.isObjectManager: getManagedObjects(message, root: object)
            default:
                let method = object.interfaces.lazy.compactMap { $0.methods.first { $0.name == member } }.first
                guard let method else { return unknownMethod(message, object: object) }
                invoke(method, message)
            }
        }
    }

    private func unknownMethod(_ message: Message, object: ExportedObject) {
        let member = message.member ?? ""
        let interface = message.interface.map { " on interface '\($0)'" } ?? ""
        sendError(
            DBusError(
                name: DBusError.Name.unknownMethod,
                message:
                    "No such method '\(member)'\(interface) at object path '\(object.path)' (signature '\(message.signature)')"
            ), to: message)
    }

    private func invoke(_ method: DBusMethod, _ message: Message) {
        if let expected = method.inputSignature, message.signature != expected {
            return sendError(
                .invalidArguments("\(method.name) takes arguments of type '\(expected)', not '\(message.signature)'"),
                to: message)
        }
        let arguments: [DBusValue]
        do {
            arguments = try message.arguments()
        } catch {
            return sendError(error, to: message)
        }
        switch method.body {
        case .immediate(let handler):
            do {
                let values = try handler(arguments)
                sendReply(values, outputSignature: method.outputSignature, to: message)
            } catch {
                sendError(error, to: message)
            }
        case .deferred(let handler):
            handler(
                DBusMethodCall(
                    core: self, message: message, arguments: arguments, outputSignature: method.outputSignature))
        }
    }

    // MARK: org.freedesktop.DBus.Properties

    private func handleProperties(_ message: Message, member: String, object: ExportedObject) {
        let expected = ["Get": "ss", "GetAll": "s", "Set": "ssv"]
        guard let signature = expected[member] else { return unknownMethod(message, object: object) }
        guard message.signature == signature, let arguments = try? message.arguments(),
            let interfaceName = arguments.first?.string
        else {
            return sendError(
                .invalidArguments("\(member) takes arguments of type '\(signature)', not '\(message.signature)'"),
                to: message)
        }
        let standard = [
            DBusInterfaceName.properties, DBusInterfaceName.introspectable, DBusInterfaceName.peer,
        ]
        let isStandard =
            standard.contains(interfaceName)
            || (object.isObjectManager && interfaceName == DBusInterfaceName.objectManager)
        guard let interface = object.interface(named: interfaceName) else {
            if isStandard {
                // The standard interfaces have no properties.
                if member == "GetAll" {
                    return sendReply([.stringVariantDictionary([:])], outputSignature: "a{sv}", to: message)
                }
                return sendError(noSuchProperty(arguments[1].string ?? "", interfaceName), to: message)
            }
            return sendError(
                DBusError(
                    name: DBusError.Name.unknownInterface,
                    message: "No such interface '\(interfaceName)' at object path '\(object.path)'"), to: message)
        }
        if member == "GetAll" {
            let values = ExportedObject.readableProperties(of: interface)
            return sendReply([.stringVariantDictionary(values)], outputSignature: "a{sv}", to: message)
        }
        let propertyName = arguments[1].string ?? ""
        guard let property = interface.properties.first(where: { $0.name == propertyName }) else {
            return sendError(noSuchProperty(propertyName, interfaceName), to: message)
        }
        if member == "Get" {
            do {
                let value = try property.getter()
                guard value.signature == property.signature else {
                    return sendError(
                        .failed(
                            "property \(propertyName) has type '\(property.signature)' but its getter returned "
                                + "'\(value.signature)'"), to: message)
                }
                sendReply([.variant(value)], outputSignature: "v", to: message)
            } catch {
                sendError(error, to: message)
            }
            return
        }
        guard let setter = property.setter else {
            return sendError(
                DBusError(
                    name: DBusError.Name.propertyReadOnly,
                    message: "Property '\(propertyName)' of interface '\(interfaceName)' is not writable"), to: message)
        }
        let value = arguments[2].variant ?? arguments[2]
        guard value.signature == property.signature else {
            return sendError(
                .invalidArguments(
                    "Property '\(propertyName)' has type '\(property.signature)', not '\(value.signature)'"),
                to: message)
        }
        do {
            try setter(value)
        } catch {
            return sendError(error, to: message)
        }
        sendReply([], outputSignature: "", to: message)
        guard property.emitsChangedSignal else { return }
        if let current = try? property.getter(), current.signature == property.signature {
            try? emitPropertiesChanged(path: object.path, interface: interfaceName, changed: [propertyName: current])
        } else {
            try? emitPropertiesChanged(path: object.path, interface: interfaceName, invalidated: [propertyName])
        }
    }

    private func noSuchProperty(_ property: String, _ interface: String) -> DBusError {
        DBusError(
            name: DBusError.Name.unknownProperty, message: "No such property '\(property)' on interface '\(interface)'")
    }

    func emitPropertiesChanged(
        path: String, interface: String, changed: [String: DBusValue] = [:], invalidated: [String] = []
    ) throws(DBusError) {
        try emitSignal(
            path: path, interface: DBusInterfaceName.properties, name: "PropertiesChanged",
            arguments: [.string(interface), .stringVariantDictionary(changed), .stringArray(invalidated.sorted())],
            destination: nil)
    }

    func emitSignal(path: String, interface: String, name: String, arguments: [DBusValue], destination: String?)
        throws(DBusError)
    {
        guard isOpen else { throw .disconnected() }
        let message = try checkedMessage(arguments) { () throws(DBusError) in
            try Message.signal(
                path: path, interface: interface, name: name, arguments: arguments, destination: destination)
        }
        send(message)
    }

    // MARK: org.freedesktop.DBus.ObjectManager

    private func getManagedObjects(_ message: Message, root: ExportedObject) {
        guard message.signature.isEmpty else {
            return sendError(.invalidArguments("GetManagedObjects takes no arguments"), to: message)
        }
        let objects = withState { state in state.objects.values.filter { $0.path.isObjectPath(below: root.path) } }
        var managed: [String: [String: [String: DBusValue]]] = [:]
        for object in objects { managed[object.path] = object.interfacesAndProperties }
        sendReply([.managedObjects(managed)], outputSignature: "a{oa{sa{sv}}}", to: message)
    }

    /// The object manager responsible for `path`: its nearest strict ancestor flagged as one.
    func managerPath(above path: String, in objects: [String: ExportedObject]) -> String? {
        var current = path
        while current != "/" {
            guard let slash = current.lastIndex(of: "/") else { return nil }
            current = slash == current.startIndex ? "/" : String(current[..<slash])
            if objects[current]?.isObjectManager == true { return current }
        }
        return nil
    }

    // MARK: Export

    func export(path: String, interfaces: [DBusInterface], isObjectManager: Bool) throws(DBusError) {
        try DBusSyntax.require(DBusSyntax.isValidObjectPath(path), "object path", path)
        var names: Set<String> = []
        for interface in interfaces {
            try interface.validate()
            guard names.insert(interface.name).inserted else {
                throw .invalidArguments("interface \(interface.name) appears twice at \(path)")
            }
        }
        let object = ExportedObject(path: path, interfaces: interfaces, isObjectManager: isObjectManager)
        let manager = try withStateThrowing { (state) throws(DBusError) -> String? in
            guard state.isOpen else { throw .disconnected() }
            guard state.objects[path] == nil else {
                throw DBusError(
                    name: DBusError.Name.objectPathInUse, message: "an object is already exported at \(path)")
            }
            state.objects[path] = object
            return managerPath(above: path, in: state.objects)
        }
        guard let manager, !interfaces.isEmpty else { return }
        perform { [self] in
            try? emitSignal(
                path: manager, interface: DBusInterfaceName.objectManager, name: "InterfacesAdded",
                arguments: [.objectPath(path), .interfacesAndProperties(object.interfacesAndProperties)],
                destination: nil)
        }
    }

    @discardableResult
    func unexport(path: String) -> Bool {
        let removed = withState { state -> (ExportedObject, String?)? in
            guard let object = state.objects.removeValue(forKey: path) else { return nil }
            return (object, managerPath(above: path, in: state.objects))
        }
        guard let (object, manager) = removed else { return false }
        if let manager, !object.interfaces.isEmpty {
            try? emitSignal(
                path: manager, interface: DBusInterfaceName.objectManager, name: "InterfacesRemoved",
                arguments: [.objectPath(path), .stringArray(object.interfaces.map(\.name))], destination: nil)
        }
        return true
    }

    // MARK: org.freedesktop.DBus.Introspectable

    private func introspect(_ message: Message, object: ExportedObject) {
        guard message.signature.isEmpty else {
            return sendError(.invalidArguments("Introspect takes no arguments"), to: message)
        }
        sendReply([.string(introspectionXML(path: object.path, object: object))], outputSignature: "s", to: message)
    }

    /// The introspection document of `path`: the standard interfaces and the object's own (for an
    /// exported object), and one `<node>` per child in the tree.
    func introspectionXML(path: String, object: ExportedObject?) -> String {
        let children = withState { state -> [String] in
            var names: Set<String> = []
            let prefix = path == "/" ? "/" : path + "/"
            for other in state.objects.keys where other.isObjectPath(below: path) {
                let rest = other.dropFirst(prefix.count)
                if let name = rest.split(separator: "/").first { names.insert(String(name)) }
            }
            return names.sorted()
        }
        return Introspection.document(object: object, children: children)
    }

    // MARK: Signals

    /// Delivers a received signal to every subscription that matches it. The arguments are only
    /// unmarshalled when someone wants the signal.
    func deliverSignal(_ message: Message) {
        guard let sender = message.sender, let path = message.path, let interface = message.interface,
            let member = message.member
        else { return }
        if sender == DBusInterfaceName.bus, interface == DBusInterfaceName.bus, member == "NameOwnerChanged",
            let arguments = try? message.arguments(), arguments.count == 3, let name = arguments[0].string,
            let newOwner = arguments[2].string
        {
            withState { state in
                guard state.owners[name] != nil else { return }
                state.owners[name]?.owner = newOwner.isEmpty ? nil : newOwner
            }
        }
        let candidates = withState { state in
            state.subscriptions.values.filter { subscription in
                subscription.rule.matchesHeader(
                    sender: sender, path: path, interface: interface, member: member,
                    senderOwner: subscription.rule.sender.flatMap { state.owners[$0]?.owner })
            }
        }
        guard !candidates.isEmpty, let arguments = try? message.arguments() else { return }
        let signal = DBusSignal(
            sender: sender, path: path, interface: interface, member: member, destination: message.destination,
            arguments: arguments)
        for candidate in candidates {
            if let arg0 = candidate.rule.arg0, arguments.first?.string != arg0 { continue }
            candidate.continuation.yield(signal)
        }
    }

    /// Registers a local subscription first, so that nothing the bus routes to us once the match
    /// is added can be missed.
    func subscribe(
        _ rule: DBusMatchRule, bufferingPolicy: AsyncStream<DBusSignal>.Continuation.BufferingPolicy
    ) throws(DBusError) -> (id: UInt64, stream: AsyncStream<DBusSignal>) {
        let (stream, continuation) = AsyncStream.makeStream(of: DBusSignal.self, bufferingPolicy: bufferingPolicy)
        let id = nextID()
        try withStateThrowing { (state) throws(DBusError) in
            guard state.isOpen else { throw .disconnected() }
            state.subscriptions[id] = Subscription(rule: rule, continuation: continuation)
        }
        continuation.onTermination = { [weak self] _ in self?.unsubscribe(id) }
        return (id, stream)
    }

    /// Ends a subscription: removes its rule from the bus and releases its owner tracking.
    func unsubscribe(_ id: UInt64) {
        guard let subscription = withState({ $0.subscriptions.removeValue(forKey: id) }) else { return }
        subscription.continuation.finish()
        if subscription.matchAdded { sendToBus("RemoveMatch", [.string(subscription.rule.description)]) }
        if subscription.tracksOwner, let sender = subscription.rule.sender { releaseOwner(sender) }
    }

    /// Records that the subscription's rule is on the bus; false (after undoing it) if the
    /// subscription ended meanwhile.
    func markMatchAdded(_ id: UInt64, rule: DBusMatchRule) -> Bool {
        let alive = withState { state -> Bool in
            guard state.subscriptions[id] != nil else { return false }
            state.subscriptions[id]?.matchAdded = true
            return true
        }
        if !alive { sendToBus("RemoveMatch", [.string(rule.description)]) }
        return alive
    }

    /// Starts following the owner of a well-known name for subscription `id`. The NameOwnerChanged
    /// match goes to the bus before the caller's GetNameOwner, so no change between them is missed.
    func retainOwner(_ name: String, for id: UInt64) {
        let first = withState { state -> Bool? in
            guard state.subscriptions[id] != nil else { return nil }
            state.subscriptions[id]?.tracksOwner = true
            let first = state.owners[name] == nil
            state.owners[name, default: OwnerTracking()].references += 1
            return first
        }
        if first == true { sendToBus("AddMatch", [.string(Self.ownerRule(name).description)]) }
    }

    private func releaseOwner(_ name: String) {
        let last = withState { state -> Bool in
            guard var tracking = state.owners[name] else { return false }
            tracking.references -= 1
            state.owners[name] = tracking.references > 0 ? tracking : nil
            return tracking.references <= 0
        }
        if last { sendToBus("RemoveMatch", [.string(Self.ownerRule(name).description)]) }
    }

    /// Records a GetNameOwner answer (run on the queue, in message order).
    func applyOwner(_ name: String, _ result: Result<[DBusValue], DBusError>) {
        guard case .success(let reply) = result, let owner = reply.first?.string else { return }
        withState { state in
            guard state.owners[name] != nil else { return }
            state.owners[name]?.owner = owner
        }
    }

    static func ownerRule(_ name: String) -> DBusMatchRule {
        DBusMatchRule(
            sender: DBusInterfaceName.bus, path: "/org/freedesktop/DBus", interface: DBusInterfaceName.bus,
            member: "NameOwnerChanged", arg0: name)
    }

    /// A call to the bus daemon whose reply nobody waits for.
    func sendToBus(_ method: String, _ arguments: [DBusValue]) {
        guard isOpen, let message = try? Message.busCall(method, arguments) else { return }
        message.setNoReply()
        send(message)
    }
}

extension Message {
    /// A call to the bus daemon itself.
    static func busCall(_ method: String, _ arguments: [DBusValue]) throws(DBusError) -> Message {
        try methodCall(
            destination: DBusInterfaceName.bus, path: "/org/freedesktop/DBus", interface: DBusInterfaceName.bus,
            method: method, arguments: arguments)
    }
}
