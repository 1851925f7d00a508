/// The BlueZ part of issue 8: the same payment between two real `bluetoothd`s (the VM harness
/// in `Tools/bluez-vm/`, two virtual controllers). It is being built separately and is NOT
/// measured by this executable yet; the result file and the table carry a section saying so,
/// so a reader never mistakes the simulated numbers for BlueZ ones.
///
/// To add it: make `measure(_:)` start the VM harness (or attach to a running one), run
/// `--iterations` payments over it, and return a `BlueZResult` with `status: "measured"` and
/// its numbers in `measurements` (acceptance to receipt in wall time, CPU per payment of both
/// programs, frames and bytes as btmon counts them). `HorizonBench.run()` already calls it for
/// `--only bluez` and for full runs, and `Report` prints whatever `measurements` holds.
struct BlueZResult: Codable {
    let status: String
    let reason: String
    /// Named numbers, once measured (milliseconds, microseconds, bytes: the name says).
    let measurements: [String: Double]
}

enum BlueZ {
    static let notMeasured = "bluez: not measured in this run"

    static func measure(_ settings: BenchSettings) -> BlueZResult {
        _ = settings
        return BlueZResult(
            status: notMeasured,
            reason:
                "the BlueZ radio and its VM benchmark are being built separately (issue 5 and Tools/bluez-vm); every number in this file is from the simulated radio",
            measurements: [:])
    }
}
