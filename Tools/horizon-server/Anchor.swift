import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonServer

struct Anchor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the public trust anchor (what wallets pin) and its fingerprint.")

    @OptionGroup var options: ServerOptions

    @Flag(help: "Print it as JSON (the same shape as GET /v1/anchor).")
    var json = false

    func run() async throws {
        let issuer = try options.issuer(try options.settings())
        let anchor = issuer.anchorDescription
        let console = Console()
        if json {
            try console.json(
                AnchorJSON(
                    publicKey: anchor.publicKey, keyId: anchor.keyId, fingerprint: anchor.fingerprint, name: anchor.name
                ))
        } else {
            console.line("name:        \(anchor.name)")
            console.line("key id:      \(anchor.keyId)")
            console.line("fingerprint: \(anchor.fingerprint)")
            console.line("public key:  \(anchor.publicKey)")
        }
    }

    struct AnchorJSON: Encodable {
        let publicKey: String
        let keyId: String
        let fingerprint: String
        let name: String
    }
}
