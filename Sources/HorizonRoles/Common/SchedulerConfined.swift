import Dispatch
import HorizonCore

/// State that only one scheduler's serial context reads and writes. That context runs one thing
/// at a time (the `Scheduler` contract), so the state needs no lock; what it needs is that every
/// access happens there, which debug builds check when the scheduler is a `RealTimeScheduler`
/// (on its queue). A virtual clock's context is whichever thread runs the simulation.
final class SchedulerConfined<Value>: @unchecked Sendable {
    private var value: Value
    private let scheduler: any Scheduler

    init(_ value: Value, on scheduler: any Scheduler) {
        self.value = value
        self.scheduler = scheduler
    }

    /// Runs `body` on the value; call it on the scheduler's context only, and not from within
    /// another access.
    func withValue<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure)
        -> Result
    {
        #if DEBUG
            if let realTime = scheduler as? RealTimeScheduler {
                dispatchPrecondition(condition: .onQueue(realTime.queue))
            }
        #endif
        return try body(&value)
    }
}
