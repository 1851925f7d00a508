import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonServiceClients

/// `cards add|list|update|remove`: the wallet's payment cards on its server, through
/// `WalletClient` with the wallet's key.
struct Cards: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The wallet's payment cards on its server: add (with 3-D Secure), list, update, remove.",
        discussion: """
            The server keeps only a token, the brand and the last four digits, never the number or the CVC. \
            On a sandbox server only its test numbers are accepted (docs/terminal-and-wallet.md, "Cards"), for example \
            4242 4242 4242 4242, or 4000 0000 0000 3220 for a card that needs 3-D Secure.
            """,
        subcommands: [AddCard.self, ListCards.self, UpdateCard.self, RemoveCard.self])
}

struct AddCard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract:
            "Add a card. A card that needs 3-D Secure prints a link; open it in a browser and answer the challenge.",
        discussion: """
            The CVC is read from --cvc-file, else $\(cvcVariable), else asked for (it is never taken on the \
            command line, where other users' `ps` would see it). The command waits for the challenge, \
            asking the server every second, up to --wait seconds.
            """)
    static let cvcVariable = "HORIZON_WALLET_CARD_CVC"

    @Option(help: "The name on the card.") var cardholder: String
    @Option(help: "The card number (spaces allowed).") var number: String
    @Option(help: "The expiry as printed on the card, MM/YY.") var expiry: String
    @Option(help: "Read the CVC from this file (else $\(cvcVariable), else a prompt).") var cvcFile: String?
    @Option(help: "Your own name for the card (default: brand and last four digits).") var name: String?
    @Option(help: "How long to wait for a 3-D Secure challenge to be answered, in seconds.") var wait: Int = 600
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...3600).contains(wait) else { throw ValidationError("--wait must be 1 to 3600 seconds") }
    }

    func run() async throws {
        let (wallet, url) = try await CardCommands.walletClient(global, pin)
        let cvc: String
        if cvcFile == nil, let value = ProcessInfo.processInfo.environment[Self.cvcVariable], !value.isEmpty {
            cvc = value
        } else {
            cvc = try readSecret(
                prompt: "CVC: ", file: cvcFile, what: "CVC", fileOption: "--cvc-file or $\(Self.cvcVariable)")
        }
        let result = try await CardCommands.call(url) { () async throws in
            try await wallet.addPaymentCard(
                cardholder: cardholder, cardNumber: number, cvc: cvc, expDate: expiry, name: name)
        }
        let card: PaymentCard
        switch result {
        case .added(let added): card = added
        case .challengeRequired(let pending, let details):
            // The link is shown at once, so a person or a script can open it while the command
            // waits: on standard output, or on standard error with --json (which keeps standard
            // output for the JSON alone).
            let console = Console()
            let json = json
            @Sendable func say(_ text: String) {
                if json { FileHandle.standardError.write(Data((text + "\n").utf8)) } else { console.line(text) }
            }
            say("This card needs 3-D Secure. Open this link in a browser and answer the challenge:")
            say(details.redirectionURL.absoluteString)
            do {
                card = try await wallet.waitForChallenge(details, timeout: .seconds(wait)) { waited in
                    let progress = "Waiting for the challenge to be answered… \(waited.components.seconds) s"
                    if json { say(progress) } else { console.status(progress) }
                }
            } catch {
                throw CLIError(
                    "\(CardCommands.sentence(error, server: url)) (card \(pending.id) stays unusable; remove it with `horizon-wallet cards remove \(pending.id)`)"
                )
            }
            if !json { console.line() }
        }
        if json { return try Console().json(card) }
        print("Added \(CardCommands.describe(card)); it can pay.")
    }
}

struct ListCards: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the wallet's cards.")

    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: TerminalRelayOptions

    func run() async throws {
        guard try WalletServer.account(global.walletFiles) != nil else { throw CardCommands.unregistered }
        // Through the session's identity, so that --via-terminal routes this call too.
        let session = try await WalletSession.open(global.walletFiles, pin: pin, relay: relay, verbose: global.verbose)
        defer { session.finish(json: json) }
        let url = try WalletServer.url(session.account.server)
        let wallet = WalletClient(identityClient: session.identity)
        let cards: [PaymentCard]
        do { cards = try await wallet.getWallet() } catch {
            if case .server(let error) = error { throw CLIError(WalletServer.describe(error, server: url)) }
            throw CLIError(session.describe(error))
        }
        if json { return try Console().json(cards) }
        if cards.isEmpty { return print("No cards. Add one with `horizon-wallet cards add`.") }
        for card in cards { print("\(card.id)  \(CardCommands.describe(card))") }
    }
}

struct UpdateCard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update", abstract: "Switch a card on or off, or rename it.")

    @Argument(help: "The card's id (see `cards list`).") var cardID: String
    @Option(help: "true: the card may pay; false: it may not.") var active: Bool?
    @Option(help: "Your own name for the card.") var name: String?
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard active != nil || name != nil else { throw ValidationError("give --active, --name or both") }
    }

    func run() async throws {
        let (wallet, url) = try await CardCommands.walletClient(global, pin)
        let card = try await CardCommands.call(url) { () async throws in
            let cards = try await wallet.getWallet()
            guard let card = cards.first(where: { $0.id == cardID }) else {
                throw ServerClientError.refused(
                    status: 404, code: "card_not_found", message: "this wallet has no card \(cardID)", requestID: "-")
            }
            return try await wallet.updateCard(card, status: active ?? card.isActive, cardName: name ?? card.name)
        }
        if json { return try Console().json(card) }
        print("Updated \(CardCommands.describe(card)).")
    }
}

struct RemoveCard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove a card; it can no longer pay.")

    @Argument(help: "The card's id (see `cards list`).") var cardID: String
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let (wallet, url) = try await CardCommands.walletClient(global, pin)
        try await CardCommands.call(url) { () async throws in try await wallet.removeCard(id: cardID)
        }
        print("Removed card \(cardID).")
    }
}

enum CardCommands {
    static var unregistered: CLIError {
        CLIError(
            "this wallet is not registered with a server; cards live there. Run `horizon-wallet register --server URL ...` first"
        )
    }

    /// The wallet's client on the server it registered with, signing with its (unlocked) key.
    static func walletClient(_ global: GlobalOptions, _ pin: PINOptions) async throws -> (WalletClient, URL) {
        let files = global.walletFiles
        guard let account = try WalletServer.account(files) else { throw unregistered }
        let url = try WalletServer.url(account.server)
        let key = try await WalletKeys.unlock(files, pin: pin.current)
        return (WalletClient(server: HorizonServerClient(serverURL: url, signingKey: key)), url)
    }

    static func call<T: Sendable>(_ server: URL, _ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw CLIError(sentence(error, server: server)) }
    }

    static func sentence(_ error: any Error, server: URL) -> String {
        switch error {
        case let error as ServerClientError: WalletServer.describe(error, server: server)
        case ServiceClientError.server(let error), WalletClientError.server(.server(let error)):
            WalletServer.describe(error, server: server)
        default: "\(error)"
        }
    }

    /// "Visa •••• 4242, expires 12/30, Alice Smith (Everyday), active".
    static func describe(_ card: PaymentCard) -> String {
        let brand =
            switch card.brand {
            case .visa: "Visa"
            case .mastercard: "Mastercard"
            case .amex: "American Express"
            }
        let expiry = String(format: "%02d/%02d", card.expiryMonth, card.expiryYear % 100)
        let state = !card.isReady ? "waiting for 3-D Secure" : card.isActive ? "active" : "inactive"
        return "\(brand) •••• \(card.lastFour), expires \(expiry), \(card.cardholder) (\(card.name)), \(state)"
    }
}
