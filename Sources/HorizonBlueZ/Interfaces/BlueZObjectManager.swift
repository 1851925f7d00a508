import HorizonDBus

/// bluetoothd's `org.freedesktop.DBus.ObjectManager` at `/`: every adapter, device, service and
/// characteristic it knows, and the signals that announce them coming and going.
struct BlueZObjectManager: Sendable {
    let connection: DBusConnection

    /// Every object, typed by the interfaces this radio reads.
    func managedObjects() -> BlueZCall<BlueZObjects> {
        BlueZCall(
            connection: connection,
            call: DBusCall(
                destination: BlueZName.service, path: "/", interface: DBusInterfaceName.objectManager,
                member: "GetManagedObjects"
            ) { reply throws(DBusError) in
                try BlueZObjects(DBusCall.managedObjects(destination: BlueZName.service).decodeReply(reply))
            })
    }

    static let interfacesAdded = DBusMatchRule.interfacesAdded(sender: BlueZName.service, managerPath: "/")
    static let interfacesRemoved = DBusMatchRule.interfacesRemoved(sender: BlueZName.service, managerPath: "/")
}

/// bluetoothd's objects as GetManagedObjects lists them: path → interface → properties.
struct BlueZObjects: Sendable {
    let objects: [String: [String: [String: DBusValue]]]

    init(_ objects: [String: [String: [String: DBusValue]]]) { self.objects = objects }

    var count: Int { objects.count }

    /// Adapters, with whether they also export `LEAdvertisingManager1` and `GattManager1`.
    var adapters: [(path: String, properties: Adapter1.Properties, canAdvertise: Bool, canServeGATT: Bool)] {
        objects.compactMap { path, interfaces in
            guard let adapter = interfaces[Adapter1.interface] else { return nil }
            return (
                path, Adapter1.Properties(adapter), interfaces[LEAdvertisingManager1.interface] != nil,
                interfaces[GattManager1.interface] != nil
            )
        }
    }

    /// The devices bluetoothd keeps under `adapterPath`.
    func devices(under adapterPath: String) -> [(path: String, properties: Device1.Properties)] {
        objects.compactMap { path, interfaces in
            guard path.hasPrefix(adapterPath + "/"), let device = interfaces[Device1.interface] else { return nil }
            return (path, Device1.Properties(device))
        }
    }

    /// The remote characteristics under `devicePath`.
    func characteristics(under devicePath: String) -> [(path: String, properties: GattCharacteristic1.Properties)] {
        objects.compactMap { path, interfaces in
            guard path.hasPrefix(devicePath + "/"), let characteristic = interfaces[GattCharacteristic1.interface]
            else { return nil }
            return (path, GattCharacteristic1.Properties(characteristic))
        }
    }
}

extension DBusSignal {
    /// A device object added (InterfacesAdded with `Device1`): its path and properties.
    var deviceAdded: (path: String, properties: Device1.Properties)? {
        guard let added = interfacesAdded, let device = added.interfaces[Device1.interface] else { return nil }
        return (added.path, Device1.Properties(device))
    }

    /// The path of a device object removed (InterfacesRemoved naming `Device1`).
    var deviceRemoved: String? {
        guard let removed = interfacesRemoved, removed.interfaces.contains(Device1.interface) else { return nil }
        return removed.path
    }
}
