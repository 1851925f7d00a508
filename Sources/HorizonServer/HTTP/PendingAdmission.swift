import HorizonLedger
import Synchronization

/// A signed request's replay and rate checks, left by `SignedRequestMiddleware` for the
/// operation to make in its own ledger transaction (a payment: one commit instead of three).
/// Whatever the operation does not make in a transaction that committed, the middleware makes
/// on its own before the answer leaves (`admitSeparately`), so every request is checked once.
final class PendingAdmission: Sendable {
    let admission: RequestAdmission
    private let separately: @Sendable () async throws -> Void
    private let refusalError: @Sendable (AdmissionRefusal) -> any Error
    private let done = Mutex(false)

    init(
        _ admission: RequestAdmission, separately: @escaping @Sendable () async throws -> Void,
        refusal: @escaping @Sendable (AdmissionRefusal) -> any Error
    ) {
        self.admission = admission
        self.separately = separately
        self.refusalError = refusal
    }

    /// The checks, unless they were made already.
    var pending: RequestAdmission? { done.withLock { $0 } ? nil : admission }

    /// The checks were made in a transaction that committed.
    func markMade() { done.withLock { $0 = true } }

    /// The answer to a request the checks refused.
    func refusal(_ reason: AdmissionRefusal) -> any Error { refusalError(reason) }

    /// Makes the checks on their own (each its own statement, as for any signed request) unless
    /// they were made: before an operation's effect outside the ledger, or after an operation
    /// that failed; throws the refusal.
    func admitSeparately() async throws {
        guard
            done.withLock({ made in
                defer { made = true }
                return !made
            })
        else { return }
        try await separately()
    }
}
