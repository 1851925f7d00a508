import HorizonDBus
import HorizonTestSupport
import Testing

@testable import HorizonBlueZ

/// What each proxy sends (destination, object, interface, member, argument signature; BlueZ's
/// doc/org.bluez.*.rst) and how it reads what bluetoothd answers.
@Suite("BlueZ interface proxies")
struct InterfaceTests {
    /// The call as bluetoothd receives it.
    struct Sent: Equatable, CustomStringConvertible {
        var path: String
        var interface: String
        var member: String
        var signature: String

        init(_ path: String, _ interface: String, _ member: String, _ signature: String = "") {
            self.path = path
            self.interface = interface
            self.member = member
            self.signature = signature
        }

        init<Reply>(_ call: BlueZCall<Reply>) {
            #expect(call.call.destination == "org.bluez")
            self.init(call.call.path, call.call.interface, call.call.member, call.call.signature)
        }

        var description: String { "\(path) \(interface).\(member)(\(signature))" }
    }

    static let adapterPath = "/org/bluez/hci0"
    static let devicePath = adapterPath + "/dev_11_22_33_44_55_66"
    static let characteristicPath = devicePath + "/service0010/char0011"

    /// Calls are values: building them needs a connection but sends nothing.
    static func withConnection(_ body: (DBusConnection) throws -> Void) throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let connection = try DBusConnection(.address(bus.address))
        defer { connection.close() }
        try body(connection)
    }

    @Test func adapterMethods() throws {
        try Self.withConnection { connection in
            let adapter = Adapter1(connection: connection, path: Self.adapterPath)
            let path = Self.adapterPath
            let interface = "org.bluez.Adapter1"
            #expect(Sent(adapter.startDiscovery()) == Sent(path, interface, "StartDiscovery"))
            #expect(Sent(adapter.stopDiscovery()) == Sent(path, interface, "StopDiscovery"))
            #expect(Sent(adapter.removeDevice(Self.devicePath)) == Sent(path, interface, "RemoveDevice", "o"))
            #expect(adapter.removeDevice(Self.devicePath).call.arguments == [.objectPath(Self.devicePath)])
            let filter = adapter.setDiscoveryFilter(.init(transport: .le, duplicateData: true))
            #expect(Sent(filter) == Sent(path, interface, "SetDiscoveryFilter", "a{sv}"))
            #expect(
                filter.call.arguments.first?.stringVariantDictionary
                    == ["Transport": .string("le"), "DuplicateData": .boolean(true)])
            #expect(
                Sent(adapter.discovering())
                    == Sent(path, "org.freedesktop.DBus.Properties", "Get", "ss"))
            #expect(adapter.discovering().call.arguments == [.string(interface), .string("Discovering")])
        }
    }

    @Test func deviceMethods() throws {
        try Self.withConnection { connection in
            let device = Device1(connection: connection, path: Self.devicePath)
            let path = Self.devicePath
            #expect(Sent(device.connect()) == Sent(path, "org.bluez.Device1", "Connect"))
            #expect(Sent(device.disconnect()) == Sent(path, "org.bluez.Device1", "Disconnect"))
            #expect(Sent(device.connected()) == Sent(path, "org.freedesktop.DBus.Properties", "Get", "ss"))
            #expect(device.connected().call.arguments == [.string("org.bluez.Device1"), .string("Connected")])
            #expect(Sent(device.properties()) == Sent(path, "org.freedesktop.DBus.Properties", "GetAll", "s"))
            #expect(device.properties().call.arguments == [.string("org.bluez.Device1")])
            #expect(
                Device1.changes(under: Self.adapterPath).description
                    == "type='signal',sender='org.bluez',path_namespace='/org/bluez/hci0',"
                    + "interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',arg0='org.bluez.Device1'")
        }
    }

    @Test func characteristicMethods() throws {
        try Self.withConnection { connection in
            let characteristic = GattCharacteristic1(connection: connection, path: Self.characteristicPath)
            let path = Self.characteristicPath
            let interface = "org.bluez.GattCharacteristic1"
            let write = characteristic.writeValue([1, 2], type: .request)
            #expect(Sent(write) == Sent(path, interface, "WriteValue", "aya{sv}"))
            #expect(write.call.arguments[0].bytes == [1, 2])
            #expect(write.call.arguments[1].stringVariantDictionary == ["type": .string("request")])
            #expect(Sent(characteristic.startNotify()) == Sent(path, interface, "StartNotify"))
            #expect(Sent(characteristic.acquireNotify()) == Sent(path, interface, "AcquireNotify", "a{sv}"))
            #expect(Sent(characteristic.mtu()) == Sent(path, "org.freedesktop.DBus.Properties", "Get", "ss"))
            #expect(characteristic.mtu().call.arguments == [.string(interface), .string("MTU")])
        }
    }

    @Test func managerMethods() throws {
        try Self.withConnection { connection in
            let root = "/org/horizon/radio1_0"
            let advertisement = root + "/advertisement0"
            let gatt = GattManager1(connection: connection, path: Self.adapterPath)
            let advertising = LEAdvertisingManager1(connection: connection, path: Self.adapterPath)
            let register = gatt.registerApplication(root)
            #expect(Sent(register) == Sent(Self.adapterPath, "org.bluez.GattManager1", "RegisterApplication", "oa{sv}"))
            #expect(register.call.arguments[0] == .objectPath(root))
            #expect(
                Sent(gatt.unregisterApplication(root))
                    == Sent(Self.adapterPath, "org.bluez.GattManager1", "UnregisterApplication", "o"))
            #expect(
                Sent(advertising.registerAdvertisement(advertisement))
                    == Sent(Self.adapterPath, "org.bluez.LEAdvertisingManager1", "RegisterAdvertisement", "oa{sv}"))
            #expect(advertising.registerAdvertisement(advertisement).call.arguments[0] == .objectPath(advertisement))
            #expect(
                Sent(advertising.unregisterAdvertisement(advertisement))
                    == Sent(Self.adapterPath, "org.bluez.LEAdvertisingManager1", "UnregisterAdvertisement", "o"))
            #expect(
                Sent(BlueZObjectManager(connection: connection).managedObjects())
                    == Sent("/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"))
        }
    }

    // MARK: Replies and properties

    @Test func propertyRepliesDecodeOrSayWhatTheyAre() throws {
        try Self.withConnection { connection in
            let device = Device1(connection: connection, path: Self.devicePath)
            #expect(try device.connected().call.decodeReply([.variant(.boolean(true))]) == true)
            #expect(throws: DBusError.self) { try device.connected().call.decodeReply([.variant(.string("yes"))]) }
            #expect(throws: DBusError.self) { try device.connected().call.decodeReply([]) }
            let characteristic = GattCharacteristic1(connection: connection, path: Self.characteristicPath)
            #expect(try characteristic.mtu().call.decodeReply([.variant(.uint16(185))]) == 185)
            let all = try device.properties().call.decodeReply([
                .stringVariantDictionary(["Connected": .boolean(true), "ServicesResolved": .boolean(false)])
            ])
            #expect(all.connected == true)
            #expect(all.servicesResolved == false)
            #expect(all.address == nil)
            let acquired = try characteristic.acquireNotify().call.decodeReply([
                .unixFileDescriptor(DBusFileDescriptor(owning: -1)), .uint16(185),
            ])
            #expect(acquired.mtu == 185)
            #expect(throws: DBusError.self) { try characteristic.acquireNotify().call.decodeReply([.uint16(185)]) }
        }
    }

    @Test func deviceProperties() {
        let properties = Device1.Properties([
            "Address": .string("11:22:33:44:55:66"), "RSSI": .int16(-60),
            "ManufacturerData": .uint16VariantDictionary([0xFFFF: .byteArray([1, 2]), 0x0001: .string("not bytes")]),
            "Connected": .boolean(true), "ServicesResolved": .boolean(true), "Paired": .boolean(false),
            "Trusted": .variant(.boolean(true)),
        ])
        #expect(properties.address == "11:22:33:44:55:66")
        #expect(properties.rssi == -60)
        #expect(properties.manufacturerData == [0xFFFF: [1, 2]])
        #expect(properties.connected == true)
        #expect(properties.servicesResolved == true)
        #expect(properties.paired == false)
        #expect(properties.trusted == true)
        let empty = Device1.Properties([:])
        #expect(empty.connected == nil && empty.rssi == nil && empty.manufacturerData == nil)
    }

    @Test func changedPropertiesAreReadOnlyFromTheirOwnInterface() {
        func changed(_ interface: String, _ values: [String: DBusValue]) -> DBusSignal {
            DBusSignal(
                sender: ":1.1", path: Self.devicePath, interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged",
                arguments: [.string(interface), .stringVariantDictionary(values), .stringArray([])])
        }
        let device = changed("org.bluez.Device1", ["Connected": .boolean(false)])
        #expect(Device1.Properties(changedIn: device)?.connected == false)
        #expect(GattCharacteristic1.Properties(changedIn: device) == nil)
        let value = changed("org.bluez.GattCharacteristic1", ["Value": .byteArray([9, 8])])
        #expect(GattCharacteristic1.Properties(changedIn: value)?.value == [9, 8])
        #expect(Device1.Properties(changedIn: value) == nil)
        let adapter = changed("org.bluez.Adapter1", ["Powered": .boolean(false), "Discovering": .boolean(true)])
        #expect(Adapter1.Properties(changedIn: adapter)?.powered == false)
        #expect(Adapter1.Properties(changedIn: adapter)?.discovering == true)
    }

    @Test func managedObjectsAreReadByInterface() {
        let objects = BlueZObjects([
            Self.adapterPath: [
                "org.bluez.Adapter1": [
                    "Address": .string("00:AA"), "Alias": .string("box"), "Powered": .boolean(true),
                ],
                "org.bluez.GattManager1": [:],
            ],
            Self.devicePath: ["org.bluez.Device1": ["Address": .string("11:22:33:44:55:66")]],
            "/org/bluez/hci1/dev_01": ["org.bluez.Device1": ["Address": .string("01")]],
            Self.characteristicPath: ["org.bluez.GattCharacteristic1": ["UUID": .string("ABC"), "MTU": .uint16(23)]],
        ])
        let adapters = objects.adapters
        #expect(adapters.count == 1)
        #expect(adapters.first?.properties.alias == "box")
        #expect(adapters.first?.canServeGATT == true)
        #expect(adapters.first?.canAdvertise == false)
        #expect(objects.devices(under: Self.adapterPath).map(\.path) == [Self.devicePath])
        let characteristics = objects.characteristics(under: Self.devicePath)
        #expect(characteristics.map(\.path) == [Self.characteristicPath])
        #expect(characteristics.first?.properties.uuid == "ABC")
        #expect(characteristics.first?.properties.mtu == 23)
    }

    @Test func ourObjectsDeclareWhatBluetoothdReads() {
        let service = GattService1.local(uuid: "4a5a0001", primary: true)
        #expect(service.name == "org.bluez.GattService1")
        let written = GattCharacteristic1.localWritable(uuid: "4a5a0002", service: "/s") { _ throws(DBusError) in }
        #expect(written.name == "org.bluez.GattCharacteristic1")
        #expect(written.methods.map(\.name) == ["WriteValue"])
        #expect(written.methods.first?.inputSignature == "aya{sv}")
        let notifying = GattCharacteristic1.localNotifying(
            uuid: "4a5a0003", service: "/s",
            acquireNotify: { _ throws(DBusError) in throw BlueZError.reply(.notSupported, "no") },
            notifyAcquired: { false }, value: { [] })
        #expect(notifying.methods.map(\.name) == ["StartNotify", "StopNotify", "AcquireNotify"])
        #expect(Set(notifying.properties.map(\.name)) == ["UUID", "Service", "Flags", "NotifyAcquired", "Value"])
        let advertisement = LEAdvertisement1.local(
            .init(
                type: .peripheral, manufacturerData: [0xFFFF: [1]], discoverable: true, minInterval: 100,
                maxInterval: 100)
        ) {}
        #expect(advertisement.name == "org.bluez.LEAdvertisement1")
        #expect(advertisement.methods.map(\.name) == ["Release"])
        #expect(
            Set(advertisement.properties.map(\.name))
                == ["Type", "ManufacturerData", "Discoverable", "MinInterval", "MaxInterval"])
    }
}
