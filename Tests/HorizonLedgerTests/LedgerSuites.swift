import Testing

/// One test of the store contract: its name and the function that runs it on a store.
struct ContractCase: Sendable, CustomTestStringConvertible {
    let name: String
    let run: @Sendable (StoreKind) async throws -> Void

    init(_ name: String, _ run: @escaping @Sendable (StoreKind) async throws -> Void) {
        self.name = name
        self.run = run
    }

    var testDescription: String { name }

    /// Every contract test, in the order they were written; a new one is added here once and
    /// runs on both stores.
    static let all: [ContractCase] = [
        ContractCase("migratesAnEmptyDatabase", LedgerContract.migratesAnEmptyDatabase),
        ContractCase("migratesAnOlderDatabase", LedgerContract.migratesAnOlderDatabase),
        ContractCase("refusesANewerSchema", LedgerContract.refusesANewerSchema),
        ContractCase("runsOnANewerSchemaThatOnlyExpanded", LedgerContract.runsOnANewerSchemaThatOnlyExpanded),
        ContractCase("refusesANewerSchemaThatContracted", LedgerContract.refusesANewerSchemaThatContracted),
        ContractCase("merchantsWalletsAndRegisterUsers", LedgerContract.merchantsWalletsAndRegisterUsers),
        ContractCase("postingsSumToZeroPerCurrency", LedgerContract.postingsSumToZeroPerCurrency),
        ContractCase("walletNeverGoesBelowZero", LedgerContract.walletNeverGoesBelowZero),
        ContractCase("aRetryGetsTheStoredResult", LedgerContract.aRetryGetsTheStoredResult),
        ContractCase("otherTermsAreAConflict", LedgerContract.otherTermsAreAConflict),
        ContractCase("concurrentDuplicatesExecuteOnce", LedgerContract.concurrentDuplicatesExecuteOnce),
        ContractCase("concurrentPaymentsNeverOverdraw", LedgerContract.concurrentPaymentsNeverOverdraw),
        ContractCase("duplicatesAcrossTwoStoresExecuteOnce", LedgerContract.duplicatesAcrossTwoStoresExecuteOnce),
        ContractCase("manyWalletsPayOneMerchantAtOnce", LedgerContract.manyWalletsPayOneMerchantAtOnce),
        ContractCase(
            "concurrentSpendingKeepsEveryCentAndPoint", LedgerContract.concurrentSpendingKeepsEveryCentAndPoint),
        ContractCase("concurrentFirstContactEnrolsOnce", LedgerContract.concurrentFirstContactEnrolsOnce),
        ContractCase(
            "requestNoncesAreUsedOnceAndForgottenAfterTheirWindow",
            LedgerContract.requestNoncesAreUsedOnceAndForgottenAfterTheirWindow),
        ContractCase("unknownAndRevokedWallets", LedgerContract.unknownAndRevokedWallets),
        ContractCase("sandboxEnrolsOnFirstContact", LedgerContract.sandboxEnrolsOnFirstContact),
        ContractCase("bonusPointsAreEarnedAndRedeemed", LedgerContract.bonusPointsAreEarnedAndRedeemed),
        ContractCase("goldBenefitOncePerPeriod", LedgerContract.goldBenefitOncePerPeriod),
        ContractCase("couponsRedeemOnceBeforeTheyExpire", LedgerContract.couponsRedeemOnceBeforeTheyExpire),
        ContractCase("rowsDecodeStrictly", LedgerContract.rowsDecodeStrictly),
        ContractCase("registrationCreatesAWalletOnce", LedgerContract.registrationCreatesAWalletOnce),
        ContractCase("wrongCodesLockARegistration", LedgerContract.wrongCodesLockARegistration),
        ContractCase("expiredCodesAreRefused", LedgerContract.expiredCodesAreRefused),
        ContractCase("restorationMovesTheAccountToTheNewKey", LedgerContract.restorationMovesTheAccountToTheNewKey),
        ContractCase("restorationOfAnUnknownEmailLooksTheSame", LedgerContract.restorationOfAnUnknownEmailLooksTheSame),
        ContractCase("keysAndEmailsBelongToOneWallet", LedgerContract.keysAndEmailsBelongToOneWallet),
        ContractCase("registrationInputIsChecked", LedgerContract.registrationInputIsChecked),
        ContractCase("registrationMigratesAVersion3Database", LedgerContract.registrationMigratesAVersion3Database),
        ContractCase(
            "eachChannelsCodeIsNeededAndTheOutboxForgetsIt",
            LedgerContract.eachChannelsCodeIsNeededAndTheOutboxForgetsIt),
        // Cards and 3-D Secure.
        ContractCase("cardsBelongToOneWallet", LedgerContract.cardsBelongToOneWallet),
        ContractCase("threeDSecureChallengeGatesACard", LedgerContract.threeDSecureChallengeGatesACard),
        ContractCase(
            "failedAndAbandonedChallengesLeaveTheCardUnusable",
            LedgerContract.failedAndAbandonedChallengesLeaveTheCardUnusable),
        ContractCase("cardRowsAreCheckedByTheDatabase", LedgerContract.cardRowsAreCheckedByTheDatabase),
        ContractCase(
            "aCardPaymentIsSettledOnceAndRefundedToItsCard",
            LedgerContract.aCardPaymentIsSettledOnceAndRefundedToItsCard),
        // Refunds
        ContractCase("refundsGiveBackUntilNothingIsLeft", LedgerContract.refundsGiveBackUntilNothingIsLeft),
        ContractCase("refundsAreIdempotentByRefundID", LedgerContract.refundsAreIdempotentByRefundID),
        ContractCase("refundRefusalsHaveExactCodes", LedgerContract.refundRefusalsHaveExactCodes),
        ContractCase("refundedPointsRoundDownAndStopAtZero", LedgerContract.refundedPointsRoundDownAndStopAtZero),
        ContractCase("concurrentRefundsNeverExceedThePayment", LedgerContract.concurrentRefundsNeverExceedThePayment),
        ContractCase("refundsMigrateAVersion4Database", LedgerContract.refundsMigrateAVersion4Database),
        // Merchant service
        ContractCase("transactionsArePagedAndFiltered", LedgerContract.transactionsArePagedAndFiltered),
        ContractCase(
            "transactionsAreSearchedAndTotalledPerPeriod", LedgerContract.transactionsAreSearchedAndTotalledPerPeriod),
        ContractCase(
            "sandboxCardChargesAndRefundsOncePerKey", LedgerContract.sandboxCardChargesAndRefundsOncePerKey),
        ContractCase(
            "registerUsersAndTerminalsAreScopedToTheirMerchant",
            LedgerContract.registerUsersAndTerminalsAreScopedToTheirMerchant),
        // Merchant dashboard
        ContractCase("dashboardSessionsLiveInTheDatabase", LedgerContract.dashboardSessionsLiveInTheDatabase),
        ContractCase(
            "signInAttemptsAreCountedPerKeyWithinTheWindow",
            LedgerContract.signInAttemptsAreCountedPerKeyWithinTheWindow),
        ContractCase(
            "transactionPagesAreFilteredAndScopedToTheMerchant",
            LedgerContract.transactionPagesAreFilteredAndScopedToTheMerchant),
        ContractCase(
            "theMerchantsMembershipsAndCouponsAreListed", LedgerContract.theMerchantsMembershipsAndCouponsAreListed),
        ContractCase("walletServicesSeeOnlyTheWallet", LedgerContract.walletServicesSeeOnlyTheWallet),
        ContractCase("dailyTokensAreKeptPerWalletAndKey", LedgerContract.dailyTokensAreKeptPerWalletAndKey),
        // Offline settlement
        ContractCase(
            "offlinePaymentsAreGuaranteedUpToOneAllowance", LedgerContract.offlinePaymentsAreGuaranteedUpToOneAllowance),
        ContractCase(
            "overlappingTokensDoNotDoubleTheGuarantee", LedgerContract.overlappingTokensDoNotDoubleTheGuarantee),
        ContractCase("offlinePaymentsExecuteOnce", LedgerContract.offlinePaymentsExecuteOnce),
        ContractCase(
            "concurrentOfflinePaymentsStayWithinTheGuarantee",
            LedgerContract.concurrentOfflinePaymentsStayWithinTheGuarantee),
        ContractCase("offlineTokenGuards", LedgerContract.offlineTokenGuards),
        ContractCase(
            "offlineDebtIsBoundedPerWalletAcrossTokenPeriods",
            LedgerContract.offlineDebtIsBoundedPerWalletAcrossTokenPeriods),
        ContractCase(
            "offlinePaymentsAfterTheKeyWasRevokedAreNotCharged",
            LedgerContract.offlinePaymentsAfterTheKeyWasRevokedAreNotCharged),
        ContractCase(
            "offlineSettlementMigratesAVersion9Database", LedgerContract.offlineSettlementMigratesAVersion9Database),
        // The wallet PIN counted by the server; pinless wallets
        ContractCase("wrongPINProofsAreCountedAndBlock", LedgerContract.wrongPINProofsAreCountedAndBlock),
        ContractCase("pinlessWalletsPayUpToTheLimit", LedgerContract.pinlessWalletsPayUpToTheLimit),
        ContractCase("aRestorationDropsTheOldDevicesPIN", LedgerContract.aRestorationDropsTheOldDevicesPIN),
    ]
}

@Suite("Ledger on SQLite")
struct SQLiteLedgerTests {
    @Test(arguments: ContractCase.all) func contract(_ test: ContractCase) async throws { try await test.run(.sqlite) }
}

// A trait such as `.enabled(if:)` applies to a whole test, not to one argument, so the
// PostgreSQL half is a test of its own, shown as skipped when no database is given.
@Suite(
    "Ledger on PostgreSQL",
    .enabled(
        if: TestStores.postgresConfigured,
        "set HORIZON_TEST_POSTGRES_URL (Tools/lib/postgres.sh starts a throw-away PostgreSQL and sets it)"))
struct PostgresLedgerTests {
    @Test(arguments: ContractCase.all) func contract(_ test: ContractCase) async throws {
        try await test.run(.postgres)
    }
}
