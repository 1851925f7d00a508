import Dispatch
import HorizonCore
import HorizonSimulatedRadio
import Testing

/// A simulation is the serial executor of the actors on it: their jobs are events of its clock,
/// so a seeded run still orders them, and nothing enters them from another thread while it runs.
@Suite("The simulation as an actor's executor")
struct SimulationExecutorTests {
    @Test func anActorsJobWaitsForTheRunAndFiresInIt() async throws {
        let simulation = RadioSimulation(seed: 1)
        simulation.run(for: .seconds(5))
        let probe = SimulationProbe(on: simulation)
        let task = Task { await probe.now() }
        while simulation.pendingEventCount == 0 { try await Task.sleep(for: .milliseconds(1)) }
        // Nothing runs between runs: the job is an event waiting for the clock.
        try await Task.sleep(for: .milliseconds(50))
        #expect(simulation.pendingEventCount == 1)
        simulation.run(for: .seconds(1))
        #expect(await task.value == Instant.zero + .seconds(5))
    }

    @Test func anotherThreadCannotEnterWhileTheSimulationRuns() async {
        await #expect(processExitsWith: .failure) {
            let simulation = RadioSimulation(seed: 1)
            let checked = DispatchSemaphore(value: 0)
            // The event waits (the run with it) while another thread checks.
            simulation.schedule(after: .zero) {
                DispatchQueue(label: "horizon.test.intruder").async {
                    simulation.checkIsolated()
                    checked.signal()
                }
                checked.wait()
            }
            simulation.run(for: .seconds(1))
        }
    }

    @Test func theThreadThatRunsItIsOnIt() {
        let simulation = RadioSimulation(seed: 1)
        let probe = SimulationProbe(on: simulation)
        simulation.schedule(after: .seconds(1)) { probe.assumeIsolated { $0.touched += 1 } }
        simulation.run(for: .seconds(2))
        #expect(probe.assumeIsolated { $0.touched } == 1)
    }
}

/// An actor on a simulation, as a role's driver is.
private actor SimulationProbe {
    let simulation: RadioSimulation
    var touched = 0

    nonisolated var unownedExecutor: UnownedSerialExecutor { simulation.asUnownedSerialExecutor() }

    init(on simulation: RadioSimulation) { self.simulation = simulation }

    func now() -> Instant { simulation.now }
}
