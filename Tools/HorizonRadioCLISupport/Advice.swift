import HorizonCLISupport
import HorizonRadio
import HorizonRoles

// What a person at the command line can do about an error, in the programs' own terms (flags,
// commands). The libraries' errors say what is wrong; the advice lives here.

extension HostError {
    /// A sentence for the cashier, with what to do at this terminal.
    public func cliMessage(noun: String) -> String {
        switch self {
        case .radio(let cause): "Bluetooth is not available: \(BlueZAdvice.cliMessage(for: cause))."
        case .outcomeUnknown:
            humanized(noun: noun)
                + " Run horizon-terminal pay, redeem or serve to settle it (each recovers the journal first)."
        case .serverUnreachable:
            humanized(noun: noun)
                + " Once the server answers again, the next horizon-terminal pay, redeem or serve settles it first (horizon-terminal journal --unsettled lists it)."
        default: humanized(noun: noun)
        }
    }
}

extension PaymentClientError {
    /// The error, with what to do at this wallet.
    public var cliMessage: String {
        switch self {
        case .connectionFailed(let cause): "Could not connect to the terminal: \(BlueZAdvice.cliMessage(for: cause))."
        case .stillPending(let id):
            "request \(id) is pending: the terminal may have executed it. It is kept and asked for again by the next `horizon-wallet pay` or `redeem`; `horizon-wallet history` lists it."
        default: description
        }
    }
}

extension PaymentClientError {
    /// Signed and sent, outcome unknown: never to be reported as failed.
    public var isStillPending: Bool {
        if case .stillPending = self { true } else { false }
    }
}
