/// The texts a wallet key signs to prove, when registering or restoring, that the caller holds
/// the key it names (`openapi.yaml`, `WalletRegistrationRequest.proof` and
/// `WalletRestorationRequest.proof`). Written once here, so the client and the server cannot
/// disagree; each has its own label, so one proof never passes for the other (or for a
/// terminal's activation).
public enum WalletProof {
    /// The lines a registration's proof signs: the label, the e-mail, the phone and the public
    /// key's base64, exactly as sent.
    public static func registration(email: String, phone: String, publicKey: String) -> [UInt8] {
        Array(["horizon/register-wallet/v1", email, phone, publicKey].joined(separator: "\n").utf8)
    }

    /// The lines a restoration's proof signs: the label, the e-mail and the new public key's base64.
    public static func restoration(email: String, publicKey: String) -> [UInt8] {
        Array(["horizon/restore-wallet/v1", email, publicKey].joined(separator: "\n").utf8)
    }
}
