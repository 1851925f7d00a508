import Foundation
import Logging

/// Writes through `base` after ending a status line shown in place: a log line never continues it.
struct StatusAwareLogHandler: LogHandler {
    var base: StreamLogHandler

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }
    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        Console.endStatusLine()
        base.log(event: event)
    }
}

/// Sets up swift-log once: warnings by default, everything with --verbose, to standard error.
public enum Logs {
    nonisolated(unsafe) private static var bootstrapped = false

    public static func logger(_ label: String, verbose: Bool) -> Logger {
        if !bootstrapped {
            bootstrapped = true
            LoggingSystem.bootstrap { StatusAwareLogHandler(base: StreamLogHandler.standardError(label: $0)) }
        }
        var logger = Logger(label: label)
        logger.logLevel = verbose ? .debug : .warning
        return logger
    }

    /// The BlueZ radio's logger: the program's level, or `trace` (each D-Bus step with bluetoothd)
    /// with `HORIZON_BLUEZ_TRACE=1` in the environment.
    public static func bluezLogger(following program: Logger) -> Logger {
        var logger = Logger(label: "horizon.bluez")
        let trace = ProcessInfo.processInfo.environment["HORIZON_BLUEZ_TRACE"] == "1"
        logger.logLevel = trace ? .trace : program.logLevel
        return logger
    }
}
