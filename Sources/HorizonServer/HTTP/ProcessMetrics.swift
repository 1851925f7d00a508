import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The server process's own figures in Prometheus's standard `process_*` names (those of the
/// official client libraries, so existing dashboards and alerts apply), read from `/proc` at
/// each scrape. Where there is no `/proc` (not Linux), there are none.
public enum ProcessMetrics {
    public struct Sample: Equatable, Sendable {
        public var residentBytes: Double
        public var virtualBytes: Double
        public var cpuSeconds: Double
        public var openFileDescriptors: Double
        public var maximumFileDescriptors: Double?
        public var startTimeSeconds: Double
        public var threads: Double
    }

    /// The Prometheus text exposition of this process's figures; empty without `/proc`.
    static func exposition() -> String {
        guard let sample = sample() else { return "" }
        var text = ""
        func add(_ name: String, _ type: String, _ help: String, _ value: Double) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(format(value))\n"
        }
        add(
            "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
            sample.cpuSeconds)
        add("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", sample.residentBytes)
        add("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", sample.virtualBytes)
        add("process_open_fds", "gauge", "Number of open file descriptors.", sample.openFileDescriptors)
        if let maximum = sample.maximumFileDescriptors {
            add("process_max_fds", "gauge", "Maximum number of open file descriptors.", maximum)
        }
        add(
            "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds.",
            sample.startTimeSeconds)
        add("process_threads", "gauge", "Number of OS threads in the process.", sample.threads)
        return text
    }

    /// Whole numbers without a fraction, others as Swift prints them (both valid Prometheus floats).
    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// This process's figures now, nil where `/proc` cannot be read.
    static func sample() -> Sample? {
        guard let stat = read("/proc/self/stat"), let status = read("/proc/self/status"),
            let systemStat = read("/proc/stat")
        else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard ticks > 0, let parsed = parse(stat: stat, status: status, systemStat: systemStat, ticksPerSecond: ticks)
        else { return nil }
        var sample = parsed
        sample.openFileDescriptors = Double(
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0)
        var limit = rlimit()
        #if os(Linux)
            let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        // rlim_t.max is "unlimited": then there is no maximum to report.
        if getrlimit(resource, &limit) == 0, limit.rlim_cur != rlim_t.max {
            sample.maximumFileDescriptors = Double(limit.rlim_cur)
        }
        return sample
    }

    /// The figures in the texts of `/proc/self/stat`, `/proc/self/status` and `/proc/stat` (the
    /// file descriptors are counted apart). nil when a text is not as the kernel writes it.
    public static func parse(stat: String, status: String, systemStat: String, ticksPerSecond: Double) -> Sample? {
        // The command name (field 2) is in parentheses and may contain spaces or ")": the fields
        // that follow start after the last ")".
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(whereSeparator: \.isWhitespace)
        // fields[0] is field 3 (state): field n is fields[n - 3].
        func field(_ number: Int) -> Double? {
            fields.indices.contains(number - 3) ? Double(fields[number - 3]) : nil
        }
        guard let userTicks = field(14), let systemTicks = field(15), let startTicks = field(22),
            let virtualBytes = field(23), let threads = field(20)
        else { return nil }
        func statusKilobytes(_ key: String) -> Double? {
            for line in status.split(separator: "\n") where line.hasPrefix(key + ":") {
                let value = line.dropFirst(key.count + 1).split(whereSeparator: \.isWhitespace).first
                return value.flatMap { Double($0) }.map { $0 * 1024 }
            }
            return nil
        }
        guard let resident = statusKilobytes("VmRSS") else { return nil }
        // The process started `startTicks` after the boot, which /proc/stat dates (btime).
        guard
            let bootLine = systemStat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let bootTime = Double(bootLine.dropFirst("btime ".count).trimmingCharacters(in: .whitespaces))
        else { return nil }
        return Sample(
            residentBytes: resident, virtualBytes: virtualBytes,
            cpuSeconds: (userTicks + systemTicks) / ticksPerSecond, openFileDescriptors: 0,
            maximumFileDescriptors: nil, startTimeSeconds: bootTime + startTicks / ticksPerSecond, threads: threads)
    }

    private static func read(_ path: String) -> String? {
        // /proc files report a size of 0: read until the end rather than by their size.
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}
