import HorizonCore
import Testing

@testable import HorizonRoles

/// The terminal service's state lives on its scheduler without a lock (`SchedulerConfined`); on
/// a real-time scheduler, debug builds check every access is on its queue, so a test that runs
/// the service on one (RadioServerTests) also checks the radio's callbacks arrive there.
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

    #if DEBUG
        @Test func anAccessOffTheQueueStopsADebugBuild() async {
            await #expect(processExitsWith: .failure) {
                let counter = SchedulerConfined(0, on: RealTimeScheduler(label: "horizon.test.confined"))
                _ = counter.withValue { $0 }
            }
        }
    #endif
}
