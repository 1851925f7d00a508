import Foundation
import HTTPTypes
import HorizonCore
import HorizonLedger
import Hummingbird
import NIOCore

/// The sandbox's 3-D Secure pages, served by the server itself in the place of a card issuer's
/// (the reference's flow: the app opens `redirectionUrl`, the page posts `MD` and `PaRes` to
/// `postDataTermUrl`, the app reads them there and completes with `executeAddPaymentCard`).
///
/// Plain HTML forms that work without JavaScript, with stable element ids for browser scripts:
/// the challenge page's buttons are `approve` and `fail`; the answer page's is `continue`; the
/// term page's fields are `MD` and `PaRes`. Holding the MD (128 random bits) is what lets a
/// browser answer the challenge, as with an issuer's page.
enum ThreeDSecurePages {
    static let challengePath = "/v1/cards/3ds/challenge"
    static let answerPath = "/v1/cards/3ds/challenge/answer"
    static let termPath = "/v1/cards/3ds/term"

    static func challengeURL(md: String) -> String { "\(challengePath)?MD=\(md)" }

    /// Whether a path takes HTML form posts (`application/x-www-form-urlencoded`) instead of JSON.
    static func acceptsForms(path: String) -> Bool { path.hasPrefix("/v1/cards/3ds/") }

    /// The pages on the API's `/v1` group (its paths without the group's prefix).
    static func register(
        on v1: RouterGroup<ServerRequestContext>, ledger: Ledger, now: @escaping @Sendable () -> UnixTime
    ) {
        func inGroup(_ path: String) -> RouterPath { RouterPath(String(path.dropFirst("/v1".count))) }
        // The reference loads the redirection URL as a POST with `MD` in the body; a person's
        // browser follows it as a GET with `MD` in the query. Both show the same page.
        v1.get(inGroup(challengePath)) { request, _ in
            try await challengePage(md: fields(request.uri.query ?? "")["MD"], ledger: ledger, now: now)
        }
        v1.post(inGroup(challengePath)) { request, _ in
            try await challengePage(md: try await formFields(request)["MD"], ledger: ledger, now: now)
        }
        v1.post(inGroup(answerPath)) { request, _ in
            let form = try await formFields(request)
            guard let md = form["MD"], let decision = form["decision"], decision == "approve" || decision == "fail"
            else {
                return page(
                    .badRequest, title: "Incomplete answer",
                    body: "<p>The form must carry <code>MD</code> and <code>decision</code> (approve or fail). "
                        + "Open the challenge link again.</p>")
            }
            let challenge: CardChallenge
            do throws(CardError) {
                challenge = try await ledger.decideCardChallenge(md: md, approve: decision == "approve", at: now())
            } catch {
                return refusal(error)
            }
            let verdict = challenge.decision == .approved ? "approved" : "failed"
            return page(
                .ok, title: "3-D Secure: \(verdict)",
                body: """
                    <p>The challenge was <strong id="decision">\(verdict)</strong>. Continue to return to the wallet.</p>
                    <form id="term" method="post" action="\(termPath)">
                    <input type="hidden" name="MD" value="\(escape(challenge.md))">
                    <input type="hidden" name="PaRes" value="\(escape(challenge.paRes ?? ""))">
                    <button type="submit" id="continue">Continue</button>
                    </form>
                    """)
        }
        v1.post(inGroup(termPath)) { request, _ in
            let form = try await formFields(request)
            let md = form["MD"] ?? ""
            let paRes = form["PaRes"] ?? ""
            return page(
                .ok, title: "3-D Secure finished",
                body: """
                    <p>The card issuer's answer is below. The wallet finishes adding the card with it
                    (the <code>horizon-wallet cards add</code> command does so by itself).</p>
                    <form id="result" method="post" action="\(termPath)">
                    <label for="MD">MD</label> <input id="MD" name="MD" value="\(escape(md))" readonly>
                    <label for="PaRes">PaRes</label> <input id="PaRes" name="PaRes" value="\(escape(paRes))" readonly>
                    </form>
                    """)
        }
    }

    static func challengePage(md: String?, ledger: Ledger, now: @Sendable () -> UnixTime) async throws -> Response {
        guard let md, !md.isEmpty else {
            return page(
                .badRequest, title: "No challenge named",
                body: "<p>The link has no <code>MD</code>. Open the challenge link the wallet printed.</p>")
        }
        guard let challenge = try await ledger.cardChallenge(md: md) else {
            return refusal(CardError.challengeNotFound)
        }
        if challenge.decision != nil {
            return page(
                .conflict, title: "Already answered",
                body: "<p>This challenge was answered already; the wallet finishes adding the card.</p>")
        }
        if challenge.expiresAt <= now() { return refusal(CardError.challengeExpired) }
        return page(
            .ok, title: "3-D Secure sandbox",
            body: """
                <p>Your card issuer asks you to confirm that you are adding this card.
                This is the sandbox: no bank is asked.</p>
                <form id="challenge" method="post" action="\(answerPath)">
                <input type="hidden" name="MD" value="\(escape(md))">
                <button type="submit" id="approve" name="decision" value="approve">Approve</button>
                <button type="submit" id="fail" name="decision" value="fail">Fail</button>
                </form>
                """)
    }

    static func refusal(_ error: CardError) -> Response {
        switch error {
        case .challengeNotFound:
            page(
                .notFound, title: "Unknown challenge",
                body: "<p>No 3-D Secure challenge has this MD. Open the link the wallet printed, unchanged.</p>")
        case .challengeExpired:
            page(
                .gone, title: "Challenge expired",
                body: "<p>This challenge expired. Remove the card in the wallet and add it again.</p>")
        default:
            page(
                .internalServerError, title: "Not available",
                body: "<p>The challenge cannot be answered now; retry.</p>")
        }
    }

    /// A whole HTML page; `body` is trusted markup (everything from outside is escaped into it).
    static func page(_ status: HTTPResponse.Status, title: String, body: String) -> Response {
        let html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>\(escape(title))</title>
            <meta name="viewport" content="width=device-width, initial-scale=1"></head>
            <body><h1>\(escape(title))</h1>
            \(body)
            </body></html>
            """
        return Response(
            status: status,
            headers: [
                .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                HTTPField.Name.contentSecurityPolicy: "default-src 'none'; form-action 'self'",
            ],
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func escape(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// The fields of a form post (the body is whole: `BodyLimitMiddleware` collected it).
    static func formFields(_ request: Request) async throws -> [String: String] {
        var request = request
        let body = try await request.collectBody(upTo: .max)
        return fields(String(buffer: body))
    }

    /// `application/x-www-form-urlencoded` (or a query string) as a dictionary; the first of a
    /// repeated name wins.
    static func fields(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String {
                String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            let name = decode(parts[0])
            if fields[name] == nil { fields[name] = parts.count > 1 ? decode(parts[1]) : "" }
        }
        return fields
    }
}
