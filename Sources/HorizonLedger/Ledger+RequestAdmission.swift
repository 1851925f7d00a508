import HorizonCore
import HorizonProtocol

/// The checks of a signed request that a payment makes in its own transaction, so that the
/// request commits once: its nonce (a replay is refused) and, unless it is not limited, one count
/// in its signing key's request window (over the limit is refused).
public struct RequestAdmission: Sendable {
    /// The request's nonce, and the key that signed it.
    public var nonce: String
    public var key: PublicKeyBytes
    /// When the request was received: its nonce's time.
    public var time: UnixTime
    /// How long, in seconds, nonces are remembered.
    public var nonceWindow: Int64
    /// The request window counted, or nil when the request is not limited.
    public var rateLimit: RateLimitCount?

    public init(nonce: String, key: PublicKeyBytes, time: UnixTime, nonceWindow: Int64, rateLimit: RateLimitCount?) {
        self.nonce = nonce
        self.key = key
        self.time = time
        self.nonceWindow = nonceWindow
        self.rateLimit = rateLimit
    }
}

/// One count in a fixed request window (`Ledger.countRequest`): refused above `limit`.
public struct RateLimitCount: Sendable {
    public var key: String
    public var windowStart: UnixTime
    public var limit: Int

    public init(key: String, windowStart: UnixTime, limit: Int) {
        self.key = key
        self.windowStart = windowStart
        self.limit = limit
    }
}

/// Why a request's checks refused it; nothing was executed.
public enum AdmissionRefusal: Sendable, Equatable {
    /// Its key used its nonce before.
    case replayed
    /// Its key sent more requests than its window allows.
    case overLimit
}

/// What a request with its checks did: executed, or refused by them.
public enum Admitted<Value: Sendable>: Sendable {
    case executed(Value)
    case refused(AdmissionRefusal)
}

extension Ledger {
    /// Makes a request's checks in the caller's transaction: nil when they admit it. A replay
    /// writes nothing; an over-limit request keeps its nonce and its count (the transaction
    /// commits them without the work), as a request refused on its own does.
    static func admit(_ admission: RequestAdmission, in db: any SQLTransaction)
        async throws(LedgerError) -> AdmissionRefusal?
    {
        guard try await insertNonce(admission.nonce, for: admission.key, at: admission.time, in: db) else {
            return .replayed
        }
        if let rate = admission.rateLimit,
            try await countRequest(key: rate.key, windowStart: rate.windowStart, in: db) > rate.limit
        {
            return .overLimit
        }
        return nil
    }
}
