import HorizonCore
import Testing

@testable import HorizonRoles

/// The terminal service's state lives on its scheduler without a lock (`SchedulerConfined`, an
/// actor whose executor is the scheduler); on a real-time scheduler every access is checked to
/// be on its queue, so a test that runs the service on one (RadioServerTests) also checks the
/// radio's callbacks arrive there.
@Suite("State confined to a scheduler's serial context")
struct SchedulerConfinedTests {
    @Test func theStateIsUsedOnTheSchedulersQueue() async {
        let scheduler = RealTimeScheduler(label: "horizon.test.confined")
        let counter = SchedulerConfined(0, on: scheduler)
        let value = await scheduler.perform {
            counter.withValue { value in
                value += 1
                return value
            }
        }
        #expect(value == 1)
    }

    @Test func anAccessOffTheQueueStopsTheProgramInEveryBuild() async {
        await #expect(processExitsWith: .failure) {
            let counter = SchedulerConfined(0, on: RealTimeScheduler(label: "horizon.test.confined"))
            _ = counter.withValue { $0 }
        }
    }

    @Test func anActorOnASchedulerRunsItsJobsOnTheSchedulersQueue() async {
        let scheduler = RealTimeScheduler(label: "horizon.test.confined")
        let probe = SchedulerProbe(on: scheduler)
        #expect(await probe.isOnTheQueue())
        #expect(await probe.count() == 1)
        // Code already on the queue (a timer, a radio callback) enters without a hop.
        let entered = await scheduler.perform { probe.assumeIsolated { $0.touched += 1 } }
        #expect(entered == ())
        #expect(await probe.count() == 3)
    }
}

/// An actor on a scheduler, as a role's driver is.
private actor SchedulerProbe {
    let scheduler: RealTimeScheduler
    var touched = 0

    nonisolated var unownedExecutor: UnownedSerialExecutor { scheduler.asUnownedSerialExecutor() }

    init(on scheduler: RealTimeScheduler) { self.scheduler = scheduler }

    func isOnTheQueue() -> Bool { scheduler.isCurrent }

    func count() -> Int {
        touched += 1
        return touched
    }
}
