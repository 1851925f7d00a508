import ArgumentParser

// The benchmark executable: an ArgumentParser command, see HorizonBench.swift.
// Parsed and run by hand: here both `HorizonBench.main()` and `run()` on an
// AsyncParsableCommand resolve to the synchronous versions, which would print the asynchronous
// `scale-out` subcommand's help instead of running it.
do {
    var command = try HorizonBench.parseAsRoot()
    if let scaleOut = command as? ScaleOut {
        try await scaleOut.drive()
    } else if let intentLatency = command as? IntentLatency {
        try await intentLatency.drive()
    } else {
        try command.run()
    }
} catch {
    HorizonBench.exit(withError: error)
}
