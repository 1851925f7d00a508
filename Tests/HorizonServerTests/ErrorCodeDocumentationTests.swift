import HorizonServer
import HorizonTestSupport
import Testing

/// docs/api.md lists every error code the API can answer with, so a client author finds each one
/// there; a code added to the server without a line on that page fails here.
@Suite("The API page lists every error code")
struct ErrorCodeDocumentationTests {
    @Test func everyCodeIsOnTheAPIPage() throws {
        let page = try RepositoryFile.text("docs/api.md")
        let missing = APIError.Code.allCases.map(\.rawValue).filter { !page.contains("`\($0)`") }
        #expect(missing.isEmpty, "add these codes to docs/api.md, \"Errors\": \(missing)")
    }
}
