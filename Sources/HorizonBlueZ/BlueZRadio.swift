import HorizonCore
import HorizonDBus
import HorizonRadio
import Logging
import Synchronization

/// The radio of a real Bluetooth adapter, through bluetoothd: the terminal advertises sessions
/// and serves the Horizon GATT service, the wallet scans and connects. It implements the same
/// protocols as the simulated radio, so every role runs on it unchanged. Callbacks run on its own
/// real-time scheduler.
public final class BlueZRadio: DeviceRadio, Sendable {
    public let adapter: BlueZAdapter
    public let connection: DBusConnection
    private let realTime: RealTimeScheduler
    let peripheral: BlueZPeripheral
    let central: BlueZCentral
    private let currentAvailability: Mutex<AdapterAvailability>
    private let powerWatch = Mutex<Task<Void, Never>?>(nil)
    private static let instances = Atomic<Int>(0)

    /// Connects to bluetoothd and takes the adapter named `adapterName` (default: the first
    /// powered one), suspending while bluetoothd lists its adapters. Throws an error that says
    /// what to do when there is no adapter, it is off, or bluetoothd is not running.
    public static func open(
        adapter adapterName: String? = nil, bus: DBusConnection.Bus = .system,
        retryPolicy: BlueZConnectRetryPolicy = BlueZConnectRetryPolicy(),
        notifications: BlueZNotificationPath = .acquiredSocket, logger: Logger = .bluezSilent
    ) async throws(RadioError) -> BlueZRadio {
        let bluez: BlueZ
        do {
            bluez = try BlueZ(bus: bus)
        } catch .adapterUnavailable(.serviceUnavailable) {
            throw .adapterUnavailable(HCIDevices.availabilityWithoutBlueZ())
        }
        let adapter = try await bluez.adapter(named: adapterName)
        guard adapter.powered else { throw .adapterUnavailable(.poweredOff) }
        // Subscribed before the radio exists, so no change of power after the listing is missed.
        let powerChanges = try? await Adapter1(connection: bluez.connection, path: adapter.path).propertyChanges()
        return BlueZRadio(
            connection: bluez.connection, adapter: adapter, retryPolicy: retryPolicy, notifications: notifications,
            powerChanges: powerChanges, logger: logger)
    }

    init(
        connection: DBusConnection, adapter: BlueZAdapter, retryPolicy: BlueZConnectRetryPolicy,
        notifications: BlueZNotificationPath = .acquiredSocket, powerChanges: AsyncStream<DBusSignal>?,
        logger: Logger = .bluezSilent
    ) {
        var logger = logger
        logger[metadataKey: "adapter"] = "\(adapter.name)"
        self.connection = connection
        self.adapter = adapter
        realTime = RealTimeScheduler(label: "horizon.bluez.\(adapter.name)")
        let instance = Self.instances.wrappingAdd(1, ordering: .relaxed).oldValue
        peripheral = BlueZPeripheral(
            connection: connection, adapterPath: adapter.path, scheduler: realTime, instance: instance, logger: logger)
        central = BlueZCentral(
            connection: connection, adapterPath: adapter.path, scheduler: realTime, retryPolicy: retryPolicy,
            notifications: notifications, logger: logger)
        currentAvailability = Mutex(adapter.availability)
        if let powerChanges { watchPower(powerChanges) }
    }

    public var scheduler: any Scheduler { realTime }

    /// Powered on or off as bluetoothd last reported it.
    public var availability: AdapterAvailability { currentAvailability.withLock { $0 } }

    private func watchPower(_ stream: AsyncStream<DBusSignal>) {
        let task = Task { [weak self] in
            for await signal in stream {
                guard let powered = Adapter1.Properties(changedIn: signal)?.powered else { continue }
                self?.currentAvailability.withLock { $0 = powered ? .poweredOn : .poweredOff }
            }
        }
        powerWatch.withLock { $0 = task }
    }

    // MARK: PeripheralRadio

    /// Registers the GATT service now rather than at the first advertisement (a terminal calls
    /// this at start so a problem shows before the first sale).
    public func prepareToServe() async throws(RadioError) { try await peripheral.registerApplication() }

    public func startAdvertising(_ advertisingData: [UInt8], interval: Duration) async throws(RadioError)
        -> any AdvertisingSet
    {
        try requirePowered()
        return try await peripheral.startAdvertising(advertisingData, interval: interval)
    }

    public func setConnectionHandler(_ handler: @escaping @Sendable (any ByteLink) -> Void) {
        peripheral.setConnectionHandler(handler)
    }

    /// Wallets connected now (links with a registered tag).
    public var connectedWalletCount: Int { peripheral.linkCount }
    /// Writes to our characteristic from centrals that never registered (foreign software).
    public var foreignWriteCount: Int { peripheral.foreignWriteCount }
    /// Tag registrations refused because another device holds the tag.
    public var refusedTagCount: Int { peripheral.refusedTagCount }
    /// Centrals disconnected for registering no tag within the grace period.
    public var silentDisconnectCount: Int { peripheral.silentDisconnectCount }
    /// Advertisements bluetoothd released (adapter reset or powered off) that were registered again.
    public var advertisementReregistrationCount: Int { peripheral.advertisementReregistrationCount }

    // MARK: CentralRadio

    public func startScanning(_ handler: @escaping @Sendable (Sighting) -> Void) async throws(RadioError) {
        try requirePowered()
        try await central.startScanning(handler)
    }

    public func stopScanning() { central.stopScanning() }

    public func connect(
        to peer: PeerAddress, timeout: Duration,
        completion: @escaping @Sendable (Result<any ByteLink, RadioError>) -> Void
    ) {
        guard availability == .poweredOn else {
            let availability = availability
            realTime.execute { completion(.failure(.adapterUnavailable(availability))) }
            return
        }
        central.connect(to: peer, timeout: timeout, completion: completion)
    }

    // MARK: Shutdown

    /// Withdraws advertisements and the GATT service, stops discovery, disconnects, and closes the
    /// D-Bus connection. Blocking for at most a few seconds.
    public func shutdown() {
        peripheral.shutdown()
        central.shutdown()
        powerWatch.withLock { $0 }?.cancel()
        connection.close()
    }

    private func requirePowered() throws(RadioError) {
        let availability = availability
        guard availability == .poweredOn else { throw .adapterUnavailable(availability) }
    }
}
