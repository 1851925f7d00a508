import HorizonCore

/// State that only one scheduler's serial context reads and writes: an actor whose executor is
/// the scheduler, so the compiler lets nothing touch the value outside the actor's isolation,
/// and every synchronous entry (`withValue`, from a radio callback, a timer, or a reference-API
/// command that hopped onto the scheduler) is checked to run on that context, in every build
/// (the scheduler's `checkIsolated`: its queue for a `RealTimeScheduler`, the driving thread for
/// a simulation).
actor SchedulerConfined<Value> {
    private var value: Value
    private let scheduler: any Scheduler

    nonisolated var unownedExecutor: UnownedSerialExecutor { scheduler.asUnownedSerialExecutor() }

    init(_ value: Value, on scheduler: any Scheduler) {
        self.value = value
        self.scheduler = scheduler
    }

    /// Runs `body` on the value, on the scheduler's context (it traps elsewhere), and not from
    /// within another access.
    nonisolated func withValue<Result: Sendable, Failure: Error>(
        _ body: sending (inout Value) throws(Failure) -> Result
    ) throws(Failure)
        -> Result
    {
        try assumeIsolated { confined in
            Swift.Result { () throws(Failure) -> Result in try body(&confined.value) }
        }.get()
    }
}
