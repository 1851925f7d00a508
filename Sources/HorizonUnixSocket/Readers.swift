/// What reading a line from a `UnixConnection` gave.
public enum LineRead: Sendable, Equatable {
    case line(String)
    /// The peer closed its side (or the connection was closed here) before a newline.
    case end
    /// The line grew past the reader's maximum length; it is refused, not buffered.
    case tooLong
}

/// The lines of one `UnixConnection`, in order; used by the one task that reads them.
public struct LineReader {
    private var chunks: AsyncStream<[UInt8]>.Iterator
    private var buffer: [UInt8] = []
    private var ended = false
    public let maximumLength: Int

    init(chunks: AsyncStream<[UInt8]>, maximumLength: Int) {
        self.chunks = chunks.makeAsyncIterator()
        self.maximumLength = maximumLength
    }

    /// The next line without its newline. At the end, a last line without a newline is still
    /// returned; the reader's task being cancelled ends it too.
    public mutating func next() async -> LineRead {
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                guard newline <= maximumLength else { return .tooLong }
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return .line(line)
            }
            if buffer.count > maximumLength { return .tooLong }
            guard !ended, let chunk = await chunks.next() else {
                ended = true
                guard !buffer.isEmpty else { return .end }
                defer { buffer.removeAll() }
                return .line(String(decoding: buffer, as: UTF8.self))
            }
            buffer.append(contentsOf: chunk)
        }
    }
}

/// What reading a frame from a `UnixConnection` gave.
public enum FrameRead: Sendable, Equatable {
    case frame([UInt8])
    /// The peer closed its side (or the connection was closed here); a partial frame is dropped.
    case end
    /// The frame announced more than the reader's maximum size: a protocol error.
    case tooLarge
}

/// The frames (see `UnixSocket.frame`) of one `UnixConnection`, in order; used by the one task
/// that reads them.
public struct FrameReader {
    private var chunks: AsyncStream<[UInt8]>.Iterator
    private var buffer: [UInt8] = []
    private var ended = false
    public let maximumSize: Int

    init(chunks: AsyncStream<[UInt8]>, maximumSize: Int) {
        self.chunks = chunks.makeAsyncIterator()
        self.maximumSize = maximumSize
    }

    public mutating func next() async -> FrameRead {
        while true {
            if buffer.count >= UnixSocket.frameHeaderSize {
                let length = UnixSocket.frameLength(buffer[...])
                guard length <= maximumSize else { return .tooLarge }
                let end = UnixSocket.frameHeaderSize + length
                if buffer.count >= end {
                    let frame = Array(buffer[UnixSocket.frameHeaderSize..<end])
                    buffer.removeSubrange(..<end)
                    return .frame(frame)
                }
            }
            guard !ended, let chunk = await chunks.next() else {
                ended = true
                return .end
            }
            buffer.append(contentsOf: chunk)
        }
    }
}
