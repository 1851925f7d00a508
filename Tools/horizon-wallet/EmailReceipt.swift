import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonServiceClients

/// `receipt PAYMENT_ID`: the server e-mails the receipt of one of this wallet's payments to the
/// address the wallet registered with (WalletTransactionsClient).
struct EmailReceipt: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipt",
        abstract: "Have the server e-mail the receipt of one of this wallet's payments.",
        discussion: """
            The receipt goes to the e-mail address this wallet registered with (`horizon-wallet account` shows it), \
            never to another: merchant, amount, tip, total, currency, time, payment id and the merchant's order \
            reference if the payment was for one. The server queues it with the request and sends it once; asking \
            again while it still waits sends no second mail. Payment ids are in `horizon-wallet history`. Only \
            approved payments of this wallet have a receipt to mail; a wallet in the single-box sandbox has no \
            server to ask.
            """)

    @Argument(help: "The payment's id (32 hex digits), as `horizon-wallet history` shows it.") var paymentID: String
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: TerminalRelayOptions

    func validate() throws {
        guard paymentID.count == 32, paymentID.allSatisfy(\.isHexDigit) else {
            throw ValidationError("the payment id must be 32 hex digits, as `horizon-wallet history` shows it")
        }
    }

    func run() async throws {
        let session = try await WalletSession.open(global.walletFiles, pin: pin, relay: relay, verbose: global.verbose)
        defer { session.finish(json: json) }
        let client = WalletTransactionsClient(identityClient: session.identity, cache: session.cache)
        let queued = try await session.call { () async throws(ServiceClientError) in
            try await client.emailReceipt(paymentID: paymentID.lowercased())
        }
        if json { return try Console().json(queued) }
        print(
            queued.alreadyQueued
                ? "The receipt of payment \(queued.paymentId) is already on its way to \(queued.sentTo)"
                : "The receipt of payment \(queued.paymentId) is being e-mailed to \(queued.sentTo)")
    }
}
