import Foundation
import HorizonCore
import HorizonProtocol
import HorizonStores

/// Crash tests' way to stop a terminal at a chosen step, as a power cut would: with
/// `HORIZON_CRASH_AFTER_SETTLE=1` in its environment, the terminal kills itself (SIGKILL, no
/// clean-up) right after the ledger committed a payment and before the receipt leaves. Without
/// the variable the ledger is used as it is.
public enum CrashInjection {
    public static let afterSettleVariable = "HORIZON_CRASH_AFTER_SETTLE"

    public static func processor(wrapping ledger: any PaymentProcessor) -> any PaymentProcessor {
        guard ProcessInfo.processInfo.environment[afterSettleVariable] == "1" else { return ledger }
        return CrashAfterSettle(ledger: ledger)
    }
}

private struct CrashAfterSettle: PaymentProcessor {
    let ledger: any PaymentProcessor

    func settle(_ request: SettlementRequest, at time: UnixTime) throws(ProcessorError) -> SettlementResult {
        let result = try ledger.settle(request, at: time)
        FileHandle.standardError.write(Data("crash injection: killed after settling \(request.paymentID)\n".utf8))
        kill(getpid(), SIGKILL)
        return result
    }

    func result(for paymentID: PaymentID) throws(ProcessorError) -> SettlementResult? {
        try ledger.result(for: paymentID)
    }
}
