import HorizonCore

/// Where a payment client gets the daily token a terminal asks for when it cannot reach its
/// server, and records what it spent offline: `DailyTokenClient` (the reference's
/// `dailyTokenClient`), or a fake in tests.
public protocol OfflineTokenProvider: Sendable {
    /// The current token's signed bytes if one is valid now, nil otherwise.
    var presentableDailyToken: [UInt8]? { get }
    /// Lowers the remaining allowance by a payment the terminal accepted offline.
    func recordOfflineSpending(_ amount: Money)
    /// What the current token still allows offline; nil without a valid token.
    var remainingAllowance: Money? { get }
}
