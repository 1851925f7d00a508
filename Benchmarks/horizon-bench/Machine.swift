import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The machine a result came from, so numbers are compared like for like.
struct MachineDescription: Codable {
    let processors: Int
    let cpuModel: String
    let memoryTotalKiB: Int?
    let kernel: String
    let operatingSystem: String
    let build: String
    let compiler: String
    /// /proc/loadavg when the run started: other work on the machine skews every number.
    let loadAverage: String

    static func current() -> MachineDescription {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown"
        let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
        let memory =
            meminfo.split(separator: "\n").first { $0.hasPrefix("MemTotal:") }
            .flatMap { Int($0.filter(\.isNumber)) }
        let kernel =
            (try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
        let osRelease = (try? String(contentsOfFile: "/etc/os-release", encoding: .utf8)) ?? ""
        let system =
            osRelease.split(separator: "\n").first { $0.hasPrefix("PRETTY_NAME=") }
            .map { $0.dropFirst("PRETTY_NAME=".count).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
            ?? "unknown"
        #if DEBUG
            let build = "debug (numbers are not representative; use -c release)"
        #else
            let build = "release"
        #endif
        #if compiler(>=6.3)
            let compiler = "Swift 6.3 or newer"
        #else
            let compiler = "Swift older than 6.3"
        #endif
        return MachineDescription(
            processors: sysconf(Int32(_SC_NPROCESSORS_ONLN)), cpuModel: model, memoryTotalKiB: memory, kernel: kernel,
            operatingSystem: system, build: build, compiler: compiler,
            loadAverage: ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "unknown")
                .split(separator: " ").prefix(3).joined(separator: " "))
    }
}

/// The file system under a path, from /proc/mounts (SQLite's syncs cost what the file system
/// makes them cost: tmpfs nearly nothing, a disk much more).
func fileSystemName(of path: String) -> String {
    let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    let mounts = (try? String(contentsOfFile: "/proc/mounts", encoding: .utf8)) ?? ""
    var best: (mountPoint: String, type: String)?
    for line in mounts.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 3 else { continue }
        let mountPoint = String(fields[1])
        let isPrefix =
            mountPoint == "/" || resolved == mountPoint
            || resolved.hasPrefix(mountPoint.hasSuffix("/") ? mountPoint : mountPoint + "/")
        if isPrefix, mountPoint.count >= (best?.mountPoint.count ?? 0) { best = (mountPoint, String(fields[2])) }
    }
    return best.map { "\($0.type) (\($0.mountPoint))" } ?? "unknown"
}
