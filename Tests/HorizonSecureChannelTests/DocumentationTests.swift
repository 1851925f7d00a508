import Foundation
import HorizonTestSupport
import Testing

@testable import HorizonSecureChannel

/// `docs/protocol.md` names the handshake's version and labels as the code has them: a change to
/// the wire that leaves the page behind fails here.
@Suite("The protocol page matches the secure channel")
struct DocumentationTests {
    static var page: String {
        get throws { try RepositoryFile.text("docs/protocol.md") }
    }

    @Test func theHandshakesVersionAndLabelsAreTheCodes() throws {
        let page = try Self.page
        #expect(page.contains("**Version** `\(HandshakeFormat.version)`"))
        for label in [
            HandshakeFormat.transcriptLabel, HandshakeFormat.walletToTerminalInfo, HandshakeFormat.terminalToWalletInfo,
            HandshakeFormat.confirmationCodeInfo, TerminalCredential.signatureLabel, DailyToken.signatureLabel,
        ] {
            let text = String(decoding: label, as: UTF8.self)
            #expect(page.contains("`\(text)`"), "docs/protocol.md does not name \(text)")
        }
    }
}
