import Foundation

/// The events of a terminal's payment-intent stream (`GET /v1/terminal/payment-intents/events`,
/// server-sent events): what the server writes and what the terminal reads, in one place.
///
/// - `event: ready` once connected, `data: {"terminalId": ...}`;
/// - `event: intent`, `id: <intent id>`, `data: {"id", "amount", "currency", "reference",
///   "expiresAt"}`: an intent waits for this terminal;
/// - `event: ended`, `data: {"id": ...}`: an intent pushed before was canceled, expired or
///   processed; a sale still running for it stops;
/// - comment lines (`: keep-alive`) at least every few seconds, so a dead connection shows.
public enum TerminalIntentEvents {
    public static let path = "/v1/terminal/payment-intents/events"

    /// An intent to collect, as pushed.
    public struct Intent: Codable, Sendable, Equatable {
        public let id: String
        public let amount: Int64
        public let currency: String
        public let reference: String
        public let expiresAt: Int64

        public init(id: String, amount: Int64, currency: String, reference: String, expiresAt: Int64) {
            self.id = id
            self.amount = amount
            self.currency = currency
            self.reference = reference
            self.expiresAt = expiresAt
        }
    }

    public enum Event: Sendable, Equatable {
        case ready(terminalID: String)
        case intent(Intent)
        case ended(id: String)
        case keepAlive
    }

    struct Ready: Codable { let terminalId: String }
    struct Ended: Codable { let id: String }

    /// The event as it goes on the wire.
    public static func encode(_ event: Event) -> String {
        func json(_ value: some Encodable) -> String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }
        switch event {
        case .ready(let terminal): return "event: ready\ndata: \(json(Ready(terminalId: terminal)))\n\n"
        case .intent(let intent): return "event: intent\nid: \(intent.id)\ndata: \(json(intent))\n\n"
        case .ended(let id): return "event: ended\ndata: \(json(Ended(id: id)))\n\n"
        case .keepAlive: return ": keep-alive\n\n"
        }
    }

    /// Reads events from text as it arrives in pieces: lines split anywhere, events ended by a
    /// blank line; unknown events are skipped, as the format asks.
    public struct Parser: Sendable {
        private var buffer: [UInt8] = []
        private var name = ""
        private var data = ""
        private var sawComment = false
        /// A line longer than this is not the server's: the connection is given up.
        public static let maximumLineBytes = 64 * 1024

        public init() {}

        public enum ParseError: Error, Equatable { case lineTooLong }

        /// The events completed by `bytes`.
        public mutating func feed(_ bytes: some Sequence<UInt8>) throws(ParseError) -> [Event] {
            buffer.append(contentsOf: bytes)
            var events: [Event] = []
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                var line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                if line.hasSuffix("\r") { line.removeLast() }
                if let event = take(line) { events.append(event) }
            }
            guard buffer.count <= Self.maximumLineBytes else { throw .lineTooLong }
            return events
        }

        private mutating func take(_ line: String) -> Event? {
            if line.isEmpty {
                defer { (name, data, sawComment) = ("", "", false) }
                return event()
            }
            if line.hasPrefix(":") {
                sawComment = true
                return nil
            }
            let field = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            var value = field.count > 1 ? String(field[1]) : ""
            if value.hasPrefix(" ") { value.removeFirst() }
            switch field[0] {
            case "event": name = value
            case "data": data += data.isEmpty ? value : "\n" + value
            default: break
            }
            return nil
        }

        private func event() -> Event? {
            let decoder = JSONDecoder()
            let bytes = Data(data.utf8)
            switch name {
            case "ready": return (try? decoder.decode(Ready.self, from: bytes)).map { .ready(terminalID: $0.terminalId) }
            case "intent": return (try? decoder.decode(Intent.self, from: bytes)).map { .intent($0) }
            case "ended": return (try? decoder.decode(Ended.self, from: bytes)).map { .ended(id: $0.id) }
            case "" where sawComment: return .keepAlive
            default: return nil
            }
        }
    }
}
