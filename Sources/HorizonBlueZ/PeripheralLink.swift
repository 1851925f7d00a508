import HorizonCore
import HorizonRadio
import Synchronization

/// One wallet connected to the terminal: frames arrive as writes from its device, and leave as
/// notifications bearing its tag.
final class PeripheralLink: ByteLink, Sendable {
    let peer: PeerAddress
    let attMTU: Int
    let devicePath: String
    let tag: LinkTag
    let inbox: LinkInbox
    private weak let peripheral: BlueZPeripheral?

    init(peripheral: BlueZPeripheral, devicePath: String, tag: LinkTag, attMTU: Int, scheduler: any Scheduler) {
        self.peripheral = peripheral
        self.devicePath = devicePath
        self.tag = tag
        self.attMTU = attMTU
        self.peer = PeerAddress(BlueZName.address(ofDevicePath: devicePath))
        self.inbox = LinkInbox(scheduler: scheduler)
    }

    func setHandler(_ handler: ByteLinkHandler) { inbox.setHandler(handler) }

    /// A notification carries the link tag before the payload, and all of it must fit an
    /// attribute value (512 bytes) as well as the MTU: `attMTU` is already the MTU less the tag.
    var maximumPayloadSize: Int {
        min(attMTU + LinkTag.length - 3, maximumAttributeValueLength) - LinkTag.length
    }

    func send(_ payload: [UInt8]) throws(RadioError) {
        guard !inbox.isClosed, let peripheral else { throw .linkClosed }
        guard payload.count <= maximumPayloadSize else {
            throw .payloadTooLarge(size: payload.count, maximum: maximumPayloadSize)
        }
        try peripheral.notify(payload, for: self)
    }

    func close() {
        if let peripheral {
            peripheral.close(self, reason: .closedLocally)
        } else {
            inbox.close(.closedLocally)
        }
    }
}

/// An advertisement registered with bluetoothd; `stop` withdraws it.
final class BlueZAdvertisingSet: AdvertisingSet, Sendable {
    private let onStop: Mutex<(@Sendable () -> Void)?>

    init(onStop: @escaping @Sendable () -> Void) { self.onStop = Mutex(onStop) }

    func stop() {
        let action = onStop.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }
}
