import Crypto
import Foundation
import HorizonServerClient

/// The server side of registration and restoration, as the identity procedure needs it.
public protocol IdentityBackend: Sendable {
    /// Starts registering `key`; the server texts a PUK to the phone and mails an activation
    /// link. Returns the registration's id.
    func register(_ user: RegistrationUserData, invitationCode: String?, key: P256.Signing.PrivateKey) async throws
        -> String
    /// Gives the server the PUK, as `key` (the one being registered). Returns whether the
    /// registration is active (the link was confirmed already).
    func submitRegistrationPuk(id: String, puk: String, key: P256.Signing.PrivateKey) async throws -> Bool
    /// Whether the registration is active (both the PUK and the link proven), asked as `key`.
    func isRegistrationActive(id: String, key: P256.Signing.PrivateKey) async throws -> Bool
    /// Confirms the activation link as its page's button does.
    func confirmActivationLink(_ link: String) async throws
    /// Asks for a restoration PUK, texted to the phone of the account with this e-mail.
    /// Returns the restoration's id.
    func requestRestorationPuk(email: String, key: P256.Signing.PrivateKey) async throws -> String
    /// Gives the server the restoration's PUK, as `key`; it mails the reactivation token.
    func submitRestorationPuk(id: String, puk: String, key: P256.Signing.PrivateKey) async throws
    /// Moves the account to `key` with the mailed token; every other key is revoked.
    func reactivate(id: String, token: String, key: P256.Signing.PrivateKey) async throws
    /// Tells the server the account's key `key` is kept without a PIN (a pinless registration or
    /// restoration), so it limits its payments.
    func declarePinless(key: P256.Signing.PrivateKey) async throws
}

extension IdentityBackend {
    /// A backend without a server has nobody to tell.
    public func declarePinless(key: P256.Signing.PrivateKey) async throws {}
}

/// Where the device keeps its key: protected by a PIN, or by the device alone (pinless).
public protocol IdentityKeyVault: Sendable {
    func stored() throws -> StoredIdentity
    /// Stores `key`, replacing any before it; `pin` nil stores it pinless.
    func store(_ key: P256.Signing.PrivateKey, pin: String?) throws
    /// The stored key if `pin` opens it; nil if the PIN is wrong.
    func load(pin: String?) throws -> P256.Signing.PrivateKey?
    func discard() throws
}

/// A key vault whose PIN the server counts: the device keeps a `ServerSealedWalletKey` that opens
/// only with the share the server releases to a right PIN (`WalletPINClient`). `IdentityProcedure`
/// proves and applies PINs through it, so every wrong PIN is counted by the server and the
/// blocks are the server's.
public protocol ServerCountedKeyVault: IdentityKeyVault {
    /// The stored key, opened with the server's answer to a proof of `pin`.
    func unlock(pin: String) async throws(WalletPINError) -> P256.Signing.PrivateKey
    /// Protects `key` with `pin` from now on (the server keeps the PIN's verifier and share), or
    /// with none (`pin` nil: pinless, the server told, its payments limited).
    func protect(_ key: P256.Signing.PrivateKey, pin: String?) async throws(WalletPINError)
}

/// Why an identity call did not go through.
public enum IdentityProcedureError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Called in a state that does not take it; nothing changed.
    case refused(IdentityCallRefused)
    /// The step was tried and failed (a wrong PUK, a server that did not answer); the state
    /// says what may be tried next.
    case failed(String)

    public var description: String {
        switch self {
        case .refused(let refusal): refusal.description
        case .failed(let reason): reason
        }
    }
}

/// Drives `IdentityClientStateMachine`: runs its actions against the server and the key vault,
/// feeds their outcomes back, publishes every state on `states()`, and hands a ready key to the
/// `IdentityClient`, so every service client signs with it (and an invalidation the identity
/// client sees ends here too). Calls carry the reference's names.
public actor IdentityProcedure {
    public let identity: IdentityClient
    let backend: any IdentityBackend
    let vault: any IdentityKeyVault
    let clock: @Sendable () -> Int64
    private var machine = IdentityClientStateMachine()
    /// The key being registered or restored, until it is stored.
    private var pendingKey: P256.Signing.PrivateKey?
    private var continuations: [UUID: AsyncStream<IdentityClientState>.Continuation] = [:]
    private var wakeTask: Task<Void, Never>?

    public init(
        identity: IdentityClient, backend: any IdentityBackend, vault: any IdentityKeyVault,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.identity = identity
        self.backend = backend
        self.vault = vault
        self.clock = clock
    }

    /// The current state, by the reference's names.
    public var state: IdentityClientState { machine.name }

    /// Every state from now on, starting with the current one.
    public func states() -> AsyncStream<IdentityClientState> {
        let (stream, continuation) = AsyncStream.makeStream(of: IdentityClientState.self, bufferingPolicy: .unbounded)
        let id = UUID()
        continuations[id] = continuation
        continuation.yield(machine.name)
        continuation.onTermination = { [weak self] _ in Task { await self?.removeContinuation(id) } }
        return stream
    }

    private func removeContinuation(_ id: UUID) { continuations.removeValue(forKey: id) }

    // MARK: The reference's calls

    public func start() async throws(IdentityProcedureError) {
        let stored: StoredIdentity
        do { stored = try vault.stored() } catch { throw .failed("the stored key cannot be read: \(error)") }
        try await call { (machine) throws(IdentityCallRefused) in try machine.start(with: stored) }
    }
    public func requestStartRegistrationProcedure() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.requestStartRegistrationProcedure() }
    }
    public func requestStartPinlessRegistrationProcedure() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in
            try machine.requestStartPinlessRegistrationProcedure()
        }
    }
    public func requestRestoration() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.requestRestoration() }
    }
    public func requestPinlessRestoration() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.requestPinlessRestoration() }
    }
    public func choosePIN(_ pin: String) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.choosePIN(pin) }
    }
    public func confirmPIN(_ pin: String) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.confirmPIN(pin) }
    }
    public func retryChangeOfPIN() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.retryChangeOfPIN() }
    }
    public func prepareWalletUserData(_ user: RegistrationUserData) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.prepareWalletUserData(user) }
    }
    public func registerWithInvitationCode(_ code: String) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.registerWithInvitationCode(code) }
    }
    /// The reference's short-cut for `prepareWalletUserData` then `registerWithInvitationCode`.
    public func register(with user: RegistrationUserData, invitationCode: String?) async throws(IdentityProcedureError)
    {
        try await prepareWalletUserData(user)
        if let invitationCode {
            try await registerWithInvitationCode(invitationCode)
        } else {
            try await cancelEnteringInvitationCode()
        }
    }
    public func cancelEnteringInvitationCode() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.cancelEnteringInvitationCode() }
    }
    public func requestRegistrationWithPuk(_ puk: String) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.requestRegistrationWithPuk(puk) }
    }
    /// The link from the activation mail (on a phone, a tap on it).
    public func confirmActivation(link: String) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.confirmActivation(link: link) }
    }
    public func retryCheckActivationAgain() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.retryCheckActivationAgain() }
    }
    public func requestRestorationPukWithEmail(_ email: String) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.requestRestorationPukWithEmail(email) }
    }
    public func requestRestorationWithPuk(_ puk: String) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.requestRestorationWithPuk(puk) }
    }
    /// The token from the reactivation mail (on Linux there are no universal links: the person
    /// gives it to the wallet, as `horizon-wallet reactivate TOKEN` does).
    public func reactivateWithReactivationToken(_ token: String) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.reactivateWithReactivationToken(token) }
    }
    public func reactivatePinlessWithReactivationToken(_ token: String) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in
            try machine.reactivatePinlessWithReactivationToken(token)
        }
    }
    /// Whether a restoration is under way.
    public var reactivationInProgress: Bool { machine.reactivationInProgress }
    public func provePIN(_ pin: String) async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.provePIN(pin) }
    }
    public func requestChangeOfPIN() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.requestChangeOfPIN() }
    }
    public func deactivatePin() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.deactivatePin() }
    }
    public func cancelPINProof() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.cancelPINProof() }
    }
    public func lock() async throws(IdentityProcedureError) {
        try await call { (machine) throws(IdentityCallRefused) in try machine.lock() }
    }

    /// The server refused the key: the identity is dropped here and at the identity client.
    public func invalidate(reason: String) async {
        _ = try? await run(machine.handle(.invalidated(reason: reason)))
        publish()
    }

    // MARK: Running actions

    private func call(
        _ body: (inout IdentityClientStateMachine) throws(IdentityCallRefused) -> [IdentityClientStateMachine.Action]
    ) async throws(IdentityProcedureError) {
        let actions: [IdentityClientStateMachine.Action]
        do { actions = try body(&machine) } catch { throw .refused(error) }
        publish()
        try await run(actions)
    }

    /// Runs actions in order; each outcome goes back into the machine, whose new actions run
    /// next. The first reason reported is thrown once all have run.
    private func run(_ actions: [IdentityClientStateMachine.Action]) async throws(IdentityProcedureError) {
        var queue = actions
        var report: String?
        while !queue.isEmpty {
            let action = queue.removeFirst()
            if case .report(let reason) = action {
                report = report ?? reason
                continue
            }
            if let event = await perform(action) {
                queue += machine.handle(event)
                publish()
            }
        }
        if let report { throw .failed(report) }
    }

    private func perform(_ action: IdentityClientStateMachine.Action) async -> IdentityClientStateMachine.Event? {
        do {
            switch action {
            case .createIdentity:
                pendingKey = P256.Signing.PrivateKey()
                return .identityCreated
            case .register(let user, let invitationCode):
                guard let key = pendingKey else { return .failed(reason: "no key was made for this registration") }
                return .registrationStarted(
                    id: try await backend.register(user, invitationCode: invitationCode, key: key))
            case .submitPuk(let id, let puk):
                guard let key = pendingKey else { return .failed(reason: "no key was made for this registration") }
                return .activationChecked(active: try await backend.submitRegistrationPuk(id: id, puk: puk, key: key))
            case .checkActivation(let id):
                guard let key = pendingKey else { return .failed(reason: "no key was made for this registration") }
                return .activationChecked(active: try await backend.isRegistrationActive(id: id, key: key))
            case .confirmActivationLink(let id, let link):
                guard let key = pendingKey else { return .failed(reason: "no key was made for this registration") }
                try await backend.confirmActivationLink(link)
                return .activationChecked(active: try await backend.isRegistrationActive(id: id, key: key))
            case .requestRestorationPuk(let email):
                guard let key = pendingKey else { return .failed(reason: "no key was made for this restoration") }
                return .restorationPukSent(id: try await backend.requestRestorationPuk(email: email, key: key))
            case .submitRestorationPuk(let id, let puk):
                guard let key = pendingKey else { return .failed(reason: "no key was made for this restoration") }
                try await backend.submitRestorationPuk(id: id, puk: puk, key: key)
                return .reactivationMailSent
            case .reactivate(let id, let token):
                guard let key = pendingKey else { return .failed(reason: "no key was made for this restoration") }
                try await backend.reactivate(id: id, token: token, key: key)
                return .activated
            case .storeIdentity(let pin):
                guard let key = pendingKey else { return .failed(reason: "no key was made to store") }
                if let counted = vault as? any ServerCountedKeyVault {
                    // Pinless, it tells the server itself.
                    try await counted.protect(key, pin: pin)
                } else {
                    try vault.store(key, pin: pin)
                    // The account is this key's now (registered or reactivated): a pinless one
                    // is limited by the server only once it is told.
                    if pin == nil { try await backend.declarePinless(key: key) }
                }
                pendingKey = nil
                await identity.setSigningKey(key)
                return .identityStored
            case .verifyPIN(let pin):
                if let counted = vault as? any ServerCountedKeyVault {
                    return await verifyCountedPIN(pin, counted)
                }
                guard let key = try vault.load(pin: pin) else { return .pinRejected(at: clock()) }
                pendingKey = key
                return .pinVerified
            case .applyNewPIN(let pin):
                guard let key = pendingKey else {
                    return .failed(reason: "the key to protect is not in memory; give the PIN again")
                }
                if let counted = vault as? any ServerCountedKeyVault {
                    try await counted.protect(key, pin: pin)
                } else {
                    try vault.store(key, pin: pin)
                }
                pendingKey = nil
                return .newPINApplied
            case .forgetKey:
                pendingKey = nil
                identity.forgetSigningKey()
                return nil
            case .discardIdentity(let reason):
                pendingKey = nil
                try? vault.discard()
                await identity.invalidate(reason: reason)
                return nil
            case .publishReady:
                if let key = pendingKey {
                    pendingKey = nil
                    await identity.setSigningKey(key)
                } else if identity.publicKey == nil, let key = try vault.load(pin: nil) {
                    await identity.setSigningKey(key)
                }
                return nil
            case .wake(let time):
                scheduleWake(at: time)
                return nil
            case .report:
                return nil
            }
        } catch {
            return .failed(reason: "\(error)")
        }
    }

    /// A PIN proven to the server that counts: its answer, as the machine's event.
    private func verifyCountedPIN(_ pin: String, _ vault: any ServerCountedKeyVault) async
        -> IdentityClientStateMachine.Event
    {
        let now = clock()
        do {
            pendingKey = try await vault.unlock(pin: pin)
            return .pinVerified
        } catch .wrongPIN(_, let retryAfter) where retryAfter > 0 {
            return .pinBlocked(until: now + retryAfter, at: now)
        } catch .wrongPIN {
            return .pinRejected(at: now)
        } catch .backingOff(let retryAfter) {
            return .pinBlocked(until: now + retryAfter, at: now)
        } catch .blocked {
            return .pinBlocked(until: nil, at: now)
        } catch {
            return .failed(reason: error.description)
        }
    }

    private func scheduleWake(at time: Int64) {
        wakeTask?.cancel()
        let delay = max(0, time - clock())
        wakeTask = Task { [weak self, clock] in
            try? await Task.sleep(for: .seconds(delay))
            guard !Task.isCancelled, let self else { return }
            await self.timePassed(now: clock())
        }
    }

    /// Wakes the machine (the driver's timer does; tests call it with their clock).
    public func timePassed(now: Int64) async {
        _ = try? await run(machine.handle(.timePassed(now: now)))
        publish()
    }

    private func publish() {
        let name = machine.name
        for continuation in continuations.values { continuation.yield(name) }
    }
}

/// The server as the identity procedure's backend (`/v1/wallets/registrations`, `/restorations`):
/// a registration's e-mail is proven by the mailed activation link, its phone by the PUK; a
/// restoration's phone by its PUK, its e-mail by the mailed reactivation token. Every step after
/// the start is signed with the key being registered or restored.
public struct ServerIdentityBackend: IdentityBackend {
    public let serverURL: URL
    public let timeout: Duration

    public init(serverURL: URL, timeout: Duration = .seconds(10)) {
        self.serverURL = serverURL
        self.timeout = timeout
    }

    private var client: HorizonServerClient { HorizonServerClient(serverURL: serverURL, timeout: timeout) }

    public func register(_ user: RegistrationUserData, invitationCode: String?, key: P256.Signing.PrivateKey)
        async throws
        -> String
    {
        try await client.registerWalletWithActivationLink(
            name: user.name, email: user.email, phone: user.phone, invitationCode: invitationCode, key: key
        ).registrationId
    }

    public func submitRegistrationPuk(id: String, puk: String, key: P256.Signing.PrivateKey) async throws -> Bool {
        try await signed(by: key).submitRegistrationPuk(id: id, puk: puk).active
    }

    public func isRegistrationActive(id: String, key: P256.Signing.PrivateKey) async throws -> Bool {
        try await signed(by: key).registrationActivation(id: id).active
    }

    public func confirmActivationLink(_ link: String) async throws {
        try await client.confirmActivationLink(link, timeout: timeout)
    }

    private func signed(by key: P256.Signing.PrivateKey) -> HorizonServerClient {
        HorizonServerClient(serverURL: serverURL, signingKey: key, timeout: timeout)
    }

    public func requestRestorationPuk(email: String, key: P256.Signing.PrivateKey) async throws -> String {
        try await client.restoreWalletWithReactivationLink(email: email, key: key).registrationId
    }

    public func submitRestorationPuk(id: String, puk: String, key: P256.Signing.PrivateKey) async throws {
        _ = try await signed(by: key).submitRestorationPuk(id: id, puk: puk)
    }

    public func reactivate(id: String, token: String, key: P256.Signing.PrivateKey) async throws {
        _ = try await signed(by: key).reactivateWallet(id: id, token: token)
    }

    public func declarePinless(key: P256.Signing.PrivateKey) async throws {
        try await WalletPINClient(serverURL: serverURL, timeout: timeout).declarePinless(key)
    }
}
