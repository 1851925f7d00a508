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
        /// Scans started so far: a start still setting up when `stopScanning` came finds a newer
        /// number (or none scanning) and undoes what it set up.
        var scans = 0
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
    let adapter: Adapter1
    let objectManager: BlueZObjectManager

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
        adapter = Adapter1(connection: connection, path: adapterPath)
        objectManager = BlueZObjectManager(connection: connection)
    }

    func device(_ path: String) -> Device1 { Device1(connection: connection, path: path) }

    func characteristic(_ path: String) -> GattCharacteristic1 {
        GattCharacteristic1(connection: connection, path: path)
    }

    // MARK: Scanning

    /// Starts LE discovery with duplicates reported; returns once discovery runs (a few D-Bus
    /// calls, awaited).
    func startScanning(_ handler: @escaping @Sendable (Sighting) -> Void) async throws(RadioError) {
        let scan = state.withLock { state -> Int? in
            guard state.scanHandler == nil else { return nil }
            state.scanHandler = handler
            state.scans += 1
            return state.scans
        }
        guard let scan else { throw .alreadyScanning }
        do {
            try await beginDiscovery(scan)
        } catch {
            state.withLock { state in
                if state.scans == scan { state.scanHandler = nil }
            }
            throw error
        }
    }

    /// Whether scan number `scan` is still wanted (no `stopScanning` since it started).
    private func isCurrent(_ scan: Int) -> Bool {
        state.withLock { $0.scans == scan && $0.scanHandler != nil }
    }

    private func beginDiscovery(_ scan: Int) async throws(RadioError) {
        let streams: [AsyncStream<DBusSignal>]
        do throws(DBusError) {
            // Subscribe first, so that nothing changing between the listing and the subscription is lost.
            streams = [
                try await connection.signals(matching: BlueZObjectManager.interfacesAdded),
                try await connection.signals(matching: BlueZObjectManager.interfacesRemoved),
                try await connection.signals(matching: Device1.changes(under: adapterPath)),
            ]
        } catch {
            throw .bluez(error, doing: "listing devices")
        }
        let objects: BlueZObjects
        do throws(BlueZError) {
            objects = try await objectManager.managedObjects().reply(within: Self.callTimeout)
        } catch {
            throw .bluez(error, doing: "listing devices")
        }
        await removeStaleDevices(objects)
        logger.trace("scan: \(objects.count) objects listed; starting discovery on \(adapterPath)")
        do throws(BlueZError) {
            try await adapter.setDiscoveryFilter(.init(transport: .le, duplicateData: true))
                .reply(within: Self.callTimeout)
            try await startDiscoveryCall()
        } catch {
            throw .bluez(error, doing: "starting discovery")
        }
        guard isCurrent(scan) else {
            // Stopped while it was starting: `stopScanning` found no discovery to stop yet.
            logger.trace("scan: stopped while starting; stopping discovery")
            adapter.stopDiscovery().whenAnswered(within: .seconds(5))
            return
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
        let started = state.withLock { state -> Bool in
            guard state.scans == scan, state.scanHandler != nil else { return false }
            state.scanTask = task
            return true
        }
        guard started else {
            task.cancel()
            adapter.stopDiscovery().whenAnswered(within: .seconds(5))
            return
        }
        scheduleRefresh()
    }

    /// `StartDiscovery`, retried while bluetoothd is still stopping an earlier discovery of ours
    /// (a `StopDiscovery` sent without waiting makes an immediate start answer `InProgress`, and
    /// the adapter would stay deaf until the next restart). A lasting `InProgress` is another
    /// client's discovery, which ours joins.
    private func startDiscoveryCall() async throws(BlueZError) {
        for attempt in 1...Self.startDiscoveryAttempts {
            do {
                try await adapter.startDiscovery().reply(within: Self.callTimeout)
                return
            } catch  where error.kind == .inProgress {
                logger.trace("scan: StartDiscovery in progress (attempt \(attempt))")
                if attempt < Self.startDiscoveryAttempts {
                    do {
                        try await Task.sleep(for: Self.startDiscoveryRetryDelay)
                    } catch {
                        throw BlueZError(DBusError.cancelled)
                    }
                }
            }
        }
    }

    static let startDiscoveryRetryDelay: Duration = .milliseconds(100)

    static let startDiscoveryAttempts = 5

    /// Forgets devices bluetoothd cached from earlier scans (not paired, trusted or connected), so
    /// that only what is heard now is reported. Each removal is answered before discovery starts:
    /// a removal still under way then would swallow the device's first report, and the
    /// controller reports each advertiser once per scan.
    private func removeStaleDevices(_ objects: BlueZObjects) async {
        for (path, device) in objects.devices(under: adapterPath) {
            let kept = [device.paired, device.trusted, device.connected].contains(true)
            guard !kept else { continue }
            logger.trace("scan: removing cached \(path)")
            try? await adapter.removeDevice(path).reply(within: .seconds(5))
        }
    }

    /// Stops and starts discovery again: controllers filter duplicate advertisements per scan,
    /// so without a restart a device is reported once (and its RSSI never again). Skipped while
    /// a connect has discovery paused.
    private func restartDiscovery() {
        guard state.withLock({ $0.scanHandler != nil && $0.discoveryPausedForConnect == 0 }) else { return }
        // Calls answered later leave in call order.
        adapter.stopDiscovery().whenAnswered(within: .seconds(5)) { [weak self] _ in
            guard let self,
                state.withLock({ $0.scanHandler != nil && $0.discoveryPausedForConnect == 0 })
            else { return }
            adapter.startDiscovery().whenAnswered(within: .seconds(5))
        }
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
        adapter.stopDiscovery().whenAnswered(within: .seconds(5))
    }

    /// Folds a signal into the device table and reports the device if it advertises data.
    private func apply(_ signal: DBusSignal) {
        var report: (path: String, record: DeviceRecord)?
        if let added = signal.deviceAdded {
            guard added.path.hasPrefix(adapterPath + "/"), let address = added.properties.address else { return }
            var record = DeviceRecord(address: address)
            Self.update(&record, with: added.properties)
            record.lastReport = ContinuousClock.now
            state.withLock { $0.devices[added.path] = record }
            logger.trace(
                "scan: added \(added.path) rssi \(record.rssi.map(String.init) ?? "-") data \(record.manufacturerData.keys.sorted())"
            )
            report = (added.path, record)
        } else if let removed = signal.deviceRemoved {
            _ = state.withLock { $0.devices.removeValue(forKey: removed) }
            logger.trace("scan: removed \(removed)")
        } else if let changed = Device1.Properties(changedIn: signal) {
            report = state.withLock { state -> (String, DeviceRecord) in
                // A device bluetoothd listed before scanning started is known from its path.
                var record =
                    state.devices[signal.path] ?? DeviceRecord(address: BlueZName.address(ofDevicePath: signal.path))
                Self.update(&record, with: changed)
                if changed.manufacturerData != nil || changed.rssi != nil {
                    record.lastReport = ContinuousClock.now
                }
                state.devices[signal.path] = record
                logger.trace("scan: changed \(signal.path) \(signal.propertiesChanged?.changed.keys.sorted() ?? [])")
                return (signal.path, record)
            }
        }
        if let report { deliver(report.record) }
    }

    static func update(_ record: inout DeviceRecord, with properties: Device1.Properties) {
        if let rssi = properties.rssi {
            // 127 is HCI's "RSSI not available" (virtual controllers report it).
            record.rssi = rssi == 127 ? nil : Int(rssi)
        }
        if let data = properties.manufacturerData { record.manufacturerData = data }
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
        let adapter = adapter
        guard ours else {
            await waitWhileTrue(adapter.discovering(), for: .seconds(2), until: deadline)
            return
        }
        let stop: @Sendable () async -> Void = {
            try? await adapter.stopDiscovery().reply(within: .seconds(5))
        }
        await stop()
        // A periodic restart's StartDiscovery sent just before our stop may still be under way
        // (bluetoothd then refuses the stop, InProgress) and turn discovery on after it: so the
        // stop is sent again while the adapter keeps discovering.
        await waitWhileTrue(adapter.discovering(), for: .seconds(2), until: deadline, nudge: stop)
    }

    /// Polls a boolean property every 50 ms until it is not true (or cannot be read), for at most
    /// `patience` and never past `deadline`; `nudge` runs every fourth poll that finds it true.
    private func waitWhileTrue(
        _ property: BlueZCall<Bool>, for patience: Duration, until deadline: ContinuousClock.Instant,
        nudge: (@Sendable () async -> Void)? = nil
    ) async {
        let clock = ContinuousClock()
        let limit = min(deadline, clock.now + patience)
        var polls = 0
        while clock.now < limit {
            let value = try? await property.reply(within: .seconds(2))
            if value != true { return }
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
        adapter.startDiscovery().whenAnswered(within: .seconds(5))
    }

    private func attemptLink(_ devicePath: String, peer: PeerAddress, deadline: ContinuousClock.Instant)
        async throws(ConnectFailure) -> CentralLink
    {
        let device = device(devicePath)
        await dropLeftoverConnection(device, until: deadline)
        // Followed from before the connect, so that ServicesResolved is seen the moment
        // bluetoothd announces it rather than at the next poll.
        let resolution: AsyncStream<DBusSignal>
        do {
            resolution = try await device.propertyChanges()
        } catch {
            throw ConnectFailure(error, doing: "following the device")
        }
        logger.trace("connect: Connect \(devicePath)")
        try await call(device.connect(), deadline: deadline, doing: "connecting")
        logger.trace("connect: connected; waiting for services")
        let characteristics = try await resolvedCharacteristics(device, changes: resolution, deadline: deadline)
        let write = characteristic(characteristics.write)
        let notify = characteristic(characteristics.notify)
        let tag = LinkTag.random()
        // bluetoothd subscribes (writes the CCC) and hands over a socket that carries each
        // notification as a datagram; without it (an older or stand-in bluetoothd), notifications
        // arrive as Value changes after StartNotify. The requests that do not depend on each other
        // go out together.
        async let acquiring = acquireNotifySocket(notify, deadline: deadline)
        async let deviceSubscription = Self.subscription(device)
        let acquired = await acquiring
        async let notificationsSubscription = acquired == nil ? Self.subscription(notify) : nil
        async let mtuReading = acquired == nil ? try? write.mtu().reply(within: .seconds(2)) : nil
        let link: CentralLink
        do throws(BlueZError) {
            let deviceChanges = try await deviceSubscription.get()
            let notifications = try await notificationsSubscription?.get()
            let readMTU = await mtuReading
            link = CentralLink(
                central: self, peer: peer, devicePath: devicePath, write: write, tag: tag,
                attMTU: acquired?.mtu ?? readMTU.map(Int.init) ?? 23, scheduler: scheduler)
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
                try await call(notify.startNotify(), deadline: deadline, doing: "subscribing to notifications")
            }
            try await call(
                write.writeValue(LinkFraming.registration(tag), type: .request), deadline: deadline,
                doing: "registering the link")
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
    private func dropLeftoverConnection(_ device: Device1, until deadline: ContinuousClock.Instant) async {
        let connected = try? await device.connected().reply(within: .seconds(2))
        guard connected == true else { return }
        logger.trace("connect: \(device.path) is still connected from before; disconnecting first")
        try? await device.disconnect().reply(within: .seconds(5))
        await waitWhileTrue(device.connected(), for: .seconds(3), until: deadline)
    }

    /// `AcquireNotify` on the terminal's notify characteristic: the socket (ours to close) and
    /// the ATT MTU; nil when bluetoothd does not offer it (any error: StartNotify then subscribes,
    /// and fails in its turn if the device is the problem).
    private func acquireNotifySocket(_ characteristic: GattCharacteristic1, deadline: ContinuousClock.Instant)
        async -> (descriptor: Int32, mtu: Int)?
    {
        let remaining = deadline - ContinuousClock().now
        guard notifications == .acquiredSocket, remaining > .zero else { return nil }
        do {
            let reply = try await characteristic.acquireNotify().reply(within: remaining)
            guard let descriptor = reply.descriptor.take() else {
                logger.trace("connect: AcquireNotify answered a closed socket; notifications as Value changes")
                return nil
            }
            logger.trace("connect: notifications over an acquired socket, MTU \(reply.mtu)")
            return (descriptor, Int(reply.mtu))
        } catch {
            logger.trace("connect: AcquireNotify not offered (\(error.name)); notifications as Value changes")
            return nil
        }
    }

    private static func subscription(_ object: some BlueZProxy) async -> Result<AsyncStream<DBusSignal>, BlueZError> {
        do {
            return .success(try await object.propertyChanges())
        } catch {
            return .failure(error)
        }
    }

    /// Waits until bluetoothd has discovered the device's services (`changes` follows the device
    /// from before the connect), then finds ours.
    private func resolvedCharacteristics(
        _ device: Device1, changes: AsyncStream<DBusSignal>, deadline: ContinuousClock.Instant
    ) async throws(ConnectFailure) -> (write: String, notify: String) {
        let properties: Device1.Properties
        do {
            properties = try await device.properties().reply(within: .seconds(5))
        } catch {
            throw ConnectFailure(error, doing: "reading the device")
        }
        // bluetoothd may lose the link during discovery (it races the kernel on some connects).
        guard properties.connected == true else { throw .droppedDuringDiscovery }
        if properties.servicesResolved != true {
            switch await Self.servicesResolution(in: changes, until: deadline) {
            case .resolved: break
            case .disconnected: throw .droppedDuringDiscovery
            case .timedOut: throw .timedOut
            }
        }
        let objects: BlueZObjects
        do {
            objects = try await objectManager.managedObjects().reply(within: .seconds(5))
        } catch {
            throw ConnectFailure(error, doing: "listing the device's services")
        }
        var write: String?
        var notify: String?
        for (path, characteristic) in objects.characteristics(under: device.path) {
            guard let uuid = characteristic.uuid?.lowercased() else { continue }
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
                    guard let changed = Device1.Properties(changedIn: signal) else { continue }
                    if changed.connected == false { return .disconnected }
                    if changed.servicesResolved == true { return .resolved }
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

    /// Makes `call` with the time left before `deadline`.
    private func call(_ call: BlueZCall<Void>, deadline: ContinuousClock.Instant, doing action: String)
        async throws(ConnectFailure)
    {
        let remaining = deadline - ContinuousClock().now
        guard remaining > .zero else { throw .timedOut }
        do {
            try await call.reply(within: remaining)
        } catch {
            throw ConnectFailure(error, doing: action)
        }
    }

    func disconnect(_ devicePath: String) {
        state.withLock { _ = $0.linkedDevices.remove(devicePath) }
        device(devicePath).disconnect().whenAnswered(within: .seconds(5))
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
            try? device(devicePath).disconnect().replyBlocking(within: .seconds(2))
        }
    }
}
