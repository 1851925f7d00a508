import Logging
import Synchronization

/// Keeps every line a logger made from it receives.
public final class LogRecorder: Sendable {
    public struct Line: Sendable {
        public let level: Logger.Level
        public let message: String
        public let metadata: [String: String]
    }

    private let lines = Mutex<[Line]>([])

    public init() {}

    public func logger(level: Logger.Level) -> Logger {
        var logger = Logger(label: "test") { _ in Handler(recorder: self) }
        logger.logLevel = level
        return logger
    }

    public func first(_ message: String) -> Line? { lines.withLock { $0.first { $0.message == message } } }

    fileprivate func record(_ line: Line) { lines.withLock { $0.append(line) } }

    fileprivate func linesSnapshot() -> [Line] { lines.withLock { $0 } }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(
            level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String,
            function: String, line: UInt
        ) {
            var merged = self.metadata
            for (key, value) in metadata ?? [:] { merged[key] = value }
            recorder.record(Line(level: level, message: "\(message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}

extension LogRecorder {
    /// Every line recorded so far.
    public var all: [Line] { linesSnapshot() }
}
