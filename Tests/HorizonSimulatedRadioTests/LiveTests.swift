import Dispatch
import Foundation
import HorizonCore
import HorizonSimulatedRadio
import Synchronization
import Testing

@Suite("A simulation running live beside async code")
struct LiveTests {
    /// More live simulations than the cooperative pool has threads, each waiting (as a virtual
    /// clock does) for external work that itself needs a pool thread, as HTTP clients and servers
    /// do. Were the drivers on the pool, they would hold every thread while their work waited for
    /// one; the work gives up after 60 s so that such a starvation fails the test instead of
    /// hanging the suite. (60, not less: in the whole parallel run other suites may hold the
    /// pool's threads for many seconds on a loaded machine; 5 s failed there once.)
    @Test func liveDriversWaitingForExternalWorkLeaveThePoolFree() async {
        let simulations = ProcessInfo.processInfo.activeProcessorCount + 2
        let results = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<simulations {
                group.addTask {
                    let simulation = RadioSimulation(seed: 1)
                    let result = Mutex<Int?>(nil)
                    simulation.schedule(after: .milliseconds(1)) {
                        simulation.runExternal(Self.workNeedingThePool) { value in
                            result.withLock { $0 = value }
                        }
                    }
                    return await simulation.live(speed: 10) {
                        while result.withLock({ $0 }) == nil {
                            try? await Task.sleep(for: .milliseconds(2))
                        }
                        return result.withLock { $0 } ?? -1
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results == Array(repeating: 1, count: simulations), "1: the pool served the work; 0: it starved")
    }

    /// 1 once a detached task (a job for the cooperative pool) has run; 0 if none ran within 60 s.
    @Sendable static func workNeedingThePool() async -> Int {
        let answered = Mutex(false)
        return await withCheckedContinuation { continuation in
            let answer: @Sendable (Int) -> Void = { value in
                let first = answered.withLock { answered in
                    defer { answered = true }
                    return !answered
                }
                if first { continuation.resume(returning: value) }
            }
            Task.detached { answer(1) }
            DispatchQueue.global().asyncAfter(deadline: .now() + 60) { answer(0) }
        }
    }
}
