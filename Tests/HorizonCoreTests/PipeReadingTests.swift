import Foundation
import Glibc
import HorizonTestSupport
import Synchronization
import Testing

/// The test support's pipe reader survives signals that interrupt its read. (Foundation's
/// `availableData` trapped on EINTR once in a whole-suite run, killing it; this test does not
/// reproduce that trap, which needs a signal at a moment it cannot aim for, but it holds the
/// replacement to what it promises.)
@Suite struct PipeReadingTests {
    @Test func aReadInterruptedByASignalIsRetried() throws {
        // A handler installed without SA_RESTART, so a blocked read() returns EINTR.
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        var previous = sigaction()
        #expect(sigaction(SIGUSR2, &action, &previous) == 0)
        defer { sigaction(SIGUSR2, &previous, nil) }

        let pipe = Pipe()
        let reader = Mutex<pthread_t?>(nil)
        let received = Mutex(Data())
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            reader.withLock { $0 = pthread_self() }
            received.withLock { $0 = pipe.fileHandleForReading.readAllUntilEndOfFile() }
            done.signal()
        }
        thread.start()
        while reader.withLock({ $0 }) == nil { usleep(1000) }
        usleep(50_000)  // the reader is blocked in read() by now
        for _ in 0..<5 {
            if let target = reader.withLock({ $0 }) { pthread_kill(target, SIGUSR2) }
            usleep(10_000)
        }
        pipe.fileHandleForWriting.write(Data("after the signals".utf8))
        try pipe.fileHandleForWriting.close()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(String(decoding: received.withLock { $0 }, as: UTF8.self) == "after the signals")
    }
}
