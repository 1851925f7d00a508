import Crypto
import HorizonCore
import HorizonLedger
import HorizonProtocol

/// A wallet registered straight in the ledger, with a key of its own and money on its account:
/// what most settlement tests start from.
struct FundedWallet: Sendable {
    let key: P256.Signing.PrivateKey
    let id: WalletID
}

extension TestServer {
    /// Registers a wallet named `name` and deposits `minorUnits` euro cents on its account.
    func fundedWallet(_ minorUnits: Int64, name: String = "Alex") async throws -> FundedWallet {
        let key = P256.Signing.PrivateKey()
        let id = try await ledger.createWallet(
            name: name, publicKey: try PublicKeyBytes(bytes: Array(key.publicKey.x963Representation))
        ).id
        try await ledger.deposit(try Money(minorUnits: minorUnits, currency: .eur), to: id)
        return FundedWallet(key: key, id: id)
    }
}
