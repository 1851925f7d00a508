import Dispatch
import HorizonCore
import HorizonDBus
import HorizonRadio
import HorizonTestSupport
import Synchronization
import Testing

@testable import HorizonBlueZ

#if canImport(Glibc)
    import Glibc
#endif

/// A stand-in bluetoothd that speaks the GATT, advertising and device parts of BlueZ's API the
/// way bluetoothd does: it reads a registered application with GetManagedObjects and an
/// advertisement with GetAll, calls the application's WriteValue as a remote central would, and
/// exports remote devices with Connect, ServicesResolved and their characteristics. The real
/// bluetoothd is exercised in the VM checks (Tools/bluez-vm); this pins our side of each exchange.
final class FakeBluetoothd: Sendable {
    struct Registrations: Sendable {
        var applications: [String: [String: [String: [String: DBusValue]]]] = [:]
        var advertisements: [String: [String: DBusValue]] = [:]
        var unregisteredApplications: [String] = []
        var unregisteredAdvertisements: [String] = []
        var applicationAttempts = 0
        var failNextApplicationWith: DBusError?
        var discovery: [String] = []
        var connectFailures: [DBusError] = []
        var connectAttempts = 0
        var connected = false
        /// When set, services resolve this long after Connect, announced only by a signal (as
        /// bluetoothd does after its GATT discovery); otherwise at once.
        var servicesResolveDelay: Duration?
        var servicesResolved = false
        var writes: [(value: [UInt8], options: [String: DBusValue])] = []
        var notifying = false
        /// Whether the terminal's notify characteristic answers AcquireNotify (bluetoothd does
        /// for remote characteristics that notify); otherwise NotSupported.
        var offersAcquireNotify = false
        /// Our end of the socket handed to the wallet by AcquireNotify.
        var acquiredNotifySocket: Int32?
        var writeInFlight = false
        var startDiscoveryBusy = 0
        /// Device1.Disconnect calls on centrals connected to our terminal, by device path.
        var centralDisconnects: [String] = []
    }

    let bus: TestBus
    let connection: DBusConnection
    let state = Locked(Registrations())
    static let adapterPath = "/org/bluez/hci0"

    init() async throws {
        bus = try TestBus()
        connection = try DBusConnection(.address(bus.address))
        _ = try await connection.requestName("org.bluez")
        try connection.export(path: "/", interfaces: [], isObjectManager: true)
        try connection.export(path: Self.adapterPath, interfaces: adapterInterfaces())
    }

    deinit {
        connection.close()
        bus.stop()
    }

    var address: DBusConnection.Bus { .address(bus.address) }

    private func adapterInterfaces() -> [DBusInterface] {
        let connection = connection
        let state = state
        return [
            DBusInterface(
                "org.bluez.Adapter1",
                methods: [
                    DBusMethod("SetDiscoveryFilter", input: "a{sv}") { arguments throws(DBusError) in
                        let filter = arguments[0].stringVariantDictionary ?? [:]
                        state.withLock {
                            $0.discovery.append(
                                "filter \(filter["Transport"]?.string ?? "-") \(filter["DuplicateData"]?.boolean ?? false)"
                            )
                        }
                        return []
                    },
                    DBusMethod("StartDiscovery") { _ throws(DBusError) in
                        // As bluetoothd answers while an earlier StopDiscovery is still under way.
                        if state.withLock({ state -> Bool in
                            guard state.startDiscoveryBusy > 0 else { return false }
                            state.startDiscoveryBusy -= 1
                            return true
                        }) {
                            throw DBusError(
                                name: "org.bluez.Error.InProgress", message: "Operation already in progress")
                        }
                        state.withLock { $0.discovery.append("start") }
                        return []
                    },
                    DBusMethod("StopDiscovery") { _ throws(DBusError) in
                        state.withLock { $0.discovery.append("stop") }
                        return []
                    },
                    DBusMethod("RemoveDevice", input: "o") { arguments throws(DBusError) in
                        state.withLock { $0.discovery.append("remove \(arguments[0].objectPath ?? "")") }
                        return []
                    },
                ],
                properties: [
                    .constant("Address", .string("00:AA:01:00:00:00")),
                    .constant("Alias", .string("fake")),
                    .constant("Powered", .boolean(true)),
                    .constant("Discovering", .boolean(false)),
                ]),
            DBusInterface(
                "org.bluez.GattManager1",
                methods: [
                    // Deferred and answered from D-Bus callbacks, not tasks: a test blocked in a
                    // registration must not wait for a cooperative thread it may itself hold.
                    .deferred("RegisterApplication", input: "oa{sv}") { call in
                        let root = call.arguments[0].objectPath ?? "/"
                        if let failure = state.withLock({ state -> DBusError? in
                            state.applicationAttempts += 1
                            defer { state.failNextApplicationWith = nil }
                            return state.failNextApplicationWith
                        }) {
                            call.fail(failure)
                            return
                        }
                        connection.call(
                            destination: call.sender ?? "", path: root,
                            interface: "org.freedesktop.DBus.ObjectManager", method: "GetManagedObjects",
                            timeout: .seconds(5)
                        ) { result in
                            switch result {
                            case .success(let reply):
                                state.withLock { $0.applications[root] = reply.first?.managedObjects ?? [:] }
                                call.reply()
                            case .failure(let error):
                                call.fail(error)
                            }
                        }
                    },
                    DBusMethod("UnregisterApplication", input: "o") { arguments throws(DBusError) in
                        state.withLock { $0.unregisteredApplications.append(arguments[0].objectPath ?? "") }
                        return []
                    },
                ]),
            DBusInterface(
                "org.bluez.LEAdvertisingManager1",
                methods: [
                    .deferred("RegisterAdvertisement", input: "oa{sv}") { call in
                        let path = call.arguments[0].objectPath ?? "/"
                        connection.call(
                            destination: call.sender ?? "", path: path,
                            interface: "org.freedesktop.DBus.Properties", method: "GetAll",
                            arguments: [.string("org.bluez.LEAdvertisement1")], timeout: .seconds(5)
                        ) { result in
                            switch result {
                            case .success(let reply):
                                state.withLock { $0.advertisements[path] = reply.first?.stringVariantDictionary ?? [:] }
                                call.reply()
                            case .failure(let error):
                                call.fail(error)
                            }
                        }
                    },
                    DBusMethod("UnregisterAdvertisement", input: "o") { arguments throws(DBusError) in
                        state.withLock { $0.unregisteredAdvertisements.append(arguments[0].objectPath ?? "") }
                        return []
                    },
                ]),
        ]
    }

    // MARK: A remote terminal, as the wallet's bluetoothd shows it

    static let terminalAddress = "11:22:33:44:55:66"
    static let devicePath = adapterPath + "/dev_11_22_33_44_55_66"
    static var writePath: String { devicePath + "/service0010/char0011" }
    static var notifyPath: String { devicePath + "/service0010/char0013" }

    /// Exports the terminal's device object (InterfacesAdded) with its advertisement's data.
    func addTerminalDevice(manufacturerData: [UInt16: [UInt8]], rssi: Int16) throws {
        let state = state
        let connection = connection
        try connection.export(
            path: Self.devicePath,
            interfaces: [
                DBusInterface(
                    "org.bluez.Device1",
                    methods: [
                        DBusMethod("Connect") { _ throws(DBusError) in
                            let failure = state.withLock { state -> DBusError? in
                                state.connectAttempts += 1
                                if !state.connectFailures.isEmpty { return state.connectFailures.removeFirst() }
                                state.connected = true
                                return nil
                            }
                            if let failure { throw failure }
                            try Self.exportServices(on: connection, state: state)
                            guard let delay = state.withLock({ $0.servicesResolveDelay }) else {
                                state.withLock { $0.servicesResolved = true }
                                try connection.emitPropertiesChanged(
                                    path: Self.devicePath, interface: "org.bluez.Device1",
                                    changed: ["Connected": .boolean(true), "ServicesResolved": .boolean(true)])
                                return []
                            }
                            try connection.emitPropertiesChanged(
                                path: Self.devicePath, interface: "org.bluez.Device1",
                                changed: ["Connected": .boolean(true)])
                            let milliseconds = Int(
                                delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000)
                            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) {
                                state.withLock { $0.servicesResolved = true }
                                try? connection.emitPropertiesChanged(
                                    path: Self.devicePath, interface: "org.bluez.Device1",
                                    changed: ["ServicesResolved": .boolean(true)])
                            }
                            return []
                        },
                        DBusMethod("Disconnect") { _ throws(DBusError) in
                            state.withLock {
                                $0.connected = false
                                $0.servicesResolved = false
                            }
                            return []
                        },
                    ],
                    properties: [
                        .constant("Address", .string(Self.terminalAddress)),
                        .constant("RSSI", .int16(rssi)),
                        .constant(
                            "ManufacturerData",
                            .uint16VariantDictionary(manufacturerData.mapValues { .byteArray($0) })),
                        DBusProperty("Connected", signature: "b") { .boolean(state.withLock { $0.connected }) },
                        DBusProperty("ServicesResolved", signature: "b") {
                            .boolean(state.withLock { $0.connected && $0.servicesResolved })
                        },
                    ])
            ])
    }

    private static func exportServices(on connection: DBusConnection, state: Locked<Registrations>) throws(DBusError) {
        guard !connection.exportedPaths.contains(writePath) else { return }
        try connection.export(
            path: devicePath + "/service0010",
            interfaces: [
                DBusInterface(
                    "org.bluez.GattService1", properties: [.constant("UUID", .string(HorizonGATTService.service))])
            ])
        try connection.export(
            path: writePath,
            interfaces: [
                DBusInterface(
                    "org.bluez.GattCharacteristic1",
                    methods: [
                        // As bluetoothd does: a write request takes a round trip, and a second
                        // one while the first is under way is refused with InProgress.
                        .deferred("WriteValue", input: "aya{sv}") { call in
                            let busy = state.withLock { state -> Bool in
                                defer { state.writeInFlight = true }
                                return state.writeInFlight
                            }
                            guard !busy else {
                                call.fail(DBusError(name: "org.bluez.Error.InProgress", message: "In Progress"))
                                return
                            }
                            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) {
                                state.withLock {
                                    $0.writeInFlight = false
                                    $0.writes.append(
                                        (
                                            call.arguments[0].bytes ?? [],
                                            call.arguments[1].stringVariantDictionary ?? [:]
                                        ))
                                }
                                call.reply()
                            }
                        }
                    ],
                    properties: [
                        .constant("UUID", .string(HorizonGATTService.walletToTerminal.uppercased())),
                        .constant("MTU", .uint16(185)),
                    ])
            ])
        try connection.export(
            path: notifyPath,
            interfaces: [
                DBusInterface(
                    "org.bluez.GattCharacteristic1",
                    methods: [
                        DBusMethod("StartNotify") { _ throws(DBusError) in
                            state.withLock { $0.notifying = true }
                            return []
                        },
                        DBusMethod("AcquireNotify", input: "a{sv}", output: "hq") { _ throws(DBusError) in
                            guard state.withLock({ $0.offersAcquireNotify }) else {
                                throw DBusError(
                                    name: "org.bluez.Error.NotSupported", message: "Operation is not supported")
                            }
                            var ends: [Int32] = [-1, -1]
                            guard
                                socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue | SOCK_CLOEXEC.rawValue), 0, &ends)
                                    == 0
                            else { throw DBusError(name: "org.bluez.Error.Failed", message: "socketpair") }
                            state.withLock { $0.acquiredNotifySocket = ends[0] }
                            return [.unixFileDescriptor(DBusFileDescriptor(owning: ends[1])), .uint16(185)]
                        },
                    ],
                    properties: [.constant("UUID", .string(HorizonGATTService.terminalToWallet))])
            ])
    }

    /// A notification from the remote terminal, as bluetoothd relays it (a change of `Value`).
    func notify(_ value: [UInt8]) throws {
        if let socket = state.withLock({ $0.acquiredNotifySocket }) {
            _ = value.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            return
        }
        try connection.emitPropertiesChanged(
            path: Self.notifyPath, interface: "org.bluez.GattCharacteristic1", changed: ["Value": .byteArray(value)])
    }

    /// A remote central connecting to the terminal again, as bluetoothd shows a device it knew:
    /// Connected turning true on its object.
    func connectCentral(_ path: String) throws {
        try exportCentral(path, properties: [])
        try connection.emitPropertiesChanged(
            path: path, interface: "org.bluez.Device1", changed: ["Connected": .boolean(true)])
    }

    /// A central bluetoothd never saw before: its device object appears already connected
    /// (InterfacesAdded from the object manager at "/"), with no property change.
    func connectNewCentral(_ path: String) throws {
        try exportCentral(path, properties: [.constant("Connected", .boolean(true))])
    }

    /// A central's device object whose Disconnect is recorded.
    private func exportCentral(_ path: String, properties: [DBusProperty]) throws {
        let state = state
        try connection.export(
            path: path,
            interfaces: [
                DBusInterface(
                    "org.bluez.Device1",
                    methods: [
                        DBusMethod("Disconnect") { _ throws(DBusError) in
                            state.withLock { $0.centralDisconnects.append(path) }
                            return []
                        }
                    ], properties: properties)
            ])
    }

    /// The remote central dropping the link, as bluetoothd reports it.
    func disconnectDevice(_ path: String) throws {
        state.withLock { $0.connected = false }
        try connection.emitPropertiesChanged(
            path: path, interface: "org.bluez.Device1", changed: ["Connected": .boolean(false)])
    }

    /// A remote central enabling notifications on the terminal's notify characteristic (its CCC
    /// write), as bluetoothd 5.69+ handles it in `ccc_write_cb` (src/gatt-database.c): if the
    /// registered characteristic has a NotifyAcquired property, AcquireNotify with the options of
    /// `append_options` (device, link, mtu), answered with a socket and an MTU; otherwise
    /// StartNotify. Returns bluetoothd's end of the socket (owned by the caller), nil after
    /// StartNotify.
    func subscribe(_ device: String, to radio: BlueZRadio, mtu: UInt16 = 247) async throws -> Int32? {
        let root = radio.peripheral.rootPath
        let path = radio.peripheral.notifyCharacteristicPath
        let exported = state.withLock { $0.applications[root]?[path]?["org.bluez.GattCharacteristic1"] }
        guard exported?["NotifyAcquired"] != nil else {
            _ = try await connection.call(
                destination: radio.connection.uniqueName, path: path, interface: "org.bluez.GattCharacteristic1",
                method: "StartNotify", timeout: .seconds(5))
            return nil
        }
        let reply = try await connection.call(
            destination: radio.connection.uniqueName, path: path, interface: "org.bluez.GattCharacteristic1",
            method: "AcquireNotify",
            arguments: [
                .stringVariantDictionary([
                    "device": .objectPath(device), "link": .string("LE"), "mtu": .uint16(mtu),
                ])
            ], timeout: .seconds(5))
        guard reply.count == 2, reply[1].uint16 == mtu, let fd = reply[0].fileDescriptor?.take() else {
            throw DBusError(name: "org.bluez.Error.Failed", message: "Invalid AcquireNotify response: \(reply)")
        }
        return fd
    }

    /// A remote central writing to the terminal's characteristic, as bluetoothd relays it.
    func write(_ value: [UInt8], from device: String, to radio: BlueZRadio, mtu: UInt16 = 247) async throws {
        _ = try await connection.call(
            destination: radio.connection.uniqueName, path: radio.peripheral.writeCharacteristicPath,
            interface: "org.bluez.GattCharacteristic1", method: "WriteValue",
            arguments: [
                .byteArray(value),
                .stringVariantDictionary(["device": .objectPath(device), "mtu": .uint16(mtu)]),
            ], timeout: .seconds(5))
    }
}

/// A value behind a lock that closures can share (a `Mutex` itself cannot be captured).
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<Result: Sendable>(_ body: (inout Value) -> Result) -> Result { mutex.withLock { body(&$0) } }
}

/// Waits (in real time) until `condition` holds, for callbacks that arrive on other queues.
/// Connects `radio` to the stand-in's terminal device; fails the test if no link within 30 s.
/// The bounds are generous: the stand-in answers at once, but beside the process-heavy suites a
/// busy machine can hold the connect's D-Bus round trips for seconds. The wait outlasts the
/// connect's own timeout, so that a slow connect reports its own error.
func connectToTheTerminal(_ radio: BlueZRadio) async throws -> any ByteLink {
    let result = Mutex<Result<any ByteLink, RadioError>?>(nil)
    radio.connect(to: PeerAddress(FakeBluetoothd.terminalAddress), timeout: .seconds(30)) { outcome in
        result.withLock { $0 = outcome }
    }
    #expect(await eventually(40) { result.withLock { $0 } != nil })
    return try #require(try result.withLock { $0 }?.get())
}

func eventually(_ seconds: Double = 20, _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + .milliseconds(Int(seconds * 1000))
    while clock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// What bluetoothd's end of an AcquireNotify socket gives within `seconds`: one datagram (one
/// notification), the end of the socket (the terminal closed it), or nothing.
enum SocketRead: Equatable {
    case datagram([UInt8])
    case closed
    case nothing
}

func readSocket(_ fd: Int32, within seconds: Double = 2) -> SocketRead {
    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    guard poll(&poller, 1, Int32(seconds * 1000)) > 0 else { return .nothing }
    var buffer = [UInt8](repeating: 0, count: 1024)
    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
    return count > 0 ? .datagram(Array(buffer.prefix(count))) : .closed
}

/// A Horizon-like advertisement: flags and 20 bytes of manufacturer data for company 0xFFFF.
let sampleAdvertisement: [UInt8] =
    [0x02, 0x01, 0x06, 0x17, 0xFF, 0xFF, 0xFF] + Array("HZ".utf8) + [1, 1] + Array(repeating: 0xAB, count: 16)

@Suite("BlueZ radio (against a stand-in bluetoothd on a private bus)")
struct BlueZRadioTests {
    @Test func theAdvertisementCarriesOnlyTheManufacturerDataAndBlueZWritesTheFlags() throws {
        let properties = try BlueZPeripheral.advertisementProperties(
            sampleAdvertisement, interval: .milliseconds(100)
        ).dictionary
        #expect(properties["Type"] == .string("peripheral"))
        #expect(properties["Discoverable"] == .boolean(true))
        #expect(properties["MinInterval"] == .uint32(100))
        #expect(properties["MaxInterval"] == .uint32(100))
        let manufacturer = properties["ManufacturerData"]?.uint16VariantDictionary
        #expect(manufacturer?[0xFFFF]?.bytes == Array(sampleAdvertisement.dropFirst(7)))
        #expect(sampleAdvertisement.count == 27)
        #expect(throws: RadioError.advertisementTooLarge(size: 32, maximum: 31)) {
            try BlueZPeripheral.advertisementProperties(
                sampleAdvertisement + [0x04, 0x09, 0x41, 0x42, 0x43], interval: .milliseconds(100))
        }
        #expect(throws: RadioError.self) {
            try BlueZPeripheral.advertisementProperties([0x03, 0x09, 0x41, 0x42], interval: .milliseconds(100))
        }
    }

    @Test func tagsAddressNotificationsToOneWallet() throws {
        let tag = try #require(LinkTag([1, 2, 3, 4]))
        let other = try #require(LinkTag([1, 2, 3, 5]))
        #expect(LinkFraming.parseRegistration(LinkFraming.registration(tag)) == tag)
        #expect(LinkFraming.parseRegistration([0xDE, 0xAD, 0xBE, 0xEF, 0, 1, 2, 3]) == nil)
        #expect(LinkFraming.parseRegistration(Array(LinkFraming.registration(tag).dropLast())) == nil)
        let notification = LinkFraming.notification([9, 8, 7], to: tag)
        #expect(LinkFraming.payload(ofNotification: notification, for: tag) == [9, 8, 7])
        #expect(LinkFraming.payload(ofNotification: notification, for: other) == nil)
        #expect(LinkFraming.payload(ofNotification: [1, 2], for: tag) == nil)
        #expect(LinkTag.random() != LinkTag.random())
    }

    @Test func transientConnectFailuresAreRetriedAndTheRestAreNot() {
        func failure(_ name: String, _ message: String = "") -> ConnectFailure {
            .bluez(BlueZError(name: name, message: message), doing: "connecting")
        }
        #expect(failure("org.bluez.Error.InProgress").isTransient)
        #expect(failure("org.bluez.Error.NotConnected").isTransient)
        #expect(failure("org.bluez.Error.Failed", "le-connection-abort-by-local").isTransient)
        #expect(failure("org.bluez.Error.Failed", "Software caused connection abort").isTransient)
        #expect(failure("org.bluez.Error.Failed", "Operation already in progress").isTransient)
        #expect(failure("org.bluez.Error.Failed", "Connection refused").isTransient)
        #expect(failure("org.bluez.Error.Failed", "Input/output error").isTransient)
        // The reason is bluetoothd's whole message, and only a Failed error has one.
        #expect(!failure("org.bluez.Error.Failed", "connect: Connection refused (111)").isTransient)
        #expect(!failure("org.bluez.Error.NotSupported", "le-connection-abort-by-local").isTransient)
        #expect(ConnectFailure.droppedDuringDiscovery.isTransient)
        #expect(!failure("org.bluez.Error.Failed", "Operation failed").isTransient)
        #expect(!failure("org.bluez.Error.NotPermitted").isTransient)
        #expect(!ConnectFailure.notAHorizonTerminal.isTransient)
        #expect(!ConnectFailure.timedOut.isTransient)
        let peer = PeerAddress("11:22:33:44:55:66")
        #expect(
            failure("org.freedesktop.DBus.Error.UnknownObject").radioError(peer: peer, attempts: 1)
                == .peerNotFound(peer))
        #expect(failure("org.bluez.Error.DoesNotExist").radioError(peer: peer, attempts: 1) == .peerNotFound(peer))
        #expect(
            failure("org.freedesktop.DBus.Error.NoReply").radioError(peer: peer, attempts: 1)
                == .connectionTimedOut(peer))
        #expect(
            failure("org.freedesktop.DBus.Error.TimedOut").radioError(peer: peer, attempts: 1)
                == .connectionTimedOut(peer))
        #expect(ConnectFailure.timedOut.radioError(peer: peer, attempts: 3) == .connectionTimedOut(peer))
        #expect(BlueZConnectRetryPolicy().backoff(afterAttempt: 1) == .milliseconds(250))
        #expect(BlueZConnectRetryPolicy().backoff(afterAttempt: 3) == .seconds(1))
    }

    @Test func sightingsRebuildTheAdvertisingDataAndTreatRSSI127AsUnknown() {
        var record = BlueZCentral.DeviceRecord(address: "11:22:33:44:55:66")
        BlueZCentral.update(
            &record,
            with: Device1.Properties([
                "RSSI": .int16(127), "ManufacturerData": .uint16VariantDictionary([0xFFFF: .byteArray([1, 2])]),
            ]))
        #expect(record.rssi == nil)
        #expect(BlueZCentral.advertisingData(of: record) == [0x02, 0x01, 0x06, 0x05, 0xFF, 0xFF, 0xFF, 1, 2])
        BlueZCentral.update(&record, with: Device1.Properties(["RSSI": .int16(-58)]))
        #expect(record.rssi == -58)
        #expect(BlueZCentral.advertisingData(of: BlueZCentral.DeviceRecord(address: "x")) == nil)
    }

    @Test func theTerminalRegistersItsServiceAndAdvertisementAndServesTaggedLinks() async throws {
        let bluetoothd = try await FakeBluetoothd()
        // A registration a crashed run left behind on this connection: withdrawn, then done again.
        bluetoothd.state.withLock {
            $0.failNextApplicationWith = DBusError(name: "org.bluez.Error.AlreadyExists", message: "Already Exists")
        }
        let radio = try await BlueZRadio.open(adapter: "hci0", bus: bluetoothd.address)
        let links = Recorder<any ByteLink>()
        radio.setConnectionHandler { links.append($0) }
        let advertising = try await radio.startAdvertising(sampleAdvertisement, interval: .milliseconds(100))

        let registered = bluetoothd.state.withLock { $0 }
        #expect(registered.applicationAttempts == 2)
        #expect(registered.unregisteredApplications == [radio.peripheral.rootPath])
        let objects = try #require(registered.applications[radio.peripheral.rootPath])
        let uuids = Set(
            objects.values.compactMap {
                $0["org.bluez.GattCharacteristic1"]?["UUID"]?.string ?? $0["org.bluez.GattService1"]?["UUID"]?.string
            })
        #expect(
            uuids
                == [
                    HorizonGATTService.service, HorizonGATTService.walletToTerminal,
                    HorizonGATTService.terminalToWallet,
                ])
        let advertisement = try #require(registered.advertisements.values.first)
        #expect(advertisement["ManufacturerData"]?.uint16VariantDictionary?[0xFFFF]?.bytes?.count == 20)

        // A wallet registers its tag with its first write, then sends a frame.
        let wallet = FakeBluetoothd.adapterPath + "/dev_AA_BB_CC_DD_EE_01"
        let tag = try #require(LinkTag([7, 7, 7, 7]))
        try await bluetoothd.write(LinkFraming.registration(tag), from: wallet, to: radio, mtu: 185)
        #expect(await eventually { links.count == 1 })
        let link = try #require(links.last)
        #expect(link.peer == PeerAddress("AA:BB:CC:DD:EE:01"))
        #expect(link.attMTU == 181)
        let received = Recorder<[UInt8]>()
        let closes = Recorder<LinkCloseReason>()
        link.setHandler(ByteLinkHandler(onReceive: { received.append($0) }, onClose: { closes.append($0) }))
        try await bluetoothd.write([0xC0, 1, 2, 3], from: wallet, to: radio)
        #expect(await eventually { received.values == [[0xC0, 1, 2, 3]] })

        // Its answers go out as notifications bearing its tag.
        let notifications = try await bluetoothd.connection.signals(
            matching: .propertiesChanged(
                sender: radio.connection.uniqueName, path: radio.peripheral.notifyCharacteristicPath))
        try link.send([0x40, 9, 9])
        var iterator = notifications.makeAsyncIterator()
        let notified = await iterator.next()
        #expect(notified?.propertiesChanged?.changed["Value"]?.bytes == [7, 7, 7, 7, 0x40, 9, 9])
        #expect(throws: RadioError.payloadTooLarge(size: 179, maximum: 178)) {
            try link.send(Array(repeating: 0, count: 179))
        }
        // At the largest MTU the tag and the payload together fit one attribute value (512
        // bytes), not MTU - 3 (514), which bluetoothd refuses.
        let bigWallet = FakeBluetoothd.adapterPath + "/dev_AA_BB_CC_DD_EE_02"
        let bigTag = try #require(LinkTag([8, 8, 8, 8]))
        try await bluetoothd.write(LinkFraming.registration(bigTag), from: bigWallet, to: radio, mtu: 517)
        #expect(await eventually { links.count == 2 })
        let bigLink = try #require(links.last)
        #expect(bigLink.maximumPayloadSize == 512 - LinkTag.length)
        #expect(throws: RadioError.payloadTooLarge(size: 509, maximum: 508)) {
            try bigLink.send(Array(repeating: 0, count: 509))
        }
        bigLink.close()

        // A foreign central's garbage is answered, ignored and counted; it makes no link.
        try await bluetoothd.write([0xDE, 0xAD, 0xBE, 0xEF], from: FakeBluetoothd.adapterPath + "/dev_66", to: radio)
        #expect(radio.foreignWriteCount == 1)
        #expect(radio.connectedWalletCount == 1)

        // The wallet's device disconnecting ends its link.
        try bluetoothd.disconnectDevice(wallet)
        #expect(await eventually { closes.values == [.closedByPeer] })
        #expect(radio.connectedWalletCount == 0)

        advertising.stop()
        #expect(await eventually { bluetoothd.state.withLock { $0.unregisteredAdvertisements.count } == 1 })
        radio.shutdown()
        #expect(bluetoothd.state.withLock { $0.unregisteredApplications.count } == 2)
    }

    /// A tag another device holds is refused (the first wallet keeps its link),
    /// and a central that connects and registers no tag is disconnected after the grace period,
    /// while one that registers in time is not.
    @Test func aHeldTagIsRefusedToAnotherDeviceAndSilentCentralsAreDisconnected() async throws {
        let bluetoothd = try await FakeBluetoothd()
        let radio = try await BlueZRadio.open(adapter: "hci0", bus: bluetoothd.address)
        let links = Recorder<any ByteLink>()
        radio.setConnectionHandler { links.append($0) }
        let advertising = try await radio.startAdvertising(sampleAdvertisement, interval: .milliseconds(100))
        let wallet = FakeBluetoothd.adapterPath + "/dev_AA_BB_CC_DD_EE_01"
        let thief = FakeBluetoothd.adapterPath + "/dev_AA_BB_CC_DD_EE_02"
        let silent = FakeBluetoothd.adapterPath + "/dev_AA_BB_CC_DD_EE_03"
        let newcomer = FakeBluetoothd.adapterPath + "/dev_AA_BB_CC_DD_EE_04"
        try bluetoothd.connectCentral(wallet)
        try bluetoothd.connectCentral(silent)
        try bluetoothd.connectNewCentral(newcomer)
        let tag = try #require(LinkTag([1, 2, 3, 4]))
        try await bluetoothd.write(LinkFraming.registration(tag), from: wallet, to: radio)
        #expect(await eventually { links.count == 1 })
        let link = try #require(links.last)
        let received = Recorder<[UInt8]>()
        link.setHandler(ByteLinkHandler(onReceive: { received.append($0) }, onClose: { _ in }))

        await #expect(throws: DBusError.self) {
            try await bluetoothd.write(LinkFraming.registration(tag), from: thief, to: radio)
        }
        #expect(radio.refusedTagCount == 1)
        #expect(radio.connectedWalletCount == 1)
        try await bluetoothd.write([0xC0, 5], from: wallet, to: radio)
        #expect(await eventually { received.values == [[0xC0, 5]] }, "the first wallet's link still works")

        // Past the 10 s grace: the silent central is disconnected, the registered wallet is not.
        #expect(await eventually(13) { radio.silentDisconnectCount == 2 })
        #expect(await eventually { Set(bluetoothd.state.withLock { $0.centralDisconnects }) == [silent, newcomer] })
        advertising.stop()
        radio.shutdown()
    }

    /// Where bluetoothd offers per-device notification delivery (AcquireNotify
    /// per subscribing device, BlueZ 5.69+), each wallet's notifications go over its own device's
    /// socket and no other; a central without a socket (AcquireNotify not used, or BlueZ up to 5.68
    /// acquiring one socket for the first subscriber only), or whose socket bluetoothd closed,
    /// gets Value changes; a device's socket is closed when it disconnects.
    @Test func eachWalletsNotificationsGoOverItsOwnDevicesAcquiredSocket() async throws {
        let bluetoothd = try await FakeBluetoothd()
        let radio = try await BlueZRadio.open(adapter: "hci0", bus: bluetoothd.address)
        let links = Recorder<any ByteLink>()
        radio.setConnectionHandler { links.append($0) }
        let advertising = try await radio.startAdvertising(sampleAdvertisement, interval: .milliseconds(100))
        let valueChanges = Recorder<[UInt8]>()
        let notifications = try await bluetoothd.connection.signals(
            matching: .propertiesChanged(
                sender: radio.connection.uniqueName, path: radio.peripheral.notifyCharacteristicPath))
        let watch = Task {
            for await signal in notifications {
                if let value = signal.propertiesChanged?.changed["Value"]?.bytes { valueChanges.append(value) }
            }
        }
        defer { watch.cancel() }

        let first = FakeBluetoothd.adapterPath + "/dev_AA_BB_CC_DD_EE_01"
        let second = FakeBluetoothd.adapterPath + "/dev_AA_BB_CC_DD_EE_02"
        let third = FakeBluetoothd.adapterPath + "/dev_AA_BB_CC_DD_EE_03"
        // Both wallets subscribe before registering their tags, as the wallet's central does.
        let firstSocket = try #require(try await bluetoothd.subscribe(first, to: radio, mtu: 185))
        let secondSocket = try #require(try await bluetoothd.subscribe(second, to: radio))
        defer {
            close(firstSocket)
            close(secondSocket)
        }
        #expect(radio.peripheral.notifySocketDevices == [first, second])
        var tags: [LinkTag] = []
        for (index, device) in [first, second, third].enumerated() {
            let tag = try #require(LinkTag([9, 9, 9, UInt8(index)]))
            tags.append(tag)
            try await bluetoothd.write(LinkFraming.registration(tag), from: device, to: radio)
            #expect(await eventually { links.count == index + 1 })
        }
        let firstLink = try #require(links.values.first { $0.peer == PeerAddress("AA:BB:CC:DD:EE:01") })
        let secondLink = try #require(links.values.first { $0.peer == PeerAddress("AA:BB:CC:DD:EE:02") })
        let thirdLink = try #require(links.values.first { $0.peer == PeerAddress("AA:BB:CC:DD:EE:03") })

        try firstLink.send([0x40, 1])
        #expect(readSocket(firstSocket) == .datagram(tags[0].bytes + [0x40, 1]))
        try secondLink.send([0x40, 2])
        #expect(readSocket(secondSocket) == .datagram(tags[1].bytes + [0x40, 2]))
        #expect(readSocket(firstSocket, within: 0.3) == .nothing, "the second wallet's frame reached the first")
        #expect(readSocket(secondSocket, within: 0.3) == .nothing)
        #expect(radio.peripheral.socketNotificationCount == 2)

        // The third central never got a socket (it subscribed with StartNotify, or bluetoothd up
        // to 5.68 keeps one socket for the first subscriber): its frames are Value changes.
        try thirdLink.send([0x40, 3])
        #expect(await eventually { valueChanges.values == [tags[2].bytes + [0x40, 3]] })
        #expect(readSocket(firstSocket, within: 0.3) == .nothing)
        #expect(readSocket(secondSocket, within: 0.3) == .nothing)

        // bluetoothd closes the first wallet's socket (it unsubscribed): Value changes from then on.
        shutdown(firstSocket, Int32(SHUT_RDWR))
        try firstLink.send([0x40, 4])
        #expect(await eventually { valueChanges.values.last == tags[0].bytes + [0x40, 4] })
        #expect(radio.peripheral.notifySocketDevices == [second])

        // The second wallet disconnects: the terminal closes its socket, as bluetoothd 5.69+ also
        // does (and as bluetoothd up to 5.68 needs to acquire one for the next subscriber).
        try bluetoothd.disconnectDevice(second)
        // Generous waits: the disconnect reaches the terminal as a signal, which a loaded machine
        // delivered after more than two seconds.
        #expect(readSocket(secondSocket, within: 20) == .closed)
        #expect(await eventually { radio.peripheral.notifySocketDevices.isEmpty })
        #expect(radio.peripheral.socketNotificationCount == 2)

        // An AcquireNotify that names no device is declined (bluetoothd then calls StartNotify).
        await #expect(throws: DBusError.self) {
            try await bluetoothd.connection.call(
                destination: radio.connection.uniqueName, path: radio.peripheral.notifyCharacteristicPath,
                interface: "org.bluez.GattCharacteristic1", method: "AcquireNotify",
                arguments: [.stringVariantDictionary(["mtu": .uint16(23)])], timeout: .seconds(5))
        }
        advertising.stop()
        radio.shutdown()
    }

    /// A notify socket bluetoothd stopped reading is waited on for a bounded time, never forever,
    /// and one whose other end was closed says so (the caller then falls back to Value changes).
    @Test func aNotifySocketReportsAStalledOrClosedPeerInsteadOfBlocking() throws {
        let (ours, theirs) = try NotifySocket.pair(device: FakeBluetoothd.adapterPath + "/dev_01", mtu: 247)
        let datagram = [UInt8](repeating: 7, count: 200)
        var sent = 0
        while sent < 100_000, ours.send(datagram, patience: .zero) == .sent { sent += 1 }
        #expect(sent > 0 && sent < 100_000)
        let clock = ContinuousClock()
        let start = clock.now
        #expect(ours.send(datagram, patience: .milliseconds(200)) == .failed(EAGAIN))
        #expect(clock.now - start >= .milliseconds(150))
        // bluetoothd reading one notification makes room for the next.
        let fd = try #require(theirs.rawValue)
        #expect(readSocket(fd) == .datagram(datagram))
        #expect(ours.send(datagram, patience: .milliseconds(200)) == .sent)
        theirs.close()
        #expect(ours.send(datagram) == .closed)
    }

    /// bluetoothd calls Release on an advertisement it dropped (the adapter went away): a session
    /// still advertising registers its GATT application and advertisement again.
    @Test func anAdvertisementBluetoothdReleasesIsRegisteredAgainWhileItsSessionLasts() async throws {
        let bluetoothd = try await FakeBluetoothd()
        let radio = try await BlueZRadio.open(adapter: "hci0", bus: bluetoothd.address)
        let advertising = try await radio.startAdvertising(sampleAdvertisement, interval: .milliseconds(100))
        let path = try #require(bluetoothd.state.withLock { $0.advertisements.keys.first })
        func release() async throws {
            bluetoothd.state.withLock { _ = $0.advertisements.removeValue(forKey: path) }
            _ = try await withCheckedThrowingContinuation { continuation in
                bluetoothd.connection.call(
                    destination: radio.connection.uniqueName ?? "", path: path, interface: "org.bluez.LEAdvertisement1",
                    method: "Release", timeout: .seconds(5)
                ) { continuation.resume(with: $0) }
            }
        }
        let applicationAttempts = bluetoothd.state.withLock { $0.applicationAttempts }
        try await release()
        #expect(await eventually { bluetoothd.state.withLock { $0.advertisements[path] } != nil })
        #expect(radio.advertisementReregistrationCount == 1)
        // The GATT application is offered again too (bluetoothd answers AlreadyExists if it kept it).
        #expect(bluetoothd.state.withLock { $0.applicationAttempts } == applicationAttempts + 1)

        // Once its session stops advertising, a late Release (if it still reaches us) changes nothing.
        advertising.stop()
        #expect(await eventually { bluetoothd.state.withLock { $0.unregisteredAdvertisements } == [path] })
        try? await release()
        try await Task.sleep(for: .milliseconds(500))
        #expect(bluetoothd.state.withLock { $0.advertisements[path] } == nil)
        #expect(radio.advertisementReregistrationCount == 1)
        radio.shutdown()
    }

    @Test func theRadioTracesEachBlueZStepThroughTheLoggerItIsGiven() async throws {
        let bluetoothd = try await FakeBluetoothd()
        let traced = LogRecorder()
        let quiet = LogRecorder()
        let radio = try await BlueZRadio.open(
            adapter: "hci0", bus: bluetoothd.address, logger: traced.logger(level: .trace))
        defer { radio.shutdown() }
        try await radio.startScanning { _ in }
        let started = try #require(traced.first("scan: discovery started"))
        #expect(started.level == .trace)
        #expect(started.metadata["adapter"] == "hci0")
        // The same steps at a program's ordinary level: nothing.
        let other = try await FakeBluetoothd()
        let quietRadio = try await BlueZRadio.open(
            adapter: "hci0", bus: other.address, logger: quiet.logger(level: .info))
        defer { quietRadio.shutdown() }
        try await quietRadio.startScanning { _ in }
        #expect(quiet.all.isEmpty)
    }

    @Test func theWalletScansConnectsWithRetriesAndKeepsOnlyItsOwnNotifications() async throws {
        let bluetoothd = try await FakeBluetoothd()
        let radio = try await BlueZRadio.open(
            adapter: "hci0", bus: bluetoothd.address,
            retryPolicy: BlueZConnectRetryPolicy(maximumAttempts: 4, initialBackoff: .milliseconds(10)))
        defer { radio.shutdown() }
        let sightings = Recorder<Sighting>()
        // bluetoothd still stopping an earlier discovery: the start is retried, not taken as joined.
        bluetoothd.state.withLock { $0.startDiscoveryBusy = 2 }
        try await radio.startScanning { sightings.append($0) }
        await #expect(throws: RadioError.alreadyScanning) { try await radio.startScanning { _ in } }
        #expect(bluetoothd.state.withLock { $0.discovery } == ["filter le true", "start"])

        try bluetoothd.addTerminalDevice(manufacturerData: [0xFFFF: [1, 2, 3]], rssi: 127)
        // Reported when added, then again at the refresh pace (bluetoothd reports changes only).
        #expect(await eventually { sightings.count >= 3 })
        let sighting = try #require(sightings.last)
        #expect(sighting.address == PeerAddress(FakeBluetoothd.terminalAddress))
        #expect(sighting.rssi == nil)
        #expect(sighting.advertisingData == [0x02, 0x01, 0x06, 0x06, 0xFF, 0xFF, 0xFF, 1, 2, 3])

        // bluetoothd is busy, then the controller aborts: the third attempt connects.
        bluetoothd.state.withLock {
            $0.connectFailures = [
                DBusError(name: "org.bluez.Error.InProgress", message: "In Progress"),
                DBusError(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local"),
            ]
        }
        let link = try await connectToTheTerminal(radio)
        let state = bluetoothd.state.withLock { $0 }
        #expect(state.connectAttempts == 3)
        #expect(state.notifying)
        #expect(link.attMTU == 185)
        // Discovery paused for the connect (the kernel does not start one while discovering).
        #expect(state.discovery.contains("stop"))
        let registration = try #require(state.writes.first)
        #expect(registration.options["type"]?.string == "request")
        let tag = try #require(LinkFraming.parseRegistration(registration.value))

        let received = Recorder<[UInt8]>()
        link.setHandler(ByteLinkHandler(onReceive: { received.append($0) }, onClose: { _ in }))
        try bluetoothd.notify(LinkTag.random().bytes + [0xAA])  // another wallet's
        try bluetoothd.notify(tag.bytes + [0xC0, 5])
        #expect(await eventually { received.values == [[0xC0, 5]] })

        // Frames sent back to back leave one write at a time, in order (no InProgress).
        try link.send([0x41, 1])
        try link.send([0x01, 2])
        try link.send([0x82, 3])
        #expect(await eventually { bluetoothd.state.withLock { $0.writes.count } == 4 })
        #expect(
            bluetoothd.state.withLock { $0.writes.dropFirst().map(\.value) } == [[0x41, 1], [0x01, 2], [0x82, 3]])
        link.close()
        #expect(await eventually { !bluetoothd.state.withLock { $0.connected } })
    }

    @Test func theConnectWaitsForServicesResolvedAnnouncedOnlyBySignal() async throws {
        let bluetoothd = try await FakeBluetoothd()
        let radio = try await BlueZRadio.open(adapter: "hci0", bus: bluetoothd.address)
        defer { radio.shutdown() }
        try bluetoothd.addTerminalDevice(manufacturerData: [0xFFFF: [1]], rssi: -40)
        // Not resolved when the connect returns; only a signal says so, 300 ms later.
        bluetoothd.state.withLock { $0.servicesResolveDelay = .milliseconds(300) }
        let link = try await connectToTheTerminal(radio)
        let state = bluetoothd.state.withLock { $0 }
        #expect(state.connectAttempts == 1)
        #expect(state.servicesResolved)
        #expect(state.notifying)
        #expect(state.writes.count == 1)  // the registration, sent once services were resolved
        link.close()
    }

    @Test func aDeviceBluetoothdStillListsButNoLongerHearsIsNotReportedAgain() async throws {
        let bluetoothd = try await FakeBluetoothd()
        let radio = try await BlueZRadio.open(adapter: "hci0", bus: bluetoothd.address)
        defer { radio.shutdown() }
        let sightings = Recorder<Sighting>()
        try await radio.startScanning { sightings.append($0) }
        try bluetoothd.addTerminalDevice(manufacturerData: [0xFFFF: [1, 2, 3]], rssi: -50)
        // Re-reported at the refresh pace while its last report is recent...
        #expect(await eventually { sightings.count >= 5 })
        // ...and no longer once it is older than the report lifetime: bluetoothd keeps a silent
        // device (and its last advertising data) for 30 s, a session long ended.
        try await Task.sleep(for: BlueZCentral.reportLifetime + .milliseconds(300))
        let afterLifetime = sightings.count
        try await Task.sleep(for: .milliseconds(600))
        #expect(sightings.count == afterLifetime)
        // A new report (the advertisement heard again) revives it.
        try bluetoothd.connection.emitPropertiesChanged(
            path: FakeBluetoothd.devicePath, interface: "org.bluez.Device1",
            changed: ["ManufacturerData": .uint16VariantDictionary([0xFFFF: .byteArray([4, 5])])])
        #expect(await eventually { sightings.count >= afterLifetime + 3 })
        #expect(sightings.last?.advertisingData.suffix(2) == [4, 5])
    }

    /// A stand-in bluetoothd that answers AcquireNotify, a wallet radio on it (shut it down), and
    /// its link to the terminal.
    static func linkOverAnAcquiredSocket() async throws -> (FakeBluetoothd, BlueZRadio, any ByteLink) {
        let bluetoothd = try await FakeBluetoothd()
        let radio = try await BlueZRadio.open(adapter: "hci0", bus: bluetoothd.address)
        try bluetoothd.addTerminalDevice(manufacturerData: [0xFFFF: [1]], rssi: -40)
        bluetoothd.state.withLock { $0.offersAcquireNotify = true }
        do {
            return (bluetoothd, radio, try await connectToTheTerminal(radio))
        } catch {
            radio.shutdown()
            throw error
        }
    }

    @Test func theWalletReadsItsNotificationsFromTheSocketBluetoothdAcquiresForIt() async throws {
        let (bluetoothd, radio, link) = try await Self.linkOverAnAcquiredSocket()
        defer { radio.shutdown() }
        let state = bluetoothd.state.withLock { $0 }
        let socket = try #require(state.acquiredNotifySocket)
        #expect(!state.notifying)  // AcquireNotify subscribed; no StartNotify
        #expect(link.attMTU == 185)  // the MTU AcquireNotify answered
        let registration = try #require(state.writes.first)
        let tag = try #require(LinkFraming.parseRegistration(registration.value))

        let received = Recorder<[UInt8]>()
        let closed = Recorder<LinkCloseReason>()
        link.setHandler(ByteLinkHandler(onReceive: { received.append($0) }, onClose: { closed.append($0) }))
        try bluetoothd.notify(LinkTag.random().bytes + [0xAA])  // another wallet's
        try bluetoothd.notify(tag.bytes + [0xC0, 5])
        try bluetoothd.notify(tag.bytes + [0xC1, 6])
        #expect(await eventually { received.values == [[0xC0, 5], [0xC1, 6]] })

        // bluetoothd closes its end while the device stays connected: the link ends, deaf otherwise.
        _ = Glibc.close(socket)
        #expect(await eventually(5) { closed.values == [.connectionLost] })
    }

    @Test func closingTheLinkReleasesTheAcquiredNotifySocket() async throws {
        let (bluetoothd, radio, link) = try await Self.linkOverAnAcquiredSocket()
        defer { radio.shutdown() }
        let socket = try #require(bluetoothd.state.withLock { $0.acquiredNotifySocket })
        link.close()
        // bluetoothd sees the socket hang up, which releases the subscription.
        #expect(readSocket(socket, within: 5) == .closed)
        _ = Glibc.close(socket)
    }

    @Test func aConnectToADeviceThatIsNotATerminalFailsWithoutRetrying() async throws {
        let bluetoothd = try await FakeBluetoothd()
        let radio = try await BlueZRadio.open(adapter: "hci0", bus: bluetoothd.address)
        defer { radio.shutdown() }
        let result = Mutex<Result<any ByteLink, RadioError>?>(nil)
        // Long enough that a busy machine still learns "not in range" before the connect's timeout.
        radio.connect(to: PeerAddress("99:99:99:99:99:99"), timeout: .seconds(25)) { outcome in
            result.withLock { $0 = outcome }
        }
        #expect(await eventually(35) { result.withLock { $0 } != nil })
        let outcome = result.withLock { $0 }
        guard case .failure(let error) = outcome else {
            Issue.record("connected to a device that does not exist")
            return
        }
        #expect(error == .peerNotFound(PeerAddress("99:99:99:99:99:99")))
    }
    /// The radio follows the adapter's power from the moment it is opened: bluetoothd switching it
    /// off and on again is what `availability` says, and an advertisement is then refused.
    @Test func theRadioFollowsTheAdaptersPowerFromTheMomentItOpens() async throws {
        let bluetoothd = try await FakeBluetoothd()
        let radio = try await BlueZRadio.open(adapter: "hci0", bus: bluetoothd.address)
        defer { radio.shutdown() }
        #expect(radio.availability == .poweredOn)
        try bluetoothd.connection.emitPropertiesChanged(
            path: FakeBluetoothd.adapterPath, interface: "org.bluez.Adapter1", changed: ["Powered": .boolean(false)])
        #expect(await eventually(20) { radio.availability == .poweredOff })
        await #expect(throws: RadioError.adapterUnavailable(.poweredOff)) {
            try await radio.startAdvertising(sampleAdvertisement, interval: .milliseconds(100))
        }
        try bluetoothd.connection.emitPropertiesChanged(
            path: FakeBluetoothd.adapterPath, interface: "org.bluez.Adapter1", changed: ["Powered": .boolean(true)])
        #expect(await eventually(20) { radio.availability == .poweredOn })
    }
}
