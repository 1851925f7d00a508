import Foundation
import Mustache

/// Why a dashboard page could not be made (a template missing from the build, or one that does
/// not parse): a programming error, shown as a 500 with the request id and logged.
struct DashboardTemplateError: Error, CustomStringConvertible {
    let description: String
}

/// The dashboard's Mustache templates, parsed once when the server starts.
///
/// The `.mustache` files under `Dashboard/Templates` are compiled into the binary by SwiftPM's
/// `embedInCode` resource rule (`PackageResources`): a copied or installed `horizon-server` needs
/// no resource bundle beside it (`Bundle.module` on Linux looks beside the executable and then in
/// the build directory, and stops the program when neither is there), and no source tree.
struct DashboardTemplates: Sendable {
    private let library: MustacheLibrary
    let stylesheet: String

    init() throws {
        let sources: [(String, [UInt8])] = [
            ("header", PackageResources.header_mustache), ("footer", PackageResources.footer_mustache),
            ("sign-in", PackageResources.sign_in_mustache), ("error", PackageResources.error_mustache),
            ("transactions", PackageResources.transactions_mustache),
            ("register-users", PackageResources.register_users_mustache),
            ("terminals", PackageResources.terminals_mustache), ("programs", PackageResources.programs_mustache),
            ("home", PackageResources.home_mustache), ("transaction", PackageResources.transaction_mustache),
            ("confirm", PackageResources.confirm_mustache), ("settings", PackageResources.settings_mustache),
            ("api-keys", PackageResources.api_keys_mustache),
            ("api-key-secret", PackageResources.api_key_secret_mustache),
            ("webhooks", PackageResources.webhooks_mustache),
            ("webhook-secret", PackageResources.webhook_secret_mustache),
        ]
        var library = MustacheLibrary()
        for (name, bytes) in sources {
            do {
                try library.register(String(decoding: bytes, as: UTF8.self), named: name)
            } catch {
                throw DashboardTemplateError(
                    description: "the dashboard template \(name).mustache does not parse: \(error)")
            }
        }
        self.library = library
        stylesheet = String(decoding: PackageResources.style_css, as: UTF8.self)
    }

    /// The page `name` rendered with `model` (HTML-escaped except where a template says otherwise).
    func render(_ name: String, _ model: Any) throws -> String {
        guard let html = library.render(model, withTemplate: name) else {
            throw DashboardTemplateError(description: "the dashboard has no template named \(name)")
        }
        return html
    }
}
