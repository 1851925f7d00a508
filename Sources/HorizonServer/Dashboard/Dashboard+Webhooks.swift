import HTTPTypes
import HorizonCore
import HorizonLedger
import Hummingbird

/// The webhooks page: the merchant's endpoints (added with the event types they listen to, the
/// signing secret shown once; the secret rolled and the endpoint deleted after a confirmation)
/// and the latest deliveries with the answer each got, any of which can be sent again.
extension Dashboard {
    /// The event types the form offers, with the checkbox each has and what it says.
    static let eventChoices: [(type: WebhookEventType, field: String, meaning: String)] = [
        (.paymentSucceeded, "event_payment_succeeded", "a payment was approved"),
        (.paymentDeclined, "event_payment_declined", "a payment was declined"),
        (.refundSucceeded, "event_refund_succeeded", "a refund was made"),
        (.intentSucceeded, "event_intent_succeeded", "a payment intent was paid"),
        (.intentCanceled, "event_intent_canceled", "a payment intent was canceled"),
        (.terminalOffline, "event_terminal_offline", "a terminal lost its connection to the server"),
    ]

    func webhooksPage(_ request: Request) async throws -> Response {
        guard let signedIn = try await session(of: request) else { return Self.redirect("/dashboard/sign-in") }
        return try await webhooks(signedIn, notice: Self.notice(request))
    }

    func webhooks(
        _ signedIn: SignedIn, notice: String? = nil, problem: String? = nil, status: HTTPResponse.Status = .ok,
        newURL: String = "", newDescription: String = "", checked: Set<WebhookEventType> = []
    ) async throws -> Response {
        let merchant = signedIn.merchant.id
        let endpoints = try await ledger.webhookEndpoints(of: merchant, includingDeleted: true)
        let deliveries = try await ledger.webhookDeliveries(of: merchant, limit: 50)
        var layout = Layout.signedIn("Webhooks", signedIn, current: \.onWebhooks, notice: notice)
        layout.problem = problem
        let clock = MerchantClock(identifier: signedIn.merchant.timeZone)
        let urls = Dictionary(endpoints.map { ($0.id, $0.url) }, uniquingKeysWith: { first, _ in first })
        return try page(
            "webhooks",
            WebhooksPage(
                layout: layout, csrf: signedIn.session.csrfSecret, zone: clock.name,
                endpoints: endpoints.filter(\.isActive).map { endpoint in
                    WebhookEndpointRow(
                        id: endpoint.id, url: endpoint.url, description: endpoint.description,
                        events: endpoint.eventTypes.sorted().map(\.rawValue).joined(separator: ", "),
                        created: clock.format(endpoint.createdAt),
                        previousSecret: endpoint.previousSecretExpiresAt.map {
                            "the secret before the last roll also signs until \(clock.format($0))"
                        })
                },
                deliveries: deliveries.map { delivery in
                    let last = delivery.history.first
                    return WebhookDeliveryRow(
                        id: String(delivery.id), event: delivery.eventType.rawValue, eventID: delivery.eventID,
                        endpoint: urls[delivery.endpointID] ?? delivery.endpointID,
                        created: clock.format(delivery.createdAt), state: Self.stateText(delivery, clock),
                        attempts: String(delivery.attempts),
                        response: last.map { attempt in
                            attempt.status.map { "HTTP \($0)" } ?? (attempt.error ?? "no answer")
                        } ?? "not tried yet",
                        latency: last.map { "\($0.latencyMilliseconds) ms" } ?? "",
                        body: last.map { String($0.responseBody.prefix(200)) } ?? "",
                        resendable: endpoints.contains { $0.id == delivery.endpointID && $0.isActive })
                },
                newURL: newURL, newDescription: newDescription,
                events: Self.eventChoices.map {
                    EventChoice(
                        field: $0.field, type: $0.type.rawValue, meaning: $0.meaning, checked: checked.contains($0.type)
                    )
                }), status: status)
    }

    static func stateText(_ delivery: WebhookDelivery, _ clock: MerchantClock) -> String {
        switch delivery.state {
        case .delivered: "delivered \(delivery.deliveredAt.map(clock.format) ?? "")"
        case .failed: "given up"
        case .pending: "sending"
        case .retrying: "retrying at \(delivery.dueAt.map(clock.format) ?? "")"
        }
    }

    func createWebhookEndpoint(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        let url = form.text("url") ?? ""
        let description = form.text("description") ?? ""
        let types = Set(Self.eventChoices.filter { form[$0.field] == "yes" }.map(\.type))
        func refuse(_ problem: String) async throws -> Response {
            try await webhooks(
                signedIn, problem: problem, status: .badRequest, newURL: url, newDescription: description,
                checked: types)
        }
        let checkedURL: String
        let checkedDescription: String
        do {
            checkedURL = try await WebhookEndpointRules.checkURL(
                url.trimmingCharacters(in: .whitespaces), policy: api.configuration.webhookAddressPolicy)
        } catch let error as APIError {
            return try await refuse("That address cannot receive webhooks: \(error.message).")
        }
        do { checkedDescription = try WebhookEndpointRules.checkDescription(description) } catch {
            return try await refuse("Keep the description to 200 characters of printable text.")
        }
        guard !types.isEmpty else { return try await refuse("Choose at least one event to send.") }
        let secret = WebhookSignature.newSecret()
        guard try await ledger.webhookEndpoints(of: signedIn.merchant.id).count < Ledger.maximumWebhookEndpoints else {
            return try await refuse(
                "You have \(Ledger.maximumWebhookEndpoints) endpoints, the most there can be; delete one first.")
        }
        let endpoint = try await ledger.createWebhookEndpoint(
            id: WebhookEndpointRules.newID(), url: checkedURL, description: checkedDescription, eventTypes: types,
            secret: secret, for: signedIn.merchant.id, at: now())
        RequestScope.current?.logger.notice(
            "webhook endpoint created on the dashboard", metadata: ["endpoint": "\(endpoint.id)"])
        return try webhookSecretPage(signedIn, endpoint: endpoint, secret: secret, title: "The new webhook endpoint")
    }

    func rollWebhookSecret(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        // Another merchant's endpoint is "not found", exactly like one that does not exist.
        guard let id = form["id"], let endpoint = try await activeEndpoint(id, of: signedIn) else {
            return try await webhooks(signedIn, problem: "That endpoint does not exist any more.", status: .notFound)
        }
        guard form["confirm"] == "yes" else {
            return try webhookConfirmation(
                signedIn, endpoint: endpoint, question: "Roll the signing secret of \(endpoint.url)?",
                consequence:
                    "A new secret is made and shown once. For 24 hours deliveries are signed with both the new and the old secret, so you can put the new one into your receiver; then only the new one signs.",
                action: "/dashboard/webhooks/roll", button: "Roll the secret")
        }
        let secret = WebhookSignature.newSecret()
        guard
            let rolled = try await ledger.rollWebhookSecret(
                endpoint.id, of: signedIn.merchant.id, to: secret, at: now())
        else {
            return try await webhooks(signedIn, problem: "That endpoint does not exist any more.", status: .notFound)
        }
        RequestScope.current?.logger.notice(
            "webhook secret rolled on the dashboard", metadata: ["endpoint": "\(rolled.id)"])
        return try webhookSecretPage(signedIn, endpoint: rolled, secret: secret, title: "The rolled signing secret")
    }

    func deleteWebhookEndpoint(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        guard let id = form["id"], let endpoint = try await activeEndpoint(id, of: signedIn) else {
            return try await webhooks(signedIn, problem: "That endpoint does not exist any more.", status: .notFound)
        }
        guard form["confirm"] == "yes" else {
            return try webhookConfirmation(
                signedIn, endpoint: endpoint, question: "Delete the webhook endpoint \(endpoint.url)?",
                consequence:
                    "No event is sent to it from now on, and deliveries still being retried stop. Its past deliveries stay listed.",
                action: "/dashboard/webhooks/delete", button: "Delete the endpoint")
        }
        _ = try await ledger.deleteWebhookEndpoint(endpoint.id, of: signedIn.merchant.id, at: now())
        RequestScope.current?.logger.notice(
            "webhook endpoint deleted on the dashboard", metadata: ["endpoint": "\(endpoint.id)"])
        return Self.redirect("/dashboard/webhooks?done=endpoint-deleted")
    }

    func resendWebhookDelivery(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        guard let id = form["id"].flatMap({ Int64($0) }),
            try await ledger.resendWebhookDelivery(id, of: signedIn.merchant.id, at: now()) != nil
        else {
            return try await webhooks(
                signedIn, problem: "That delivery does not exist, or its endpoint was deleted.", status: .notFound)
        }
        RequestScope.current?.logger.notice("webhook delivery resent on the dashboard", metadata: ["delivery": "\(id)"])
        return Self.redirect("/dashboard/webhooks?done=delivery-resent")
    }

    private func activeEndpoint(_ id: String, of signedIn: SignedIn) async throws -> WebhookEndpoint? {
        try await ledger.webhookEndpoint(id, of: signedIn.merchant.id).flatMap { $0.isActive ? $0 : nil }
    }

    private func webhookConfirmation(
        _ signedIn: SignedIn, endpoint: WebhookEndpoint, question: String, consequence: String, action: String,
        button: String
    ) throws -> Response {
        try page(
            "confirm",
            ConfirmPage(
                layout: .signedIn("Confirm", signedIn, current: \.onWebhooks, notice: nil), question: question,
                consequence: consequence, action: action,
                fields: [
                    FormField(name: "csrf", value: signedIn.session.csrfSecret),
                    FormField(name: "id", value: endpoint.id), FormField(name: "confirm", value: "yes"),
                ], button: button, cancelURL: "/dashboard/webhooks"))
    }

    private func webhookSecretPage(_ signedIn: SignedIn, endpoint: WebhookEndpoint, secret: String, title: String)
        throws -> Response
    {
        try page(
            "webhook-secret",
            WebhookSecretPage(
                layout: .signedIn(title, signedIn, current: \.onWebhooks, notice: nil), url: endpoint.url,
                events: endpoint.eventTypes.sorted().map(\.rawValue).joined(separator: ", "), secret: secret),
            status: .created)
    }
}

struct WebhooksPage {
    var layout: Layout
    var csrf: String
    var zone: String
    var endpoints: [WebhookEndpointRow]
    var deliveries: [WebhookDeliveryRow]
    var newURL: String
    var newDescription: String
    var events: [EventChoice]
}

struct WebhookEndpointRow {
    var id: String
    var url: String
    var description: String
    var events: String
    var created: String
    var previousSecret: String?
}

struct WebhookDeliveryRow {
    var id: String
    var event: String
    var eventID: String
    var endpoint: String
    var created: String
    var state: String
    var attempts: String
    var response: String
    var latency: String
    var body: String
    var resendable: Bool
}

struct EventChoice {
    var field: String
    var type: String
    var meaning: String
    var checked: Bool
}

struct WebhookSecretPage {
    var layout: Layout
    var url: String
    var events: String
    var secret: String
}
