import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import HorizonTracing
import Logging

struct Pay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pay the nearest terminal: show its verified offer, confirm, add a tip.",
        discussion: """
            Ctrl-C before confirming declines the offer. Ctrl-C after confirming leaves the payment pending: \
            it is kept in the wallet store and asked for again by the next `horizon-wallet pay`, and \
            `horizon-wallet history` lists it meanwhile. Exit code 0 only when the payment completed.
            """)

    @Option(help: "The tip to add, e.g. 1.50 (in the offer's currency).") var tip = "0"
    @Option(
        help: ArgumentHelp(
            "Pay with this card (an id from `horizon-wallet cards list`) instead of the account balance.",
            valueName: "card-id")) var card: String?
    @OptionGroup var options: ConfirmOptions

    /// The card named on the command line, as the payment client asks for it.
    struct ChosenCard: PaymentCardIDProvider {
        let paymentCardID: String?
    }

    func validate() throws {
        // Refused here, before any terminal is looked for; its decimals are checked against the offer.
        try AmountArgument.checkAmountSyntax(tip, option: "--tip")
        if let card, card.isEmpty || card.utf8.count > 64 || card.contains(where: { $0.isWhitespace }) {
            throw ValidationError("--card takes a card id as `horizon-wallet cards list` prints it")
        }
    }

    func run() async throws {
        // Traces are exported only when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT names a collector.
        try await TracingSetup.run(
            defaultServiceName: "horizon-wallet", logger: Logs.logger("horizon.wallet", verbose: options.global.verbose)
        ) { try await pay() }
    }

    private func pay() async throws {
        let wallet = try await options.openWallet()
        defer { wallet.radio.shutdown() }
        // A terminal that cannot reach its server asks for the daily token (kept by
        // `horizon-wallet token`); it travels only then.
        let tokens = try WalletSession.dailyTokenClient(
            options.global.walletFiles, signingKey: wallet.identity.signingKey, anchors: wallet.anchors)
        let client = PaymentClient(
            radio: wallet.radio, identity: wallet.identity, trustAnchors: wallet.anchors,
            pendingStore: wallet.pendingStore, paymentCardIDProvider: card.map { ChosenCard(paymentCardID: $0) },
            dailyTokenClient: tokens, logger: wallet.logger)
        let tipText = tip
        let paidWith = card.map { " with card \($0)" } ?? ""
        let timeout = options.timeout
        try await withInterruptCancellation {
            let flow = try await wallet.flow(clients: [client], decider: client.manualConnectionDecider)
            try await flow.run(
                timeout: timeout,
                script: ConfirmationScript(
                    describe: { offer in "asks \(offer.amount)" },
                    question: { offer, _ in
                        let tip: Money
                        do {
                            tip = try Money.parse(tipText, currency: offer.amount.currency)
                        } catch {
                            throw CLIError("--tip: \(error)")
                        }
                        let total = (try? offer.amount.adding(tip)) ?? offer.amount
                        return "Pay \(offer.amount) + tip \(tip) = \(total)\(paidWith)?"
                    },
                    confirm: { (client, offer) throws(PaymentClientError) in
                        guard let payment = client as? PaymentClient else { throw .notReady("not a payment terminal") }
                        guard let tip = try? Money.parse(tipText, currency: offer.amount.currency) else {
                            throw .invalidTip("--tip \(tipText) is not an amount in \(offer.amount.currency.code)")
                        }
                        return try await payment.pay(offer, tip: tip)
                    },
                    success: { receipt in
                        if receipt.acceptedOffline {
                            // Not "paid": the terminal took it against the daily token and the
                            // server settles it when the terminal forwards it.
                            return [
                                "Accepted offline by \(receipt.merchantName): \(receipt.amount) + tip \(receipt.tip) = \(receipt.total)",
                                "  payment \(receipt.paymentID)  settled by the server when the terminal forwards it",
                                "  offline allowance left \(offlineAllowanceText(tokens))",
                            ]
                        }
                        return [
                            "Paid \(receipt.merchantName): \(receipt.amount) + tip \(receipt.tip) = \(receipt.total)",
                            "  payment \(receipt.paymentID)  reference \(receipt.reference)  bonus points +\(receipt.bonusPointsEarned) (now \(receipt.bonusPointsBalance))",
                        ]
                    }))
        }
    }
}

/// Options `pay` and `redeem` share.
