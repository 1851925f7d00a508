import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRadioCLISupport
import HorizonServiceClients

/// `refund`: gives back all or part of a payment, to the method it was paid with, once per refund id.
struct RefundCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refund", abstract: "Refund all or part of a payment this merchant received.",
        discussion: """
            Gives money back to the wallet that paid, as many times as needed until nothing of the payment's \
            amount plus tip is left; bonus points the payment earned are taken back in proportion. Each refund \
            has a refund id: given with --refund-id, or made and printed here. If the answer is lost (the server \
            did not answer in time), run the same command again with the printed --refund-id: the refund is made \
            once, and the retry prints it. An activated terminal refunds at its server, signed in as the merchant's \
            admin (--admin-email; a terminal's own key may not refund); the single-box sandbox refunds in its own ledger.

            Examples:
              horizon-terminal refund 3f2a…  (refunds what is left)
              horizon-terminal refund 3f2a… --amount 1.50 --refund-id r-0001
              horizon-terminal refund 3f2a… --admin-email owner@example.com   (an activated terminal)
            """)

    @Argument(help: "The payment's id (32 hex digits; `horizon-terminal transactions` lists them).")
    var paymentID: String
    @Option(help: "How much to refund, e.g. 1.50 (default: everything not refunded yet).") var amount: String?
    @Option(help: "The refund id (1 to 64 characters of A-Z a-z 0-9 . _ : -) to make or retry.") var refundID: String?
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions
    @OptionGroup var admin: AdminSignInOptions

    func validate() throws {
        guard let bytes = [UInt8](hexString: paymentID.lowercased()), bytes.count == PaymentID.byteCount else {
            throw ValidationError("the payment id must be 32 hex digits (horizon-terminal transactions lists them)")
        }
        if let amount { try AmountArgument.checkAmountSyntax(amount, option: "--amount") }
        if let refundID, !RefundID(rawValue: refundID).isWellFormed {
            throw ValidationError("--refund-id must be 1 to 64 characters of A-Z a-z 0-9 . _ : -")
        }
    }

    func run() async throws {
        // The server refunds only for the merchant's admin: a till's key cannot pay money out.
        // Said before anything is asked or sent.
        if admin.adminEmail == nil, global.terminalFiles.directory.exists(TerminalFiles.settings),
            try global.terminalFiles.loadSettings().server != nil
        {
            throw CLIError(
                "a refund at the Horizon server needs the merchant's admin: add --admin-email EMAIL (the password is asked, or read from --password-file)"
            )
        }
        let refundID = refundID ?? MerchantServiceClient.makeRefundID()
        let paymentID = paymentID.lowercased()
        // Printed before anything is asked, so that a lost answer can be retried with the same id.
        if self.refundID == nil, !json { FileHandle.standardError.write(Data("refund id \(refundID)\n".utf8)) }
        let row: RefundRow
        if let merchant = try await admin.merchantService(global) {
            let details = try await merchant.run { try await $0.transaction(paymentID: paymentID) }
            if details.transaction.outcome == .declined { throw CLIError(Self.declined(paymentID)) }
            let currency = try AmountArgument.currency(details.transaction.currency)
            let minorUnits = try amount.map {
                try AmountArgument.money($0, in: currency, option: "--amount").minorUnits
            }
            guard let minorUnits = minorUnits ?? (details.refundableAmount > 0 ? details.refundableAmount : nil) else {
                throw CLIError("nothing is left to refund of payment \(paymentID)")
            }
            let refund = try await merchant.run {
                try await $0.refund(
                    paymentID: paymentID, amount: minorUnits, currency: currency.code, refundID: refundID)
            }
            row = RefundRow(refund)
        } else {
            let ledger = try await global.lockedTerminalFiles().loadLedger()
            guard let bytes = [UInt8](hexString: paymentID), let id = try? PaymentID(bytes: bytes),
                let details = try await ledger.ledger.transactionDetails(id, merchant: ledger.merchant.id)
            else { throw CLIError("no payment \(paymentID) was executed at this terminal") }
            if case .declined = details.transaction.result.outcome { throw CLIError(Self.declined(paymentID)) }
            let money =
                try amount.map { try AmountArgument.money($0, in: ledger.currency, option: "--amount") }
                ?? details.refundable
            guard money.minorUnits > 0 || amount != nil else {
                throw CLIError("nothing is left to refund of payment \(paymentID)")
            }
            let request = RefundRequest(refundID: RefundID(rawValue: refundID), paymentID: id, amount: money)
            switch await Self.refund(request, in: ledger) {
            case .success(let refund): row = RefundRow(refund)
            case .failure(.refundRefused(let refusal)):
                throw CLIError("\(refusal) [\(refusal.code)]", code: refusal.code)
            case .failure(let error): throw CLIError("the refund failed: \(error)")
            }
        }
        if json {
            try Console().json(row)
        } else {
            print(
                "refunded \(row.amount.formatted) of payment \(row.paymentId) to the \(row.destination.replacingOccurrences(of: "_", with: " ")) (refund \(row.refundId), \(row.bonusPointsReversed) bonus points taken back)"
                    .sanitizedForDisplay)
        }
    }
}

extension RefundCommand {
    /// Said before anything is asked of the ledger: a declined payment moved no money.
    static func declined(_ paymentID: String) -> String {
        "payment \(paymentID) was declined and nothing was charged, so there is nothing to refund"
    }

    /// The sandbox's refund, its refusal as a value.
    static func refund(_ request: RefundRequest, in ledger: InProcessLedger) async -> Result<
        HorizonLedger.Refund, LedgerError
    > {
        do { return .success(try await ledger.ledger.refund(request, merchant: ledger.merchant.id)) } catch {
            return .failure(error)
        }
    }
}

/// A refund as the CLI prints it (the shape every `--json` shares).
typealias RefundRow = JSONRefund

extension JSONRefund {
    init(_ refund: MerchantServiceClient.Refund) {
        self.init(
            refundId: refund.refundId, paymentId: refund.paymentId,
            amount: JSONMoney(minorUnits: refund.amount, currency: refund.currency), destination: refund.destination,
            bonusPointsReversed: refund.bonusPointsReversed, createdAt: refund.createdAt)
    }

    init(_ refund: HorizonLedger.Refund) {
        self.init(
            refundId: refund.refundID.rawValue, paymentId: refund.paymentID.bytes.hexString,
            amount: JSONMoney(refund.amount), destination: refund.destination.rawValue,
            bonusPointsReversed: refund.bonusPointsReversed, createdAt: refund.createdAt)
    }
}

// MARK: The merchant service of an activated terminal

extension GlobalOptions {
    /// The merchant service at the server this terminal was activated with, signed with the
    /// terminal's key; nil for the single-box sandbox (no server), whose commands use the
    /// in-process ledger. Opens no ledger file.
    func merchantService() async throws -> MerchantServiceClient? {
        let files = terminalFiles
        guard let server = try files.loadSettings().server else { return nil }
        let url: URL
        do { url = try HorizonServerClient.url(server) } catch { throw CLIError("\(error)") }
        let client = MerchantServiceClient(serverURL: url, terminalKey: try files.loadIdentity().signingKey)
        do { try await client.start() } catch {
            throw CLIError(Self.advice(for: error, server: server), code: error.code ?? JSONErrorCode.commandFailed)
        }
        return client
    }

    /// What to tell the cashier about a failed merchant-service call.
    static func advice(for error: MerchantServiceError, server: String) -> String {
        switch error.code {
        case "terminal_revoked":
            "\(error)\nThis terminal's key was revoked; activate it again (horizon-terminal activate --force)."
        case "terminal_unknown":
            "\(error)\nThe server does not know this terminal; activate it (horizon-terminal activate --server \(server))."
        case nil where !(error == .stopped):
            "\(error)\nCheck that the server at \(server) is running and reachable, then retry."
        default: "\(error)"
        }
    }
}

extension MerchantServiceClient {
    /// Runs one call and turns its failure into the CLI's error, with the server's code.
    nonisolated func run<T: Sendable>(_ body: (MerchantServiceClient) async throws -> T) async throws -> T {
        do { return try await body(self) } catch let error as MerchantServiceError {
            throw CLIError(
                GlobalOptions.advice(for: error, server: "its server"), code: error.code ?? JSONErrorCode.commandFailed)
        }
    }
}
