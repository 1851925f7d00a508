import Crypto
import Foundation
import HorizonServiceClients
import Synchronization
import Testing

/// The identity's rules without a server: every transition by the reference's names, every call
/// in a state that does not take it refused with nothing changed, and the driver running the
/// actions against a stand-in server and key vault.
@Suite struct IdentityClientStateMachineTests {
    typealias Machine = IdentityClientStateMachine
    typealias Action = Machine.Action

    static let user = RegistrationUserData(name: "Alex", email: "alex@example.com", phone: "+491701234567")

    // MARK: Transitions

    @Test func registrationWithAPINGoesThroughEveryStepInOrder() throws {
        var machine = Machine()
        #expect(try machine.start(with: .none) == [])
        #expect(machine.name == .awaitingUserRegistrationDecision)
        #expect(try machine.requestStartRegistrationProcedure() == [])
        #expect(machine.name == .awaitingUserPINChoice)
        #expect(try machine.choosePIN("2468") == [])
        #expect(machine.name == .awaitingUserPINConfirmation)
        #expect(try machine.confirmPIN("2468") == [.createIdentity])
        #expect(machine.name == .creatingIdentity)
        #expect(machine.handle(.identityCreated) == [])
        #expect(machine.name == .awaitingUserRegistration)
        #expect(try machine.prepareWalletUserData(Self.user) == [])
        #expect(machine.name == .awaitingInvitationCode)
        #expect(try machine.registerWithInvitationCode("WELCOME") == [.register(Self.user, invitationCode: "WELCOME")])
        #expect(machine.name == .acquiringRegistration)
        #expect(machine.handle(.registrationStarted(id: "reg_1")) == [])
        #expect(machine.name == .awaitingRegistrationPuk)
        #expect(try machine.requestRegistrationWithPuk("12345678") == [.submitPuk(id: "reg_1", puk: "12345678")])
        #expect(machine.name == .acquiringRegistration)
        // The PUK proves the phone; the e-mail address is not confirmed yet.
        #expect(machine.handle(.activationChecked(active: false)) == [])
        #expect(machine.name == .awaitingActivation)
        #expect(try machine.retryCheckActivationAgain() == [.checkActivation(id: "reg_1")])
        #expect(machine.name == .aquiringPingActivationResponse)
        #expect(
            machine.handle(.activationChecked(active: false)) == [
                .report(
                    reason:
                        "the e-mail address is not confirmed yet: open the link in the activation mail and press its button"
                )
            ])
        #expect(machine.name == .awaitingActivation)
        #expect(
            try machine.confirmActivation(link: "https://pay.example/v1/wallets/activation?registration=reg_1&token=t")
                == [
                    .confirmActivationLink(
                        id: "reg_1", link: "https://pay.example/v1/wallets/activation?registration=reg_1&token=t")
                ])
        #expect(machine.name == .aquiringPingActivationResponse)
        #expect(machine.handle(.activationChecked(active: true)) == [.storeIdentity(pin: "2468")])
        #expect(machine.name == .applyingNewPIN)
        #expect(machine.handle(.identityStored) == [.publishReady])
        #expect(machine.state == .unlocked(pinProtected: true))
    }

    @Test func aPinlessRegistrationSkipsThePINAndTheInvitationCode() throws {
        var machine = Machine()
        _ = try machine.start(with: .none)
        #expect(try machine.requestStartPinlessRegistrationProcedure() == [.createIdentity])
        _ = machine.handle(.identityCreated)
        _ = try machine.prepareWalletUserData(Self.user)
        #expect(try machine.cancelEnteringInvitationCode() == [.register(Self.user, invitationCode: nil)])
        _ = machine.handle(.registrationStarted(id: "reg_2"))
        // The link was confirmed before the PUK came: the PUK completes the registration.
        _ = try machine.requestRegistrationWithPuk("11111111")
        #expect(machine.handle(.activationChecked(active: true)) == [.storeIdentity(pin: nil)])
        #expect(machine.handle(.identityStored) == [.publishReady])
        #expect(machine.state == .unlocked(pinProtected: false))
        // A pinless wallet has no PIN to change, remove or lock with.
        #expect(throws: IdentityCallRefused(call: "lock", state: .unlocked)) { try machine.lock() }
        #expect(throws: IdentityCallRefused.self) { try machine.deactivatePin() }
    }

    @Test func mismatchedPINsAreAskedForAgain() throws {
        var machine = Machine()
        _ = try machine.start(with: .none)
        _ = try machine.requestStartRegistrationProcedure()
        _ = try machine.choosePIN("1111")
        #expect(try machine.confirmPIN("2222") == [.report(reason: "the two PINs differ")])
        #expect(machine.name == .failedUserPINConfirmation)
        _ = try machine.retryChangeOfPIN()
        #expect(machine.name == .awaitingUserPINChoice)
    }

    @Test func failedStepsGoBackToWhereThePersonCanTryAgain() throws {
        var machine = Machine()
        _ = try machine.start(with: .none)
        _ = try machine.requestStartPinlessRegistrationProcedure()
        _ = machine.handle(.identityCreated)
        _ = try machine.prepareWalletUserData(Self.user)
        _ = try machine.cancelEnteringInvitationCode()
        #expect(
            machine.handle(.failed(reason: "the server did not answer")) == [
                .report(reason: "the server did not answer")
            ])
        #expect(machine.name == .awaitingUserRegistration)
        _ = try machine.prepareWalletUserData(Self.user)
        _ = try machine.cancelEnteringInvitationCode()
        _ = machine.handle(.registrationStarted(id: "reg_3"))
        _ = try machine.requestRegistrationWithPuk("00000000")
        // A wrong PUK: asked for again.
        #expect(machine.handle(.failed(reason: "the code is wrong")) == [.report(reason: "the code is wrong")])
        #expect(machine.name == .awaitingRegistrationPuk)
        _ = try machine.requestRegistrationWithPuk("00000001")
        _ = machine.handle(.activationChecked(active: false))
        _ = try machine.retryCheckActivationAgain()
        _ = machine.handle(.failed(reason: "the server did not answer"))
        #expect(machine.name == .awaitingActivation)
        #expect(try machine.retryCheckActivationAgain() == [.checkActivation(id: "reg_3")])
        #expect(machine.name == .aquiringPingActivationResponse)
        // A late answer for a step no longer waited for changes nothing.
        #expect(machine.handle(.registrationStarted(id: "late")) == [])
        #expect(machine.name == .aquiringPingActivationResponse)
    }

    @Test func restorationAsksForTheEmailThePukThenTheMailedReactivationToken() throws {
        var machine = Machine()
        _ = try machine.start(with: .none)
        _ = try machine.requestRestoration()
        #expect(machine.name == .awaitingUserPINChoice)
        _ = try machine.choosePIN("1357")
        #expect(try machine.confirmPIN("1357") == [.createIdentity])
        _ = machine.handle(.identityCreated)
        #expect(machine.name == .awaitingRestorationEmail)
        #expect(
            try machine.requestRestorationPukWithEmail("alex@example.com") == [
                .requestRestorationPuk(email: "alex@example.com")
            ])
        #expect(machine.name == .sendingRestorationPukRequest)
        _ = machine.handle(.restorationPukSent(id: "res_1"))
        #expect(machine.name == .awaitingRestorationPuk)
        #expect(machine.reactivationInProgress)
        #expect(
            try machine.requestRestorationWithPuk("424242") == [.submitRestorationPuk(id: "res_1", puk: "424242")])
        #expect(machine.name == .acquiringReactivationMail)
        _ = machine.handle(.failed(reason: "the code is wrong"))
        #expect(machine.name == .awaitingRestorationPuk)
        _ = try machine.requestRestorationWithPuk("424243")
        #expect(machine.handle(.reactivationMailSent) == [])
        #expect(machine.name == .awaitingMailReactivationToken)
        #expect(try machine.reactivateWithReactivationToken("tok") == [.reactivate(id: "res_1", token: "tok")])
        #expect(machine.name == .acquiringReactivationResponse)
        _ = machine.handle(.failed(reason: "the token is wrong"))
        #expect(machine.name == .awaitingMailReactivationToken)
        _ = try machine.reactivateWithReactivationToken("tok2")
        #expect(machine.handle(.activated) == [.storeIdentity(pin: "1357")])
        #expect(!machine.reactivationInProgress)
        #expect(machine.handle(.identityStored) == [.publishReady])
        #expect(machine.state == .unlocked(pinProtected: true))
    }

    @Test func aPinlessReactivationStoresTheKeyWithoutThePINChosen() throws {
        var machine = Machine()
        _ = try machine.start(with: .none)
        _ = try machine.requestRestoration()
        _ = try machine.choosePIN("1357")
        _ = try machine.confirmPIN("1357")
        _ = machine.handle(.identityCreated)
        _ = try machine.requestRestorationPukWithEmail("alex@example.com")
        _ = machine.handle(.restorationPukSent(id: "res_1"))
        _ = try machine.requestRestorationWithPuk("424242")
        _ = machine.handle(.reactivationMailSent)
        #expect(try machine.reactivatePinlessWithReactivationToken("tok") == [.reactivate(id: "res_1", token: "tok")])
        #expect(machine.handle(.activated) == [.storeIdentity(pin: nil)])
        #expect(machine.handle(.identityStored) == [.publishReady])
        #expect(machine.state == .unlocked(pinProtected: false))
    }

    @Test func aPinlessRestorationMakesTheKeyFirst() throws {
        var machine = Machine()
        _ = try machine.start(with: .none)
        #expect(try machine.requestPinlessRestoration() == [.createIdentity])
        _ = machine.handle(.identityCreated)
        #expect(machine.name == .awaitingRestorationEmail)
    }

    @Test func aLockedWalletUnlocksWithItsPINAndBlocksAfterThreeWrongOnes() throws {
        var machine = Machine()
        _ = try machine.start(with: .pinProtected)
        #expect(machine.name == .awaitingUserPINUnlock)
        #expect(try machine.provePIN("0000") == [.verifyPIN("0000")])
        #expect(machine.handle(.pinRejected(at: 100)) == [.report(reason: "wrong PIN")])
        #expect(machine.name == .failedUserPINProof)
        _ = try machine.provePIN("0001")
        _ = machine.handle(.pinRejected(at: 101))
        _ = try machine.provePIN("0002")
        #expect(
            machine.handle(.pinRejected(at: 102)) == [.report(reason: "wrong PIN; try again in 30 s"), .wake(at: 132)])
        #expect(machine.name == .blockedWithWrongPIN)
        #expect(throws: IdentityCallRefused(call: "provePIN", state: .blockedWithWrongPIN)) {
            try machine.provePIN("2468")
        }
        // An early wake (a clock that jumped) keeps the block.
        #expect(machine.handle(.timePassed(now: 120)) == [.wake(at: 132)])
        #expect(machine.name == .blockedWithWrongPIN)
        #expect(machine.handle(.timePassed(now: 132)) == [])
        #expect(machine.name == .awaitingUserPINUnlock)
        // The next wrong PIN blocks again, twice as long.
        _ = try machine.provePIN("0003")
        #expect(
            machine.handle(.pinRejected(at: 200)) == [.report(reason: "wrong PIN; try again in 60 s"), .wake(at: 260)])
        _ = machine.handle(.timePassed(now: 260))
        _ = try machine.provePIN("2468")
        #expect(machine.handle(.pinVerified) == [.publishReady])
        #expect(machine.state == .unlocked(pinProtected: true))
        #expect(try machine.lock() == [.forgetKey])
        #expect(machine.name == .awaitingUserPINUnlock)
        #expect(throws: IdentityCallRefused.self) { try machine.cancelPINProof() }
    }

    @Test func aBlockFromTheServerThatCountsIsTheMachinesBlock() throws {
        var machine = Machine()
        _ = try machine.start(with: .pinProtected)
        _ = try machine.provePIN("0000")
        // The server counted this one wrong and takes the next proof in 45 s.
        #expect(
            machine.handle(.pinBlocked(until: 145, at: 100))
                == [.report(reason: "wrong PIN; try again in 45 s"), .wake(at: 145)])
        #expect(machine.name == .blockedWithWrongPIN)
        #expect(throws: IdentityCallRefused(call: "provePIN", state: .blockedWithWrongPIN)) {
            try machine.provePIN("2468")
        }
        _ = machine.handle(.timePassed(now: 145))
        #expect(machine.name == .awaitingUserPINUnlock)
        // Blocked until a restoration: no time unblocks it.
        _ = try machine.provePIN("0001")
        #expect(
            machine.handle(.pinBlocked(until: nil, at: 200)) == [
                .report(
                    reason:
                        "the PIN is blocked after too many wrong tries, counted by the server: restore the wallet to use it again"
                )
            ])
        _ = machine.handle(.timePassed(now: 10_000_000_000))
        #expect(machine.name == .blockedWithWrongPIN)
        // A restoration starts from an invalidated identity.
        _ = machine.handle(.invalidated(reason: "restored elsewhere"))
        #expect(machine.name == .invalidated)
    }

    @Test func changingThePINProvesTheOldOneFirst() throws {
        var machine = Machine()
        _ = try machine.start(with: .pinProtected)
        _ = try machine.provePIN("2468")
        _ = machine.handle(.pinVerified)
        _ = try machine.requestChangeOfPIN()
        #expect(machine.name == .awaitingUserPINProof)
        _ = try machine.provePIN("2468")
        #expect(machine.handle(.pinVerified) == [])
        #expect(machine.name == .awaitingUserPINChoice)
        _ = try machine.choosePIN("9753")
        #expect(try machine.confirmPIN("9753") == [.applyNewPIN(pin: "9753")])
        #expect(machine.name == .applyingNewPIN)
        #expect(machine.handle(.newPINApplied) == [.publishReady])
        #expect(machine.state == .unlocked(pinProtected: true))
        // Cancelling a proof for a change goes back, unlocked.
        _ = try machine.requestChangeOfPIN()
        _ = try machine.cancelPINProof()
        #expect(machine.state == .unlocked(pinProtected: true))
    }

    @Test func deactivatingThePINProvesItThenStoresTheKeyPinless() throws {
        var machine = Machine()
        _ = try machine.start(with: .pinProtected)
        _ = try machine.provePIN("2468")
        _ = machine.handle(.pinVerified)
        _ = try machine.deactivatePin()
        _ = try machine.provePIN("2468")
        #expect(machine.handle(.pinVerified) == [.applyNewPIN(pin: nil)])
        #expect(machine.handle(.newPINApplied) == [.publishReady])
        #expect(machine.state == .unlocked(pinProtected: false))
    }

    @Test func anInvalidatedIdentityIsDroppedAndMayRegisterOrRestoreAgain() throws {
        var machine = Machine()
        #expect(try machine.start(with: .pinless) == [.publishReady])
        #expect(machine.handle(.invalidated(reason: "revoked")) == [.discardIdentity(reason: "revoked")])
        #expect(machine.state == .invalidated(reason: "revoked"))
        #expect(try machine.requestRestoration() == [])
        #expect(machine.name == .awaitingUserPINChoice)
        // Nothing to drop before there is an identity.
        var fresh = Machine()
        _ = try fresh.start(with: .none)
        #expect(fresh.handle(.invalidated(reason: "revoked")) == [])
        #expect(fresh.name == .awaitingUserRegistrationDecision)
    }

    @Test func aKeyThatCannotBeStoredIsAnError() throws {
        var machine = Machine()
        _ = try machine.start(with: .none)
        _ = try machine.requestStartPinlessRegistrationProcedure()
        _ = machine.handle(.identityCreated)
        _ = try machine.prepareWalletUserData(Self.user)
        _ = try machine.cancelEnteringInvitationCode()
        _ = machine.handle(.registrationStarted(id: "reg"))
        _ = try machine.requestRegistrationWithPuk("1")
        _ = machine.handle(.activationChecked(active: true))
        #expect(machine.handle(.failed(reason: "disk full")) == [.report(reason: "disk full")])
        #expect(machine.state == .error(reason: "disk full"))
    }

    // MARK: Calls in the wrong order

    typealias Call = (name: String, run: @Sendable (inout Machine) throws(IdentityCallRefused) -> [Action])

    static let calls: [Call] = [
        ("start", { (m) throws(IdentityCallRefused) in try m.start(with: .none) }),
        (
            "requestStartRegistrationProcedure",
            { (m) throws(IdentityCallRefused) in try m.requestStartRegistrationProcedure() }
        ),
        (
            "requestStartPinlessRegistrationProcedure",
            { (m) throws(IdentityCallRefused) in try m.requestStartPinlessRegistrationProcedure() }
        ),
        ("requestRestoration", { (m) throws(IdentityCallRefused) in try m.requestRestoration() }),
        ("requestPinlessRestoration", { (m) throws(IdentityCallRefused) in try m.requestPinlessRestoration() }),
        ("choosePIN", { (m) throws(IdentityCallRefused) in try m.choosePIN("1") }),
        ("confirmPIN", { (m) throws(IdentityCallRefused) in try m.confirmPIN("1") }),
        ("retryChangeOfPIN", { (m) throws(IdentityCallRefused) in try m.retryChangeOfPIN() }),
        ("prepareWalletUserData", { (m) throws(IdentityCallRefused) in try m.prepareWalletUserData(user) }),
        ("registerWithInvitationCode", { (m) throws(IdentityCallRefused) in try m.registerWithInvitationCode("C") }),
        ("cancelEnteringInvitationCode", { (m) throws(IdentityCallRefused) in try m.cancelEnteringInvitationCode() }),
        ("requestRegistrationWithPuk", { (m) throws(IdentityCallRefused) in try m.requestRegistrationWithPuk("1") }),
        ("confirmActivation", { (m) throws(IdentityCallRefused) in try m.confirmActivation(link: "1") }),
        ("retryCheckActivationAgain", { (m) throws(IdentityCallRefused) in try m.retryCheckActivationAgain() }),
        (
            "requestRestorationPukWithEmail",
            { (m) throws(IdentityCallRefused) in try m.requestRestorationPukWithEmail("a@b.c") }
        ),
        ("requestRestorationWithPuk", { (m) throws(IdentityCallRefused) in try m.requestRestorationWithPuk("1") }),
        (
            "reactivateWithReactivationToken",
            { (m) throws(IdentityCallRefused) in try m.reactivateWithReactivationToken("t") }
        ),
        (
            "reactivatePinlessWithReactivationToken",
            { (m) throws(IdentityCallRefused) in try m.reactivatePinlessWithReactivationToken("t") }
        ),
        ("provePIN", { (m) throws(IdentityCallRefused) in try m.provePIN("1") }),
        ("requestChangeOfPIN", { (m) throws(IdentityCallRefused) in try m.requestChangeOfPIN() }),
        ("deactivatePin", { (m) throws(IdentityCallRefused) in try m.deactivatePin() }),
        ("cancelPINProof", { (m) throws(IdentityCallRefused) in try m.cancelPINProof() }),
        ("lock", { (m) throws(IdentityCallRefused) in try m.lock() }),
    ]

    /// A machine brought to each state the person can call in, and the calls that state takes.
    static func reachable() throws -> [(Machine, Set<String>)] {
        let procedures: Set = [
            "requestStartRegistrationProcedure", "requestStartPinlessRegistrationProcedure", "requestRestoration",
            "requestPinlessRestoration",
        ]
        var cases: [(Machine, Set<String>)] = []
        var machine = Machine()
        cases.append((machine, ["start"]))
        _ = try machine.start(with: .none)
        cases.append((machine, procedures))
        _ = try machine.requestStartRegistrationProcedure()
        cases.append((machine, ["choosePIN"]))
        _ = try machine.choosePIN("1")
        cases.append((machine, ["confirmPIN"]))
        var mismatched = machine
        _ = try mismatched.confirmPIN("2")
        cases.append((mismatched, ["retryChangeOfPIN"]))
        _ = try machine.confirmPIN("1")
        cases.append((machine, []))  // creating the identity
        _ = machine.handle(.identityCreated)
        cases.append((machine, ["prepareWalletUserData"]))
        _ = try machine.prepareWalletUserData(user)
        cases.append((machine, ["registerWithInvitationCode", "cancelEnteringInvitationCode"]))
        _ = try machine.cancelEnteringInvitationCode()
        cases.append((machine, []))  // acquiring the registration
        _ = machine.handle(.registrationStarted(id: "r"))
        cases.append((machine, ["requestRegistrationWithPuk"]))
        _ = try machine.requestRegistrationWithPuk("1")
        cases.append((machine, []))  // the PUK with the server
        _ = machine.handle(.activationChecked(active: false))
        cases.append((machine, ["confirmActivation", "retryCheckActivationAgain"]))
        _ = try machine.confirmActivation(link: "2")
        cases.append((machine, []))  // asking the server
        _ = machine.handle(.failed(reason: "no"))
        cases.append((machine, ["confirmActivation", "retryCheckActivationAgain"]))
        _ = try machine.retryCheckActivationAgain()
        _ = machine.handle(.activationChecked(active: true))
        cases.append((machine, []))  // storing the key
        _ = machine.handle(.identityStored)
        cases.append((machine, ["requestChangeOfPIN", "deactivatePin", "lock"]))
        var proving = machine
        _ = try proving.requestChangeOfPIN()
        cases.append((proving, ["provePIN", "cancelPINProof"]))
        _ = try machine.lock()
        cases.append((machine, ["provePIN"]))
        for _ in 0..<3 {
            _ = try machine.provePIN("0")
            _ = machine.handle(.pinRejected(at: 0))
        }
        cases.append((machine, []))  // blocked
        var restoring = Machine()
        _ = try restoring.start(with: .none)
        _ = try restoring.requestPinlessRestoration()
        _ = restoring.handle(.identityCreated)
        cases.append((restoring, ["requestRestorationPukWithEmail"]))
        _ = try restoring.requestRestorationPukWithEmail("a@b.c")
        cases.append((restoring, []))
        _ = restoring.handle(.restorationPukSent(id: "s"))
        cases.append((restoring, ["requestRestorationWithPuk"]))
        _ = try restoring.requestRestorationWithPuk("1")
        cases.append((restoring, []))  // the PUK with the server
        _ = restoring.handle(.reactivationMailSent)
        cases.append((restoring, ["reactivateWithReactivationToken", "reactivatePinlessWithReactivationToken"]))
        _ = try restoring.reactivateWithReactivationToken("t")
        cases.append((restoring, []))  // the token with the server
        _ = restoring.handle(.failed(reason: "wrong token"))
        cases.append((restoring, ["reactivateWithReactivationToken", "reactivatePinlessWithReactivationToken"]))
        _ = restoring.handle(.invalidated(reason: "revoked"))
        cases.append((restoring, procedures))
        return cases
    }

    @Test func everyCallInAStateThatDoesNotTakeItIsRefusedAndChangesNothing() throws {
        let cases = try Self.reachable()
        #expect(Set(cases.map(\.0.name)).count >= 20, "the walk reaches most states")
        for (machine, allowed) in cases {
            for call in Self.calls where !allowed.contains(call.name) {
                var copy = machine
                #expect(throws: IdentityCallRefused(call: call.name, state: machine.name)) { try call.run(&copy) }
                #expect(copy == machine, "\(call.name) in \(machine.name) changed the state")
            }
            for call in Self.calls where allowed.contains(call.name) {
                var copy = machine
                #expect(throws: Never.self, "\(call.name) in \(machine.name)") { try call.run(&copy) }
            }
        }
    }

    // MARK: The driver

    @Test func theDriverRegistersStoresTheKeyAndHandsItToTheIdentityClient() async throws {
        let backend = StandInBackend()
        let vault = MemoryVault()
        let identity = IdentityClient(serverURL: URL(string: "http://127.0.0.1:1")!)
        let procedure = IdentityProcedure(identity: identity, backend: backend, vault: vault)
        let states = await procedure.states()
        try await procedure.start()
        try await procedure.requestStartRegistrationProcedure()
        try await procedure.choosePIN("2468")
        try await procedure.confirmPIN("2468")
        try await procedure.register(with: Self.user, invitationCode: nil)
        await #expect(throws: IdentityProcedureError.failed("the PUK is wrong")) {
            try await procedure.requestRegistrationWithPuk("00000000")
        }
        #expect(await procedure.state == .awaitingRegistrationPuk)
        try await procedure.requestRegistrationWithPuk("12345678")
        #expect(await procedure.state == .awaitingActivation)
        await #expect(throws: IdentityProcedureError.self) { try await procedure.retryCheckActivationAgain() }
        #expect(identity.state == .notReady)
        backend.linkConfirmed.withLock { $0 = true }
        try await procedure.retryCheckActivationAgain()
        #expect(await procedure.state == .unlocked)
        #expect(identity.state == .ready)
        let stored = try #require(try vault.load(pin: "2468"))
        #expect(identity.publicKey?.rawRepresentation == stored.publicKey.rawRepresentation)
        #expect(try vault.load(pin: "1111") == nil)
        #expect(backend.registered.withLock { $0 } == [Self.user])

        // Locked, then unlocked with the PIN; the client signs again with the same key.
        try await procedure.lock()
        #expect(identity.state == .notReady)
        await #expect(throws: IdentityProcedureError.failed("wrong PIN")) { try await procedure.provePIN("1111") }
        try await procedure.provePIN("2468")
        #expect(identity.publicKey?.rawRepresentation == stored.publicKey.rawRepresentation)

        var seen: [IdentityClientState] = []
        for await state in states {
            seen.append(state)
            if seen.count == 16 { break }
        }
        #expect(
            seen == [
                .uninitialised, .awaitingUserRegistrationDecision, .awaitingUserPINChoice,
                .awaitingUserPINConfirmation, .creatingIdentity, .awaitingUserRegistration, .awaitingInvitationCode,
                .acquiringRegistration, .awaitingRegistrationPuk, .acquiringRegistration, .awaitingRegistrationPuk,
                .acquiringRegistration, .awaitingActivation, .aquiringPingActivationResponse, .awaitingActivation,
                .aquiringPingActivationResponse,
            ])
    }

    @Test func theDriverRestoresWithThePukThenTheMailedTokenAndHandsTheKeyOver() async throws {
        let backend = StandInBackend()
        let vault = MemoryVault()
        let identity = IdentityClient(serverURL: URL(string: "http://127.0.0.1:1")!)
        let procedure = IdentityProcedure(identity: identity, backend: backend, vault: vault)
        try await procedure.start()
        try await procedure.requestPinlessRestoration()
        try await procedure.requestRestorationPukWithEmail("alex@example.com")
        await #expect(throws: IdentityProcedureError.failed("the PUK is wrong")) {
            try await procedure.requestRestorationWithPuk("00000000")
        }
        try await procedure.requestRestorationWithPuk("12345678")
        #expect(await procedure.state == .awaitingMailReactivationToken)
        #expect(await procedure.reactivationInProgress)
        await #expect(throws: IdentityProcedureError.failed("the token is wrong")) {
            try await procedure.reactivateWithReactivationToken("guessed")
        }
        #expect(identity.state == .notReady)
        #expect(try vault.stored() == StoredIdentity.none)
        try await procedure.reactivateWithReactivationToken("the-mailed-token")
        #expect(await procedure.state == .unlocked)
        #expect(identity.state == .ready)
        let stored = try #require(try vault.load(pin: nil))
        #expect(backend.reactivatedKeys.withLock { $0 } == [stored.publicKey.rawRepresentation])
        #expect(identity.publicKey?.rawRepresentation == stored.publicKey.rawRepresentation)
    }

    @Test func theDriverSaysWhyACallIsRefused() async throws {
        let procedure = IdentityProcedure(
            identity: IdentityClient(serverURL: URL(string: "http://127.0.0.1:1")!), backend: StandInBackend(),
            vault: MemoryVault())
        await #expect(
            throws: IdentityProcedureError.refused(IdentityCallRefused(call: "choosePIN", state: .uninitialised))
        ) { try await procedure.choosePIN("1") }
        #expect(
            IdentityProcedureError.refused(IdentityCallRefused(call: "choosePIN", state: .uninitialised)).description
                == "choosePIN cannot be called while the identity is uninitialised")
    }
}

/// A server that accepts one PUK, and whose activation link the test confirms.
final class StandInBackend: IdentityBackend {
    let acceptedPUK = Mutex("12345678")
    let linkConfirmed = Mutex(false)
    let registered = Mutex<[RegistrationUserData]>([])
    let reactivatedKeys = Mutex<[Data]>([])

    func register(_ user: RegistrationUserData, invitationCode: String?, key: P256.Signing.PrivateKey) async throws
        -> String
    {
        registered.withLock { $0.append(user) }
        return "reg_1"
    }

    func submitRegistrationPuk(id: String, puk: String, key: P256.Signing.PrivateKey) async throws -> Bool {
        guard puk == acceptedPUK.withLock({ $0 }) else { throw IdentityProcedureError.failed("the PUK is wrong") }
        return linkConfirmed.withLock { $0 }
    }

    func isRegistrationActive(id: String, key: P256.Signing.PrivateKey) async throws -> Bool {
        linkConfirmed.withLock { $0 }
    }

    func confirmActivationLink(_ link: String) async throws { linkConfirmed.withLock { $0 = true } }

    func requestRestorationPuk(email: String, key: P256.Signing.PrivateKey) async throws -> String { "res_1" }

    func submitRestorationPuk(id: String, puk: String, key: P256.Signing.PrivateKey) async throws {
        guard puk == acceptedPUK.withLock({ $0 }) else { throw IdentityProcedureError.failed("the PUK is wrong") }
    }

    func reactivate(id: String, token: String, key: P256.Signing.PrivateKey) async throws {
        guard token == "the-mailed-token" else { throw IdentityProcedureError.failed("the token is wrong") }
        reactivatedKeys.withLock { $0.append(key.publicKey.rawRepresentation) }
    }
}

/// Keys in memory, "protected" by remembering the PIN.
final class MemoryVault: IdentityKeyVault {
    private let entry = Mutex<(key: P256.Signing.PrivateKey, pin: String?)?>(nil)

    func stored() throws -> StoredIdentity {
        switch entry.withLock({ $0 }) {
        case nil: .none
        case let entry?: entry.pin == nil ? .pinless : .pinProtected
        }
    }

    func store(_ key: P256.Signing.PrivateKey, pin: String?) throws { entry.withLock { $0 = (key, pin) } }

    func load(pin: String?) throws -> P256.Signing.PrivateKey? {
        guard let stored = entry.withLock({ $0 }), stored.pin == pin else { return nil }
        return stored.key
    }

    func discard() throws { entry.withLock { $0 = nil } }
}
