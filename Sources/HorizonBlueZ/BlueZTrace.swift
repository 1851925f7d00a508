#if canImport(Glibc)
    import Glibc
#endif

/// Troubleshooting output for the BlueZ radio: with `HORIZON_BLUEZ_TRACE=1` in the environment,
/// each D-Bus step it takes with bluetoothd (discovery, sightings, connects and their retries,
/// registrations, link open and close) is written to standard error with a monotonic timestamp.
enum BlueZTrace {
    static let isEnabled: Bool = getenv("HORIZON_BLUEZ_TRACE").map { String(cString: $0) == "1" } ?? false

    static func log(_ message: @autoclosure () -> String) {
        guard isEnabled else { return }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let stamp = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
        let line = Array("bluez-trace \(format3(stamp)) \(message())\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    private static func format3(_ value: Double) -> String {
        let milliseconds = Int64((value * 1000).rounded())
        let fraction = String(milliseconds % 1000)
        return "\(milliseconds / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }
}
