import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The clocks a benchmark reads. CPU time is the whole process's (every thread, user and
/// kernel), as the budget counts it; wall time is the monotonic clock.
enum Clocks {
    /// Process CPU time in nanoseconds (`CLOCK_PROCESS_CPUTIME_ID`: user + system, all threads).
    static func processCPU() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    /// Monotonic wall time in nanoseconds.
    static func wall() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    /// User and system CPU time of the process, microseconds (`getrusage`). The kernel splits
    /// the total between the two by sampling, so only sums over many payments mean much.
    static func usage() -> (user: Int64, system: Int64) {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return (
            Int64(usage.ru_utime.tv_sec) * 1_000_000 + Int64(usage.ru_utime.tv_usec),
            Int64(usage.ru_stime.tv_sec) * 1_000_000 + Int64(usage.ru_stime.tv_usec)
        )
    }
}

/// Median and spread of repeated readings, in the unit its field name says.
struct Summary: Codable, Sendable {
    let count: Int
    let median: Double
    let p10: Double
    let p90: Double
    let p99: Double
    let min: Double
    let max: Double
    let mean: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        count = sorted.count
        guard let first = sorted.first, let last = sorted.last else {
            median = .nan
            p10 = .nan
            p90 = .nan
            p99 = .nan
            min = .nan
            max = .nan
            mean = .nan
            return
        }
        median = Self.percentile(sorted, 0.5)
        p10 = Self.percentile(sorted, 0.1)
        p90 = Self.percentile(sorted, 0.9)
        p99 = Self.percentile(sorted, 0.99)
        min = first
        max = last
        mean = sorted.reduce(0, +) / Double(sorted.count)
    }

    init(_ values: [Int]) { self.init(values.map(Double.init)) }

    /// Linear interpolation between the closest ranks.
    private static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        let position = fraction * Double(sorted.count - 1)
        let lower = Int(position.rounded(.down))
        let upper = Swift.min(lower + 1, sorted.count - 1)
        let weight = position - Double(lower)
        return sorted[lower] * (1 - weight) + sorted[upper] * weight
    }
}

/// Progress for people watching: standard error, so the table on standard output stays clean.
enum Progress {
    static func note(_ text: String) {
        FileHandle.standardError.write(Data(("horizon-bench: " + text + "\n").utf8))
    }
}

/// A benchmark that could not run as planned; the message says what happened.
struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Double {
    /// Fixed decimals for the table.
    func formatted(_ decimals: Int) -> String {
        guard isFinite else { return "n/a" }
        return String(format: "%.\(decimals)f", self)
    }
}
