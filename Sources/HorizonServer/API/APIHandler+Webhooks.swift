import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger

/// Webhook endpoints and their deliveries, for the merchant's admin or an API key with
/// `webhooks:write`. Another merchant's endpoint or delivery is "not found", like one that does
/// not exist.
extension APIHandler {
    func listWebhookEndpoints(_ input: Operations.ListWebhookEndpoints.Input) async throws
        -> Operations.ListWebhookEndpoints.Output
    {
        let caller = try await merchantAdmin(for: "managing webhooks", keyScope: .webhooksWrite)
        let endpoints = try await ledger.webhookEndpoints(of: caller.merchantID)
        return .ok(.init(body: .json(.init(webhookEndpoints: endpoints.map(Self.webhookEndpoint)))))
    }

    func createWebhookEndpoint(_ input: Operations.CreateWebhookEndpoint.Input) async throws
        -> Operations.CreateWebhookEndpoint.Output
    {
        guard case .json(let body) = input.body else { throw APIError(.unsupportedMediaType, "the body must be JSON") }
        let caller = try await merchantAdmin(for: "managing webhooks", keyScope: .webhooksWrite)
        let url = try await WebhookEndpointRules.checkURL(body.url, policy: configuration.webhookAddressPolicy)
        let description = try WebhookEndpointRules.checkDescription(body.description ?? "")
        let types = Set(body.eventTypes.compactMap { WebhookEventType(rawValue: $0.rawValue) })
        guard !types.isEmpty else { throw APIError(.invalidRequest, "eventTypes must name at least one event type") }
        let secret = WebhookSignature.newSecret()
        // Past the most endpoints there can be: the ledger's invalidArgument, a 400.
        let endpoint = try await ledger.createWebhookEndpoint(
            id: WebhookEndpointRules.newID(), url: url, description: description, eventTypes: types,
            secret: secret, for: caller.merchantID, at: now())
        metrics.record(event: "webhook_endpoint_created")
        RequestScope.current?.logger.notice(
            "webhook endpoint created", metadata: ["endpoint": "\(endpoint.id)", "by": "\(caller)"])
        return .created(.init(body: .json(.init(webhookEndpoint: Self.webhookEndpoint(endpoint), secret: secret))))
    }

    func rollWebhookSecret(_ input: Operations.RollWebhookSecret.Input) async throws
        -> Operations.RollWebhookSecret.Output
    {
        let caller = try await merchantAdmin(for: "managing webhooks", keyScope: .webhooksWrite)
        let secret = WebhookSignature.newSecret()
        guard
            let endpoint = try await ledger.rollWebhookSecret(
                input.path.endpointId, of: caller.merchantID, to: secret, at: now())
        else { throw Self.noWebhookEndpoint(input.path.endpointId) }
        RequestScope.current?.logger.notice(
            "webhook secret rolled", metadata: ["endpoint": "\(endpoint.id)", "by": "\(caller)"])
        return .ok(.init(body: .json(.init(webhookEndpoint: Self.webhookEndpoint(endpoint), secret: secret))))
    }

    func deleteWebhookEndpoint(_ input: Operations.DeleteWebhookEndpoint.Input) async throws
        -> Operations.DeleteWebhookEndpoint.Output
    {
        let caller = try await merchantAdmin(for: "managing webhooks", keyScope: .webhooksWrite)
        guard
            let endpoint = try await ledger.deleteWebhookEndpoint(
                input.path.endpointId, of: caller.merchantID, at: now())
        else { throw Self.noWebhookEndpoint(input.path.endpointId) }
        RequestScope.current?.logger.notice(
            "webhook endpoint deleted", metadata: ["endpoint": "\(endpoint.id)", "by": "\(caller)"])
        return .ok(.init(body: .json(Self.webhookEndpoint(endpoint))))
    }

    func listWebhookDeliveries(_ input: Operations.ListWebhookDeliveries.Input) async throws
        -> Operations.ListWebhookDeliveries.Output
    {
        let caller = try await merchantAdmin(for: "managing webhooks", keyScope: .webhooksWrite)
        let deliveries = try await ledger.webhookDeliveries(of: caller.merchantID, endpoint: input.query.endpointId)
        return .ok(.init(body: .json(.init(webhookDeliveries: deliveries.map { Self.webhookDelivery($0) }))))
    }

    func getWebhookDelivery(_ input: Operations.GetWebhookDelivery.Input) async throws
        -> Operations.GetWebhookDelivery.Output
    {
        let caller = try await merchantAdmin(for: "managing webhooks", keyScope: .webhooksWrite)
        guard let delivery = try await ledger.webhookDelivery(input.path.deliveryId, of: caller.merchantID) else {
            throw Self.noWebhookDelivery(input.path.deliveryId)
        }
        let body = try await ledger.webhookEventBody(delivery.eventID, of: caller.merchantID)
        return .ok(.init(body: .json(Self.webhookDelivery(delivery, full: true, body: body))))
    }

    func resendWebhookDelivery(_ input: Operations.ResendWebhookDelivery.Input) async throws
        -> Operations.ResendWebhookDelivery.Output
    {
        let caller = try await merchantAdmin(for: "managing webhooks", keyScope: .webhooksWrite)
        guard
            let delivery = try await ledger.resendWebhookDelivery(
                input.path.deliveryId, of: caller.merchantID, at: now())
        else { throw Self.noWebhookDelivery(input.path.deliveryId) }
        RequestScope.current?.logger.notice(
            "webhook delivery resent", metadata: ["delivery": "\(delivery.id)", "by": "\(caller)"])
        return .accepted(.init(body: .json(Self.webhookDelivery(delivery))))
    }

    static func noWebhookEndpoint(_ id: String) -> APIError {
        APIError(.webhookEndpointNotFound, "this merchant has no webhook endpoint \(id)")
    }

    static func noWebhookDelivery(_ id: Int64) -> APIError {
        APIError(.webhookDeliveryNotFound, "this merchant has no webhook delivery \(id)")
    }

    static func webhookEndpoint(_ endpoint: WebhookEndpoint) -> Components.Schemas.WebhookEndpoint {
        .init(
            id: endpoint.id, url: endpoint.url, description: endpoint.description,
            eventTypes: endpoint.eventTypes.sorted().compactMap { .init(rawValue: $0.rawValue) },
            createdAt: endpoint.createdAt, previousSecretExpiresAt: endpoint.previousSecretExpiresAt,
            deletedAt: endpoint.deletedAt)
    }

    static func webhookAttempt(_ attempt: WebhookAttempt) -> Components.Schemas.WebhookAttempt {
        .init(
            attemptedAt: attempt.attemptedAt, status: attempt.status.map { Int32(clamping: $0) },
            responseBody: attempt.responseBody, latencyMs: attempt.latencyMilliseconds, error: attempt.error)
    }

    static func webhookDelivery(_ delivery: WebhookDelivery, full: Bool = false, body: String? = nil)
        -> Components.Schemas.WebhookDelivery
    {
        .init(
            id: delivery.id, eventId: delivery.eventID,
            eventType: .init(rawValue: delivery.eventType.rawValue) ?? .payment_succeeded,
            endpointId: delivery.endpointID, state: .init(rawValue: delivery.state.rawValue) ?? .pending,
            attempts: delivery.attempts, createdAt: delivery.createdAt, nextAttemptAt: delivery.dueAt,
            deliveredAt: delivery.deliveredAt, giveUpAt: delivery.giveUpAt,
            lastAttempt: delivery.history.first.map(webhookAttempt),
            attemptHistory: full ? delivery.history.map(webhookAttempt) : nil, body: body)
    }
}
