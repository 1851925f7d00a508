import HorizonRoles
import HorizonServiceClients

// The wallet's request proxy (a role) driven by the service clients' view of the network: wired
// here, above both, so that the service clients need no radio role.

extension RequestProxyClientCoordinator {
    /// The reference's wiring: requests go through the terminal whenever `reachability`
    /// does not report the server as answering fast (unknown, unreachable or slow).
    public func useNetworkReachability(_ reachability: NetworkReachability) {
        shouldUseProxyDueToNetworkProblem = { reachability.reachabilityStatus != .fast }
    }

    /// A coordinator over `proxyClientConnectors` that uses the proxy whenever `reachability`
    /// does not report the server as answering fast.
    public convenience init(
        proxyClientConnectors: [any ProxyClientConnector], networkReachability: NetworkReachability,
        configuration: RequestProxyClientConfiguration = RequestProxyClientConfiguration()
    ) {
        self.init(proxyClientConnectors: proxyClientConnectors, configuration: configuration)
        useNetworkReachability(networkReachability)
    }
}
