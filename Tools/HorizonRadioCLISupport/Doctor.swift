import Foundation
import HorizonBlueZ
import HorizonCLISupport
import HorizonRadio
import HorizonServerClient

#if canImport(Glibc)
    import Glibc
#endif

/// One line of `doctor`: what was checked, how it stands, and a sentence a person can act on.
public struct DoctorCheck: Sendable, Equatable {
    public enum Outcome: String, Sendable {
        case ok, warn, fail
    }

    public let outcome: Outcome
    public let subject: String
    public let sentence: String

    public init(_ outcome: Outcome, _ subject: String, _ sentence: String) {
        self.outcome = outcome
        self.subject = subject
        self.sentence = sentence
    }

    /// "ok    adapter    hci0 is present and powered on."
    public var line: String {
        outcome.rawValue.padding(toLength: 6, withPad: " ", startingAt: 0)
            + subject.padding(toLength: 13, withPad: " ", startingAt: 0) + sentence
    }
}

/// The checks both programs' `doctor` share: the radio, bluetoothd, the server and its clock,
/// the disk.
public enum Doctor {
    /// Prints the checks; throws (exit status 1) when one failed. Warnings do not fail.
    public static func report(_ checks: [DoctorCheck]) throws {
        for check in checks { print(check.line) }
        let failed = checks.filter { $0.outcome == .fail }.count
        if failed > 0 { throw CommandFailure("\(failed) of \(checks.count) checks failed", code: 1) }
    }

    /// Whether the adapter can be used: through bluetoothd over D-Bus with BlueZ; with the
    /// simulated radio there is none to check, and the line says so.
    public static func adapter(_ radio: RadioOptions) async -> DoctorCheck {
        guard radio.radio == .bluez else {
            return DoctorCheck(
                .ok, "adapter",
                "none needed: the simulated radio is used (socket \(radio.socketPath)); pass --radio bluez to check Bluetooth."
            )
        }
        let (adapter, availability) = await RadioOptions.blueZAvailability(adapter: radio.adapter)
        if availability == .poweredOn {
            return DoctorCheck(.ok, "adapter", "\(adapter ?? "the adapter") is present and powered on (BlueZ).")
        }
        return DoctorCheck(.fail, "adapter", "\(RadioError.adapterUnavailable(availability)).")
    }

    /// bluetoothd's version and what it means here (BlueZ only).
    public static func bluetoothd(_ radio: RadioOptions, servesAsTerminal: Bool) -> DoctorCheck {
        guard radio.radio == .bluez else {
            return DoctorCheck(.ok, "bluetoothd", "not used by the simulated radio.")
        }
        return BluetoothDaemon.check(version: BluetoothDaemon.installedVersion(), servesAsTerminal: servesAsTerminal)
    }

    /// Whether the server answers, and this clock against the server's (from its `Date` header).
    public static func server(_ url: URL) async -> [DoctorCheck] {
        let before = Date()
        let serverDate: Date
        do { serverDate = try await HorizonServerClient(serverURL: url).serverTime() } catch {
            let sentence: String
            switch error {
            case .timedOut: sentence = "\(url.absoluteString) does not answer: no answer within 5 s."
            // The client's sentence already names the server, the cause and what to check.
            case .unreachable(let text): sentence = text + "."
            default: sentence = "\(url.absoluteString) does not answer: \(error)."
            }
            return [
                DoctorCheck(.fail, "server", sentence),
                DoctorCheck(.warn, "clock", "not compared: the server does not answer."),
            ]
        }
        let after = Date()
        // The header has whole seconds: the server's clock was within the second it names.
        let local = before.addingTimeInterval(after.timeIntervalSince(before) / 2)
        let skew = local.timeIntervalSince(serverDate.addingTimeInterval(0.5))
        return [
            DoctorCheck(
                .ok, "server",
                "\(url.absoluteString) answers (\(Int((after.timeIntervalSince(before) * 1000).rounded())) ms)."),
            clock(skew: skew),
        ]
    }

    /// Within 5 s is fine; signed requests, credentials and daily tokens are judged by the clock,
    /// and the server refuses a signature outside its window (300 s unless set otherwise).
    public static func clock(skew: TimeInterval) -> DoctorCheck {
        let seconds = Int(skew.magnitude.rounded())
        let direction = skew > 0 ? "ahead of" : "behind"
        if seconds <= 5 { return DoctorCheck(.ok, "clock", "agrees with the server's (within \(max(seconds, 1)) s).") }
        let text = "\(seconds) s \(direction) the server's"
        if seconds <= 120 {
            return DoctorCheck(.warn, "clock", "\(text): set up time synchronisation (systemd-timesyncd or chrony).")
        }
        return DoctorCheck(
            .fail, "clock",
            "\(text): the server refuses signed requests outside its window (300 s by default); synchronise the clock.")
    }

    /// Free space where the data directory is (or would be).
    public static func disk(_ directory: DataDirectory) -> DoctorCheck {
        var url = directory.url
        while !FileManager.default.fileExists(atPath: url.path), url.path != "/" { url.deleteLastPathComponent() }
        var stats = statvfs()
        guard statvfs(url.path, &stats) == 0 else {
            return DoctorCheck(
                .fail, "disk", "cannot read the free space of \(url.path): \(String(cString: strerror(errno))).")
        }
        let free = Int64(stats.f_bavail) * Int64(stats.f_frsize)
        let megabytes = free / 1_000_000
        let text = "\(megabytes) MB free for \(directory.path)"
        if free < 16_000_000 {
            return DoctorCheck(.fail, "disk", "\(text): too little to record payments; free some space.")
        }
        if free < 256_000_000 { return DoctorCheck(.warn, "disk", "\(text): little room left; free some space.") }
        return DoctorCheck(.ok, "disk", "\(text).")
    }

    public static func date(_ time: Int64) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(time)))
    }
}

/// bluetoothd, the BlueZ daemon: its version decides how a terminal's notifications travel.
public enum BluetoothDaemon {
    /// Since 5.69 bluetoothd acquires a notification socket per subscribed device and sends what
    /// is written to it to that device only; before, to every subscribed device (see NotifySocket).
    public static let perDeviceNotificationsSince = (major: 5, minor: 69)

    /// The installed bluetoothd's version ("5.66"), from `bluetoothd --version` or, when the
    /// daemon is not where Debian and Fedora put it, `bluetoothctl --version`; nil when neither runs.
    public static func installedVersion() -> String? {
        let candidates = [
            ("/usr/libexec/bluetooth/bluetoothd", ["--version"]), ("/usr/lib/bluetooth/bluetoothd", ["--version"]),
            ("/usr/sbin/bluetoothd", ["--version"]), ("/usr/bin/bluetoothctl", ["--version"]),
        ]
        for (path, arguments) in candidates where FileManager.default.isExecutableFile(atPath: path) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            guard (try? process.run()) != nil else { continue }
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let text = String(decoding: data, as: UTF8.self)
            if let match = text.firstMatch(of: /(\d+)\.(\d+)/) { return String(match.0) }
        }
        return nil
    }

    public static func parse(_ version: String) -> (major: Int, minor: Int)? {
        guard let match = version.firstMatch(of: /(\d+)\.(\d+)/), let major = Int(match.1), let minor = Int(match.2)
        else { return nil }
        return (major, minor)
    }

    /// What the version means: for a terminal, whether a payment's notifications reach its own
    /// wallet only; a wallet (the central) receives its notifications on its own link either way.
    public static func check(version: String?, servesAsTerminal: Bool) -> DoctorCheck {
        guard let version, let (major, minor) = parse(version) else {
            return DoctorCheck(.fail, "bluetoothd", "not found: install BlueZ (Debian: apt install bluez).")
        }
        guard servesAsTerminal else {
            return DoctorCheck(
                .ok, "bluetoothd", "BlueZ \(version): the wallet receives notifications on its own link.")
        }
        let since = perDeviceNotificationsSince
        if (major, minor) >= (since.major, since.minor) {
            return DoctorCheck(
                .ok, "bluetoothd",
                "BlueZ \(version): each notification goes to its own wallet only (per-device since \(since.major).\(since.minor))."
            )
        }
        return DoctorCheck(
            .warn, "bluetoothd",
            "BlueZ \(version): notifications go to every connected wallet (per-device only since \(since.major).\(since.minor)); payments still work, link tags keep them apart, with more radio traffic when several wallets are near."
        )
    }
}
