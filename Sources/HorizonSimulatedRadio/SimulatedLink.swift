import HorizonCore
import HorizonRadio

/// Which end of a link: the central opened it, the peripheral accepted it.
enum LinkSide: Int, Sendable {
    case central = 0
    case peripheral = 1

    var other: LinkSide { self == .central ? .peripheral : .central }
}

struct LinkState {
    enum Status: Equatable {
        case open
        /// Radio contact ended at this instant; both sides learn after the supervision timeout.
        /// Frames from `frame` on are never delivered (earlier ones still in flight are).
        case lost(at: Instant, fromFrame: Int)
        case closed
    }

    let devices: [Int]  // indexed by LinkSide.rawValue
    let parameters: LinkParameters
    let attMTU: Int
    /// Connection event k happens at anchor + k * interval.
    let anchor: Instant
    var status: Status = .open
    var closedLocally: [Bool] = [false, false]
    var closeNotified: [Bool] = [false, false]
    var handlers: [ByteLinkHandler?] = [nil, nil]
    var pendingPayloads: [[[UInt8]]] = [[], []]
    var pendingClose: [LinkCloseReason?] = [nil, nil]
    /// Per sending side: the connection event of its last scheduled packet, and packets in it.
    var lastEvent: [Int64] = [0, 0]
    var packetsInLastEvent: [Int] = [0, 0]
    var lastDeliveryTime: [Instant] = [.zero, .zero]
    /// A frame held back by a `reorder` fault, per sending side, sent after the next one.
    var heldFrame: [(payload: [UInt8], frame: Int)?] = [nil, nil]
    var framesSent = 0
    /// Frames and bytes per direction, for benchmarks (see `LinkTraffic`).
    var traffic: LinkTraffic
    var plannedFaults: [Int: FrameFault]
    let randomFaults: FaultProbabilities

    func involves(_ device: Int) -> Bool { devices.contains(device) }

    func side(of device: Int) -> LinkSide { devices[0] == device ? .central : .peripheral }
}

/// One end of a simulated link, handed to the central on connect and to the peripheral's
/// connection handler.
public final class SimulatedLinkEndpoint: ByteLink, Sendable {
    let simulation: RadioSimulation
    let linkID: Int
    let side: LinkSide
    public let peer: PeerAddress
    public let attMTU: Int

    init(simulation: RadioSimulation, linkID: Int, side: LinkSide, peer: PeerAddress, attMTU: Int) {
        self.simulation = simulation
        self.linkID = linkID
        self.side = side
        self.peer = peer
        self.attMTU = attMTU
    }

    /// A stable number for this link within its simulation, for traces and fault injection.
    public var identifier: Int { linkID }

    public func setHandler(_ handler: ByteLinkHandler) {
        let (payloads, close) = simulation.state.withLock { state in
            state.links[linkID].handlers[side.rawValue] = handler
            let payloads = state.links[linkID].pendingPayloads[side.rawValue]
            state.links[linkID].pendingPayloads[side.rawValue] = []
            let close = state.links[linkID].pendingClose[side.rawValue]
            state.links[linkID].pendingClose[side.rawValue] = nil
            return (payloads, close)
        }
        for payload in payloads { handler.onReceive(payload) }
        if let close { handler.onClose(close) }
    }

    public func send(_ payload: [UInt8]) throws(RadioError) {
        let error: RadioError? = simulation.state.withLock { state in
            simulation.send(payload, on: linkID, from: side, in: &state)
        }
        if let error { throw error }
    }

    public func close() {
        simulation.state.withLock { state in
            simulation.closeLink(linkID, from: side, in: &state)
        }
    }
}

extension RadioSimulation {
    func openLink(central: Int, peripheral: Int, in state: inout SimulationState)
        -> (SimulatedLinkEndpoint, SimulatedLinkEndpoint)
    {
        let parameters = state.devices[central].configuration.link
        let mtu = min(parameters.attMTU, state.devices[peripheral].configuration.link.attMTU)
        let linkID = state.links.count
        state.links.append(
            LinkState(
                devices: [central, peripheral], parameters: parameters, attMTU: mtu, anchor: state.now,
                traffic: LinkTraffic(
                    linkID: linkID, central: state.devices[central].address,
                    peripheral: state.devices[peripheral].address, attMTU: mtu),
                plannedFaults: state.faultsForNextLink, randomFaults: state.randomFaults))
        state.faultsForNextLink = [:]
        if state.trace != nil {
            let line =
                "link-open #\(linkID) \(state.devices[central].name)->\(state.devices[peripheral].name) mtu=\(mtu)"
            record(line, in: &state)
        }
        let centralEnd = SimulatedLinkEndpoint(
            simulation: self, linkID: linkID, side: .central, peer: state.devices[peripheral].address, attMTU: mtu)
        let peripheralEnd = SimulatedLinkEndpoint(
            simulation: self, linkID: linkID, side: .peripheral, peer: state.devices[central].address, attMTU: mtu)
        return (centralEnd, peripheralEnd)
    }

    /// Puts one frame on air. Returns an error to throw, or nil.
    func send(_ payload: [UInt8], on linkID: Int, from side: LinkSide, in state: inout SimulationState) -> RadioError? {
        let link = state.links[linkID]
        guard !link.closedLocally[side.rawValue], !link.closeNotified[side.rawValue] else { return .linkClosed }
        // As on BlueZ: the ATT MTU less its header, and never more than bluetoothd takes in a write.
        let maximum = min(link.attMTU - 3, maximumWrittenValueLength)
        guard payload.count <= maximum else { return .payloadTooLarge(size: payload.count, maximum: maximum) }
        // After contact is lost, or the peer closed, a sender cannot tell until it is told:
        // its frames go nowhere.
        guard link.status == .open else { return nil }
        let frameIndex = link.framesSent
        state.links[linkID].framesSent += 1
        state.links[linkID].traffic.count(payload.count, fromCentral: side == .central)
        let fault = link.plannedFaults[frameIndex] ?? drawRandomFault(linkID: linkID, in: &state)
        if let fault { state.appliedFaults.append(AppliedFault(linkID: linkID, frameIndex: frameIndex, fault: fault)) }
        if state.trace != nil {
            let sender = state.devices[link.devices[side.rawValue]].name
            let line =
                "frame #\(linkID).\(frameIndex) \(sender) \(payload.hexString)\(fault.map { " fault=\($0)" } ?? "")"
            record(line, in: &state)
        }
        switch fault {
        case .cut:
            loseLink(linkID, in: &state, notifyImmediately: nil, fromFrame: frameIndex)
        case .drop:
            break
        case .duplicate:
            scheduleDelivery(payload, frame: frameIndex, on: linkID, from: side, in: &state)
            scheduleDelivery(payload, frame: frameIndex, on: linkID, from: side, in: &state)
        case .reorder:
            if let earlier = state.links[linkID].heldFrame[side.rawValue] {
                scheduleDelivery(earlier.payload, frame: earlier.frame, on: linkID, from: side, in: &state)
            }
            state.links[linkID].heldFrame[side.rawValue] = (payload, frameIndex)
        case nil:
            scheduleDelivery(payload, frame: frameIndex, on: linkID, from: side, in: &state)
            if let held = state.links[linkID].heldFrame[side.rawValue] {
                state.links[linkID].heldFrame[side.rawValue] = nil
                scheduleDelivery(held.payload, frame: held.frame, on: linkID, from: side, in: &state)
            }
        }
        return nil
    }

    private func drawRandomFault(linkID: Int, in state: inout SimulationState) -> FrameFault? {
        let odds = state.links[linkID].randomFaults
        guard odds != .none else { return nil }
        return withGenerator("faults/\(linkID)", in: &state) { random -> FrameFault? in
            let roll = random.nextUnit()
            var threshold = odds.cut
            if roll < threshold { return .cut }
            threshold += odds.drop
            if roll < threshold { return .drop }
            threshold += odds.duplicate
            if roll < threshold { return .duplicate }
            threshold += odds.reorder
            if roll < threshold { return .reorder }
            return nil
        }
    }

    /// Plans a packet's arrival: at the first connection event after now (or after the sender's
    /// previous packet), a limited number per event, delayed by retransmissions and latency.
    private func scheduleDelivery(
        _ payload: [UInt8], frame: Int, on linkID: Int, from side: LinkSide, in state: inout SimulationState
    ) {
        let link = state.links[linkID]
        let interval = max(link.parameters.connectionInterval.nanoseconds, 1)
        let elapsed = (state.now - link.anchor).nanoseconds
        var event = elapsed / interval + 1
        var packets = 0
        if event < link.lastEvent[side.rawValue] {
            event = link.lastEvent[side.rawValue]
        }
        if event == link.lastEvent[side.rawValue] {
            packets = link.packetsInLastEvent[side.rawValue]
            if packets >= link.parameters.packetsPerEvent {
                event += 1
                packets = 0
            }
        }
        if link.parameters.lossRate > 0 {
            let lossRate = link.parameters.lossRate
            let retries = withGenerator("loss/\(linkID)/\(side.rawValue)", in: &state) { random -> Int64 in
                var retries: Int64 = 0
                while retries < 1000, random.chance(lossRate) { retries += 1 }
                return retries
            }
            if retries > 0 {
                event += retries
                packets = 0
            }
        }
        state.links[linkID].lastEvent[side.rawValue] = event
        state.links[linkID].packetsInLastEvent[side.rawValue] = packets + 1
        let time = link.anchor + .nanoseconds(event * interval) + link.parameters.latency
        state.links[linkID].lastDeliveryTime[side.rawValue] = time
        let receiver = side.other
        push(at: time, in: &state) { [self] in
            deliver(payload, frame: frame, on: linkID, to: receiver)
        }
    }

    private func deliver(_ payload: [UInt8], frame: Int, on linkID: Int, to receiver: LinkSide) {
        let handler: ByteLinkHandler? = state.withLock { state in
            let link = state.links[linkID]
            guard !link.closedLocally[receiver.rawValue], !link.closeNotified[receiver.rawValue] else { return nil }
            if case .lost(_, let fromFrame) = link.status, frame >= fromFrame { return nil }
            guard let handler = link.handlers[receiver.rawValue] else {
                state.links[linkID].pendingPayloads[receiver.rawValue].append(payload)
                return nil
            }
            return handler
        }
        handler?.onReceive(payload)
    }

    /// Ends radio contact: nothing more is delivered; each side is told after its supervision
    /// timeout, or at once for `notifyImmediately` (the side whose own device went away).
    ///
    /// `fromFrame` is the first frame that never arrives; by default every frame still in flight
    /// is lost with the contact.
    func loseLink(
        _ linkID: Int, in state: inout SimulationState, notifyImmediately: LinkSide?, fromFrame: Int = 0
    ) {
        guard state.links[linkID].status == .open || notifyImmediately != nil else { return }
        if state.links[linkID].status == .open {
            state.links[linkID].status = .lost(at: state.now, fromFrame: fromFrame)
            record("link-lost #\(linkID)", in: &state)
        }
        let timeout = state.links[linkID].parameters.supervisionTimeout
        for side in [LinkSide.central, .peripheral] {
            let delay: Duration = side == notifyImmediately ? .zero : timeout
            push(at: state.now + delay, in: &state) { [self] in
                notifyClose(linkID, side: side, reason: .connectionLost)
            }
        }
    }

    func closeLink(_ linkID: Int, from side: LinkSide, in state: inout SimulationState) {
        let link = state.links[linkID]
        guard !link.closedLocally[side.rawValue], !link.closeNotified[side.rawValue] else { return }
        state.links[linkID].closedLocally[side.rawValue] = true
        record("link-close #\(linkID) by \(side)", in: &state)
        push(at: state.now, in: &state) { [self] in
            notifyClose(linkID, side: side, reason: .closedLocally)
        }
        guard link.status == .open else { return }
        state.links[linkID].status = .closed
        // The peer hears of it at the next connection event after the last packet already on
        // its way, so a reply sent just before closing still arrives first.
        let interval = link.parameters.connectionInterval
        let after = max(state.now, link.lastDeliveryTime[side.rawValue]) + interval
        let peer = side.other
        push(at: after, in: &state) { [self] in
            notifyClose(linkID, side: peer, reason: .closedByPeer)
        }
    }

    private func notifyClose(_ linkID: Int, side: LinkSide, reason: LinkCloseReason) {
        let handler: ByteLinkHandler? = state.withLock { state in
            guard !state.links[linkID].closeNotified[side.rawValue] else { return nil }
            state.links[linkID].closeNotified[side.rawValue] = true
            if state.links[linkID].closeNotified.allSatisfy({ $0 }) { state.links[linkID].status = .closed }
            guard let handler = state.links[linkID].handlers[side.rawValue] else {
                state.links[linkID].pendingClose[side.rawValue] = reason
                return nil
            }
            return handler
        }
        handler?.onClose(reason)
    }
}
