import Foundation
import HorizonBlueZ
import HorizonCore
import HorizonRadio
import Synchronization

/// The raw round trip of the BlueZ layer: one `ByteLink.send` from the wallet's link (one ATT
/// write, through bluetoothd) answered by one `send` on the terminal's link (one notification),
/// with nothing above the links. The wallet finds the terminal by an advertisement of its own
/// ("HB" and a nonce under company 0xFFFF, so no Horizon role mistakes it for a session) and
/// connects with `CentralRadio.connect`, exactly as the payment client does.
struct BlueZRoundTripResult: Codable {
    /// What else the radios did meanwhile.
    let conditions: String
    let payloadBytes: Int
    /// Round trips run and not counted at the start of each series.
    let warmUpPerSeries: Int
    /// Series (one per block, each on a fresh connection).
    let series: Int
    /// From the wallet's `send` to its handler receiving the echo.
    let roundTripMilliseconds: Summary
    /// From the wallet's `send` to the terminal's handler receiving it (same clock, same process).
    let writeLegMilliseconds: Summary
    /// From the terminal's handler (which sends the echo at once) to the wallet's handler.
    let notificationLegMilliseconds: Summary
    /// From `startAdvertising` to the wallet's first sighting of it, per scan (blocks after the
    /// first connect to the address already known, without scanning).
    var discoveryMilliseconds: Summary?
    /// From `CentralRadio.connect` to the link (connect, service discovery, subscribe, register).
    var connectMilliseconds: Summary?
    var walletAttMTU: Int?
    var terminalAttMTU: Int?
}

/// One round trip as both ends saw it, monotonic nanoseconds.
struct RoundTripTimes {
    let sent: Int64
    let atTerminal: Int64
    let back: Int64

    var total: Double { Double(back - sent) / 1e6 }
}

/// What one block's raw series measured.
struct RoundTripBlock {
    var quiet: [RoundTripTimes]
    var large: [RoundTripTimes]
    var scanning: [RoundTripTimes]
    let address: PeerAddress
    let discovery: Double?
    let connect: Double
    let largePayloadBytes: Int
    let payloadBytes: Int
    let walletAttMTU: Int
    let terminalAttMTU: Int
}

struct BlueZRoundTrip {
    let terminal: BlueZRadio
    let wallet: BlueZRadio
    /// The terminal radio's connection handler, which this diverts to its echo while it measures.
    let tap: TappedBlueZPeripheral
    let payloadBytes: Int
    /// The size of a payment's frames (the confirmation is 188 bytes, the receipt 174), for the
    /// series that shows what the frame size costs.
    let largePayloadBytes: Int
    let warmUp: Int

    static let replyTimeout: Duration = .seconds(10)
    static let quietConditions = "quiet: no advertising, no discovery"
    static let scanningConditions =
        "the terminal advertising (100 ms), both adapters discovering with duplicates reported (as during a payment)"

    /// Advertises, connects (to `knownAddress` directly if given, else after scanning for the
    /// advertisement), measures `quiet` round trips with nothing else on the radios (and as many
    /// with a payment-sized payload) and `scanning` round trips while the terminal advertises and
    /// both adapters discover, and disconnects. Neither radio may be scanning when this starts.
    func measureBlock(quiet quietCount: Int, scanning scanningCount: Int, knownAddress: PeerAddress?) throws
        -> RoundTripBlock
    {
        let echo = Echo()
        let terminalLinks = Handoff<any ByteLink>()
        tap.divert { link in
            echo.attach(link)
            terminalLinks.put(link)
        }
        defer { tap.divert(nil) }
        do {
            try waitFor { [terminal] () async throws(RadioError) in try await terminal.prepareToServe() }
        } catch {
            throw BenchmarkError("registering the GATT service on \(terminal.adapter.name): \(error)")
        }
        var random = SystemRandomNumberGenerator()
        let nonce = (0..<8).map { _ in UInt8.random(in: 0...255, using: &random) }
        let manufacturerPayload: [UInt8] = [0x48, 0x42] + nonce  // "HB": horizon-bench, not a session
        let expected = AdvertisingData.manufacturerStructure(companyID: 0xFFFF, payload: manufacturerPayload)
        let advertisingData: [UInt8]
        do {
            advertisingData = try AdvertisingData(structures: [expected]).encoded()
        } catch {
            throw BenchmarkError("encoding the advertisement: \(error)")
        }

        // Advertise, discover, connect.
        let advertisedAt = Clocks.wall()
        var advertising: (any AdvertisingSet)?
        do {
            advertising = try waitFor { [terminal] () async throws(RadioError) in
                try await terminal.startAdvertising(advertisingData, interval: .milliseconds(100))
            }
        } catch {
            throw BenchmarkError("advertising on \(terminal.adapter.name): \(error)")
        }
        defer { advertising?.stop() }
        var address = knownAddress
        var discovery: Double?
        var connected: (link: any ByteLink, milliseconds: Double)?
        if let knownAddress {
            connected = try? connect(to: knownAddress)
        }
        if connected == nil {
            let found = try discover(expected, since: advertisedAt)
            address = found.address
            discovery = found.milliseconds
            connected = try connect(to: found.address)
        }
        guard let (link, connect) = connected, let address else {
            throw BenchmarkError("no raw link")
        }
        defer {
            link.close()
            // The terminal must see this wallet leave before anything connects it again.
            _ = waitUntil(timeout: .seconds(10)) { terminal.connectedWalletCount == 0 }
        }
        guard let terminalLink = terminalLinks.take(timeout: .seconds(10)) else {
            throw BenchmarkError("the terminal's side of the link never appeared")
        }
        let replies = Handoff<(Int64, [UInt8])>()
        link.setHandler(
            ByteLinkHandler(
                onReceive: { payload in replies.put((Clocks.wall(), payload)) },
                onClose: { reason in Progress.note("bluez: raw link closed: \(reason)") }))
        let size = max(2, min(payloadBytes, link.maximumPayloadSize, terminalLink.maximumPayloadSize))
        let largeSize = max(2, min(largePayloadBytes, link.maximumPayloadSize, terminalLink.maximumPayloadSize))
        Progress.note(
            "bluez: raw link up: \(discovery.map { "heard after \($0.formatted(0)) ms, " } ?? "")connected in \(connect.formatted(0)) ms (ATT MTU wallet \(link.attMTU), terminal \(terminalLink.attMTU)); \(quietCount) round trips of \(size) bytes and \(quietCount) of \(largeSize) quiet, \(scanningCount) while scanning"
        )

        // Quiet: no advertising, no discovery.
        advertising?.stop()
        advertising = nil
        Thread.sleep(forTimeInterval: 0.3)
        let quiet = try run(count: quietCount, size: size, link: link, echo: echo, replies: replies)
        let large = try run(count: quietCount, size: largeSize, link: link, echo: echo, replies: replies)

        // As during a payment: the terminal advertises, the wallet discovers (bluetoothd reports
        // every advertisement it hears), the terminal discovers (its conflict observer).
        do {
            advertising = try waitFor { [terminal] () async throws(RadioError) in
                try await terminal.startAdvertising(advertisingData, interval: .milliseconds(100))
            }
            try waitFor { [wallet] () async throws(RadioError) in try await wallet.startScanning { _ in } }
            try waitFor { [terminal] () async throws(RadioError) in try await terminal.startScanning { _ in } }
        } catch {
            throw BenchmarkError("starting advertising and discovery for the second series: \(error)")
        }
        defer {
            wallet.stopScanning()
            terminal.stopScanning()
        }
        Thread.sleep(forTimeInterval: 0.7)
        let scanning = try run(count: scanningCount, size: size, link: link, echo: echo, replies: replies)
        return RoundTripBlock(
            quiet: quiet, large: large, scanning: scanning, address: address, discovery: discovery, connect: connect,
            largePayloadBytes: largeSize, payloadBytes: size, walletAttMTU: link.attMTU,
            terminalAttMTU: terminalLink.attMTU)
    }

    /// Scans until the advertisement is heard. bluetoothd refuses a StartDiscovery while this
    /// connection's StopDiscovery is still under way (InProgress), which leaves the adapter silent
    /// until the BlueZ layer restarts discovery; a fresh start gets past that.
    private func discover(_ expected: AdvertisingData.Structure, since advertisedAt: Int64) throws -> (
        address: PeerAddress, milliseconds: Double
    ) {
        let sightings = Handoff<PeerAddress>()
        let heard: @Sendable (Sighting) -> Void = { sighting in
            let structures = AdvertisingData.parse(sighting.advertisingData)?.structures ?? []
            if structures.contains(expected) { sightings.put(sighting.address) }
        }
        for attempt in 1...4 {
            do {
                try waitFor { [wallet] () async throws(RadioError) in try await wallet.startScanning(heard) }
            } catch {
                throw BenchmarkError("scanning on \(wallet.adapter.name): \(error)")
            }
            let found = sightings.take(timeout: .seconds(5))
            wallet.stopScanning()
            if let found { return (found, Double(Clocks.wall() - advertisedAt) / 1e6) }
            Progress.note(
                "bluez: the terminal's advertisement not heard within 5 s (attempt \(attempt)); scanning again")
            Thread.sleep(forTimeInterval: 1)
        }
        throw BenchmarkError("the wallet adapter did not hear the terminal's advertisement (4 scans of 5 s)")
    }

    private func connect(to address: PeerAddress) throws -> (link: any ByteLink, milliseconds: Double) {
        let results = Handoff<Result<any ByteLink, RadioError>>()
        let start = Clocks.wall()
        wallet.connect(to: address, timeout: .seconds(30)) { results.put($0) }
        guard let result = results.take(timeout: .seconds(45)) else {
            throw BenchmarkError("connect did not complete within 45 s")
        }
        switch result {
        case .success(let link): return (link, Double(Clocks.wall() - start) / 1e6)
        case .failure(let error): throw BenchmarkError("connecting to the terminal: \(error)")
        }
    }

    private func run(count: Int, size: Int, link: any ByteLink, echo: Echo, replies: Handoff<(Int64, [UInt8])>)
        throws -> [RoundTripTimes]
    {
        var times: [RoundTripTimes] = []
        times.reserveCapacity(count)
        replies.drain()
        echo.arrivals.drain()
        for index in 0..<(warmUp + count) {
            var payload = [UInt8](repeating: 0x5A, count: size)
            payload[0] = UInt8(truncatingIfNeeded: index)
            payload[1] = UInt8(truncatingIfNeeded: index >> 8)
            let sent = Clocks.wall()
            do {
                try link.send(payload)
            } catch {
                throw BenchmarkError("round trip \(index): send failed: \(error)")
            }
            guard let (back, reply) = replies.take(timeout: Self.replyTimeout) else {
                throw BenchmarkError("round trip \(index): no echo within \(Self.replyTimeout)")
            }
            guard reply == payload else {
                throw BenchmarkError("round trip \(index): the echo differs from what was sent")
            }
            let atTerminal = echo.arrivals.take(timeout: .seconds(1)) ?? back
            if index >= warmUp { times.append(RoundTripTimes(sent: sent, atTerminal: atTerminal, back: back)) }
        }
        return times
    }

    enum Series {
        case quiet
        case large
        case scanning
    }

    /// The blocks' series of one kind, summarised.
    static func summarise(_ blocks: [RoundTripBlock], _ series: Series, warmUp: Int) -> BlueZRoundTripResult? {
        guard let first = blocks.first else { return nil }
        let times: [RoundTripTimes]
        let conditions: String
        let size: Int
        switch series {
        case .quiet: (times, conditions, size) = (blocks.flatMap(\.quiet), quietConditions, first.payloadBytes)
        case .large:
            (times, conditions, size) = (
                blocks.flatMap(\.large), quietConditions + ", a payment-sized payload", first.largePayloadBytes
            )
        case .scanning: (times, conditions, size) = (blocks.flatMap(\.scanning), scanningConditions, first.payloadBytes)
        }
        guard
            var result = summarise(
                times, conditions: conditions, payloadBytes: size, warmUp: warmUp, series: blocks.count)
        else { return nil }
        let discoveries = blocks.compactMap(\.discovery)
        result.discoveryMilliseconds = discoveries.isEmpty ? nil : Summary(discoveries)
        result.connectMilliseconds = Summary(blocks.map(\.connect))
        result.walletAttMTU = first.walletAttMTU
        result.terminalAttMTU = first.terminalAttMTU
        return result
    }

    static func summarise(_ times: [RoundTripTimes], conditions: String, payloadBytes: Int, warmUp: Int, series: Int)
        -> BlueZRoundTripResult?
    {
        guard !times.isEmpty else { return nil }
        return BlueZRoundTripResult(
            conditions: conditions, payloadBytes: payloadBytes, warmUpPerSeries: warmUp, series: series,
            roundTripMilliseconds: Summary(times.map(\.total)),
            writeLegMilliseconds: Summary(times.map { Double($0.atTerminal - $0.sent) / 1e6 }),
            notificationLegMilliseconds: Summary(times.map { Double($0.back - $0.atTerminal) / 1e6 }))
    }
}

/// The terminal's side: every payload received is sent straight back on the same link, and the
/// moment it arrived is noted.
private final class Echo: Sendable {
    let arrivals = Handoff<Int64>()

    func attach(_ link: any ByteLink) {
        let arrivals = arrivals
        link.setHandler(
            ByteLinkHandler(
                onReceive: { [weak link] payload in
                    arrivals.put(Clocks.wall())
                    try? link?.send(payload)
                }, onClose: { _ in }))
    }
}

/// Waits for a radio call that suspends: the benchmark's driver is synchronous, and blocking its
/// thread is what it times.
func waitFor<T: Sendable>(_ call: @escaping @Sendable () async throws(RadioError) -> T) throws(RadioError) -> T {
    try ExternalWork.wait { () async -> Result<T, RadioError> in
        do throws(RadioError) {
            return .success(try await call())
        } catch {
            return .failure(error)
        }
    }.get()
}
