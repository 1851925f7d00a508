import FoundationXML
import HorizonDBus
import HorizonTestSupport
import Synchronization
import Testing

/// Exported objects: Properties, PropertiesChanged, ObjectManager and Introspectable, as BlueZ's
/// GATT and advertising managers use them.
@Suite("D-Bus exported objects")
struct ObjectTests {
    /// A characteristic-like object: a read-only UUID, a writable Value, a property that is
    /// sometimes absent.
    final class Characteristic: Sendable {
        let value = Mutex<[UInt8]>([1, 2])

        var interface: DBusInterface {
            DBusInterface(
                "org.bluez.GattCharacteristic1",
                methods: [
                    DBusMethod("ReadValue", input: "a{sv}", output: "ay") { [self] _ in
                        [.byteArray(value.withLock { $0 })]
                    }
                ],
                properties: [
                    .constant("UUID", .string("6e400002-b5a3-f393-e0a9-e50e24dcca9e")),
                    DBusProperty(
                        "Value", signature: "ay", get: { [self] in .byteArray(value.withLock { $0 }) },
                        set: { [self] newValue throws(DBusError) in
                            guard let bytes = newValue.bytes, bytes.count <= 4 else {
                                throw DBusError(name: "org.bluez.Error.InvalidValueLength", message: "at most 4 bytes")
                            }
                            value.withLock { $0 = bytes }
                        }),
                    DBusProperty("Notifying", signature: "b") { () throws(DBusError) -> DBusValue in
                        throw DBusError(name: "org.bluez.Error.NotSupported", message: "not now")
                    },
                ],
                signals: [DBusSignalDescription("Tick", signature: "u")])
        }
    }

    static let path = "/org/horizon/app/service0/char0"

    func properties(_ client: DBusConnection, _ service: DBusConnection, _ method: String, _ arguments: [DBusValue])
        async throws(DBusError) -> [DBusValue]
    {
        try await client.call(
            destination: service.uniqueName, path: Self.path, interface: "org.freedesktop.DBus.Properties",
            method: method, arguments: arguments)
    }

    @Test func propertiesGetGetAllAndSet() async throws {
        try await withBus { bus in
            let service = try bus.connect()
            let client = try bus.connect()
            let characteristic = Characteristic()
            try service.export(path: Self.path, interfaces: [characteristic.interface])
            let interface = "org.bluez.GattCharacteristic1"

            #expect(
                try await properties(client, service, "Get", [.string(interface), .string("UUID")])
                    == [.variant(.string("6e400002-b5a3-f393-e0a9-e50e24dcca9e"))])
            #expect(
                try await client.property(
                    destination: service.uniqueName, path: Self.path, interface: interface, name: "Value")
                    == .byteArray([1, 2]))
            // GetAll leaves out the property whose getter throws.
            let all = try await client.properties(
                destination: service.uniqueName, path: Self.path, interface: interface)
            #expect(all == ["UUID": .string("6e400002-b5a3-f393-e0a9-e50e24dcca9e"), "Value": .byteArray([1, 2])])
            try await client.setProperty(
                destination: service.uniqueName, path: Self.path, interface: interface, name: "Value",
                value: .byteArray([9, 8, 7]))
            #expect(characteristic.value.withLock { $0 } == [9, 8, 7])
            #expect(
                try await properties(client, service, "Get", [.string(interface), .string("Value")])
                    == [.variant(.byteArray([9, 8, 7]))])
            // The standard interfaces have no properties.
            #expect(
                try await properties(client, service, "GetAll", [.string("org.freedesktop.DBus.Properties")])
                    == [.stringVariantDictionary([:])])
        }
    }

    @Test func propertiesErrorsHaveTheStandardNames() async throws {
        try await withBus { bus in
            let service = try bus.connect()
            let client = try bus.connect()
            try service.export(path: Self.path, interfaces: [Characteristic().interface])
            let interface = "org.bluez.GattCharacteristic1"
            func error(_ method: String, _ arguments: [DBusValue]) async -> DBusError? {
                await dbusError { () async throws(DBusError) in try await properties(client, service, method, arguments)
                }
            }
            #expect(
                await error("Get", [.string("org.horizon.Nope"), .string("UUID")])?.name
                    == "org.freedesktop.DBus.Error.UnknownInterface")
            #expect(
                await error("GetAll", [.string("org.horizon.Nope")])?.name
                    == "org.freedesktop.DBus.Error.UnknownInterface")
            #expect(
                await error("Get", [.string(interface), .string("Nope")])?.name
                    == "org.freedesktop.DBus.Error.UnknownProperty")
            #expect(
                await error("Set", [.string(interface), .string("Nope"), .variant(.boolean(true))])?.name
                    == "org.freedesktop.DBus.Error.UnknownProperty")
            #expect(
                await error("Set", [.string(interface), .string("UUID"), .variant(.string("x"))])?.name
                    == "org.freedesktop.DBus.Error.PropertyReadOnly")
            #expect(
                await error("Set", [.string(interface), .string("Value"), .variant(.string("x"))])?.name
                    == "org.freedesktop.DBus.Error.InvalidArgs")
            #expect(
                await error("Get", [.string(interface)])?.name == "org.freedesktop.DBus.Error.InvalidArgs")
            #expect(await error("Fetch", [])?.name == "org.freedesktop.DBus.Error.UnknownMethod")
            // The setter's and the getter's own errors arrive unchanged.
            #expect(
                await error("Set", [.string(interface), .string("Value"), .variant(.byteArray([1, 2, 3, 4, 5]))])
                    == DBusError(name: "org.bluez.Error.InvalidValueLength", message: "at most 4 bytes"))
            #expect(
                await error("Get", [.string(interface), .string("Notifying")])
                    == DBusError(name: "org.bluez.Error.NotSupported", message: "not now"))
        }
    }

    @Test func propertiesChangedArrivesOnTheClientsSignalStream() async throws {
        try await withBus { bus in
            let service = try bus.connect()
            let client = try bus.connect()
            let characteristic = Characteristic()
            try service.export(path: Self.path, interfaces: [characteristic.interface])
            let recorder = SignalRecorder(
                try await client.signals(matching: .propertiesChanged(sender: service.uniqueName, path: Self.path)))
            // An explicit notification, as a GATT server sends one.
            try service.emitPropertiesChanged(
                path: Self.path, interface: "org.bluez.GattCharacteristic1",
                changed: ["Value": .byteArray([0xAB, 0xCD])],
                invalidated: ["Notifying"])
            // A Set from the client announces the new value by itself.
            try await client.setProperty(
                destination: service.uniqueName, path: Self.path, interface: "org.bluez.GattCharacteristic1",
                name: "Value", value: .byteArray([5]))
            let signals = await recorder.wait(for: 2)
            try #require(signals.count == 2)
            let first = try #require(signals[0].propertiesChanged)
            #expect(first.interface == "org.bluez.GattCharacteristic1")
            #expect(first.changed == ["Value": .byteArray([0xAB, 0xCD])])
            #expect(first.invalidated == ["Notifying"])
            #expect(signals[0].sender == service.uniqueName)
            #expect(signals[0].path == Self.path)
            #expect(signals[0].arguments[1] == .stringVariantDictionary(["Value": .byteArray([0xAB, 0xCD])]))
            let second = try #require(signals[1].propertiesChanged)
            #expect(second.changed == ["Value": .byteArray([5])])
            #expect(second.invalidated == [])
        }
    }

    @Test func objectManagerListsItsObjectsAndAnnouncesChanges() async throws {
        try await withBus { bus in
            let service = try bus.connect()
            let client = try bus.connect()
            let root = "/org/horizon/app"
            try service.export(path: root, interfaces: [], isObjectManager: true)
            let added = SignalRecorder(
                try await client.signals(matching: .interfacesAdded(sender: service.uniqueName, managerPath: root)))
            let removed = SignalRecorder(
                try await client.signals(matching: .interfacesRemoved(sender: service.uniqueName, managerPath: root)))
            let serviceInterface = DBusInterface(
                "org.bluez.GattService1",
                properties: [
                    .constant("UUID", .string("6e400001-b5a3-f393-e0a9-e50e24dcca9e")),
                    .constant("Primary", .boolean(true)),
                ])
            try service.export(path: root + "/service0", interfaces: [serviceInterface])
            try service.export(path: Self.path, interfaces: [Characteristic().interface])
            // An object outside the root is not managed by it.
            try service.export(path: "/elsewhere", interfaces: [DBusInterface("org.horizon.Other")])

            let objects = try await client.managedObjects(destination: service.uniqueName, path: root)
            #expect(
                objects == [
                    root + "/service0": [
                        "org.bluez.GattService1": [
                            "UUID": .string("6e400001-b5a3-f393-e0a9-e50e24dcca9e"), "Primary": .boolean(true),
                        ]
                    ],
                    Self.path: [
                        "org.bluez.GattCharacteristic1": [
                            "UUID": .string("6e400002-b5a3-f393-e0a9-e50e24dcca9e"), "Value": .byteArray([1, 2]),
                        ]
                    ],
                ])
            // The raw reply has the exact signature BlueZ expects.
            let raw = try await client.call(
                destination: service.uniqueName, path: root, interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects")
            #expect(raw.map(\.signature) == ["a{oa{sa{sv}}}"])
            // A non-manager object does not implement ObjectManager.
            let notManager = await dbusError { () async throws(DBusError) in
                try await client.managedObjects(destination: service.uniqueName, path: "/elsewhere")
            }
            #expect(notManager?.name == "org.freedesktop.DBus.Error.UnknownInterface")

            let additions = await added.wait(for: 2)
            try #require(additions.count == 2)
            #expect(additions[0].interfacesAdded?.path == root + "/service0")
            #expect(
                additions[0].interfacesAdded?.interfaces == [
                    "org.bluez.GattService1": [
                        "UUID": .string("6e400001-b5a3-f393-e0a9-e50e24dcca9e"), "Primary": .boolean(true),
                    ]
                ])
            #expect(additions[1].interfacesAdded?.path == Self.path)
            #expect(additions[1].path == root)

            #expect(service.unexport(path: Self.path))
            #expect(!service.unexport(path: Self.path))
            let removals = await removed.wait(for: 1)
            try #require(removals.count == 1)
            #expect(removals[0].interfacesRemoved?.path == Self.path)
            #expect(removals[0].interfacesRemoved?.interfaces == ["org.bluez.GattCharacteristic1"])
            #expect(
                try await client.managedObjects(destination: service.uniqueName, path: root).keys.sorted()
                    == [root + "/service0"])
            #expect(service.exportedPaths == ["/elsewhere", root, root + "/service0"])
            // Nothing was announced for the object outside the manager.
            #expect(added.signals.count == 2)
        }
    }

    @Test func introspectionListsInterfacesMethodsPropertiesAndChildren() async throws {
        try await withBus { bus in
            let service = try bus.connect()
            let client = try bus.connect()
            let root = "/org/horizon/app"
            try service.export(path: root, interfaces: [], isObjectManager: true)
            try service.export(path: Self.path, interfaces: [Characteristic().interface])
            func introspect(_ path: String) async throws(DBusError) -> String {
                let reply = try await client.call(
                    destination: service.uniqueName, path: path, interface: "org.freedesktop.DBus.Introspectable",
                    method: "Introspect")
                return reply.first?.string ?? ""
            }
            let xml = try await introspect(Self.path)
            // Well-formed XML, with the object's methods and properties where the DTD puts them.
            let document = try XMLDocument(xmlString: xml)
            let interfacePath = "/node/interface[@name='org.bluez.GattCharacteristic1']"
            #expect(try document.nodes(forXPath: interfacePath + "/method/@name").map(\.stringValue) == ["ReadValue"])
            #expect(
                try document.nodes(forXPath: interfacePath + "/property/@name").map(\.stringValue)
                    == ["UUID", "Value", "Notifying"])
            #expect(
                try document.nodes(forXPath: "/node/interface/@name").compactMap(\.stringValue) == [
                    "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Peer",
                    "org.freedesktop.DBus.Properties",
                    "org.bluez.GattCharacteristic1",
                ])
            #expect(xml.hasPrefix("<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\""))
            #expect(xml.contains("<interface name=\"org.bluez.GattCharacteristic1\">"))
            #expect(
                xml.contains(
                    "<method name=\"ReadValue\">\n      <arg type=\"a{sv}\" direction=\"in\"/>\n      <arg type=\"ay\" direction=\"out\"/>"
                ))
            #expect(xml.contains("<property name=\"Value\" type=\"ay\" access=\"readwrite\"/>"))
            #expect(xml.contains("<property name=\"UUID\" type=\"s\" access=\"read\">"))
            #expect(xml.contains("<signal name=\"Tick\">\n      <arg type=\"u\"/>"))
            #expect(xml.contains("<interface name=\"org.freedesktop.DBus.Properties\">"))
            #expect(!xml.contains("org.freedesktop.DBus.ObjectManager"))
            #expect(xml.hasSuffix("</node>\n"))
            let rootXML = try await introspect(root)
            #expect(
                try XMLDocument(xmlString: rootXML).nodes(forXPath: "/node/node/@name").map(\.stringValue) == [
                    "service0"
                ])
            #expect(rootXML.contains("<interface name=\"org.freedesktop.DBus.ObjectManager\">"))
            #expect(rootXML.contains("<node name=\"service0\"/>"))
            // Nodes between exported objects can be walked too.
            #expect(try await introspect("/").contains("<node name=\"org\"/>"))
            #expect(try await introspect(root + "/service0").contains("<node name=\"char0\"/>"))
            #expect(!(try await introspect(root + "/service0").contains("<interface")))
            let missing = await dbusError { () async throws(DBusError) in try await introspect("/nothing/here") }
            #expect(missing?.name == "org.freedesktop.DBus.Error.UnknownObject")
        }
    }

    @Test func exportRefusesTakenPathsAndInvalidDefinitions() async throws {
        try await withBus { bus in
            let service = try bus.connect()
            try service.export(path: "/a", interfaces: [DBusInterface("org.horizon.A")])
            let taken = await dbusError { () async throws(DBusError) in
                try service.export(path: "/a", interfaces: [DBusInterface("org.horizon.B")])
            }
            #expect(taken?.name == "org.freedesktop.DBus.Error.ObjectPathInUse")
            let invalid: [(String, DBusInterface)] = [
                ("/b/", DBusInterface("org.horizon.A")),
                ("/b", DBusInterface("nodots")),
                ("/b", DBusInterface("org.freedesktop.DBus.Properties")),
                ("/b", DBusInterface("org.horizon.A", methods: [DBusMethod("bad-name") { _ in [] }])),
                ("/b", DBusInterface("org.horizon.A", methods: [DBusMethod("M", input: "a{") { _ in [] }])),
                (
                    "/b",
                    DBusInterface("org.horizon.A", properties: [.constant("P", .int32(1)), .constant("P", .int32(2))])
                ),
                (
                    "/b",
                    DBusInterface("org.horizon.A", properties: [DBusProperty("P", signature: "ii", get: { .int32(1) })])
                ),
            ]
            for (path, interface) in invalid {
                let error = await dbusError { () async throws(DBusError) in
                    try service.export(path: path, interfaces: [interface])
                }
                #expect(error?.name == "org.freedesktop.DBus.Error.InvalidArgs", "\(path) \(interface.name)")
            }
            #expect(service.exportedPaths == ["/a"])
        }
    }
}
