import HorizonDBus

/// `org.bluez.GattCharacteristic1` (doc/org.bluez.GattCharacteristic.rst): a remote device's
/// characteristic (this proxy), or one of ours exported for bluetoothd to serve (`local…`).
struct GattCharacteristic1: BlueZProxy {
    static let interface = BlueZName.gattCharacteristic
    let connection: DBusConnection
    /// `/org/bluez/hci0/dev_…/service0010/char0011`.
    let path: String

    struct Properties: Equatable, Sendable {
        var uuid: String?
        var mtu: UInt16?
        var value: [UInt8]?

        init(_ values: [String: DBusValue]) {
            uuid = values["UUID"]?.unwrapped.string
            mtu = values["MTU"]?.unwrapped.uint16
            value = values["Value"]?.unwrapped.bytes
        }

        /// The changed properties in a `PropertiesChanged` of this interface, else nil.
        init?(changedIn signal: DBusSignal) {
            guard let change = signal.propertiesChanged, change.interface == GattCharacteristic1.interface else {
                return nil
            }
            self.init(change.changed)
        }
    }

    /// How a write is sent (`type` option).
    enum WriteType: String, Sendable {
        /// ATT Write Request: acknowledged by the peer before the call returns.
        case request
        /// ATT Write Command: not acknowledged.
        case command
    }

    func writeValue(_ value: [UInt8], type: WriteType) -> BlueZCall<Void> {
        method("WriteValue", [.byteArray(value), .stringVariantDictionary(["type": .string(type.rawValue)])])
    }

    func startNotify() -> BlueZCall<Void> { method("StartNotify") }

    /// A socket that carries each notification as a datagram (ours to close) and the ATT MTU.
    func acquireNotify() -> BlueZCall<(descriptor: DBusFileDescriptor, mtu: UInt16)> {
        method("AcquireNotify", [.stringVariantDictionary([:])]) { reply throws(DBusError) in
            guard reply.count == 2, let descriptor = reply[0].fileDescriptor, let mtu = reply[1].uint16 else {
                throw .failed("AcquireNotify answered \(reply), not (h, q)")
            }
            return (descriptor, mtu)
        }
    }

    func mtu() -> BlueZCall<UInt16> { property("MTU", \.uint16) }

    /// `PropertiesChanged` of this characteristic (its notifications, when not over a socket).
    var changesRule: DBusMatchRule {
        .propertiesChanged(sender: BlueZName.service, path: path, interface: Self.interface)
    }

    // MARK: Our characteristics

    /// A `WriteValue` bluetoothd relays from a remote central.
    struct WriteRequest: Sendable {
        let value: [UInt8]
        /// The central's device object (`device` option).
        let device: String?
        /// The connection's ATT MTU (`mtu` option).
        let mtu: UInt16?
    }

    /// An `AcquireNotify` bluetoothd calls when a central subscribes.
    struct AcquireNotifyRequest: Sendable {
        let device: String?
        let mtu: UInt16?
    }

    /// A characteristic centrals write to, with acknowledged writes (flag `write`).
    static func localWritable(
        uuid: String, service: String,
        written: @escaping @Sendable (WriteRequest) throws(DBusError) -> Void
    ) -> DBusInterface {
        DBusInterface(
            interface,
            methods: [
                DBusMethod("WriteValue", input: "aya{sv}", output: "") { arguments throws(DBusError) in
                    guard arguments.count == 2, let value = arguments[0].bytes,
                        let options = arguments[1].stringVariantDictionary
                    else { throw BlueZError.reply(.invalidArguments, "expected value and device") }
                    try written(
                        WriteRequest(value: value, device: options["device"]?.objectPath, mtu: options["mtu"]?.uint16))
                    return []
                }
            ],
            properties: [
                .constant("UUID", .string(uuid)),
                .constant("Service", .objectPath(service)),
                .constant("Flags", .stringArray(["write"])),
            ])
    }

    /// A characteristic that notifies (flag `notify`): subscribers get each change of `Value`
    /// (`valueChanged`), or, where `acquireNotify` answers, a socket of their own.
    static func localNotifying(
        uuid: String, service: String,
        acquireNotify: @escaping @Sendable (AcquireNotifyRequest) throws(DBusError) -> (DBusFileDescriptor, UInt16),
        notifyAcquired: @escaping @Sendable () -> Bool,
        value: @escaping @Sendable () -> [UInt8]
    ) -> DBusInterface {
        DBusInterface(
            interface,
            methods: [
                // bluetoothd calls these when a central subscribes and AcquireNotify was not used
                // (declined), and when the last one leaves: Value changes go out to every
                // subscriber whether or not they were called.
                DBusMethod("StartNotify") { _ throws(DBusError) in [] },
                DBusMethod("StopNotify") { _ throws(DBusError) in [] },
                // bluetoothd calls this instead of StartNotify when a central subscribes
                // (because NotifyAcquired is present), naming the central in "device".
                DBusMethod("AcquireNotify", input: "a{sv}", output: "hq") { arguments throws(DBusError) in
                    let options = arguments.first?.stringVariantDictionary ?? [:]
                    let (descriptor, mtu) = try acquireNotify(
                        AcquireNotifyRequest(device: options["device"]?.objectPath, mtu: options["mtu"]?.uint16))
                    return [.unixFileDescriptor(descriptor), .uint16(mtu)]
                },
            ],
            properties: [
                .constant("UUID", .string(uuid)),
                .constant("Service", .objectPath(service)),
                .constant("Flags", .stringArray(["notify"])),
                // For a server, the presence of this property is what tells bluetoothd that
                // AcquireNotify is supported (doc/gatt-api.txt).
                DBusProperty(
                    "NotifyAcquired", signature: "b", emitsChangedSignal: false,
                    get: { () throws(DBusError) in .boolean(notifyAcquired()) }),
                DBusProperty(
                    "Value", signature: "ay", emitsChangedSignal: true,
                    get: { () throws(DBusError) in .byteArray(value()) }),
            ])
    }

    /// The `PropertiesChanged` content that notifies `value` to subscribers.
    static func valueChanged(_ value: [UInt8]) -> [String: DBusValue] { ["Value": .byteArray(value)] }
}
