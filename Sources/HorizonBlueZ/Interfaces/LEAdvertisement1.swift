import HorizonDBus

/// `org.bluez.LEAdvertisement1` (doc/org.bluez.LEAdvertisement.rst): an advertisement of ours,
/// exported for bluetoothd to read when it is registered with `LEAdvertisingManager1`.
enum LEAdvertisement1 {
    static let interface = BlueZName.advertisement

    /// The properties this radio advertises with (legacy advertising, manufacturer data only).
    struct Properties: Equatable, Sendable {
        enum AdvertisementType: String, Sendable { case broadcast, peripheral }
        var type: AdvertisementType
        var manufacturerData: [UInt16: [UInt8]]
        var discoverable: Bool
        /// Milliseconds.
        var minInterval: UInt32
        var maxInterval: UInt32

        var dictionary: [String: DBusValue] {
            [
                "Type": .string(type.rawValue),
                "ManufacturerData": .uint16VariantDictionary(manufacturerData.mapValues { .byteArray($0) }),
                "Discoverable": .boolean(discoverable),
                "MinInterval": .uint32(minInterval),
                "MaxInterval": .uint32(maxInterval),
            ]
        }
    }

    /// The advertisement object; bluetoothd calls `released` when it drops the advertisement.
    static func local(_ properties: Properties, released: @escaping @Sendable () -> Void) -> DBusInterface {
        DBusInterface(
            interface,
            methods: [
                DBusMethod("Release") { _ throws(DBusError) in
                    released()
                    return []
                }
            ],
            properties: properties.dictionary.map { DBusProperty.constant($0.key, $0.value) })
    }
}
