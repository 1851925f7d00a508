import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension FileHandle {
    /// Reads until end of file, handing each chunk to `chunk` as it arrives. Foundation's
    /// `availableData` and `readDataToEndOfFile()` trap when a read is interrupted by a signal
    /// (EINTR), which the children the tests start make likely: their SIGCHLD reaches any thread.
    /// This retries an interrupted read instead; a real read error ends the reading like EOF.
    public func readUntilEndOfFile(_ chunk: (Data) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fileDescriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                chunk(Data(buffer[0..<count]))
            } else if count < 0, errno == EINTR {
                continue
            } else {
                return
            }
        }
    }

    /// Everything until end of file (see `readUntilEndOfFile(_:)`).
    public func readAllUntilEndOfFile() -> Data {
        var data = Data()
        readUntilEndOfFile { data.append($0) }
        return data
    }
}
