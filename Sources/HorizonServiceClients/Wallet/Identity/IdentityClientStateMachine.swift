/// Where the wallet's identity stands, by the reference SDK's `IdentityClientState` names.
public enum IdentityClientState: String, Sendable, Equatable, CaseIterable {
    /// `start` was not called yet.
    case uninitialised
    /// No identity on this device: register, or restore one registered before.
    case awaitingUserRegistrationDecision
    /// A new PIN is asked for (registration, restoration or a change of PIN).
    case awaitingUserPINChoice
    /// The new PIN is asked for again.
    case awaitingUserPINConfirmation
    /// The two entries differed; `retryChangeOfPIN` asks again.
    case failedUserPINConfirmation
    /// The device's key is being made.
    case creatingIdentity
    /// The person's name, e-mail address and phone number are asked for.
    case awaitingUserRegistration
    /// An invitation code may be entered (or skipped with `cancelEnteringInvitationCode`).
    case awaitingInvitationCode
    /// The registration (or its PUK) is with the server.
    case acquiringRegistration
    /// The PUK the server texted to the phone is asked for.
    case awaitingRegistrationPuk
    /// The e-mail address is to be confirmed: the person opens the activation mail's link and
    /// presses its button (or gives the link to the wallet, `confirmActivation`).
    case awaitingActivation
    /// The server is asked whether the account is active.
    case aquiringPingActivationResponse
    /// Restoration: the account's e-mail address is asked for.
    case awaitingRestorationEmail
    /// Restoration: the server is asked to send the restoration PUK.
    case sendingRestorationPukRequest
    /// Restoration: the PUK from the restoration mail is asked for.
    case awaitingRestorationPuk
    /// Restoration: the PUK is with the server, which mails the reactivation token.
    case acquiringReactivationMail
    /// Restoration: the reactivation token from the mail is asked for
    /// (`reactivateWithReactivationToken`; on a phone a tap on the mail's link gives it).
    case awaitingMailReactivationToken
    /// Restoration: the server moves the account to this device's key.
    case acquiringReactivationResponse
    /// The PIN is asked for to prove it is the person (before changing or removing the PIN).
    case awaitingUserPINProof
    /// The PIN given was wrong; it may be given again.
    case failedUserPINProof
    /// Too many wrong PINs: no PIN is taken until the back-off ends.
    case blockedWithWrongPIN
    /// The wallet is locked: its PIN unlocks it.
    case awaitingUserPINUnlock
    /// A new PIN (or none) is being applied to the stored key.
    case applyingNewPIN
    /// The identity is ready: its key signs requests.
    case unlocked
    /// The server refused the key (revoked by a restoration elsewhere, or unknown).
    case invalidated
    /// Something the wallet cannot go on from (the key could not be stored).
    case error
}

/// The person's data a registration sends (what the reference's `prepareWalletUserData` takes;
/// `WalletUserData` is the registered account's).
public struct RegistrationUserData: Sendable, Equatable {
    public let name: String
    public let email: String
    public let phone: String

    public init(name: String, email: String, phone: String) {
        self.name = name
        self.email = email
        self.phone = phone
    }
}

/// How the identity stored on this device is protected, as the driver finds it at `start`.
public enum StoredIdentity: Sendable, Equatable {
    case none
    case pinless
    case pinProtected
}

/// A call made in a state that does not take it: nothing changed.
public struct IdentityCallRefused: Error, Sendable, Equatable, CustomStringConvertible {
    public let call: String
    public let state: IdentityClientState

    public init(call: String, state: IdentityClientState) {
        self.call = call
        self.state = state
    }

    public var description: String { "\(call) cannot be called while the identity is \(state.rawValue)" }
}

/// The identity's rules, with no I/O: calls (the reference's method names) and what the driver
/// learned (the server's answers, the key store's) go in, actions come out; time is passed in.
/// `IdentityProcedure` drives it.
public struct IdentityClientStateMachine: Sendable, Equatable {
    /// Wrong PINs in a row before the wallet blocks PIN entry.
    public static let wrongPINsBeforeBlocking = 3

    /// Why a PIN is being proven.
    public enum ProofPurpose: Sendable, Equatable {
        case unlock
        case changeOfPIN
        case deactivation
    }

    /// What a new PIN is chosen for.
    public enum PINPurpose: Sendable, Equatable {
        case registration
        case restoration
        case change
    }

    /// The state with what each step carries; only combinations that can happen can be written.
    public enum State: Sendable, Equatable {
        case uninitialised
        case awaitingDecision
        case choosingPIN(PINPurpose)
        case confirmingPIN(PINPurpose, first: String)
        case failedPINConfirmation(PINPurpose)
        case creatingIdentity(PINPurpose, pin: String?)
        case awaitingUserRegistration(pin: String?)
        case awaitingInvitationCode(pin: String?, user: RegistrationUserData)
        case acquiringRegistration(pin: String?)
        case awaitingRegistrationPuk(pin: String?, registration: String)
        case submittingPuk(pin: String?, registration: String)
        case awaitingActivation(pin: String?, registration: String)
        case pingingActivation(pin: String?, registration: String)
        case awaitingRestorationEmail(pin: String?)
        case sendingRestorationPukRequest(pin: String?)
        case awaitingRestorationPuk(pin: String?, restoration: String)
        case acquiringReactivationMail(pin: String?, restoration: String)
        case awaitingReactivationToken(pin: String?, restoration: String)
        case acquiringReactivation(pin: String?, restoration: String)
        case awaitingPINProof(ProofPurpose, failures: Int, failed: Bool)
        case checkingPIN(ProofPurpose, failures: Int)
        case blocked(ProofPurpose, failures: Int, until: Int64)
        case applyingNewPIN(pin: String?)
        case unlocked(pinProtected: Bool)
        case invalidated(reason: String)
        case error(reason: String)

        /// The reference's name of this state.
        public var name: IdentityClientState {
            switch self {
            case .uninitialised: .uninitialised
            case .awaitingDecision: .awaitingUserRegistrationDecision
            case .choosingPIN: .awaitingUserPINChoice
            case .confirmingPIN: .awaitingUserPINConfirmation
            case .failedPINConfirmation: .failedUserPINConfirmation
            case .creatingIdentity: .creatingIdentity
            case .awaitingUserRegistration: .awaitingUserRegistration
            case .awaitingInvitationCode: .awaitingInvitationCode
            case .acquiringRegistration, .submittingPuk: .acquiringRegistration
            case .awaitingRegistrationPuk: .awaitingRegistrationPuk
            case .awaitingActivation: .awaitingActivation
            case .pingingActivation: .aquiringPingActivationResponse
            case .awaitingRestorationEmail: .awaitingRestorationEmail
            case .sendingRestorationPukRequest: .sendingRestorationPukRequest
            case .awaitingRestorationPuk: .awaitingRestorationPuk
            case .acquiringReactivationMail: .acquiringReactivationMail
            case .awaitingReactivationToken: .awaitingMailReactivationToken
            case .acquiringReactivation: .acquiringReactivationResponse
            case .awaitingPINProof(.unlock, _, false), .checkingPIN(.unlock, _): .awaitingUserPINUnlock
            case .awaitingPINProof(_, _, false), .checkingPIN: .awaitingUserPINProof
            case .awaitingPINProof(_, _, true): .failedUserPINProof
            case .blocked: .blockedWithWrongPIN
            case .applyingNewPIN: .applyingNewPIN
            case .unlocked: .unlocked
            case .invalidated: .invalidated
            case .error: .error
            }
        }
    }

    /// What the driver learned.
    public enum Event: Sendable, Equatable {
        case identityCreated
        case registrationStarted(id: String)
        case restorationPukSent(id: String)
        /// The restoration's PUK was right: the reactivation token is in the mail.
        case reactivationMailSent
        case activated
        /// The server's answer to the PUK or to an activation check: whether both channels are
        /// proven (the wallet is active).
        case activationChecked(active: Bool)
        case identityStored
        case pinVerified
        case pinRejected(at: Int64)
        /// The server that counts wrong PINs takes no proof until `until` (nil: until the wallet
        /// is restored), after this one was wrong or not even tried.
        case pinBlocked(until: Int64?, at: Int64)
        case newPINApplied
        /// A server or key-store call failed; the person may try again.
        case failed(reason: String)
        /// The server refused the key.
        case invalidated(reason: String)
        case timePassed(now: Int64)
    }

    /// What the driver must do.
    public enum Action: Sendable, Equatable {
        /// Make a new key (kept in memory until the account is active).
        case createIdentity
        case register(RegistrationUserData, invitationCode: String?)
        /// Give the server the PUK texted to the phone.
        case submitPuk(id: String, puk: String)
        /// Ask the server whether the registration is active.
        case checkActivation(id: String)
        /// Confirm the activation link the person gave the wallet, then check.
        case confirmActivationLink(id: String, link: String)
        case requestRestorationPuk(email: String)
        /// Give the server the restoration's PUK (it mails the reactivation token).
        case submitRestorationPuk(id: String, puk: String)
        /// Move the account to this device's key with the mailed token (the old keys are revoked).
        case reactivate(id: String, token: String)
        /// Store the new key on the device, protected by `pin` (nil: pinless).
        case storeIdentity(pin: String?)
        /// Read the stored key with `pin`.
        case verifyPIN(String)
        /// Protect the stored key with `pin` from now on (nil: pinless).
        case applyNewPIN(pin: String?)
        /// Forget the key in memory (the wallet is locked).
        case forgetKey
        /// Drop the identity: the stored key and every cache.
        case discardIdentity(reason: String)
        /// Tell observers the identity is ready (its key signs requests).
        case publishReady
        /// Wake the machine at this time (the end of a PIN block).
        case wake(at: Int64)
        /// Tell the caller why the last step failed.
        case report(reason: String)
    }

    public private(set) var state: State = .uninitialised
    /// The reference's name of the current state.
    public var name: IdentityClientState { state.name }

    public init() {}

    /// Seconds of PIN block after `failures` wrong PINs in a row: 30 s at the limit, doubling.
    public static func blockSeconds(after failures: Int) -> Int64 {
        let beyond = max(0, failures - wrongPINsBeforeBlocking)
        return 30 << min(beyond, 10)
    }

    // MARK: Calls (the reference's names)

    public mutating func start(with stored: StoredIdentity) throws(IdentityCallRefused) -> [Action] {
        guard case .uninitialised = state else { throw refused("start") }
        switch stored {
        case .none:
            state = .awaitingDecision
            return []
        case .pinless:
            state = .unlocked(pinProtected: false)
            return [.publishReady]
        case .pinProtected:
            state = .awaitingPINProof(.unlock, failures: 0, failed: false)
            return []
        }
    }

    public mutating func requestStartRegistrationProcedure() throws(IdentityCallRefused) -> [Action] {
        guard canStartProcedure else { throw refused("requestStartRegistrationProcedure") }
        state = .choosingPIN(.registration)
        return []
    }

    public mutating func requestStartPinlessRegistrationProcedure() throws(IdentityCallRefused) -> [Action] {
        guard canStartProcedure else { throw refused("requestStartPinlessRegistrationProcedure") }
        state = .creatingIdentity(.registration, pin: nil)
        return [.createIdentity]
    }

    public mutating func requestRestoration() throws(IdentityCallRefused) -> [Action] {
        guard canStartProcedure else { throw refused("requestRestoration") }
        state = .choosingPIN(.restoration)
        return []
    }

    public mutating func requestPinlessRestoration() throws(IdentityCallRefused) -> [Action] {
        guard canStartProcedure else { throw refused("requestPinlessRestoration") }
        state = .creatingIdentity(.restoration, pin: nil)
        return [.createIdentity]
    }

    /// The new PIN, first entry.
    public mutating func choosePIN(_ pin: String) throws(IdentityCallRefused) -> [Action] {
        guard case .choosingPIN(let purpose) = state else { throw refused("choosePIN") }
        state = .confirmingPIN(purpose, first: pin)
        return []
    }

    /// The new PIN, second entry.
    public mutating func confirmPIN(_ pin: String) throws(IdentityCallRefused) -> [Action] {
        guard case .confirmingPIN(let purpose, let first) = state else { throw refused("confirmPIN") }
        guard pin == first else {
            state = .failedPINConfirmation(purpose)
            return [.report(reason: "the two PINs differ")]
        }
        switch purpose {
        case .registration, .restoration:
            state = .creatingIdentity(purpose, pin: pin)
            return [.createIdentity]
        case .change:
            state = .applyingNewPIN(pin: pin)
            return [.applyNewPIN(pin: pin)]
        }
    }

    public mutating func retryChangeOfPIN() throws(IdentityCallRefused) -> [Action] {
        guard case .failedPINConfirmation(let purpose) = state else { throw refused("retryChangeOfPIN") }
        state = .choosingPIN(purpose)
        return []
    }

    public mutating func prepareWalletUserData(_ user: RegistrationUserData) throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingUserRegistration(let pin) = state else { throw refused("prepareWalletUserData") }
        state = .awaitingInvitationCode(pin: pin, user: user)
        return []
    }

    public mutating func registerWithInvitationCode(_ code: String) throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingInvitationCode(let pin, let user) = state else {
            throw refused("registerWithInvitationCode")
        }
        state = .acquiringRegistration(pin: pin)
        return [.register(user, invitationCode: code)]
    }

    public mutating func cancelEnteringInvitationCode() throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingInvitationCode(let pin, let user) = state else {
            throw refused("cancelEnteringInvitationCode")
        }
        state = .acquiringRegistration(pin: pin)
        return [.register(user, invitationCode: nil)]
    }

    public mutating func requestRegistrationWithPuk(_ puk: String) throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingRegistrationPuk(let pin, let registration) = state else {
            throw refused("requestRegistrationWithPuk")
        }
        state = .submittingPuk(pin: pin, registration: registration)
        return [.submitPuk(id: registration, puk: puk)]
    }

    /// The activation mail's link, given to the wallet: what a tap on the link is on a phone
    /// (on Linux there are no universal links; opening it in a browser and pressing its button
    /// does the same, then `retryCheckActivationAgain`).
    public mutating func confirmActivation(link: String) throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingActivation(let pin, let registration) = state else { throw refused("confirmActivation") }
        state = .pingingActivation(pin: pin, registration: registration)
        return [.confirmActivationLink(id: registration, link: link)]
    }

    /// Asks the server whether the e-mail address is confirmed yet.
    public mutating func retryCheckActivationAgain() throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingActivation(let pin, let registration) = state else {
            throw refused("retryCheckActivationAgain")
        }
        state = .pingingActivation(pin: pin, registration: registration)
        return [.checkActivation(id: registration)]
    }

    public mutating func requestRestorationPukWithEmail(_ email: String) throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingRestorationEmail(let pin) = state else { throw refused("requestRestorationPukWithEmail") }
        state = .sendingRestorationPukRequest(pin: pin)
        return [.requestRestorationPuk(email: email)]
    }

    public mutating func requestRestorationWithPuk(_ puk: String) throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingRestorationPuk(let pin, let restoration) = state else {
            throw refused("requestRestorationWithPuk")
        }
        state = .acquiringReactivationMail(pin: pin, restoration: restoration)
        return [.submitRestorationPuk(id: restoration, puk: puk)]
    }

    /// The token from the reactivation mail: the account moves to this device's key, protected
    /// by the PIN chosen when the restoration started (none for a pinless restoration).
    public mutating func reactivateWithReactivationToken(_ token: String) throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingReactivationToken(let pin, let restoration) = state else {
            throw refused("reactivateWithReactivationToken")
        }
        state = .acquiringReactivation(pin: pin, restoration: restoration)
        return [.reactivate(id: restoration, token: token)]
    }

    /// The token from the reactivation mail, the key stored pinless whatever was chosen before.
    public mutating func reactivatePinlessWithReactivationToken(_ token: String) throws(IdentityCallRefused)
        -> [Action]
    {
        guard case .awaitingReactivationToken(_, let restoration) = state else {
            throw refused("reactivatePinlessWithReactivationToken")
        }
        state = .acquiringReactivation(pin: nil, restoration: restoration)
        return [.reactivate(id: restoration, token: token)]
    }

    /// Whether a restoration is under way (the reference's `reactivationInProgress`).
    public var reactivationInProgress: Bool {
        switch state {
        case .creatingIdentity(.restoration, _), .awaitingRestorationEmail, .sendingRestorationPukRequest,
            .awaitingRestorationPuk, .acquiringReactivationMail, .awaitingReactivationToken, .acquiringReactivation:
            true
        default: false
        }
    }

    /// The PIN, to unlock the wallet or to prove it is the person.
    public mutating func provePIN(_ pin: String) throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingPINProof(let purpose, let failures, _) = state else { throw refused("provePIN") }
        state = .checkingPIN(purpose, failures: failures)
        return [.verifyPIN(pin)]
    }

    /// Asks for the PIN before choosing a new one.
    public mutating func requestChangeOfPIN() throws(IdentityCallRefused) -> [Action] {
        guard case .unlocked(true) = state else { throw refused("requestChangeOfPIN") }
        state = .awaitingPINProof(.changeOfPIN, failures: 0, failed: false)
        return []
    }

    /// Asks for the PIN, then stores the key without one.
    public mutating func deactivatePin() throws(IdentityCallRefused) -> [Action] {
        guard case .unlocked(true) = state else { throw refused("deactivatePin") }
        state = .awaitingPINProof(.deactivation, failures: 0, failed: false)
        return []
    }

    /// Gives up proving the PIN for a change or deactivation (unlocking cannot be cancelled).
    public mutating func cancelPINProof() throws(IdentityCallRefused) -> [Action] {
        guard case .awaitingPINProof(let purpose, _, _) = state, purpose != .unlock else {
            throw refused("cancelPINProof")
        }
        state = .unlocked(pinProtected: true)
        return []
    }

    /// Locks a PIN-protected wallet: its key leaves memory until the PIN is given again.
    public mutating func lock() throws(IdentityCallRefused) -> [Action] {
        guard case .unlocked(true) = state else { throw refused("lock") }
        state = .awaitingPINProof(.unlock, failures: 0, failed: false)
        return [.forgetKey]
    }

    // MARK: What the driver learned

    public mutating func handle(_ event: Event) -> [Action] {
        switch (state, event) {
        case (_, .invalidated(let reason)):
            guard hasIdentity else { return [] }
            state = .invalidated(reason: reason)
            return [.discardIdentity(reason: reason)]

        case (.creatingIdentity(.registration, let pin), .identityCreated):
            state = .awaitingUserRegistration(pin: pin)
            return []
        case (.creatingIdentity(.restoration, let pin), .identityCreated):
            state = .awaitingRestorationEmail(pin: pin)
            return []
        case (.creatingIdentity(let purpose, _), .failed(let reason)):
            state = purpose == .restoration || purpose == .registration ? .awaitingDecision : .error(reason: reason)
            return [.report(reason: reason)]

        case (.acquiringRegistration(let pin), .registrationStarted(let id)):
            state = .awaitingRegistrationPuk(pin: pin, registration: id)
            return []
        case (.acquiringRegistration(let pin), .failed(let reason)):
            state = .awaitingUserRegistration(pin: pin)
            return [.report(reason: reason)]

        case (.acquiringReactivation(let pin, _), .activated),
            (.submittingPuk(let pin, _), .activationChecked(true)),
            (.pingingActivation(let pin, _), .activationChecked(true)):
            state = .applyingNewPIN(pin: pin)
            return [.storeIdentity(pin: pin)]
        case (.submittingPuk(let pin, let registration), .activationChecked(false)):
            state = .awaitingActivation(pin: pin, registration: registration)
            return []
        case (.submittingPuk(let pin, let registration), .failed(let reason)):
            state = .awaitingRegistrationPuk(pin: pin, registration: registration)
            return [.report(reason: reason)]
        case (.pingingActivation(let pin, let registration), .activationChecked(false)):
            state = .awaitingActivation(pin: pin, registration: registration)
            return [
                .report(
                    reason:
                        "the e-mail address is not confirmed yet: open the link in the activation mail and press its button"
                )
            ]
        case (.pingingActivation(let pin, let registration), .failed(let reason)):
            state = .awaitingActivation(pin: pin, registration: registration)
            return [.report(reason: reason)]

        case (.sendingRestorationPukRequest(let pin), .restorationPukSent(let id)):
            state = .awaitingRestorationPuk(pin: pin, restoration: id)
            return []
        case (.sendingRestorationPukRequest(let pin), .failed(let reason)):
            state = .awaitingRestorationEmail(pin: pin)
            return [.report(reason: reason)]
        case (.acquiringReactivationMail(let pin, let restoration), .reactivationMailSent):
            state = .awaitingReactivationToken(pin: pin, restoration: restoration)
            return []
        case (.acquiringReactivationMail(let pin, let restoration), .failed(let reason)):
            state = .awaitingRestorationPuk(pin: pin, restoration: restoration)
            return [.report(reason: reason)]
        case (.acquiringReactivation(let pin, let restoration), .failed(let reason)):
            state = .awaitingReactivationToken(pin: pin, restoration: restoration)
            return [.report(reason: reason)]

        case (.applyingNewPIN(let pin), .identityStored), (.applyingNewPIN(let pin), .newPINApplied):
            state = .unlocked(pinProtected: pin != nil)
            return [.publishReady]
        case (.applyingNewPIN, .failed(let reason)):
            state = .error(reason: reason)
            return [.report(reason: reason)]

        case (.checkingPIN(let purpose, _), .pinVerified):
            switch purpose {
            case .unlock:
                state = .unlocked(pinProtected: true)
                return [.publishReady]
            case .changeOfPIN:
                state = .choosingPIN(.change)
                return []
            case .deactivation:
                state = .applyingNewPIN(pin: nil)
                return [.applyNewPIN(pin: nil)]
            }
        case (.checkingPIN(let purpose, let failures), .pinRejected(let now)):
            let failures = failures + 1
            if failures >= Self.wrongPINsBeforeBlocking {
                let until = now + Self.blockSeconds(after: failures)
                state = .blocked(purpose, failures: failures, until: until)
                return [.report(reason: "wrong PIN; try again in \(until - now) s"), .wake(at: until)]
            }
            state = .awaitingPINProof(purpose, failures: failures, failed: true)
            return [.report(reason: "wrong PIN")]
        case (.checkingPIN(let purpose, let failures), .pinBlocked(let until, let now)):
            state = .blocked(purpose, failures: failures + 1, until: until ?? .max)
            guard let until else {
                return [
                    .report(
                        reason:
                            "the PIN is blocked after too many wrong tries, counted by the server: restore the wallet to use it again"
                    )
                ]
            }
            return [.report(reason: "wrong PIN; try again in \(max(0, until - now)) s"), .wake(at: until)]
        case (.checkingPIN(let purpose, let failures), .failed(let reason)):
            state = .awaitingPINProof(purpose, failures: failures, failed: false)
            return [.report(reason: reason)]
        case (.blocked(let purpose, let failures, let until), .timePassed(let now)):
            guard now >= until else { return [.wake(at: until)] }
            state = .awaitingPINProof(purpose, failures: failures, failed: false)
            return []

        default:
            // An answer the state no longer waits for (a late reply, a second wake): ignored.
            return []
        }
    }

    // MARK: Helpers

    private var canStartProcedure: Bool {
        switch state {
        case .awaitingDecision, .invalidated: true
        default: false
        }
    }

    /// Whether a key is in use or being set up (what an invalidation takes away).
    private var hasIdentity: Bool {
        switch state {
        case .uninitialised, .awaitingDecision, .invalidated: false
        default: true
        }
    }

    private func refused(_ call: String) -> IdentityCallRefused { IdentityCallRefused(call: call, state: name) }
}
