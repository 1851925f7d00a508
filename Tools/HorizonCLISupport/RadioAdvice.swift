import HorizonRadio

// What a person at the command line can do about a radio error, in the programs' own terms; every
// program's runner reports radio errors this way (the rest of the advice is in
// HorizonRadioCLISupport).

extension RadioError {
    /// The error, then what to do about it here.
    public var cliMessage: String {
        switch self {
        case .adapterUnavailable(.unsupported): "\(description), or use --radio simulated"
        default: description
        }
    }
}
