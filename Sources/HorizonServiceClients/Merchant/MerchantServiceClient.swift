import Crypto
import Foundation
import HorizonAPI

/// The merchant's service client (the reference SDK's `MerchantServiceClient`), async: the
/// register users (cashiers) with a selected one, the merchant's transactions, its loyalty
/// programs, its terminals and refunds, over the server's merchant service signed with the
/// terminal's own key.
///
/// ```swift
/// let merchant = MerchantServiceClient(serverURL: url, terminalKey: key)
/// try await merchant.start()                     // loads programs and register users
/// try await merchant.selectRegisterUser(id: "007")
/// let page = try await merchant.transactions(.init(type: .payment, limit: 20))
/// let admin = try await MerchantServiceClient.signIn(serverURL: url, email: email, password: password)
/// let refund = try await admin.refund(paymentID: id, amount: 150, currency: "EUR")  // the admin's only
/// ```
///
/// Identity events (`identityEvents`) tell an app when the terminal's identity is ready (the
/// server served a signed call after `start()`) and when it is invalidated (the server says the
/// terminal is revoked or unknown); the client then forgets what it had loaded (`reset()`).
public actor MerchantServiceClient {
    public typealias RegisterUser = Components.Schemas.RegisterUser
    public typealias Transaction = Components.Schemas.MerchantTransaction
    public typealias TransactionPage = Components.Schemas.MerchantTransactionPage
    public typealias TransactionDetails = Components.Schemas.MerchantTransactionDetails
    public typealias TransactionKind = Components.Schemas.TransactionKind
    public typealias Refund = Components.Schemas.Refund
    public typealias Terminal = Components.Schemas.MerchantTerminal
    public typealias BonusProgramDetails = Components.Schemas.BonusProgramDetails

    /// What the identity notifications say (the reference's `IdentityClientIdentityDidGetReady`
    /// and `IdentityClientDidInvalidateIdentity`).
    public enum IdentityEvent: Sendable, Equatable {
        case didGetReady
        /// The server refused the terminal's identity; `reason` is its error.
        case didInvalidateIdentity(reason: ServerClientError)
    }

    /// Which transactions to list, and where the page starts.
    public struct TransactionQuery: Sendable, Equatable {
        public var from: Date?
        public var to: Date?
        public var type: TransactionKind?
        public var registerUserID: String?
        public var limit: Int?
        /// The `nextCursor` of the page before.
        public var cursor: String?

        public init(
            from: Date? = nil, to: Date? = nil, type: TransactionKind? = nil, registerUserID: String? = nil,
            limit: Int? = nil, cursor: String? = nil
        ) {
            self.from = from
            self.to = to
            self.type = type
            self.registerUserID = registerUserID
            self.limit = limit
            self.cursor = cursor
        }
    }

    public nonisolated let identityEvents: AsyncStream<IdentityEvent>
    private let identityContinuation: AsyncStream<IdentityEvent>.Continuation
    private let server: HorizonServerClient

    public private(set) var isStarted = false
    public private(set) var isIdentityReady = false
    /// The register users as last fetched (by `start()`, `fetchRegisterUsers()` or a change).
    public private(set) var registerUsers: [RegisterUser] = []
    /// The cashier payments are made under (the reference's `selectedRegisterUserVehicle`).
    public private(set) var selectedRegisterUser: RegisterUser?
    public private(set) var hasBonusProgram = false
    public private(set) var hasGoldProgram = false
    public private(set) var hasCouponProgram = false
    /// The bonus rule as last fetched (`start()`, `updateBonusProgramDetails()`).
    public private(set) var bonusProgramDetails: BonusProgramDetails?

    /// A client over `server`, whose requests must be signed with an activated terminal's key.
    public init(server: HorizonServerClient) {
        self.server = server
        (identityEvents, identityContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(16))
    }

    /// A client of the server at `serverURL` for the terminal whose key is `terminalKey`.
    public init(serverURL: URL, terminalKey: P256.Signing.PrivateKey, timeout: Duration = .seconds(10)) {
        self.init(server: HorizonServerClient(serverURL: serverURL, signingKey: terminalKey, timeout: timeout))
    }

    /// A client for the merchant's admin, without a terminal: signs in with the
    /// admin's e-mail and password and carries the session (`lifetime`, 60 s to 8 h) with every call. Refusals are
    /// the server's (`invalid_credentials`, `account_locked`, `rate_limited`).
    public static func signIn(
        serverURL: URL, email: String, password: String, lifetime: Duration = .seconds(8 * 3600),
        timeout: Duration = .seconds(10)
    ) async throws(MerchantServiceError) -> MerchantServiceClient {
        let session: Components.Schemas.MerchantAdminSession
        do {
            session = try await HorizonServerClient(serverURL: serverURL, timeout: timeout).signInMerchantAdmin(
                email: email, password: password, lifetimeSeconds: lifetime.components.seconds)
        } catch {
            throw .server(error)
        }
        return MerchantServiceClient(
            server: HorizonServerClient(serverURL: serverURL, adminSessionToken: session.token, timeout: timeout))
    }

    /// Ends an admin session (a client from `signIn`); its token is refused from then on.
    public func signOut() async throws(MerchantServiceError) {
        do { try await server.signOutMerchantAdmin() } catch { throw .server(error) }
        isStarted = false
    }

    deinit { identityContinuation.finish() }

    // MARK: Start and stop

    /// Starts the client: loads the programs and the register users; the identity is ready
    /// when the server served them.
    public func start() async throws(MerchantServiceError) {
        isStarted = true
        do {
            try await loadPrograms()
            registerUsers = try await call { (server) async throws(ServerClientError) in
                try await server.registerUsers()
            }
        } catch {
            isStarted = false
            throw error
        }
    }

    /// Stops the client: calls throw `.stopped` until `start()`. What was loaded stays (see `reset()`).
    public func stop() { isStarted = false }

    /// Forgets everything loaded and the selected register user (after the identity was
    /// invalidated, or when another merchant's terminal takes over the device).
    public func reset() {
        registerUsers = []
        selectedRegisterUser = nil
        hasBonusProgram = false
        hasGoldProgram = false
        hasCouponProgram = false
        bonusProgramDetails = nil
        isIdentityReady = false
    }

    // MARK: Register users

    @discardableResult
    public func fetchRegisterUsers() async throws(MerchantServiceError) -> [RegisterUser] {
        registerUsers = try await call { (server) async throws(ServerClientError) in try await server.registerUsers() }
        if let selected = selectedRegisterUser {
            selectedRegisterUser = registerUsers.first { $0.id == selected.id }
        }
        return registerUsers
    }

    /// Adds a cashier with the merchant's own id for them (`register_user_exists` if taken).
    @discardableResult
    public func addRegisterUser(id: String, name: String) async throws(MerchantServiceError) -> RegisterUser {
        let user = try await call { (server) async throws(ServerClientError) in
            try await server.addRegisterUser(id: id, name: name)
        }
        registerUsers = (registerUsers.filter { $0.id != id } + [user]).sorted { $0.id < $1.id }
        return user
    }

    /// Renames a cashier (`register_user_not_found` if the merchant has no such id).
    @discardableResult
    public func renameRegisterUser(id: String, name: String) async throws(MerchantServiceError) -> RegisterUser {
        let user = try await call { (server) async throws(ServerClientError) in
            try await server.renameRegisterUser(id: id, name: name)
        }
        registerUsers = registerUsers.map { $0.id == id ? user : $0 }
        if selectedRegisterUser?.id == id { selectedRegisterUser = user }
        return user
    }

    public func removeRegisterUser(id: String) async throws(MerchantServiceError) {
        try await call { (server) async throws(ServerClientError) in try await server.removeRegisterUser(id: id) }
        registerUsers.removeAll { $0.id == id }
        if selectedRegisterUser?.id == id { selectedRegisterUser = nil }
    }

    /// Selects the cashier payments are made under, from the fetched list; nil clears it.
    public func selectRegisterUser(id: String?) throws(MerchantServiceError) {
        guard let id else {
            selectedRegisterUser = nil
            return
        }
        guard let user = registerUsers.first(where: { $0.id == id }) else { throw .unknownRegisterUser(id) }
        selectedRegisterUser = user
    }

    // MARK: Transactions and refunds

    /// One page of the merchant's transactions, newest first.
    public func transactions(_ query: TransactionQuery = TransactionQuery()) async throws(MerchantServiceError)
        -> TransactionPage
    {
        try await call { (server) async throws(ServerClientError) in
            try await server.merchantTransactions(
                limit: query.limit, cursor: query.cursor, from: query.from.map { Int64($0.timeIntervalSince1970) },
                to: query.to.map { Int64($0.timeIntervalSince1970.rounded(.up)) }, type: query.type,
                registerUser: query.registerUserID)
        }
    }

    /// One transaction with its refunds and what is left to refund.
    public func transaction(paymentID: String) async throws(MerchantServiceError) -> TransactionDetails {
        try await call { (server) async throws(ServerClientError) in
            try await server.merchantTransaction(paymentID: paymentID)
        }
    }

    /// Refunds `amount` minor units of a payment to the method it was paid with. `refundID` is
    /// the idempotency key: keep it to retry after a lost answer (the same id and terms get the
    /// stored refund; other terms `idempotency_conflict`). Only a client signed in as the
    /// merchant's admin (`signIn`) may refund: a terminal's key gets `admin_required`.
    public func refund(paymentID: String, amount: Int64, currency: String, refundID: String)
        async throws(MerchantServiceError) -> Refund
    {
        try await call { (server) async throws(ServerClientError) in
            try await server.createRefund(refundID: refundID, paymentID: paymentID, amount: amount, currency: currency)
        }
    }

    public func refunds(paymentID: String) async throws(MerchantServiceError) -> [Refund] {
        try await call { (server) async throws(ServerClientError) in try await server.refunds(paymentID: paymentID) }
    }

    /// A new refund id (`r_` and 32 hex digits) for a refund the caller will retry with the same id.
    public nonisolated static func makeRefundID() -> String {
        "r_" + (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    // MARK: Programs

    /// Fetches the bonus program's details (and the program flags) again.
    @discardableResult
    public func updateBonusProgramDetails() async throws(MerchantServiceError) -> BonusProgramDetails {
        try await loadPrograms()
        guard let details = bonusProgramDetails else { throw .server(.invalidResponse("no bonus program details")) }
        return details
    }

    private func loadPrograms() async throws(MerchantServiceError) {
        let programs = try await call { (server) async throws(ServerClientError) in try await server.merchantPrograms()
        }
        hasBonusProgram = programs.hasBonusProgram
        hasGoldProgram = programs.hasGoldProgram
        hasCouponProgram = programs.hasCouponProgram
        bonusProgramDetails = programs.bonusProgram
    }

    // MARK: Terminals

    public func terminals() async throws(MerchantServiceError) -> [Terminal] {
        try await call { (server) async throws(ServerClientError) in try await server.merchantTerminals() }
    }

    /// Revokes one of the merchant's terminals; its identity is then invalidated by the
    /// server's next answer to it. Only the merchant's admin (`signIn`) may revoke: a terminal's
    /// key gets `admin_required`.
    @discardableResult
    public func revokeTerminal(id: String) async throws(MerchantServiceError) -> Terminal {
        try await call { (server) async throws(ServerClientError) in try await server.revokeTerminal(id: id) }
    }

    // MARK: Plumbing

    /// Runs one server call for a started client, and tells identity listeners what its
    /// answer means for the terminal's identity.
    private func call<T: Sendable>(_ body: @Sendable (HorizonServerClient) async throws(ServerClientError) -> T)
        async throws(MerchantServiceError) -> T
    {
        guard isStarted else { throw .stopped }
        do {
            let value = try await body(server)
            if !isIdentityReady {
                isIdentityReady = true
                identityContinuation.yield(.didGetReady)
            }
            return value
        } catch {
            if let code = error.code, ["terminal_revoked", "terminal_unknown"].contains(code) {
                // Told every time the server says so, not only after a ready: an app started
                // with a revoked key must learn it too.
                reset()
                identityContinuation.yield(.didInvalidateIdentity(reason: error))
            }
            throw .server(error)
        }
    }
}

/// Why a `MerchantServiceClient` call gave no answer.
public enum MerchantServiceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The client is stopped (or was never started): call `start()`.
    case stopped
    /// `selectRegisterUser(id:)` named an id that is not in the fetched list.
    case unknownRegisterUser(String)
    /// The server refused or could not be reached; the cause as the server client reported it.
    case server(ServerClientError)

    /// The server's stable error code, when it answered with one.
    public var code: String? { if case .server(let error) = self { error.code } else { nil } }

    public var description: String {
        switch self {
        case .stopped: "the merchant service client is stopped; call start() first"
        case .unknownRegisterUser(let id):
            "there is no register user \(id); fetch the register users, or add \(id) first"
        case .server(let error): error.description
        }
    }
}
