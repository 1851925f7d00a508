import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores

/// `redeem`: redeem loyalty at the nearest redemption terminal.
struct Redeem: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Redeem loyalty at the nearest terminal offering it: bonus points, the gold benefit, or a coupon.",
        discussion: """
            Shows what the terminal asks (verified), asks y/N unless --yes, then the result. A coupon \
            terminal needs --coupon CODE (see `horizon-wallet coupons`). Ctrl-C before confirming declines.
            """)

    @Option(help: "The coupon to redeem, for coupon terminals.") var coupon: String?
    @OptionGroup var options: ConfirmOptions

    func validate() throws {
        if let coupon, coupon.isEmpty || coupon.utf8.count > 64 {
            throw ValidationError("--coupon must be 1 to 64 bytes")
        }
    }

    func run() async throws {
        let wallet = try await options.openWallet()
        defer { wallet.radio.shutdown() }
        let hub = SightingHub(radio: wallet.radio)
        let clients: [RedemptionClient] = [.bonusRedemption, .goldRedemption, .couponRedemption].compactMap {
            RedemptionClient.redemptionClient(
                transactionType: $0, radio: wallet.radio, identity: wallet.identity, trustAnchors: wallet.anchors,
                pendingStore: wallet.pendingStore, scanner: hub, logger: wallet.logger)
        }
        let coupon = self.coupon
        let decider = ManualConnectionDeciderCollection(deciders: clients.map(\.manualConnectionDecider))
        let timeout = options.timeout
        try await withInterruptCancellation {
            let flow = try await wallet.flow(clients: clients, decider: decider)
            try await flow.run(
                timeout: timeout,
                script: ConfirmationScript(
                    describe: { offer in
                        switch offer.quantity {
                        case 0: "offers \(offer.item)"
                        default: "offers \(offer.item) for \(offer.quantity) bonus points"
                        }
                    },
                    question: { offer, type in
                        switch type {
                        case .bonusRedemption: return "Redeem \(offer.quantity) points for \(offer.item)?"
                        case .couponRedemption:
                            guard let coupon else {
                                throw CLIError(
                                    "this terminal redeems coupons: name yours with --coupon CODE (see `horizon-wallet coupons`)"
                                )
                            }
                            return "Redeem coupon \(coupon)?"
                        default: return "Use your gold benefit: \(offer.item)?"
                        }
                    },
                    confirm: { (client, offer) throws(PaymentClientError) in
                        guard let redemption = client as? RedemptionClient else {
                            throw .notReady("not a redemption terminal")
                        }
                        return try await redemption.redeem(offer, coupon: coupon)
                    },
                    success: { receipt in
                        let what =
                            receipt.quantity > 0 ? "\(receipt.item) for \(receipt.quantity) points" : receipt.item
                        return [
                            "Redeemed at \(receipt.merchantName): \(what)",
                            "  id \(receipt.paymentID)  reference \(receipt.reference)  bonus points now \(receipt.bonusPointsBalance)",
                        ]
                    }))
        }
    }
}
