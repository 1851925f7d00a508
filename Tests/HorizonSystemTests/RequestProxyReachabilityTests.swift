import HorizonRoles
import HorizonServiceClients
import Testing

/// The wallet's request proxy follows `NetworkReachability`: requests go through a
/// terminal while the server is not answering fast.
@Suite("Request proxy and network reachability")
struct RequestProxyReachabilityTests {
    @Test func theProxyIsUsedWhileTheServerIsNotFast() {
        let reachability = NetworkReachability(slowThreshold: .seconds(2)) { nil }
        let coordinator = RequestProxyClientCoordinator(proxyClientConnectors: [], networkReachability: reachability)
        // Not configured yet: never.
        #expect(!coordinator.shouldUseProxy)
        coordinator.configureRequestProxyClient()
        // Nothing tried yet (unknown) counts as not fast.
        #expect(coordinator.shouldUseProxy)
        reachability.recordSuccess(latency: .milliseconds(80))
        #expect(!coordinator.shouldUseProxy)
        reachability.recordSuccess(latency: .seconds(3))
        #expect(coordinator.shouldUseProxy)
        reachability.recordFailure()
        #expect(coordinator.shouldUseProxy)
        reachability.recordSuccess(latency: .milliseconds(80))
        #expect(!coordinator.shouldUseProxy)

        // An app's own rule replaces it.
        coordinator.shouldUseProxyDueToNetworkProblem = { true }
        #expect(coordinator.shouldUseProxy)
    }
}
