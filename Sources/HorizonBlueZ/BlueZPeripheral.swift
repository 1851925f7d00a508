import HorizonCore
import HorizonDBus
import HorizonRadio
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The terminal's side of the BlueZ radio: LE advertisements (`LEAdvertisement1` objects
/// registered with `LEAdvertisingManager1`) and the Horizon GATT service (an application
/// registered with `GattManager1`), with one link per wallet that registered its tag.
final class BlueZPeripheral: Sendable {
    private struct State {
        var applicationRegistered = false
        /// The registration under way, which a second caller waits for rather than starting another.
        var registration: Task<Result<Void, RadioError>, Never>?
        var connectionHandler: (@Sendable (any ByteLink) -> Void)?
        var links: [String: PeripheralLink] = [:]
        var advertisements: Set<String> = []
        var nextAdvertisement = 0
        var lastNotification: [UInt8] = []
        var deviceWatch: Task<Void, Never>?
        var arrivalWatch: Task<Void, Never>?
        /// Disconnects scheduled after a local close, by device; cancelled when that connection
        /// ends or the device registers a new link (it must not cut the device's next connection).
        var pendingDisconnects: [String: ScheduledAction] = [:]
        /// Writes from centrals that never registered (foreign software writing to our characteristic).
        var foreignWrites = 0
        /// Advertisements bluetoothd released and gave back again, for tests and diagnostics.
        var reregistrations = 0
        /// Registrations refused because another device holds the tag (a central stealing it).
        var refusedTags = 0
        /// Centrals disconnected for not registering a tag within `registrationGrace`.
        var silentDisconnects = 0
        /// Connected centrals without a link yet, with the disconnect that awaits them.
        var unregistered: [String: ScheduledAction] = [:]
    }

    let connection: DBusConnection
    let adapterPath: String
    let scheduler: any Scheduler
    /// Our objects live under this path, unique per radio so that two radios can share a process.
    let rootPath: String
    private let state = Mutex(State())
    private let notifySockets = NotifySockets()
    /// How long a closed link keeps its connection so the last notification leaves first.
    static let disconnectGrace: Duration = .milliseconds(1500)
    static let callTimeout: Duration = .seconds(10)
    /// A central that connects and registers no tag within this is disconnected: it holds one of
    /// the adapter's few connections and hears every notification while saying nothing.
    let registrationGrace: Duration
    let logger: Logger
    let gattManager: GattManager1
    let advertisingManager: LEAdvertisingManager1

    init(
        connection: DBusConnection, adapterPath: String, scheduler: any Scheduler, instance: Int,
        registrationGrace: Duration = .seconds(10), logger: Logger = .bluezSilent
    ) {
        self.logger = logger
        self.registrationGrace = registrationGrace
        self.connection = connection
        self.adapterPath = adapterPath
        self.scheduler = scheduler
        rootPath = "/org/horizon/radio\(getpid())_\(instance)"
        gattManager = GattManager1(connection: connection, path: adapterPath)
        advertisingManager = LEAdvertisingManager1(connection: connection, path: adapterPath)
    }

    func device(_ path: String) -> Device1 { Device1(connection: connection, path: path) }

    var servicePath: String { rootPath + "/service0" }
    var writeCharacteristicPath: String { servicePath + "/char0" }
    var notifyCharacteristicPath: String { servicePath + "/char1" }

    var linkCount: Int { state.withLock { $0.links.count } }
    var foreignWriteCount: Int { state.withLock { $0.foreignWrites } }
    var refusedTagCount: Int { state.withLock { $0.refusedTags } }
    var silentDisconnectCount: Int { state.withLock { $0.silentDisconnects } }
    var advertisementReregistrationCount: Int { state.withLock { $0.reregistrations } }
    var socketNotificationCount: Int { notifySockets.sentCount }
    /// Devices whose notifications currently go over an AcquireNotify socket.
    var notifySocketDevices: Set<String> { notifySockets.devices }

    func setConnectionHandler(_ handler: @escaping @Sendable (any ByteLink) -> Void) {
        state.withLock { $0.connectionHandler = handler }
    }

    // MARK: GATT application

    /// Exports the service and registers it with bluetoothd, once; a caller that comes while it
    /// is being registered waits for that registration. Suspends until bluetoothd answered, which
    /// it does after reading our objects over this connection.
    func registerApplication() async throws(RadioError) {
        let registration = state.withLock { state -> Task<Result<Void, RadioError>, Never>? in
            guard !state.applicationRegistered else { return nil }
            if let running = state.registration { return running }
            let task = Task { [self] () async -> Result<Void, RadioError> in
                let result: Result<Void, RadioError>
                do throws(RadioError) {
                    try await registerApplicationNow()
                    result = .success(())
                } catch {
                    result = .failure(error)
                }
                self.state.withLock { state in
                    state.registration = nil
                    if case .success = result { state.applicationRegistered = true }
                }
                return result
            }
            state.registration = task
            return task
        }
        try await registration?.value.get()
    }

    private func registerApplicationNow() async throws(RadioError) {
        do {
            try exportApplication()
        } catch {
            throw .bluez(error, doing: "exporting the GATT service")
        }
        let register = gattManager.registerApplication(rootPath)
        do throws(BlueZError) {
            do {
                try await register.reply(within: Self.callTimeout)
            } catch  where error.kind == .alreadyExists {
                // A registration this connection left behind: withdraw it and register afresh.
                try? await gattManager.unregisterApplication(rootPath).reply(within: .seconds(3))
                try await register.reply(within: Self.callTimeout)
            }
        } catch {
            unexportApplication()
            throw .bluez(error, doing: "registering the GATT service")
        }
        await watchDevices()
        logger.trace("serve: GATT application registered at \(rootPath)")
    }

    private func exportApplication() throws(DBusError) {
        try connection.export(path: rootPath, interfaces: [], isObjectManager: true)
        try connection.export(
            path: servicePath, interfaces: [GattService1.local(uuid: HorizonGATTService.service, primary: true)])
        try connection.export(
            path: writeCharacteristicPath,
            interfaces: [
                GattCharacteristic1.localWritable(uuid: HorizonGATTService.walletToTerminal, service: servicePath) {
                    [weak self] request throws(DBusError) in
                    try self?.written(request)
                }
            ])
        try connection.export(
            path: notifyCharacteristicPath,
            interfaces: [
                GattCharacteristic1.localNotifying(
                    uuid: HorizonGATTService.terminalToWallet, service: servicePath,
                    acquireNotify: { [weak self] request throws(DBusError) in
                        guard let self else { throw BlueZError.reply(.notSupported, "shutting down") }
                        return try self.acquireNotify(request)
                    },
                    notifyAcquired: { [weak self] in self.map { !$0.notifySockets.isEmpty } ?? false },
                    value: { [weak self] in self?.state.withLock { $0.lastNotification } ?? [] })
            ])
    }

    /// AcquireNotify from bluetoothd (on the D-Bus queue): a socket pair, our end kept for the
    /// device it names, its end and the MTU returned. Later notifications for that device's link
    /// are written to the socket; see `NotifySocket` for what bluetoothd does with them.
    private func acquireNotify(_ request: GattCharacteristic1.AcquireNotifyRequest) throws(DBusError)
        -> (DBusFileDescriptor, UInt16)
    {
        guard let device = request.device else {
            // Without the device we could not tell whose notifications the socket is for.
            throw BlueZError.reply(.notSupported, "AcquireNotify needs the device option")
        }
        // "The MTU returned shall be equal or smaller than the negotiated MTU": the one offered.
        let mtu = request.mtu ?? 23
        let theirs = try notifySockets.acquire(device: device, mtu: Int(mtu))
        logger.trace("serve: AcquireNotify for \(device), MTU \(mtu): its notifications go over a socket")
        return (theirs, mtu)
    }

    private func unexportApplication() {
        for path in [notifyCharacteristicPath, writeCharacteristicPath, servicePath, rootPath] {
            connection.unexport(path: path)
        }
    }

    private func unregisterApplicationCall() {
        try? gattManager.unregisterApplication(rootPath).replyBlocking(within: .seconds(3))
    }

    /// A write to the wallet-to-terminal characteristic (on the D-Bus queue).
    private func written(_ request: GattCharacteristic1.WriteRequest) throws(DBusError) {
        guard let device = request.device else {
            throw BlueZError.reply(.invalidArguments, "expected value and device")
        }
        let value = request.value
        if let link = state.withLock({ $0.links[device] }) {
            link.inbox.receive(value)
            return
        }
        guard let tag = LinkFraming.parseRegistration(value) else {
            // Not a wallet of ours: answer the write (a foreign central should not hang) but ignore it.
            state.withLock { $0.foreignWrites += 1 }
            logger.trace("serve: ignored \(value.count) bytes from unregistered \(device)")
            return
        }
        let mtu = request.mtu.map(Int.init) ?? 23
        let link = PeripheralLink(
            peripheral: self, devicePath: device, tag: tag,
            attMTU: max(23, mtu) - LinkTag.length, scheduler: scheduler)
        // A tag another device holds is refused: taking it over would break that wallet's link
        // (every subscriber hears every notification; the tag is how a wallet finds its own).
        let handler = state.withLock { state -> (@Sendable (any ByteLink) -> Void)?? in
            if state.links.values.contains(where: { $0.tag == tag && $0.devicePath != device }) {
                state.refusedTags += 1
                return .none
            }
            state.links[device] = link
            state.pendingDisconnects.removeValue(forKey: device)?.cancel()
            state.unregistered.removeValue(forKey: device)?.cancel()
            return .some(state.connectionHandler)
        }
        guard case .some(let handler) = handler else {
            logger.trace("serve: refused tag \(tag) from \(device): another device holds it")
            throw BlueZError.reply(.notPermitted, "link tag in use by another device")
        }
        logger.trace("serve: link from \(device), MTU \(mtu), tag \(tag)")
        guard let handler else {
            close(link, reason: .closedLocally)
            return
        }
        scheduler.execute { handler(link) }
    }

    /// Ends links whose central disconnected (Device1.Connected false, or the device removed).
    private func watchDevices() async {
        guard let stream = try? await connection.signals(matching: Device1.changes(under: adapterPath)) else { return }
        let task = Task { [weak self] in
            for await signal in stream {
                guard let self, let connected = Device1.Properties(changedIn: signal)?.connected else { continue }
                if connected {
                    self.expectRegistration(from: signal.path)
                    continue
                }
                // Its socket is closed (bluetoothd 5.69+ closes its end too; up to 5.68 that makes
                // the next subscriber's AcquireNotify create a new one).
                notifySockets.remove(signal.path)
                let link = state.withLock { state -> PeripheralLink? in
                    state.pendingDisconnects.removeValue(forKey: signal.path)?.cancel()
                    state.unregistered.removeValue(forKey: signal.path)?.cancel()
                    return state.links.removeValue(forKey: signal.path)
                }
                if let link {
                    logger.trace("serve: \(signal.path) disconnected; its link ends")
                    link.inbox.close(.closedByPeer)
                }
            }
        }
        // A central connecting for the first time appears as a new Device1 object already
        // connected (InterfacesAdded), not as a property change.
        let arrivals = (try? await connection.signals(matching: BlueZObjectManager.interfacesAdded)).map { stream in
            Task { [weak self, adapterPath] in
                for await signal in stream {
                    guard let self, let added = signal.deviceAdded, added.path.hasPrefix(adapterPath + "/"),
                        added.properties.connected == true
                    else { continue }
                    self.expectRegistration(from: added.path)
                }
            }
        }
        state.withLock {
            $0.deviceWatch = task
            $0.arrivalWatch = arrivals
        }
    }

    /// A central connected: unless it registers a tag within `registrationGrace`, it is
    /// disconnected.
    private func expectRegistration(from device: String) {
        let disconnect = scheduler.schedule(after: registrationGrace) { [weak self] in
            guard let self,
                self.state.withLock({ state -> Bool in
                    guard state.unregistered.removeValue(forKey: device) != nil, state.links[device] == nil else {
                        return false
                    }
                    state.silentDisconnects += 1
                    return true
                })
            else { return }
            logger.trace("serve: disconnecting \(device): no link tag registered")
            self.device(device).disconnect().whenAnswered(within: .seconds(5))
        }
        let previous = state.withLock { state -> ScheduledAction? in
            guard state.links[device] == nil else { return disconnect }
            return state.unregistered.updateValue(disconnect, forKey: device)
        }
        previous?.cancel()
    }

    // MARK: Links

    /// Sends one notification for `link` (in call order): over the socket bluetoothd acquired for
    /// its device if there is one (delivered to that device alone since BlueZ 5.69), else as a
    /// Value change, which bluetoothd sends to every subscribed central. The tag is there either
    /// way: the wallet cannot tell which path a frame took, and up to BlueZ 5.68 both broadcast.
    func notify(_ payload: [UInt8], for link: PeripheralLink) throws(RadioError) {
        let bytes = LinkFraming.notification(payload, to: link.tag)
        switch notifySockets.send(bytes, to: link.devicePath) {
        case .sent:
            return
        case .noSocket:
            break
        case .closed:
            // The device unsubscribed or bluetoothd dropped the socket: Value changes from now on.
            logger.trace("serve: bluetoothd closed the notify socket of \(link.devicePath); Value changes instead")
        case .failed(let error):
            throw .backend(
                name: "org.horizon.Error.NotifySocket",
                message: "bluetoothd did not take a notification for \(link.devicePath) from its socket "
                    + "(\(String(cString: strerror(error))))")
        }
        state.withLock { $0.lastNotification = bytes }
        do {
            try connection.emitPropertiesChanged(
                path: notifyCharacteristicPath, interface: GattCharacteristic1.interface,
                changed: GattCharacteristic1.valueChanged(bytes))
        } catch {
            throw .bluez(error, doing: "sending a notification")
        }
    }

    /// Forgets `link` and, after a grace period that lets queued notifications leave, disconnects
    /// its central (a wallet normally disconnects first).
    func close(_ link: PeripheralLink, reason: LinkCloseReason) {
        let removed = state.withLock { state -> Bool in
            guard state.links[link.devicePath] === link else { return false }
            state.links[link.devicePath] = nil
            return true
        }
        link.inbox.close(reason)
        logger.trace("serve: link from \(link.devicePath) closed (\(reason))")
        guard removed, reason == .closedLocally else { return }
        let disconnect = scheduler.schedule(after: Self.disconnectGrace) { [weak self] in
            guard self?.state.withLock({ $0.pendingDisconnects.removeValue(forKey: link.devicePath) }) != nil else {
                return
            }
            self?.logger.trace("serve: disconnecting \(link.devicePath) after a local close")
            self?.device(link.devicePath).disconnect().whenAnswered(within: .seconds(5))
        }
        state.withLock { $0.pendingDisconnects.updateValue(disconnect, forKey: link.devicePath)?.cancel() }
    }

    // MARK: Advertising

    /// Registers an advertisement carrying `advertisingData`'s manufacturer data; returns once
    /// bluetoothd has it (suspending meanwhile).
    func startAdvertising(_ advertisingData: [UInt8], interval: Duration) async throws(RadioError)
        -> any AdvertisingSet
    {
        let properties = try Self.advertisementProperties(advertisingData, interval: interval)
        try await registerApplication()
        let path = state.withLock { state -> String in
            defer { state.nextAdvertisement += 1 }
            return rootPath + "/advertisement\(state.nextAdvertisement)"
        }
        do {
            try connection.export(
                path: path,
                interfaces: [LEAdvertisement1.local(properties) { [weak self] in self?.released(path) }])
        } catch {
            throw .bluez(error, doing: "exporting the advertisement")
        }
        let register = advertisingManager.registerAdvertisement(path)
        do throws(BlueZError) {
            do {
                try await register.reply(within: Self.callTimeout)
            } catch  where error.kind == .alreadyExists {
                advertisingManager.unregisterAdvertisement(path).whenAnswered(within: .seconds(5))
                try await register.reply(within: Self.callTimeout)
            }
        } catch {
            connection.unexport(path: path)
            throw .bluez(error, doing: "registering the advertisement")
        }
        state.withLock { _ = $0.advertisements.insert(path) }
        logger.trace("serve: advertising \(path)")
        return BlueZAdvertisingSet { [weak self] in self?.stopAdvertising(path) }
    }

    /// bluetoothd dropped the advertisement: it calls Release when the advertisement can no
    /// longer be served (the adapter went away, e.g. a dongle unplugged; a power cycle keeps it),
    /// and it is then already unregistered. A session still advertising must not go silent: the
    /// GATT application (which went with the adapter) and the advertisement are registered again,
    /// retried every second for two minutes while the adapter comes back.
    private func released(_ path: String, attempt: Int = 0) {
        guard state.withLock({ $0.advertisements.contains(path) }) else { return }
        logger.trace("serve: bluetoothd released \(path); registering it again (attempt \(attempt + 1))")
        // Off the D-Bus queue, which this Release call is on, and after a moment for the adapter.
        scheduler.schedule(after: .milliseconds(attempt == 0 ? 200 : 1_000)) { [weak self] in
            guard let self, self.state.withLock({ $0.advertisements.contains(path) }) else { return }
            @Sendable func retry(_ doing: String, _ error: BlueZError) {
                logger.trace("serve: \(doing) again failed: \(error)")
                if attempt < 120 { self.released(path, attempt: attempt + 1) }
            }
            self.gattManager.registerApplication(self.rootPath).whenAnswered(within: Self.callTimeout) { result in
                if case .failure(let error) = result, error.kind != .alreadyExists {
                    return retry("registering the GATT application", error)
                }
                self.advertisingManager.registerAdvertisement(path).whenAnswered(within: Self.callTimeout) { result in
                    if case .failure(let error) = result, error.kind != .alreadyExists {
                        return retry("registering \(path)", error)
                    }
                    self.state.withLock { $0.reregistrations += 1 }
                    self.logger.trace("serve: advertising \(path) again")
                }
            }
        }
    }

    private func stopAdvertising(_ path: String) {
        guard state.withLock({ $0.advertisements.remove(path) }) != nil else { return }
        advertisingManager.unregisterAdvertisement(path).whenAnswered(within: .seconds(5)) { [connection] _ in
            connection.unexport(path: path)
        }
    }

    /// LEAdvertisement1's properties for legacy advertising data: BlueZ writes the flags itself
    /// (Discoverable), so only manufacturer data is passed on; anything else is refused.
    static func advertisementProperties(_ advertisingData: [UInt8], interval: Duration) throws(RadioError)
        -> LEAdvertisement1.Properties
    {
        guard advertisingData.count <= AdvertisingData.legacyMaximumLength else {
            throw .advertisementTooLarge(size: advertisingData.count, maximum: AdvertisingData.legacyMaximumLength)
        }
        guard let parsed = AdvertisingData.parse(advertisingData) else {
            throw .invalidConfiguration("the advertising data does not parse as AD structures")
        }
        var manufacturerData: [UInt16: [UInt8]] = [:]
        for structure in parsed.structures {
            switch structure.type {
            case AdvertisingData.StructureType.flags:
                continue
            case AdvertisingData.StructureType.manufacturerSpecificData where structure.data.count >= 2:
                let company = UInt16(structure.data[0]) | UInt16(structure.data[1]) << 8
                manufacturerData[company] = Array(structure.data.dropFirst(2))
            default:
                throw .invalidConfiguration(
                    "the BlueZ radio advertises flags and manufacturer data only, not AD type \(structure.type)")
            }
        }
        let milliseconds = UInt32(clamping: max(20, interval.nanoseconds / 1_000_000))
        return LEAdvertisement1.Properties(
            type: .peripheral, manufacturerData: manufacturerData, discoverable: true, minInterval: milliseconds,
            maxInterval: milliseconds)
    }

    // MARK: Shutdown

    /// Withdraws every advertisement and the GATT service and disconnects every wallet. Blocking
    /// (at most a few seconds), so that a program exiting leaves nothing registered.
    func shutdown() {
        let (advertisements, links, registered, watches) = state.withLock {
            state -> (Set<String>, [PeripheralLink], Bool, [Task<Void, Never>]) in
            defer {
                state.advertisements.removeAll()
                state.links.removeAll()
                state.applicationRegistered = false
                state.deviceWatch = nil
                state.arrivalWatch = nil
                for timer in state.unregistered.values { timer.cancel() }
                state.unregistered.removeAll()
            }
            return (
                state.advertisements, Array(state.links.values), state.applicationRegistered,
                [state.deviceWatch, state.arrivalWatch].compactMap { $0 }
            )
        }
        notifySockets.removeAll()
        for watch in watches { watch.cancel() }
        for path in advertisements {
            try? advertisingManager.unregisterAdvertisement(path).replyBlocking(within: .seconds(2))
            connection.unexport(path: path)
        }
        for link in links {
            link.inbox.close(.closedLocally)
            try? device(link.devicePath).disconnect().replyBlocking(within: .seconds(2))
        }
        if registered {
            unregisterApplicationCall()
            unexportApplication()
        }
    }
}
