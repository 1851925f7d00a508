import Foundation

extension Programs {
    /// The anchor fingerprint `horizon-server anchor` prints for the server in `serverDir`: what
    /// its operator publishes, and a wallet's `verify --anchor-fingerprint` is given.
    static func anchorFingerprint(serverDir: String) throws -> String {
        let anchor = try run("horizon-server", ["anchor", "--data-dir", serverDir, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(anchor.standardOutput.utf8)) as? [String: Any]
        guard anchor.status == 0, let fingerprint = object?["fingerprint"] as? String else {
            throw AnchorFingerprintError(text: anchor.standardError)
        }
        return fingerprint
    }
}

struct AnchorFingerprintError: Error { let text: String }
