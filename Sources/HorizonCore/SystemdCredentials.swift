#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// systemd's service credentials: a unit's `LoadCredential=name:path` or
/// `LoadCredentialEncrypted=name:path` (sealed with the machine's TPM or host key by
/// `systemd-creds encrypt`) makes the decrypted file `$CREDENTIALS_DIRECTORY/name`, readable by
/// the service alone and never written to its data directory. The programs read their keys
/// there when it has them.
public enum SystemdCredentials {
    /// `$CREDENTIALS_DIRECTORY/name` when the variable is set and the file exists; nil otherwise
    /// (then the key comes from the data directory as before).
    public static func file(_ name: String) -> String? {
        guard !name.isEmpty, !name.contains("/"), let directory = getenv("CREDENTIALS_DIRECTORY") else { return nil }
        let base = String(cString: directory)
        guard base.hasPrefix("/") else { return nil }
        let path = base.hasSuffix("/") ? base + name : base + "/" + name
        return access(path, F_OK) == 0 ? path : nil
    }
}
