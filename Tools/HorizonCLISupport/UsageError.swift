import ArgumentParser

extension CommandRunner {
    /// The message and usage for bad arguments. A check a command makes in `run()` (an amount
    /// in the terminal's currency, known only once its settings are read) shows that
    /// subcommand's usage, as ArgumentParser does for one made in `validate()`, not the root's.
    static func usageError<Root: ParsableCommand>(
        _ error: any Error, root: Root.Type, command: (any ParsableCommand.Type)?
    ) -> String {
        guard let command, command != root, error is ValidationError else { return root.fullMessage(for: error) }
        let usage = root.usageString(for: command)
        // The command's path is the usage's leading words, before its first argument or option.
        let path = usage.split(separator: " ").prefix { !"<[-".contains($0.first ?? "<") }.joined(separator: " ")
        return """
            Error: \(root.message(for: error))
            Usage: \(usage)
              See '\(path) --help' for more information.
            """
    }
}
