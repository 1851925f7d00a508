import Foundation
import HorizonTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The system-bus policy the terminal's package installs (`udev/org.horizon.Terminal.conf`),
/// loaded into a private dbus-daemon that denies what Debian's system bus denies: only the
/// terminal's service user (and root) may own `org.horizon.Terminal`, so no other program of the
/// machine can stand in for the terminal toward bluetoothd.
///
/// Another user is tried as `nobody` through `runuser`, which needs root: the test is skipped
/// elsewhere (CI runs as root).
@Suite("The terminal's D-Bus policy")
struct TerminalBusPolicyTests {
    static var canSwitchUsers: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-send")
    }

    @Test(.enabled(if: canSwitchUsers, "needs root, runuser and dbus-send"))
    func onlyTheServiceUserAndRootMayOwnTheTerminalsName() throws {
        let installed = try RepositoryFile.text("udev/org.horizon.Terminal.conf")
        #expect(installed.contains(#"<policy user="horizon">"#))
        // `nobody` stands for a desktop user in group `bluetooth` (a wallet's user, say): the
        // policy is loaded with `nobody`'s own group in that place.
        let group = try #require(Self.primaryGroup(of: "nobody"))
        let policy = installed.replacingOccurrences(of: #"group="bluetooth""#, with: "group=\"\(group)\"")
        #expect(policy != installed)

        let asInstalled = try PolicyBus(policy: policy)
        defer { asInstalled.stop() }
        #expect(try asInstalled.requestName(as: "nobody").contains("AccessDenied"), "another user owned the name")
        #expect(try asInstalled.requestName(as: nil).contains("uint32 1"), "root could not own the name")

        // The same bus with the file naming `nobody` as the service user: the refusal above was
        // the policy's, not the test bus's.
        let forNobody = try PolicyBus(
            policy: policy.replacingOccurrences(of: #"<policy user="horizon">"#, with: #"<policy user="nobody">"#))
        defer { forNobody.stop() }
        #expect(try forNobody.requestName(as: "nobody").contains("uint32 1"))
    }

    static func primaryGroup(of user: String) -> String? {
        guard let entry = getpwnam(user), let group = getgrgid(entry.pointee.pw_gid) else { return nil }
        return String(cString: group.pointee.gr_name)
    }
}

/// A dbus-daemon configured like Debian's system bus (every name and method call denied unless
/// a policy allows it) plus one policy file.
private final class PolicyBus {
    let directory: String
    let address: String
    private let process: Process

    init(policy: String) throws {
        // A plain path: a D-Bus address cannot hold spaces or parentheses unescaped, and `nobody`
        // must be able to reach the socket.
        directory = "/tmp/horizon-dbus-policy-\(UUID().uuidString.lowercased())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        chmod(directory, 0o755)
        let policyPath = directory + "/org.horizon.Terminal.conf"
        try policy.write(toFile: policyPath, atomically: true, encoding: .utf8)
        address = "unix:path=\(directory)/bus"
        let configuration = """
            <busconfig>
              <type>system</type>
              <listen>\(address)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <deny own="*"/>
                <deny send_type="method_call"/>
                <allow send_type="signal"/>
                <allow send_requested_reply="true" send_type="method_return"/>
                <allow send_requested_reply="true" send_type="error"/>
                <allow receive_type="method_call"/>
                <allow receive_type="method_return"/>
                <allow receive_type="error"/>
                <allow receive_type="signal"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
              </policy>
              <include>\(policyPath)</include>
            </busconfig>
            """
        let configurationPath = directory + "/bus.conf"
        try configuration.write(toFile: configurationPath, atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(configurationPath)", "--nofork", "--nopidfile"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.runCheckingDescriptors()
        let deadline = ContinuousClock.now + .seconds(5)
        while !FileManager.default.fileExists(atPath: directory + "/bus"), ContinuousClock.now < deadline {
            usleep(20_000)
        }
    }

    /// Asks the bus for `org.horizon.Terminal` as `user` (nil: this process's user, root) and
    /// returns what dbus-send printed, its error included.
    func requestName(as user: String?) throws -> String {
        let send = [
            "/usr/bin/dbus-send", "--bus=\(address)", "--print-reply", "--dest=org.freedesktop.DBus",
            "/org/freedesktop/DBus", "org.freedesktop.DBus.RequestName", "string:org.horizon.Terminal", "uint32:4",
        ]
        let process = Process()
        if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", user, "--"] + send
        } else {
            process.executableURL = URL(fileURLWithPath: send[0])
            process.arguments = Array(send.dropFirst())
        }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.runCheckingDescriptors()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
