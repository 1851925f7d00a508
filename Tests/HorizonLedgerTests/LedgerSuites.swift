import Testing

// The same contract (LedgerContract.swift) on both stores. The lists are spelled out because a
// Swift Testing trait such as `.enabled(if:)` applies to a whole test, not to one argument of a
// parameterised test, and the PostgreSQL half must show as skipped when no database is given.
// A new contract test is added to both lists.

@Suite("Ledger on SQLite")
struct SQLiteLedgerTests {
    @Test func migratesAnEmptyDatabase() async throws { try await LedgerContract.migratesAnEmptyDatabase(.sqlite) }
    @Test func migratesAnOlderDatabase() async throws { try await LedgerContract.migratesAnOlderDatabase(.sqlite) }
    @Test func refusesANewerSchema() async throws { try await LedgerContract.refusesANewerSchema(.sqlite) }
    @Test func merchantsWalletsAndRegisterUsers() async throws {
        try await LedgerContract.merchantsWalletsAndRegisterUsers(.sqlite)
    }
    @Test func postingsSumToZeroPerCurrency() async throws {
        try await LedgerContract.postingsSumToZeroPerCurrency(.sqlite)
    }
    @Test func walletNeverGoesBelowZero() async throws { try await LedgerContract.walletNeverGoesBelowZero(.sqlite) }
    @Test func aRetryGetsTheStoredResult() async throws { try await LedgerContract.aRetryGetsTheStoredResult(.sqlite) }
    @Test func otherTermsAreAConflict() async throws { try await LedgerContract.otherTermsAreAConflict(.sqlite) }
    @Test func concurrentDuplicatesExecuteOnce() async throws {
        try await LedgerContract.concurrentDuplicatesExecuteOnce(.sqlite)
    }
    @Test func concurrentPaymentsNeverOverdraw() async throws {
        try await LedgerContract.concurrentPaymentsNeverOverdraw(.sqlite)
    }
    @Test func duplicatesAcrossTwoStoresExecuteOnce() async throws {
        try await LedgerContract.duplicatesAcrossTwoStoresExecuteOnce(.sqlite)
    }
    @Test func manyWalletsPayOneMerchantAtOnce() async throws {
        try await LedgerContract.manyWalletsPayOneMerchantAtOnce(.sqlite)
    }
    @Test func concurrentSpendingKeepsEveryCentAndPoint() async throws {
        try await LedgerContract.concurrentSpendingKeepsEveryCentAndPoint(.sqlite)
    }
    @Test func concurrentFirstContactEnrolsOnce() async throws {
        try await LedgerContract.concurrentFirstContactEnrolsOnce(.sqlite)
    }
    @Test func requestNoncesAreUsedOnceAndForgottenAfterTheirWindow() async throws {
        try await LedgerContract.requestNoncesAreUsedOnceAndForgottenAfterTheirWindow(.sqlite)
    }
    @Test func unknownAndRevokedWallets() async throws { try await LedgerContract.unknownAndRevokedWallets(.sqlite) }
    @Test func sandboxEnrolsOnFirstContact() async throws {
        try await LedgerContract.sandboxEnrolsOnFirstContact(.sqlite)
    }
    @Test func bonusPointsAreEarnedAndRedeemed() async throws {
        try await LedgerContract.bonusPointsAreEarnedAndRedeemed(.sqlite)
    }
    @Test func goldBenefitOncePerPeriod() async throws { try await LedgerContract.goldBenefitOncePerPeriod(.sqlite) }
    @Test func couponsRedeemOnceBeforeTheyExpire() async throws {
        try await LedgerContract.couponsRedeemOnceBeforeTheyExpire(.sqlite)
    }
    @Test func rowsDecodeStrictly() async throws { try await LedgerContract.rowsDecodeStrictly(.sqlite) }
    @Test func registrationCreatesAWalletOnce() async throws {
        try await LedgerContract.registrationCreatesAWalletOnce(.sqlite)
    }
    @Test func wrongCodesLockARegistration() async throws {
        try await LedgerContract.wrongCodesLockARegistration(.sqlite)
    }
    @Test func expiredCodesAreRefused() async throws { try await LedgerContract.expiredCodesAreRefused(.sqlite) }
    @Test func restorationMovesTheAccountToTheNewKey() async throws {
        try await LedgerContract.restorationMovesTheAccountToTheNewKey(.sqlite)
    }
    @Test func restorationOfAnUnknownEmailLooksTheSame() async throws {
        try await LedgerContract.restorationOfAnUnknownEmailLooksTheSame(.sqlite)
    }
    @Test func keysAndEmailsBelongToOneWallet() async throws {
        try await LedgerContract.keysAndEmailsBelongToOneWallet(.sqlite)
    }
    @Test func registrationInputIsChecked() async throws {
        try await LedgerContract.registrationInputIsChecked(.sqlite)
    }
    @Test func registrationMigratesAVersion3Database() async throws {
        try await LedgerContract.registrationMigratesAVersion3Database(.sqlite)
    }
    @Test func eachChannelsCodeIsNeededAndTheOutboxForgetsIt() async throws {
        try await LedgerContract.eachChannelsCodeIsNeededAndTheOutboxForgetsIt(.sqlite)
    }
    // Cards and 3-D Secure.
    @Test func cardsBelongToOneWallet() async throws { try await LedgerContract.cardsBelongToOneWallet(.sqlite) }
    @Test func threeDSecureChallengeGatesACard() async throws {
        try await LedgerContract.threeDSecureChallengeGatesACard(.sqlite)
    }
    @Test func failedAndAbandonedChallengesLeaveTheCardUnusable() async throws {
        try await LedgerContract.failedAndAbandonedChallengesLeaveTheCardUnusable(.sqlite)
    }
    @Test func cardRowsAreCheckedByTheDatabase() async throws {
        try await LedgerContract.cardRowsAreCheckedByTheDatabase(.sqlite)
    }
    @Test func aCardPaymentIsSettledOnceAndRefundedToItsCard() async throws {
        try await LedgerContract.aCardPaymentIsSettledOnceAndRefundedToItsCard(.sqlite)
    }
    // Refunds
    @Test func refundsGiveBackUntilNothingIsLeft() async throws {
        try await LedgerContract.refundsGiveBackUntilNothingIsLeft(.sqlite)
    }
    @Test func refundsAreIdempotentByRefundID() async throws {
        try await LedgerContract.refundsAreIdempotentByRefundID(.sqlite)
    }
    @Test func refundRefusalsHaveExactCodes() async throws {
        try await LedgerContract.refundRefusalsHaveExactCodes(.sqlite)
    }
    @Test func refundedPointsRoundDownAndStopAtZero() async throws {
        try await LedgerContract.refundedPointsRoundDownAndStopAtZero(.sqlite)
    }
    @Test func concurrentRefundsNeverExceedThePayment() async throws {
        try await LedgerContract.concurrentRefundsNeverExceedThePayment(.sqlite)
    }
    @Test func refundsMigrateAVersion4Database() async throws {
        try await LedgerContract.refundsMigrateAVersion4Database(.sqlite)
    }
    // Merchant service
    @Test func transactionsArePagedAndFiltered() async throws {
        try await LedgerContract.transactionsArePagedAndFiltered(.sqlite)
    }
    @Test func registerUsersAndTerminalsAreScopedToTheirMerchant() async throws {
        try await LedgerContract.registerUsersAndTerminalsAreScopedToTheirMerchant(.sqlite)
    }
    // Merchant dashboard
    @Test func dashboardSessionsLiveInTheDatabase() async throws {
        try await LedgerContract.dashboardSessionsLiveInTheDatabase(.sqlite)
    }
    @Test func signInAttemptsAreCountedPerKeyWithinTheWindow() async throws {
        try await LedgerContract.signInAttemptsAreCountedPerKeyWithinTheWindow(.sqlite)
    }
    @Test func transactionPagesAreFilteredAndScopedToTheMerchant() async throws {
        try await LedgerContract.transactionPagesAreFilteredAndScopedToTheMerchant(.sqlite)
    }
    @Test func theMerchantsMembershipsAndCouponsAreListed() async throws {
        try await LedgerContract.theMerchantsMembershipsAndCouponsAreListed(.sqlite)
    }
    @Test func walletServicesSeeOnlyTheWallet() async throws {
        try await LedgerContract.walletServicesSeeOnlyTheWallet(.sqlite)
    }
    @Test func dailyTokensAreKeptPerWalletAndKey() async throws {
        try await LedgerContract.dailyTokensAreKeptPerWalletAndKey(.sqlite)
    }
    // Offline settlement
    @Test func offlinePaymentsAreGuaranteedUpToOneAllowance() async throws {
        try await LedgerContract.offlinePaymentsAreGuaranteedUpToOneAllowance(.sqlite)
    }
    @Test func overlappingTokensDoNotDoubleTheGuarantee() async throws {
        try await LedgerContract.overlappingTokensDoNotDoubleTheGuarantee(.sqlite)
    }
    @Test func offlinePaymentsExecuteOnce() async throws {
        try await LedgerContract.offlinePaymentsExecuteOnce(.sqlite)
    }
    @Test func concurrentOfflinePaymentsStayWithinTheGuarantee() async throws {
        try await LedgerContract.concurrentOfflinePaymentsStayWithinTheGuarantee(.sqlite)
    }
    @Test func offlineTokenGuards() async throws {
        try await LedgerContract.offlineTokenGuards(.sqlite)
    }
    @Test func offlineDebtIsBoundedPerWalletAcrossTokenPeriods() async throws {
        try await LedgerContract.offlineDebtIsBoundedPerWalletAcrossTokenPeriods(.sqlite)
    }
    @Test func offlinePaymentsAfterTheKeyWasRevokedAreNotCharged() async throws {
        try await LedgerContract.offlinePaymentsAfterTheKeyWasRevokedAreNotCharged(.sqlite)
    }
    @Test func offlineSettlementMigratesAVersion9Database() async throws {
        try await LedgerContract.offlineSettlementMigratesAVersion9Database(.sqlite)
    }
}

@Suite(
    "Ledger on PostgreSQL",
    .enabled(
        if: TestStores.postgresConfigured,
        "set HORIZON_TEST_POSTGRES_URL (Tools/lib/postgres.sh starts a throw-away PostgreSQL and sets it)"))
struct PostgresLedgerTests {
    @Test func migratesAnEmptyDatabase() async throws { try await LedgerContract.migratesAnEmptyDatabase(.postgres) }
    @Test func migratesAnOlderDatabase() async throws { try await LedgerContract.migratesAnOlderDatabase(.postgres) }
    @Test func refusesANewerSchema() async throws { try await LedgerContract.refusesANewerSchema(.postgres) }
    @Test func merchantsWalletsAndRegisterUsers() async throws {
        try await LedgerContract.merchantsWalletsAndRegisterUsers(.postgres)
    }
    @Test func postingsSumToZeroPerCurrency() async throws {
        try await LedgerContract.postingsSumToZeroPerCurrency(.postgres)
    }
    @Test func walletNeverGoesBelowZero() async throws { try await LedgerContract.walletNeverGoesBelowZero(.postgres) }
    @Test func aRetryGetsTheStoredResult() async throws {
        try await LedgerContract.aRetryGetsTheStoredResult(.postgres)
    }
    @Test func otherTermsAreAConflict() async throws { try await LedgerContract.otherTermsAreAConflict(.postgres) }
    @Test func concurrentDuplicatesExecuteOnce() async throws {
        try await LedgerContract.concurrentDuplicatesExecuteOnce(.postgres)
    }
    @Test func concurrentPaymentsNeverOverdraw() async throws {
        try await LedgerContract.concurrentPaymentsNeverOverdraw(.postgres)
    }
    @Test func duplicatesAcrossTwoStoresExecuteOnce() async throws {
        try await LedgerContract.duplicatesAcrossTwoStoresExecuteOnce(.postgres)
    }
    @Test func manyWalletsPayOneMerchantAtOnce() async throws {
        try await LedgerContract.manyWalletsPayOneMerchantAtOnce(.postgres)
    }
    @Test func concurrentSpendingKeepsEveryCentAndPoint() async throws {
        try await LedgerContract.concurrentSpendingKeepsEveryCentAndPoint(.postgres)
    }
    @Test func concurrentFirstContactEnrolsOnce() async throws {
        try await LedgerContract.concurrentFirstContactEnrolsOnce(.postgres)
    }
    @Test func requestNoncesAreUsedOnceAndForgottenAfterTheirWindow() async throws {
        try await LedgerContract.requestNoncesAreUsedOnceAndForgottenAfterTheirWindow(.postgres)
    }
    @Test func unknownAndRevokedWallets() async throws { try await LedgerContract.unknownAndRevokedWallets(.postgres) }
    @Test func sandboxEnrolsOnFirstContact() async throws {
        try await LedgerContract.sandboxEnrolsOnFirstContact(.postgres)
    }
    @Test func bonusPointsAreEarnedAndRedeemed() async throws {
        try await LedgerContract.bonusPointsAreEarnedAndRedeemed(.postgres)
    }
    @Test func goldBenefitOncePerPeriod() async throws { try await LedgerContract.goldBenefitOncePerPeriod(.postgres) }
    @Test func couponsRedeemOnceBeforeTheyExpire() async throws {
        try await LedgerContract.couponsRedeemOnceBeforeTheyExpire(.postgres)
    }
    @Test func rowsDecodeStrictly() async throws { try await LedgerContract.rowsDecodeStrictly(.postgres) }
    @Test func registrationCreatesAWalletOnce() async throws {
        try await LedgerContract.registrationCreatesAWalletOnce(.postgres)
    }
    @Test func wrongCodesLockARegistration() async throws {
        try await LedgerContract.wrongCodesLockARegistration(.postgres)
    }
    @Test func expiredCodesAreRefused() async throws { try await LedgerContract.expiredCodesAreRefused(.postgres) }
    @Test func restorationMovesTheAccountToTheNewKey() async throws {
        try await LedgerContract.restorationMovesTheAccountToTheNewKey(.postgres)
    }
    @Test func restorationOfAnUnknownEmailLooksTheSame() async throws {
        try await LedgerContract.restorationOfAnUnknownEmailLooksTheSame(.postgres)
    }
    @Test func keysAndEmailsBelongToOneWallet() async throws {
        try await LedgerContract.keysAndEmailsBelongToOneWallet(.postgres)
    }
    @Test func registrationInputIsChecked() async throws {
        try await LedgerContract.registrationInputIsChecked(.postgres)
    }
    @Test func registrationMigratesAVersion3Database() async throws {
        try await LedgerContract.registrationMigratesAVersion3Database(.postgres)
    }
    @Test func eachChannelsCodeIsNeededAndTheOutboxForgetsIt() async throws {
        try await LedgerContract.eachChannelsCodeIsNeededAndTheOutboxForgetsIt(.postgres)
    }
    // Cards and 3-D Secure.
    @Test func cardsBelongToOneWallet() async throws { try await LedgerContract.cardsBelongToOneWallet(.postgres) }
    @Test func threeDSecureChallengeGatesACard() async throws {
        try await LedgerContract.threeDSecureChallengeGatesACard(.postgres)
    }
    @Test func failedAndAbandonedChallengesLeaveTheCardUnusable() async throws {
        try await LedgerContract.failedAndAbandonedChallengesLeaveTheCardUnusable(.postgres)
    }
    @Test func cardRowsAreCheckedByTheDatabase() async throws {
        try await LedgerContract.cardRowsAreCheckedByTheDatabase(.postgres)
    }
    @Test func aCardPaymentIsSettledOnceAndRefundedToItsCard() async throws {
        try await LedgerContract.aCardPaymentIsSettledOnceAndRefundedToItsCard(.postgres)
    }
    // Refunds
    @Test func refundsGiveBackUntilNothingIsLeft() async throws {
        try await LedgerContract.refundsGiveBackUntilNothingIsLeft(.postgres)
    }
    @Test func refundsAreIdempotentByRefundID() async throws {
        try await LedgerContract.refundsAreIdempotentByRefundID(.postgres)
    }
    @Test func refundRefusalsHaveExactCodes() async throws {
        try await LedgerContract.refundRefusalsHaveExactCodes(.postgres)
    }
    @Test func refundedPointsRoundDownAndStopAtZero() async throws {
        try await LedgerContract.refundedPointsRoundDownAndStopAtZero(.postgres)
    }
    @Test func concurrentRefundsNeverExceedThePayment() async throws {
        try await LedgerContract.concurrentRefundsNeverExceedThePayment(.postgres)
    }
    @Test func refundsMigrateAVersion4Database() async throws {
        try await LedgerContract.refundsMigrateAVersion4Database(.postgres)
    }
    // Merchant service
    @Test func transactionsArePagedAndFiltered() async throws {
        try await LedgerContract.transactionsArePagedAndFiltered(.postgres)
    }
    @Test func registerUsersAndTerminalsAreScopedToTheirMerchant() async throws {
        try await LedgerContract.registerUsersAndTerminalsAreScopedToTheirMerchant(.postgres)
    }
    // Merchant dashboard
    @Test func dashboardSessionsLiveInTheDatabase() async throws {
        try await LedgerContract.dashboardSessionsLiveInTheDatabase(.postgres)
    }
    @Test func signInAttemptsAreCountedPerKeyWithinTheWindow() async throws {
        try await LedgerContract.signInAttemptsAreCountedPerKeyWithinTheWindow(.postgres)
    }
    @Test func transactionPagesAreFilteredAndScopedToTheMerchant() async throws {
        try await LedgerContract.transactionPagesAreFilteredAndScopedToTheMerchant(.postgres)
    }
    @Test func theMerchantsMembershipsAndCouponsAreListed() async throws {
        try await LedgerContract.theMerchantsMembershipsAndCouponsAreListed(.postgres)
    }
    @Test func walletServicesSeeOnlyTheWallet() async throws {
        try await LedgerContract.walletServicesSeeOnlyTheWallet(.postgres)
    }
    @Test func dailyTokensAreKeptPerWalletAndKey() async throws {
        try await LedgerContract.dailyTokensAreKeptPerWalletAndKey(.postgres)
    }
    // Offline settlement
    @Test func offlinePaymentsAreGuaranteedUpToOneAllowance() async throws {
        try await LedgerContract.offlinePaymentsAreGuaranteedUpToOneAllowance(.postgres)
    }
    @Test func overlappingTokensDoNotDoubleTheGuarantee() async throws {
        try await LedgerContract.overlappingTokensDoNotDoubleTheGuarantee(.postgres)
    }
    @Test func offlinePaymentsExecuteOnce() async throws {
        try await LedgerContract.offlinePaymentsExecuteOnce(.postgres)
    }
    @Test func concurrentOfflinePaymentsStayWithinTheGuarantee() async throws {
        try await LedgerContract.concurrentOfflinePaymentsStayWithinTheGuarantee(.postgres)
    }
    @Test func offlineTokenGuards() async throws {
        try await LedgerContract.offlineTokenGuards(.postgres)
    }
    @Test func offlineDebtIsBoundedPerWalletAcrossTokenPeriods() async throws {
        try await LedgerContract.offlineDebtIsBoundedPerWalletAcrossTokenPeriods(.postgres)
    }
    @Test func offlinePaymentsAfterTheKeyWasRevokedAreNotCharged() async throws {
        try await LedgerContract.offlinePaymentsAfterTheKeyWasRevokedAreNotCharged(.postgres)
    }
    @Test func offlineSettlementMigratesAVersion9Database() async throws {
        try await LedgerContract.offlineSettlementMigratesAVersion9Database(.postgres)
    }
}
