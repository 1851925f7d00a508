import Foundation
import HTTPTypes
import HorizonServer
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The server's router in Hummingbird's terms: the API's operations on groups that carry its
/// body and signature middlewares, the dashboard a route collection of its own with its own
/// error pages, and `APIError` an `HTTPResponseError`.
@Suite("Router shape")
struct RouterShapeTests {
    /// Hummingbird itself turns a thrown `APIError` into the API's envelope (here with no
    /// boundary middleware in front), with its status, headers and the request's id.
    @Test func anAPIErrorIsAnHTTPResponseErrorThatWritesTheEnvelope() async throws {
        let router = Router()
        router.get("/refused") { _, _ -> Response in
            throw APIError(.rateLimited, "slow down", headers: [.retryAfter: "7"])
        }
        let app = Application(router: router)
        try await app.test(.router) { client in
            let response = try await client.execute(
                uri: "/refused", method: .get, headers: [HTTPField.Name("X-Request-Id")!: "req-given-1234"])
            #expect(response.status == .tooManyRequests)
            #expect(response.headers[.retryAfter] == "7")
            #expect(response.headers[.contentType] == "application/json; charset=utf-8")
            #expect(
                String(buffer: response.body)
                    == #"{"error":{"code":"rate_limited","message":"slow down","requestId":"req-given-1234"}}"#)
        }
        let error: any Error = APIError(.notFound, "x")
        #expect((error as? any HTTPResponseError)?.status == .notFound)
    }

    /// A request that fails the API's signature check or body rule is refused on the API, while
    /// the same on a dashboard page is not the API's business: the groups' middlewares do not
    /// reach the dashboard's routes.
    @Test func theAPIsBodyAndSignatureRulesApplyToTheAPIGroupsOnly() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        try await server.withClient { client in
            let forged: HTTPFields = [.authorization: "HorizonSignature key=\"abc\""]
            let api = try await client.send(.get, "/v1/anchor", headers: forged)
            #expect(api.status == .unauthorized)
            #expect(api.headers[.contentType] == "application/json; charset=utf-8")
            let health = try await client.send(.get, "/health", headers: forged)
            #expect(health.status == .unauthorized, "the unversioned operations carry the same rules")
            let page = try await client.send(.get, "/dashboard/sign-in", headers: forged)
            #expect(page.status == .ok)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            // A form post is the dashboard's; on the API, a form is not JSON.
            let form = try await client.send(
                .post, "/v1/terminals/activate", headers: [.contentType: "application/x-www-form-urlencoded"],
                body: "email=a%40b.example")
            #expect(form.status == .unsupportedMediaType)
            let signIn = try await client.send(
                .post, "/dashboard/sign-in", headers: [.contentType: "application/x-www-form-urlencoded"],
                body: "email=a%40b.example")
            #expect(signIn.status == .forbidden)  // its own CSRF rule, as an HTML page
            #expect(signIn.text.contains("This form has expired"))
        }
    }

    /// Under `/dashboard`, a path or method the dashboard does not serve is its HTML "page not
    /// found"; elsewhere the API's JSON 404 or 405.
    @Test func theDashboardsRouteCollectionAnswersEveryPathUnderItWithItsOwnPages() async throws {
        let server = try await TestServer()
        try await server.withClient { client in
            for (method, path) in [
                (HTTPRequest.Method.get, "/dashboard/no-such-page"), (.put, "/dashboard/home"),
                (.delete, "/dashboard/transactions/12"), (.get, "/dashboard/sign-out"),
                (.post, "/dashboard/a/b/c"), (.patch, "/dashboard"),
            ] {
                let response = try await client.send(method, path)
                #expect(response.status == .notFound, "\(method) \(path)")
                #expect(response.headers[.contentType] == "text/html; charset=utf-8", "\(method) \(path)")
                #expect(response.text.contains("Page not found"), "\(method) \(path)")
            }
            for path in ["/dashboard", "/dashboard/"] {
                let home = try await client.send(.get, path)
                #expect(home.status == .seeOther && home.headers[.location] == "/dashboard/home", "\(path)")
            }
            let api = try await client.send(.get, "/v1/no-such-operation")
            #expect(api.status == .notFound)
            #expect(api.text.contains(#""code":"not_found""#))
            let method = try await client.send(.delete, "/v1/anchor")
            #expect(method.status == .methodNotAllowed)
            #expect(method.headers[.allow] == "GET")
        }
    }
}
