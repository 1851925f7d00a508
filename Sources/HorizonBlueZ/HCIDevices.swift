import CBluetooth
import HorizonCore
import HorizonRadio

#if canImport(Glibc)
    import Glibc
#endif

/// One Bluetooth controller as the kernel knows it (libbluetooth's `hci_devinfo`), whether or not
/// bluetoothd runs. It tells "no adapter at all" from "bluetoothd is not running".
public struct HCIDevice: Sendable, Equatable {
    public let index: Int
    /// The kernel's name, e.g. `hci0`.
    public let name: String
    public let address: String
    /// Whether the controller is up (`hciconfig hci0 up`; bluetoothd powers it).
    public let isUp: Bool
}

/// The kernel's Bluetooth controllers.
public enum HCIDevices {
    /// What the kernel says, or why it cannot say.
    public enum Listing: Sendable, Equatable {
        case devices([HCIDevice])
        /// The kernel has no Bluetooth support (no `AF_BLUETOOTH` sockets).
        case noKernelSupport
    }

    /// Every controller the kernel has (indices 0 to 31, as `hciconfig` looks).
    public static func list() -> Listing {
        let probe = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
        guard probe >= 0 else {
            return errno == EAFNOSUPPORT ? .noKernelSupport : .devices([])
        }
        close(probe)
        var devices: [HCIDevice] = []
        for index in 0..<32 {
            var info = hci_dev_info()
            guard hci_devinfo(Int32(index), &info) == 0 else { continue }
            let name = withUnsafeBytes(of: &info.name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            let address = withUnsafeBytes(of: &info.bdaddr) { raw in
                raw.reversed().map { [$0].hexString.uppercased() }.joined(separator: ":")
            }
            let isUp = info.flags & (1 << UInt32(HCI_UP)) != 0
            devices.append(HCIDevice(index: index, name: name, address: address, isUp: isUp))
        }
        return .devices(devices)
    }

    /// Why no usable adapter is reachable through bluetoothd, from the kernel's point of view:
    /// no controller at all is "unsupported" (plug in a dongle); a controller without bluetoothd
    /// is "service unavailable" (start bluetoothd).
    public static func availabilityWithoutBlueZ() -> AdapterAvailability {
        switch list() {
        case .noKernelSupport: .unsupported
        case .devices(let devices): devices.isEmpty ? .unsupported : .serviceUnavailable
        }
    }
}
