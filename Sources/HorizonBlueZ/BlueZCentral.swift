import Dispatch
import HorizonCore
import HorizonDBus
import HorizonRadio
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The wallet's side of the BlueZ radio: discovery (`SetDiscoveryFilter` + `StartDiscovery`),
/// sightings from `Device1` objects, and links to a terminal's Horizon GATT service.
final class BlueZCentral: Sendable {
    /// What bluetoothd tells of one device, as far as sightings need it.
    struct DeviceRecord: Sendable {
        var address: String
        var rssi: Int?
        var manufacturerData: [UInt16: [UInt8]] = [:]
        /// When bluetoothd last reported an advertisement of the device (not merely listed it).
        var lastReport: ContinuousClock.Instant?
    }

    private struct State {
        var devices: [String: DeviceRecord] = [:]
        var scanHandler: (@Sendable (Sighting) -> Void)?
        var scanTask: Task<Void, Never>?
        var refresh: ScheduledAction?
        /// Discovery stopped for a connect (the kernel starts no LE connection while discovering).
        var discoveryPausedForConnect = 0
        /// Devices our open links use, disconnected on shutdown.
        var linkedDevices: Set<String> = []
    }

    let connection: DBusConnection
    let adapterPath: String
    let scheduler: any Scheduler
    let retryPolicy: BlueZConnectRetryPolicy
    private let state = Mutex(State())

    /// bluetoothd reports a device's advertisement only when it changes, or once per scan where
    /// the controller filters duplicates (and virtual controllers measure no RSSI), so each device
    /// is reported again at this pace, half a terminal's advertising interval: a wallet's tracker
    /// then has its three sightings 100 ms after it first heard a session (at 250 ms it took 500).
    /// A terminal that stops advertising fades once its last report is older than `reportLifetime`.
    static let sightingRefresh: Duration = .milliseconds(50)
    /// Discovery restarts every 60 refreshes (3 s), for fresh reports and RSSI.
    static let refreshesPerDiscoveryRestart = 60
    /// A device is reported again only while bluetoothd has reported an advertisement of it this
    /// recently. A live advertiser is reported at each discovery restart (3 s); bluetoothd keeps
    /// a device and its last advertising data for 30 s after it falls silent, and re-reporting
    /// that would keep a session the terminal has ended looking alive to a wallet.
    static let reportLifetime: Duration = .seconds(4)
    static let callTimeout: Duration = .seconds(10)

    let logger: Logger

    let notifications: BlueZNotificationPath

    init(
        connection: DBusConnection, adapterPath: String, scheduler: any Scheduler, retryPolicy: BlueZConnectRetryPolicy,
        notifications: BlueZNotificationPath = .acquiredSocket, logger: Logger = .bluezSilent
    ) {
        self.notifications = notifications
        self.logger = logger
        self.connection = connection
        self.adapterPath = adapterPath
        self.scheduler = scheduler
        self.retryPolicy = retryPolicy
    }

    // MARK: Scanning

    /// Starts LE discovery with duplicates reported. Blocking (a few D-Bus calls).
    func startScanning(_ handler: @escaping @Sendable (Sighting) -> Void) throws(RadioError) {
        let already = state.withLock { state -> Bool in
            guard state.scanHandler == nil else { return true }
            state.scanHandler = handler
            return false
        }
        guard !already else { throw .alreadyScanning }
        do {
            try beginDiscovery()
        } catch {
            state.withLock { $0.scanHandler = nil }
            throw error
        }
    }

    private func beginDiscovery() throws(RadioError) {
        let streams: [AsyncStream<DBusSignal>]
        let objects: [String: [String: [String: DBusValue]]]
        do {
            // Subscribe first, so that nothing changing between the listing and the subscription is lost.
            streams = [
                try connection.signals(matching: .interfacesAdded(sender: BlueZName.service, managerPath: "/")),
                try connection.signals(matching: .interfacesRemoved(sender: BlueZName.service, managerPath: "/")),
                try connection.signals(
                    matching: .propertiesChanged(
                        sender: BlueZName.service, pathNamespace: adapterPath, interface: BlueZName.device)),
            ]
            let reply = try connection.call(
                destination: BlueZName.service, path: "/", interface: DBusInterfaceName.objectManager,
                method: "GetManagedObjects", timeout: Self.callTimeout)
            objects = reply.first?.managedObjects ?? [:]
        } catch {
            throw .bluez(error, doing: "listing devices")
        }
        removeStaleDevices(objects)
        logger.trace("scan: \(objects.count) objects listed; starting discovery on \(adapterPath)")
        do {
            _ = try connection.call(
                destination: BlueZName.service, path: adapterPath, interface: BlueZName.adapter,
                method: "SetDiscoveryFilter",
                arguments: [
                    .stringVariantDictionary(["Transport": .string("le"), "DuplicateData": .boolean(true)])
                ], timeout: Self.callTimeout)
            try startDiscoveryCall()
        } catch {
            throw .bluez(error, doing: "starting discovery")
        }
        logger.trace("scan: discovery started")
        let task = Task { [weak self] in
            await withTaskGroup(of: Void.self) { group in
                for stream in streams {
                    group.addTask { [weak self] in
                        for await signal in stream { self?.apply(signal) }
                    }
                }
            }
        }
        state.withLock { $0.scanTask = task }
        scheduleRefresh()
    }

    /// `StartDiscovery`, retried while bluetoothd is still stopping an earlier discovery of ours
    /// (a `StopDiscovery` sent without waiting makes an immediate start answer `InProgress`, and
    /// the adapter would stay deaf until the next restart). A lasting `InProgress` is another
    /// client's discovery, which ours joins.
    private func startDiscoveryCall() throws(DBusError) {
        for attempt in 1...Self.startDiscoveryAttempts {
            do {
                _ = try connection.call(
                    destination: BlueZName.service, path: adapterPath, interface: BlueZName.adapter,
                    method: "StartDiscovery", timeout: Self.callTimeout)
                return
            } catch  where error.name == "org.bluez.Error.InProgress" {
                logger.trace("scan: StartDiscovery in progress (attempt \(attempt))")
                if attempt < Self.startDiscoveryAttempts { usleep(100_000) }
            }
        }
    }

    static let startDiscoveryAttempts = 5

    /// Forgets devices bluetoothd cached from earlier scans (not paired, trusted or connected), so
    /// that only what is heard now is reported. Blocking: a removal still under way when discovery
    /// starts would swallow the device's first report, and the controller reports each advertiser
    /// once per scan.
    private func removeStaleDevices(_ objects: [String: [String: [String: DBusValue]]]) {
        for (path, interfaces) in objects where path.hasPrefix(adapterPath + "/") {
            guard let device = interfaces[BlueZName.device] else { continue }
            let kept = ["Paired", "Trusted", "Connected"].contains { device[$0]?.boolean == true }
            guard !kept else { continue }
            logger.trace("scan: removing cached \(path)")
            _ = try? connection.call(
                destination: BlueZName.service, path: adapterPath, interface: BlueZName.adapter,
                method: "RemoveDevice", arguments: [.objectPath(path)], timeout: .seconds(5))
        }
    }

    /// Stops and starts discovery again: controllers filter duplicate advertisements per scan,
    /// so without a restart a device is reported once (and its RSSI never again). Skipped while
    /// a connect has discovery paused.
    private func restartDiscovery() {
        guard state.withLock({ $0.scanHandler != nil && $0.discoveryPausedForConnect == 0 }) else { return }
        callAdapter("StopDiscovery") { [weak self] _ in
            guard let self,
                state.withLock({ $0.scanHandler != nil && $0.discoveryPausedForConnect == 0 })
            else { return }
            callAdapter("StartDiscovery")
        }
    }

    /// An `Adapter1` method whose answer only matters to `completion`; calls leave in call order.
    private func callAdapter(
        _ method: String,
        then completion: @escaping @Sendable (Result<[DBusValue], DBusError>) -> Void = { _ in }
    ) {
        connection.call(
            destination: BlueZName.service, path: adapterPath, interface: BlueZName.adapter, method: method,
            timeout: .seconds(5), completion: completion)
    }

    func stopScanning() {
        let (task, refresh, wasScanning) = state.withLock { state in
            defer {
                state.scanHandler = nil
                state.scanTask = nil
                state.refresh = nil
                state.devices.removeAll()
            }
            return (state.scanTask, state.refresh, state.scanHandler != nil)
        }
        task?.cancel()
        refresh?.cancel()
        guard wasScanning else { return }
        callAdapter("StopDiscovery")
    }

    /// Folds a signal into the device table and reports the device if it advertises data.
    private func apply(_ signal: DBusSignal) {
        var report: (path: String, record: DeviceRecord)?
        if let added = signal.interfacesAdded {
            guard added.path.hasPrefix(adapterPath + "/"), let device = added.interfaces[BlueZName.device],
                let address = device["Address"]?.string
            else { return }
            var record = DeviceRecord(address: address)
            Self.update(&record, with: device)
            record.lastReport = ContinuousClock.now
            state.withLock { $0.devices[added.path] = record }
            logger.trace(
                "scan: added \(added.path) rssi \(record.rssi.map(String.init) ?? "-") data \(record.manufacturerData.keys.sorted())"
            )
            report = (added.path, record)
        } else if let removed = signal.interfacesRemoved {
            guard removed.interfaces.contains(BlueZName.device) else { return }
            _ = state.withLock { $0.devices.removeValue(forKey: removed.path) }
            logger.trace("scan: removed \(removed.path)")
        } else if let change = signal.propertiesChanged, change.interface == BlueZName.device {
            report = state.withLock { state -> (String, DeviceRecord) in
                // A device bluetoothd listed before scanning started is known from its path.
                var record =
                    state.devices[signal.path] ?? DeviceRecord(address: BlueZName.address(ofDevicePath: signal.path))
                Self.update(&record, with: change.changed)
                if change.changed["ManufacturerData"] != nil || change.changed["RSSI"] != nil {
                    record.lastReport = ContinuousClock.now
                }
                state.devices[signal.path] = record
                logger.trace("scan: changed \(signal.path) \(change.changed.keys.sorted())")
                return (signal.path, record)
            }
        }
        if let report { deliver(report.record) }
    }

    static func update(_ record: inout DeviceRecord, with properties: [String: DBusValue]) {
        if let rssi = properties["RSSI"]?.int16 {
            // 127 is HCI's "RSSI not available" (virtual controllers report it).
            record.rssi = rssi == 127 ? nil : Int(rssi)
        }
        if let data = properties["ManufacturerData"]?.uint16VariantDictionary {
            record.manufacturerData = data.compactMapValues(\.bytes)
        }
    }

    /// The advertising data a sighting carries, rebuilt from what bluetoothd parsed: the flags and
    /// each manufacturer data structure (our terminals advertise nothing else).
    static func advertisingData(of record: DeviceRecord) -> [UInt8]? {
        guard !record.manufacturerData.isEmpty else { return nil }
        var structures = [AdvertisingData.flagsStructure]
        for (company, payload) in record.manufacturerData.sorted(by: { $0.key < $1.key }) {
            structures.append(AdvertisingData.manufacturerStructure(companyID: company, payload: payload))
        }
        return try? AdvertisingData(structures: structures).encoded()
    }

    private func deliver(_ record: DeviceRecord) {
        guard let data = Self.advertisingData(of: record),
            let handler = state.withLock({ $0.scanHandler })
        else { return }
        scheduler.execute { [scheduler] in
            handler(
                Sighting(
                    address: PeerAddress(record.address), advertisingData: data, rssi: record.rssi,
                    receivedAt: scheduler.now))
        }
    }

    private func scheduleRefresh(tick: Int = 1) {
        let action = scheduler.schedule(after: Self.sightingRefresh) { [weak self] in
            guard let self else { return }
            let now = ContinuousClock.now
            // Nil once the scan has stopped: then nothing is reported and the refresh ends.
            let records = state.withLock { state -> [DeviceRecord]? in
                guard state.scanHandler != nil else { return nil }
                return state.devices.values.filter { record in
                    record.lastReport.map { now - $0 <= Self.reportLifetime } ?? false
                }
            }
            guard let records else { return }
            for record in records { deliver(record) }
            if tick % Self.refreshesPerDiscoveryRestart == 0 { restartDiscovery() }
            scheduleRefresh(tick: tick + 1)
        }
        state.withLock { state in
            if state.scanHandler != nil { state.refresh = action } else { action.cancel() }
        }
    }

    // MARK: Connecting

    func connect(
        to peer: PeerAddress, timeout: Duration,
        completion: @escaping @Sendable (Result<any ByteLink, RadioError>) -> Void
    ) {
        let scheduler = scheduler
        Task {
            let result = await establish(peer, timeout: timeout)
            scheduler.execute { completion(result) }
        }
    }

    /// Connect, wait for service discovery, find the two characteristics, subscribe, register the
    /// tag: retried while bluetoothd reports a transient failure and time remains.
    private func establish(_ peer: PeerAddress, timeout: Duration) async -> Result<any ByteLink, RadioError> {
        let devicePath = BlueZName.devicePath(adapterPath: adapterPath, address: peer.rawValue)
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        await pauseDiscovery(until: deadline)
        defer { resumeDiscovery() }
        var attempt = 0
        while true {
            attempt += 1
            do throws(ConnectFailure) {
                return .success(try await attemptLink(devicePath, peer: peer, deadline: deadline))
            } catch {
                let remaining = deadline - clock.now
                let backoff = retryPolicy.backoff(afterAttempt: attempt)
                logger.trace("connect: attempt \(attempt) to \(devicePath) failed: \(error)")
                if error.isTransient, attempt < retryPolicy.maximumAttempts, remaining > backoff {
                    try? await Task.sleep(for: backoff)
                    continue
                }
                disconnect(devicePath)
                return .failure(error.radioError(peer: peer, attempts: attempt))
            }
        }
    }

    /// Stops our discovery and waits (within reason) until the adapter is not discovering: while
    /// it is, the kernel queues an LE connect but never starts it (seen with kernel 6.1).
    private func pauseDiscovery(until deadline: ContinuousClock.Instant) async {
        let ours = state.withLock { state -> Bool in
            state.discoveryPausedForConnect += 1
            return state.scanHandler != nil && state.discoveryPausedForConnect == 1
        }
        guard ours else {
            await waitWhileTrue(
                "Discovering", of: BlueZName.adapter, at: adapterPath, for: .seconds(2), until: deadline)
            return
        }
        let stop: @Sendable () async -> Void = { [connection, adapterPath] in
            _ = try? await connection.call(
                destination: BlueZName.service, path: adapterPath, interface: BlueZName.adapter,
                method: "StopDiscovery", timeout: .seconds(5))
        }
        await stop()
        // A periodic restart's StartDiscovery sent just before our stop may still be under way
        // (bluetoothd then refuses the stop, InProgress) and turn discovery on after it: so the
        // stop is sent again while the adapter keeps discovering.
        await waitWhileTrue(
            "Discovering", of: BlueZName.adapter, at: adapterPath, for: .seconds(2), until: deadline, nudge: stop)
    }

    /// Polls a boolean property every 50 ms until it is not true (or cannot be read), for at most
    /// `patience` and never past `deadline`; `nudge` runs every fourth poll that finds it true.
    private func waitWhileTrue(
        _ property: String, of interface: String, at path: String, for patience: Duration,
        until deadline: ContinuousClock.Instant, nudge: (@Sendable () async -> Void)? = nil
    ) async {
        let clock = ContinuousClock()
        let limit = min(deadline, clock.now + patience)
        var polls = 0
        while clock.now < limit {
            let value = try? await connection.property(
                destination: BlueZName.service, path: path, interface: interface, name: property,
                timeout: .seconds(2))
            if value?.boolean != true { return }
            polls += 1
            if polls % 4 == 0, let nudge { await nudge() }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Restarts discovery after the last connect in progress, if the owner still scans.
    private func resumeDiscovery() {
        let restart = state.withLock { state -> Bool in
            state.discoveryPausedForConnect -= 1
            return state.discoveryPausedForConnect == 0 && state.scanHandler != nil
        }
        guard restart else { return }
        callAdapter("StartDiscovery")
    }

    private func attemptLink(_ devicePath: String, peer: PeerAddress, deadline: ContinuousClock.Instant)
        async throws(ConnectFailure) -> CentralLink
    {
        await dropLeftoverConnection(devicePath, until: deadline)
        // Followed from before the connect, so that ServicesResolved is seen the moment
        // bluetoothd announces it rather than at the next poll.
        let resolution: AsyncStream<DBusSignal>
        do {
            resolution = try await connection.signals(
                matching: .propertiesChanged(sender: BlueZName.service, path: devicePath, interface: BlueZName.device))
        } catch {
            throw ConnectFailure(error, doing: "following the device")
        }
        logger.trace("connect: Connect \(devicePath)")
        try await call(devicePath, BlueZName.device, "Connect", deadline: deadline, doing: "connecting")
        logger.trace("connect: connected; waiting for services")
        let characteristics = try await resolvedCharacteristics(devicePath, changes: resolution, deadline: deadline)
        let tag = LinkTag.random()
        // bluetoothd subscribes (writes the CCC) and hands over a socket that carries each
        // notification as a datagram; without it (an older or stand-in bluetoothd), notifications
        // arrive as Value changes after StartNotify. The requests that do not depend on each other
        // go out together.
        async let acquiring = acquireNotifySocket(characteristics.notify, deadline: deadline)
        async let deviceSubscription = Self.subscription(
            connection, .propertiesChanged(sender: BlueZName.service, path: devicePath, interface: BlueZName.device))
        let acquired = await acquiring
        async let notificationsSubscription =
            acquired == nil
            ? Self.subscription(
                connection,
                .propertiesChanged(
                    sender: BlueZName.service, path: characteristics.notify, interface: BlueZName.gattCharacteristic))
            : nil
        async let mtuReading =
            acquired == nil
            ? try? connection.property(
                destination: BlueZName.service, path: characteristics.write, interface: BlueZName.gattCharacteristic,
                name: "MTU", timeout: .seconds(2)) : nil
        let link: CentralLink
        do throws(DBusError) {
            let deviceChanges = try await deviceSubscription.get()
            let notifications = try await notificationsSubscription?.get()
            let readMTU = await mtuReading
            link = CentralLink(
                central: self, peer: peer, devicePath: devicePath, writePath: characteristics.write, tag: tag,
                attMTU: acquired?.mtu ?? readMTU?.uint16.map(Int.init) ?? 23, scheduler: scheduler)
            if let acquired {
                link.follow(socket: acquired.descriptor, deviceChanges: deviceChanges)
            } else if let notifications {
                link.follow(notifications: notifications, deviceChanges: deviceChanges)
            }
        } catch {
            if let acquired { _ = Glibc.close(acquired.descriptor) }
            throw ConnectFailure(error, doing: "subscribing")
        }
        do throws(ConnectFailure) {
            if acquired == nil {
                try await call(
                    characteristics.notify, BlueZName.gattCharacteristic, "StartNotify", deadline: deadline,
                    doing: "subscribing to notifications")
            }
            try await call(
                characteristics.write, BlueZName.gattCharacteristic, "WriteValue",
                arguments: [
                    .byteArray(LinkFraming.registration(tag)),
                    .stringVariantDictionary(["type": .string("request")]),
                ], deadline: deadline, doing: "registering the link")
        } catch {
            link.abandon()
            throw error
        }
        logger.trace("connect: link up to \(devicePath), MTU \(link.attMTU), tag \(tag)")
        state.withLock { _ = $0.linkedDevices.insert(devicePath) }
        return link
    }

    /// A connection to the device that no link of ours uses (left by an earlier run that exited,
    /// or kept by bluetoothd after the terminal restarted) is dropped first: its GATT view may be
    /// stale, and the terminal expects each wallet to register on a fresh connection.
    private func dropLeftoverConnection(_ devicePath: String, until deadline: ContinuousClock.Instant) async {
        let connected = try? await connection.property(
            destination: BlueZName.service, path: devicePath, interface: BlueZName.device, name: "Connected",
            timeout: .seconds(2))
        guard connected?.boolean == true else { return }
        logger.trace("connect: \(devicePath) is still connected from before; disconnecting first")
        _ = try? await connection.call(
            destination: BlueZName.service, path: devicePath, interface: BlueZName.device, method: "Disconnect",
            timeout: .seconds(5))
        await waitWhileTrue("Connected", of: BlueZName.device, at: devicePath, for: .seconds(3), until: deadline)
    }

    /// `AcquireNotify` on the terminal's notify characteristic: the socket (ours to close) and
    /// the ATT MTU; nil when bluetoothd does not offer it (any error: StartNotify then subscribes,
    /// and fails in its turn if the device is the problem).
    private func acquireNotifySocket(_ path: String, deadline: ContinuousClock.Instant) async
        -> (descriptor: Int32, mtu: Int)?
    {
        let remaining = deadline - ContinuousClock().now
        guard notifications == .acquiredSocket, remaining > .zero else { return nil }
        do {
            let reply = try await connection.call(
                destination: BlueZName.service, path: path, interface: BlueZName.gattCharacteristic,
                method: "AcquireNotify", arguments: [.stringVariantDictionary([:])], timeout: remaining)
            guard reply.count == 2, let mtu = reply[1].uint16, let descriptor = reply[0].fileDescriptor?.take() else {
                logger.trace("connect: AcquireNotify answered \(reply); notifications as Value changes")
                return nil
            }
            logger.trace("connect: notifications over an acquired socket, MTU \(mtu)")
            return (descriptor, Int(mtu))
        } catch {
            logger.trace("connect: AcquireNotify not offered (\(error.name)); notifications as Value changes")
            return nil
        }
    }

    private static func subscription(_ connection: DBusConnection, _ rule: DBusMatchRule) async
        -> Result<AsyncStream<DBusSignal>, DBusError>
    {
        do {
            return .success(try await connection.signals(matching: rule))
        } catch {
            return .failure(error)
        }
    }

    /// Waits until bluetoothd has discovered the device's services (`changes` follows the device
    /// from before the connect), then finds ours.
    private func resolvedCharacteristics(
        _ devicePath: String, changes: AsyncStream<DBusSignal>, deadline: ContinuousClock.Instant
    ) async throws(ConnectFailure) -> (write: String, notify: String) {
        let device: [String: DBusValue]
        do {
            device = try await connection.properties(
                destination: BlueZName.service, path: devicePath, interface: BlueZName.device,
                timeout: .seconds(5))
        } catch {
            throw ConnectFailure(error, doing: "reading the device")
        }
        // bluetoothd may lose the link during discovery (it races the kernel on some connects).
        guard device["Connected"]?.boolean == true else { throw .droppedDuringDiscovery }
        if device["ServicesResolved"]?.boolean != true {
            switch await Self.servicesResolution(in: changes, until: deadline) {
            case .resolved: break
            case .disconnected: throw .droppedDuringDiscovery
            case .timedOut: throw .timedOut
            }
        }
        let objects: [String: [String: [String: DBusValue]]]
        do {
            objects = try await connection.managedObjects(destination: BlueZName.service, timeout: .seconds(5))
        } catch {
            throw ConnectFailure(error, doing: "listing the device's services")
        }
        var write: String?
        var notify: String?
        for (path, interfaces) in objects where path.hasPrefix(devicePath + "/") {
            guard let uuid = interfaces[BlueZName.gattCharacteristic]?["UUID"]?.string?.lowercased() else { continue }
            if uuid == HorizonGATTService.walletToTerminal { write = path }
            if uuid == HorizonGATTService.terminalToWallet { notify = path }
        }
        guard let write, let notify else { throw .notAHorizonTerminal }
        return (write, notify)
    }

    enum ServicesResolution: Sendable { case resolved, disconnected, timedOut }

    /// The first of: `ServicesResolved` true, `Connected` false (or the stream ending), the deadline.
    static func servicesResolution(in changes: AsyncStream<DBusSignal>, until deadline: ContinuousClock.Instant)
        async -> ServicesResolution
    {
        await withTaskGroup(of: ServicesResolution.self) { group in
            group.addTask {
                for await signal in changes {
                    guard let changed = signal.propertiesChanged?.changed else { continue }
                    if changed["Connected"]?.boolean == false { return .disconnected }
                    if changed["ServicesResolved"]?.boolean == true { return .resolved }
                }
                return .disconnected
            }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                return .timedOut
            }
            let first = await group.next() ?? .timedOut
            group.cancelAll()
            return first
        }
    }

    private func call(
        _ path: String, _ interface: String, _ method: String, arguments: [DBusValue] = [],
        deadline: ContinuousClock.Instant, doing action: String
    ) async throws(ConnectFailure) {
        let remaining = deadline - ContinuousClock().now
        guard remaining > .zero else { throw .timedOut }
        do {
            _ = try await connection.call(
                destination: BlueZName.service, path: path, interface: interface, method: method,
                arguments: arguments, timeout: remaining)
        } catch {
            throw ConnectFailure(error, doing: action)
        }
    }

    func disconnect(_ devicePath: String) {
        state.withLock { _ = $0.linkedDevices.remove(devicePath) }
        connection.call(
            destination: BlueZName.service, path: devicePath, interface: BlueZName.device, method: "Disconnect",
            timeout: .seconds(5)
        ) { _ in }
    }

    /// Stops discovery and disconnects every device a link still uses, waiting for bluetoothd's
    /// answers (a program about to exit would otherwise leave the connections up).
    func shutdown() {
        stopScanning()
        let devices = state.withLock { state in
            defer { state.linkedDevices.removeAll() }
            return state.linkedDevices
        }
        for devicePath in devices {
            _ = try? connection.call(
                destination: BlueZName.service, path: devicePath, interface: BlueZName.device, method: "Disconnect",
                timeout: .seconds(2))
        }
    }
}

/// How often and how patiently the wallet retries a connect that bluetoothd failed transiently.
public struct BlueZConnectRetryPolicy: Sendable {
    public var maximumAttempts: Int
    public var initialBackoff: Duration

    public init(maximumAttempts: Int = 4, initialBackoff: Duration = .milliseconds(250)) {
        self.maximumAttempts = maximumAttempts
        self.initialBackoff = initialBackoff
    }

    /// Doubles after each attempt: 250 ms, 500 ms, 1 s by default.
    func backoff(afterAttempt attempt: Int) -> Duration {
        initialBackoff * (1 << min(max(attempt - 1, 0), 6))
    }
}

/// Why one connect attempt failed, and whether another may succeed.
enum ConnectFailure: Error {
    case bluez(DBusError, doing: String)
    case droppedDuringDiscovery
    case notAHorizonTerminal
    case timedOut

    init(_ error: DBusError, doing action: String) { self = .bluez(error, doing: action) }

    /// The failures a second attempt cured when they were measured: bluetoothd busy with
    /// another connect, the controller aborting the connection, the link lost while services
    /// were discovered.
    var isTransient: Bool {
        switch self {
        case .droppedDuringDiscovery: return true
        case .notAHorizonTerminal, .timedOut: return false
        case .bluez(let error, _):
            if error.name == "org.bluez.Error.InProgress" || error.name == "org.bluez.Error.NotConnected" {
                return true
            }
            let transientMessages = [
                "le-connection-abort-by-local", "Software caused connection abort", "Operation already in progress",
                "Connection refused", "Input/output error",
            ]
            return error.name == "org.bluez.Error.Failed"
                && transientMessages.contains { error.message.contains($0) }
        }
    }

    func radioError(peer: PeerAddress, attempts: Int) -> RadioError {
        switch self {
        case .timedOut: return .connectionTimedOut(peer)
        case .droppedDuringDiscovery:
            return .backend(
                name: "org.bluez.Error.Failed",
                message:
                    "the connection to \(peer) dropped during service discovery \(attempts) times; move closer and retry"
            )
        case .notAHorizonTerminal:
            return .backend(
                name: "org.horizon.Error.NotATerminal",
                message: "\(peer) does not offer the Horizon payment service")
        case .bluez(let error, let action):
            if error.name == DBusError.Name.unknownObject || error.name == "org.bluez.Error.DoesNotExist" {
                return .peerNotFound(peer)
            }
            if error.isTimeout { return .connectionTimedOut(peer) }
            return .bluez(error, doing: action)
        }
    }
}

/// How a wallet's link receives the terminal's notifications.
public enum BlueZNotificationPath: String, Sendable, CaseIterable {
    /// `AcquireNotify`: bluetoothd writes each notification to a socket (`StartNotify` and
    /// `Value` signals when bluetoothd refuses it).
    case acquiredSocket = "socket"
    /// `StartNotify`, each notification a `Value` change signalled through dbus-daemon.
    case valueChanges = "signals"
}

/// The wallet's link to one terminal: frames leave as acknowledged writes, one at a time and in
/// order (bluetoothd refuses a second write request on a characteristic while one is under way:
/// `InProgress`), and arrive as notifications bearing this link's tag.
final class CentralLink: ByteLink, Sendable {
    private struct State {
        /// Frames waiting for the write in flight to be acknowledged.
        var queued: [[UInt8]] = []
        var writing = false
        var pendingWrites: Int { queued.count + (writing ? 1 : 0) }
        var disconnectWhenDrained = false
        var disconnected = false
        var tasks: [Task<Void, Never>] = []
        var reader: NotifyReader?
    }

    let peer: PeerAddress
    let attMTU: Int
    let devicePath: String
    let writePath: String
    let tag: LinkTag
    let inbox: LinkInbox
    private let scheduler: any Scheduler
    private weak let central: BlueZCentral?
    private let logger: Logger
    private let state = Mutex(State())
    /// How long a close waits for writes still in flight before disconnecting anyway.
    static let drainLimit: Duration = .seconds(2)

    init(
        central: BlueZCentral, peer: PeerAddress, devicePath: String, writePath: String, tag: LinkTag, attMTU: Int,
        scheduler: any Scheduler
    ) {
        self.central = central
        logger = central.logger
        self.peer = peer
        self.devicePath = devicePath
        self.writePath = writePath
        self.tag = tag
        self.attMTU = min(517, max(23, attMTU))
        self.scheduler = scheduler
        inbox = LinkInbox(scheduler: scheduler)
    }

    func follow(notifications: AsyncStream<DBusSignal>, deviceChanges: AsyncStream<DBusSignal>) {
        let tag = tag
        let inbox = inbox
        let receiving = Task {
            for await signal in notifications {
                guard let value = signal.propertiesChanged?.changed["Value"]?.bytes,
                    let payload = LinkFraming.payload(ofNotification: value, for: tag)
                else { continue }
                inbox.receive(payload)
            }
        }
        state.withLock { $0.tasks = [receiving, watchForDisconnect(deviceChanges)] }
    }

    /// Ends the link as closed by the peer when bluetoothd reports the device disconnected.
    private func watchForDisconnect(_ deviceChanges: AsyncStream<DBusSignal>) -> Task<Void, Never> {
        Task { [weak self] in
            for await signal in deviceChanges where signal.propertiesChanged?.changed["Connected"]?.boolean == false {
                self?.ended(.closedByPeer)
                return
            }
        }
    }

    /// Notifications from a socket bluetoothd acquired for this link (see `NotifyReader`).
    func follow(socket descriptor: Int32, deviceChanges: AsyncStream<DBusSignal>) {
        let tag = tag
        let inbox = inbox
        let scheduler = scheduler
        let reader = NotifyReader(
            taking: descriptor, mtu: attMTU, queue: Self.notifyQueue,
            received: { value in
                guard let payload = LinkFraming.payload(ofNotification: value, for: tag) else { return }
                inbox.receive(payload)
            },
            ended: { [weak self] in
                // Usually the device went: let its Connected signal say so (the peer's close),
                // and end the link here only if it does not come.
                scheduler.schedule(after: Self.socketEndGrace) { [weak self] in self?.ended(.connectionLost) }
                self?.logger.trace("link: bluetoothd closed the notify socket")
            })
        let watching = watchForDisconnect(deviceChanges)
        state.withLock {
            $0.tasks = [watching]
            $0.reader = reader
        }
    }

    /// Every link's notify socket is read on this queue; a frame's handling hops to the scheduler.
    static let notifyQueue = DispatchQueue(label: "horizon.bluez.notify")
    static let socketEndGrace: Duration = .milliseconds(500)

    func setHandler(_ handler: ByteLinkHandler) { inbox.setHandler(handler) }

    func send(_ payload: [UInt8]) throws(RadioError) {
        guard !inbox.isClosed, let central else { throw .linkClosed }
        guard payload.count <= maximumPayloadSize else {
            throw .payloadTooLarge(size: payload.count, maximum: maximumPayloadSize)
        }
        let startNow = state.withLock { state -> Bool in
            guard !state.writing else {
                state.queued.append(payload)
                return false
            }
            state.writing = true
            return true
        }
        if startNow { write(payload, through: central) }
    }

    private func write(_ payload: [UInt8], through central: BlueZCentral) {
        central.connection.call(
            destination: BlueZName.service, path: writePath, interface: BlueZName.gattCharacteristic,
            method: "WriteValue",
            arguments: [.byteArray(payload), .stringVariantDictionary(["type": .string("request")])],
            timeout: .seconds(10)
        ) { [weak self] result in
            guard let self else { return }
            if case .failure(let error) = result {
                self.logger.trace("link: write to \(self.writePath) failed: \(error)")
                state.withLock { state in
                    state.writing = false
                    state.queued.removeAll()
                }
                ended(.connectionLost)
                return
            }
            let (next, drained) = state.withLock { state -> ([UInt8]?, Bool) in
                guard !state.queued.isEmpty else {
                    state.writing = false
                    return (nil, state.disconnectWhenDrained)
                }
                return (state.queued.removeFirst(), false)
            }
            if let next, let central = self.central {
                write(next, through: central)
            } else if drained {
                disconnectNow()
            }
        }
    }

    /// Closes the link; the connection goes once the writes already sent are acknowledged.
    func close() {
        guard inbox.close(.closedLocally) else { return }
        logger.trace("link: closed by this side; disconnecting \(devicePath)")
        stopFollowing()
        let drained = state.withLock { state -> Bool in
            state.disconnectWhenDrained = true
            return state.pendingWrites == 0
        }
        if drained {
            disconnectNow()
        } else {
            scheduler.schedule(after: Self.drainLimit) { [weak self] in self?.disconnectNow() }
        }
    }

    /// A link that never reached its owner (the connect failed after it was made).
    func abandon() {
        inbox.close(.closedLocally)
        stopFollowing()
    }

    private func ended(_ reason: LinkCloseReason) {
        guard inbox.close(reason) else { return }
        logger.trace("link: to \(devicePath) ended (\(reason))")
        stopFollowing()
        disconnectNow()
    }

    private func stopFollowing() {
        let (tasks, reader) = state.withLock { state in
            defer {
                state.tasks.removeAll()
                state.reader = nil
            }
            return (state.tasks, state.reader)
        }
        for task in tasks { task.cancel() }
        reader?.cancel()
    }

    private func disconnectNow() {
        let first = state.withLock { state -> Bool in
            defer { state.disconnected = true }
            return !state.disconnected
        }
        if first { central?.disconnect(devicePath) }
    }
}
