import ArgumentParser
import Foundation
import HorizonCore

#if canImport(Glibc)
    import Glibc
#endif

/// Output for people and for programs: one updating status line on a terminal, plain lines
/// otherwise, and JSON when asked.
public final class Console: @unchecked Sendable {
    public let isTerminal: Bool
    private let lock = NSLock()
    /// One status line per process, whichever console drew it: a log line ends it first.
    nonisolated(unsafe) private static var statusShown = false
    private static let statusLock = NSLock()

    public init() { isTerminal = isatty(STDOUT_FILENO) == 1 }

    /// Shows `text` as the current status: in place on a terminal, a new line otherwise.
    public func status(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        if isTerminal {
            Self.statusLock.withLock {
                FileHandle.standardOutput.write(Data(("\r\u{1B}[2K" + text).utf8))
                Self.statusShown = true
            }
        } else {
            FileHandle.standardOutput.write(Data((text + "\n").utf8))
        }
    }

    /// Prints a line, ending any status line first.
    public func line(_ text: String = "") {
        lock.lock()
        defer { lock.unlock() }
        Self.endStatusLine()
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    /// Ends the status line shown in place, if any, so that what is written next (a line, a log
    /// line on standard error) starts on a line of its own instead of being glued to it.
    public static func endStatusLine() {
        statusLock.withLock {
            if statusShown {
                FileHandle.standardOutput.write(Data("\n".utf8))
                statusShown = false
            }
        }
    }

    /// Redraws a block of lines in place (the scan table) on a terminal; prints it otherwise.
    public func redraw(_ lines: [String], previousLineCount: Int) {
        lock.lock()
        defer { lock.unlock() }
        var output = ""
        if isTerminal, previousLineCount > 0 { output += "\u{1B}[\(previousLineCount)A" }
        for line in lines { output += (isTerminal ? "\u{1B}[2K" : "") + line + "\n" }
        FileHandle.standardOutput.write(Data(output.utf8))
    }

    public func json<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(value)
        line(String(decoding: data, as: UTF8.self))
    }

    /// Asks a yes/no question; anything but y/yes (or end of input) is no. Waits for the answer
    /// without holding a thread, so cancelling the calling task (Ctrl-C) ends the question: no.
    public func confirm(_ question: String) async -> Bool {
        line()
        FileHandle.standardOutput.write(Data((question + " [y/N] ").utf8))
        guard let answer = await StandardInput.line() else { return false }
        return ["y", "yes"].contains(answer.trimmingCharacters(in: .whitespaces).lowercased())
    }
}

/// Runs `body` when SIGINT or SIGTERM arrives (instead of dying), once per signal.
public final class InterruptHandler: @unchecked Sendable {
    private var sources: [any DispatchSourceSignal] = []

    public init(queue: DispatchQueue = .main, _ body: @escaping @Sendable (Int32) -> Void) {
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler { body(signalNumber) }
            source.resume()
            sources.append(source)
        }
    }
}

/// Amounts and currencies typed on the command line: bad input is a usage error (exit 2).
public enum AmountArgument {
    public static func currency(_ code: String) throws -> Currency {
        guard let currency = try? Currency(code: code.uppercased()) else {
            throw ValidationError("unsupported currency '\(code)'; use an ISO 4217 code such as EUR, USD, JPY")
        }
        return currency
    }

    /// Refuses text that is no amount in any currency (e.g. `abc`, `-3`, `1,50`), for the
    /// checks made before the currency is known; the currency's decimals are checked later.
    public static func checkAmountSyntax(_ text: String, option: String? = nil) throws {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let digits = parts.allSatisfy { part in !part.isEmpty && part.allSatisfy { $0.isASCII && $0.isNumber } }
        guard digits, parts[0].count <= 16 else {
            throw ValidationError(
                (option.map { "\($0): " } ?? "")
                    + "'\(text)' is not an amount; write digits with an optional '.', e.g. 12.50")
        }
    }

    /// `text` in `currency` (its ISO 4217 exponent; nothing is rounded). `option` names the flag
    /// in the message, e.g. "--tip".
    public static func money(_ text: String, in currency: Currency, option: String? = nil) throws -> Money {
        do {
            return try Money.parse(text, currency: currency)
        } catch {
            throw ValidationError((option.map { "\($0): " } ?? "") + "\(error)")
        }
    }
}

/// Lines from standard input read as they become readable (a dispatch read source), not by a
/// thread blocked in `read`.
enum StandardInput {
    /// The next line, or nil at end of input or when the calling task is cancelled.
    static func line() async -> String? {
        let reader = LineReader(descriptor: STDIN_FILENO)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in reader.start(continuation) }
        } onCancel: {
            reader.finish(nil)
        }
    }

    private final class LineReader: @unchecked Sendable {
        private let descriptor: Int32
        private let queue = DispatchQueue(label: "horizon.stdin")
        private let lock = NSLock()
        private var source: (any DispatchSourceRead)?
        private var continuation: CheckedContinuation<String?, Never>?
        private var finished = false
        private var buffer: [UInt8] = []

        init(descriptor: Int32) { self.descriptor = descriptor }

        func start(_ continuation: CheckedContinuation<String?, Never>) {
            lock.lock()
            if finished {
                lock.unlock()
                continuation.resume(returning: nil)
                return
            }
            self.continuation = continuation
            // epoll cannot watch some descriptors (/dev/null: `< /dev/null`, a service's input), so
            // a read source would never fire and the question would wait forever. Reading them
            // never blocks: read at once (end of input there is an answer: no).
            guard Self.isWatchable(descriptor) else {
                lock.unlock()
                queue.async { [self] in readAvailable() }
                return
            }
            let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
            self.source = source
            lock.unlock()
            source.setEventHandler { [weak self] in self?.readAvailable() }
            source.resume()
        }

        /// Whether a read source can watch `descriptor`: not a character device other than a
        /// terminal (such as /dev/null).
        private static func isWatchable(_ descriptor: Int32) -> Bool {
            var status = stat()
            guard fstat(descriptor, &status) == 0 else { return true }
            return (status.st_mode & S_IFMT) != S_IFCHR || isatty(descriptor) == 1
        }

        private func readAvailable() {
            // One byte at a time: what follows the newline stays in the pipe for the next reader.
            var byte: UInt8 = 0
            while true {
                let count = read(descriptor, &byte, 1)
                if count <= 0 {
                    if count == 0 || (errno != EAGAIN && errno != EINTR) {
                        finish(buffer.isEmpty ? nil : String(decoding: buffer, as: UTF8.self))
                    }
                    return
                }
                if byte == UInt8(ascii: "\n") {
                    finish(String(decoding: buffer, as: UTF8.self))
                    return
                }
                buffer.append(byte)
                if buffer.count > 4096 {
                    finish(String(decoding: buffer, as: UTF8.self))
                    return
                }
            }
        }

        func finish(_ line: String?) {
            lock.lock()
            finished = true
            let continuation = self.continuation
            self.continuation = nil
            let source = self.source
            self.source = nil
            lock.unlock()
            source?.cancel()
            continuation?.resume(returning: line)
        }
    }
}
