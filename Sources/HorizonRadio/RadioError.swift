/// Why a radio operation failed, phrased so that a person knows what is wrong with the system
/// (an app adds how to fix it in its own terms: a flag, a command).
public enum RadioError: Error, Equatable, Sendable, CustomStringConvertible {
    case adapterUnavailable(AdapterAvailability)
    case advertisementTooLarge(size: Int, maximum: Int)
    case payloadTooLarge(size: Int, maximum: Int)
    case invalidConfiguration(String)
    case peerNotFound(PeerAddress)
    case connectionTimedOut(PeerAddress)
    case linkClosed
    case alreadyScanning
    /// An error the radio backend reported, with its own name (a BlueZ error such as
    /// `org.bluez.Error.InProgress`) and what to do about it.
    case backend(name: String, message: String)

    public var description: String {
        switch self {
        case .adapterUnavailable(let availability):
            switch availability {
            case .poweredOff: "the Bluetooth adapter is powered off; power it on (bluetoothctl power on)"
            case .unauthorized: "no permission to use Bluetooth; add this user to the 'bluetooth' group"
            case .unsupported: "no Bluetooth LE adapter found; plug in a dongle"
            case .serviceUnavailable: "bluetoothd is not running; start it (systemctl start bluetooth)"
            case .poweredOn: "the Bluetooth adapter is not usable"
            }
        case .advertisementTooLarge(let size, let maximum):
            "advertising data of \(size) bytes does not fit legacy advertising (\(maximum) bytes)"
        case .payloadTooLarge(let size, let maximum):
            "payload of \(size) bytes exceeds the link's \(maximum) bytes per packet"
        case .invalidConfiguration(let reason): "invalid radio configuration: \(reason)"
        case .peerNotFound(let peer): "device \(peer) is not in range"
        case .connectionTimedOut(let peer): "connecting to \(peer) timed out; move closer and try again"
        case .linkClosed: "the link is closed"
        case .alreadyScanning: "this radio is already scanning"
        case .backend(let name, let message): "\(message) (\(name))"
        }
    }
}
