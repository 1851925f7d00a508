// swift-tools-version:6.1
// Horizon for Linux: BLE proximity payments between a Linux terminal and a Linux wallet.
// Targets are named after the layers of docs/architecture.md; each imports only the layers below it.
import PackageDescription

let strict: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]
// The crash and delay points that crash tests set through environment variables (a program kills
// itself at a chosen step) exist in debug builds only: a release binary has none of them.
let faultInjection: [SwiftSetting] = strict + [.define("HORIZON_FAULT_INJECTION", .when(configuration: .debug))]

let package = Package(
    name: "Horizon",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HorizonCore", targets: ["HorizonCore"]),
        .library(name: "HorizonRadio", targets: ["HorizonRadio"]),
        .library(name: "HorizonSimulatedRadio", targets: ["HorizonSimulatedRadio"]),
        .library(name: "HorizonUnixSocket", targets: ["HorizonUnixSocket"]),
        .library(name: "HorizonLink", targets: ["HorizonLink"]),
        .library(name: "HorizonSecureChannel", targets: ["HorizonSecureChannel"]),
        .library(name: "HorizonProtocol", targets: ["HorizonProtocol"]),
        .library(name: "HorizonSettlement", targets: ["HorizonSettlement"]),
        .library(name: "HorizonStores", targets: ["HorizonStores"]),
        .library(name: "HorizonDBus", targets: ["HorizonDBus"]),
        .library(name: "HorizonBlueZ", targets: ["HorizonBlueZ"]),
        .library(name: "HorizonRoles", targets: ["HorizonRoles"]),
        .library(name: "HorizonLedger", targets: ["HorizonLedger"]),
        .library(name: "HorizonAPI", targets: ["HorizonAPI"]),
        .library(name: "HorizonServer", targets: ["HorizonServer"]),
        .library(name: "HorizonServerClient", targets: ["HorizonServerClient"]),
        .library(name: "HorizonObliviousHTTP", targets: ["HorizonObliviousHTTP"]),
        .library(name: "HorizonServiceClients", targets: ["HorizonServiceClients"]),
        .library(name: "HorizonTracing", targets: ["HorizonTracing"]),
        .executable(name: "horizon-server", targets: ["horizon-server"]),
        .executable(name: "horizon-demo", targets: ["horizon-demo"]),
        .executable(name: "horizon-terminal", targets: ["horizon-terminal"]),
        .executable(name: "horizon-wallet", targets: ["horizon-wallet"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.21.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.7.0"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird.git", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.29.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.24.0"),
        // The tracing API (already in the graph through AsyncHTTPClient and Hummingbird); the OTLP
        // exporter is HorizonTracing's own, not swift-otel, which would add minutes to every CI build.
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.1.0"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.1.0"),
        // The merchant dashboard's HTML templates.
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
    ],
    targets: [
        // Shared vocabulary: bytes, time and scheduling, money, seeded randomness.
        .target(name: "HorizonCore", swiftSettings: strict),
        // Radio layer: the protocols every radio implements (advertise, scan, connect, byte links).
        .target(name: "HorizonRadio", dependencies: ["HorizonCore"], swiftSettings: strict),
        // Unix stream sockets served from dispatch sources and tasks: the simulated radio's server
        // and the terminal's control socket.
        .target(name: "HorizonUnixSocket", swiftSettings: strict),
        // The deterministic in-process radio ("loopback transport") used by tests and demos.
        .target(
            name: "HorizonSimulatedRadio", dependencies: ["HorizonCore", "HorizonRadio", "HorizonUnixSocket"],
            swiftSettings: strict),
        // Link layer: messages fragmented to the ATT MTU and reassembled in order.
        .target(name: "HorizonLink", dependencies: ["HorizonCore", "HorizonRadio"], swiftSettings: strict),
        // Secure channel: terminal credential, ECDH handshake, AES-GCM records, replay window.
        .target(
            name: "HorizonSecureChannel",
            dependencies: [
                "HorizonCore", "HorizonRadio", "HorizonLink", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict),
        // Session protocol: typed messages, their binary codecs, and the advertisement payload.
        .target(name: "HorizonProtocol", dependencies: ["HorizonCore", "HorizonRadio"], swiftSettings: strict),

        // libdbus, for the BlueZ radio (org.bluez on the system bus).
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        // D-Bus over libdbus: typed values, calls, exported objects, signals (the BlueZ radio's base).
        .target(name: "HorizonDBus", dependencies: ["CDBus"], swiftSettings: strict),
        .testTarget(
            name: "HorizonDBusTests", dependencies: ["HorizonDBus", "HorizonTestSupport"],
            swiftSettings: strict),

        // The BlueZ radio: bluetoothd over D-Bus (adapters, advertising, the GATT server and client).
        // libbluetooth, for the kernel's view of the controllers (adapter availability without bluetoothd).
        .systemLibrary(name: "CBluetooth", pkgConfig: "bluez", providers: [.apt(["libbluetooth-dev"])]),
        .target(
            name: "HorizonBlueZ",
            dependencies: [
                "HorizonDBus", "HorizonRadio", "HorizonCore", "CBluetooth",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "HorizonBlueZTests",
            dependencies: ["HorizonBlueZ", "HorizonDBus", "HorizonRadio", "HorizonCore", "HorizonTestSupport"],
            swiftSettings: strict),

        // The system SQLite, for the stores.
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // Settlement: what a terminal asks whoever settles for it and what it is answered (requests,
        // results, the processor protocols), offline payments and their forwarding, the relay's
        // gateway, the wallet's offline token: the seams between roles, stores, ledger and server.
        .target(name: "HorizonSettlement", dependencies: ["HorizonCore", "HorizonProtocol"], swiftSettings: strict),
        // Stores: the terminal journal, the wallet store and the SQLite wrapper.
        .target(
            name: "HorizonStores", dependencies: ["CSQLite", "HorizonCore", "HorizonProtocol", "HorizonSettlement"],
            swiftSettings: strict),

        // The ledger: merchants, accounts, double-entry postings, exactly-once settlement
        // and loyalty, one implementation of the rules over SQLite and PostgreSQL. The server runs
        // it; so does a single-box terminal, in process (`InProcessLedger`, the only sandbox).
        .target(
            name: "HorizonLedger",
            dependencies: [
                "HorizonCore", "HorizonProtocol", "HorizonStores", "HorizonSettlement",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: strict),
        .testTarget(
            name: "HorizonLedgerTests",
            dependencies: [
                "HorizonLedger", "HorizonLedgerTestSupport", "HorizonStores", "HorizonSettlement", "HorizonProtocol",
                "HorizonCore",
                "HorizonTestSupport",
            ],
            swiftSettings: strict),
        // Fresh SQLite and PostgreSQL stores for tests (HORIZON_TEST_POSTGRES_URL), one per test.
        .target(
            name: "HorizonLedgerTestSupport",
            dependencies: ["HorizonLedger", "HorizonStores", "HorizonSettlement", "HorizonProtocol", "HorizonCore"],
            path: "Tests/HorizonLedgerTestSupport", swiftSettings: strict),

        // The server's HTTP contract: `openapi.yaml` and the types, server protocol and
        // client generated from it (committed; `Tools/generate-api.sh` regenerates them, so CI
        // does not build the generator).
        .target(
            name: "HorizonAPI",
            dependencies: [
                "HorizonCore",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["openapi.yaml", "openapi-generator-config.yaml", "Generated/openapi.sha256"],
            swiftSettings: strict),

        // Oblivious HTTP (RFC 9458) and binary HTTP (RFC 9292): a wallet's request sealed
        // to the server's gateway key, so that a relaying terminal carries bytes it cannot read.
        .target(
            name: "HorizonObliviousHTTP",
            dependencies: ["HorizonCore", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict),
        .testTarget(
            name: "HorizonObliviousHTTPTests",
            dependencies: ["HorizonObliviousHTTP", "HorizonCore", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict),

        // The Horizon server: Hummingbird 2 serving HorizonAPI over HorizonLedger.
        .target(
            name: "HorizonServer",
            dependencies: [
                "HorizonAPI", "HorizonLedger", "HorizonCore", "HorizonProtocol", "HorizonSecureChannel",
                "HorizonStores", "HorizonSettlement",
                // The gateway opens sealed requests.
                "HorizonObliviousHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Mustache", package: "swift-mustache"),
                // SMS posted to an HTTP gateway.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // A settlement's spans, continuing the trace its terminal signed into the request.
                "HorizonTracing", .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            // The dashboard's templates are compiled into the binary (`PackageResources`), so an
            // installed horizon-server needs no resource bundle beside it and no source tree.
            resources: [.embedInCode("Dashboard/Templates")],
            swiftSettings: faultInjection),
        // Traces: a Tracer exporting OTLP/HTTP JSON to a collector when one is configured, and
        // the trace ids a payment's wallet and terminal derive from its payment id.
        .target(
            name: "HorizonTracing",
            dependencies: [
                "HorizonCore",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: strict),
        .testTarget(
            name: "HorizonTracingTests",
            dependencies: [
                "HorizonTracing", "HorizonCore", "HorizonTestSupport",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: strict),
        // The server's client for terminals and wallets: the generated client over AsyncHTTPClient,
        // with request signing and typed errors.
        .target(
            name: "HorizonServerClient",
            dependencies: [
                "HorizonAPI", "HorizonCore", "HorizonProtocol", "HorizonStores", "HorizonSettlement",
                // Requests sealed to the gateway and sent through a relay.
                "HorizonObliviousHTTP",
                // A settlement's trace context, signed into the request; the terminal's spans.
                "HorizonTracing", .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ], swiftSettings: strict),
        // The reference SDK's service clients: merchant, account, cards, programs,
        // transactions, status messages, over the server client.
        .target(
            name: "HorizonServiceClients",
            dependencies: [
                "HorizonServerClient", "HorizonAPI", "HorizonCore", "HorizonProtocol", "HorizonStores",
                // DailyTokenClient is the payment client's OfflineTokenProvider, ServerOfflineForwarder
                // the terminal's OfflinePaymentForwarder, ServerProxyGateway its ProxyGateway.
                "HorizonSettlement",
                // The daily token is checked against the pinned anchor before it is kept.
                "HorizonSecureChannel",
                // The gateway key configuration, checked against the anchor too.
                "HorizonObliviousHTTP",
                .product(name: "Crypto", package: "swift-crypto"),
                // scrypt for a wallet key sealed under its PIN.
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: strict),
        .testTarget(
            name: "HorizonServerTests",
            dependencies: [
                "HorizonServer", "HorizonAPI", "HorizonLedger", "HorizonCore", "HorizonProtocol",
                "HorizonSecureChannel", "HorizonTestSupport", "HorizonServerClient", "HorizonServiceClients",
                "HorizonStores", "HorizonSettlement", "HorizonRoles",
                // Requests relayed sealed through the gateway.
                "HorizonObliviousHTTP",
                // The sandbox card processor's tests run on both stores.
                "HorizonLedgerTestSupport",
                // Built for the tests that run the program as a process.
                "horizon-server",
                // The trace context a signed request carries.
                "HorizonTracing", .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: strict),
        // The whole system in one process: wallet ↔ terminal (simulated radio) ↔ server (HTTP).
        .testTarget(
            name: "HorizonSystemTests",
            dependencies: [
                "HorizonServer", "HorizonServerClient", "HorizonAPI", "HorizonLedger", "HorizonRoles", "HorizonStores",
                "HorizonSettlement",
                "HorizonCore", "HorizonProtocol", "HorizonSecureChannel", "HorizonSimulatedRadio", "HorizonTestSupport",
                "HorizonCLISupport", "HorizonRadioCLISupport", "HorizonLedgerTestSupport",
                // Paying with a card over the radio: the wallet's WalletClient.
                "HorizonServiceClients",
                // Built for the scale-out command's smoke run (Tools/scale-out.sh runs them as processes).
                "horizon-server", "horizon-bench",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ], swiftSettings: strict),
        .executableTarget(
            name: "horizon-server",
            dependencies: [
                "HorizonServer", "HorizonCLISupport", "HorizonLedger", "HorizonCore",
                // Exporting the settlements' traces when a collector is configured.
                "HorizonTracing",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ], path: "Tools/horizon-server", swiftSettings: faultInjection),

        // Roles: the reference SDK's state machines (PaymentHost, PaymentClient, deciders).
        .target(
            name: "HorizonRoles",
            dependencies: [
                "HorizonCore", "HorizonRadio", "HorizonLink", "HorizonSecureChannel", "HorizonProtocol",
                "HorizonStores", "HorizonSettlement",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: strict),
        .testTarget(
            name: "HorizonRolesTests",
            dependencies: [
                "HorizonRoles", "HorizonTestSupport", "HorizonCore", "HorizonRadio", "HorizonSimulatedRadio",
                "HorizonProtocol", "HorizonStores", "HorizonSettlement", "HorizonLink", "HorizonLedger",
                "HorizonLedgerTestSupport",
                "HorizonSecureChannel", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: strict),

        // Apps: command-line programs live under Tools/, with what they share. What every program
        // needs (console, exit codes and usage errors, the JSON contract, secrets, deadlines, logs):
        // no radio, BlueZ, D-Bus or roles, so horizon-server links none of them.
        .target(
            name: "HorizonCLISupport",
            dependencies: [
                "HorizonCore", "HorizonRadio", "HorizonProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ], path: "Tools/HorizonCLISupport", swiftSettings: strict),
        // What the terminal and the wallet share: radio choice (simulated or BlueZ), data files and
        // keys, activation, offline settings, the advice the roles' errors leave out.
        .target(
            name: "HorizonRadioCLISupport",
            dependencies: [
                "HorizonCLISupport", "HorizonCore", "HorizonRadio", "HorizonSimulatedRadio", "HorizonBlueZ",
                "HorizonSecureChannel", "HorizonProtocol", "HorizonUnixSocket",
                "HorizonStores", "HorizonSettlement", "HorizonRoles", "HorizonAPI", "HorizonServerClient",
                "HorizonServiceClients",
                "HorizonLedger",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ], path: "Tools/HorizonRadioCLISupport", swiftSettings: faultInjection),
        .executableTarget(
            name: "horizon-terminal",
            dependencies: [
                "HorizonCLISupport", "HorizonRadioCLISupport", "HorizonCore", "HorizonRadio", "HorizonProtocol",
                "HorizonStores", "HorizonSettlement", "HorizonRoles", "HorizonUnixSocket", "HorizonLedger",
                // The merchant commands of an activated terminal, or of the admin.
                "HorizonServiceClients", "HorizonServerClient",
                // The daily token and the terminal's identity in the offline commands.
                "HorizonSecureChannel", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // Exporting the payments' traces when a collector is configured.
                "HorizonTracing",
            ], path: "Tools/horizon-terminal", swiftSettings: strict),
        .executableTarget(
            name: "horizon-wallet",
            dependencies: [
                "HorizonCLISupport", "HorizonRadioCLISupport", "HorizonCore", "HorizonRadio", "HorizonSimulatedRadio",
                "HorizonProtocol",
                "HorizonStores", "HorizonRoles", "HorizonSecureChannel", "HorizonAPI", "HorizonServerClient",
                "HorizonServiceClients", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                // The payment confirmation's span.
                "HorizonTracing", .product(name: "Tracing", package: "swift-distributed-tracing"),
            ], path: "Tools/horizon-wallet", swiftSettings: strict),
        .executableTarget(
            name: "horizon-demo",
            dependencies: [
                "HorizonCore", "HorizonRadio", "HorizonSimulatedRadio", "HorizonSecureChannel", "HorizonProtocol",
                "HorizonStores", "HorizonRoles", "HorizonLedger", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ], path: "Tools/horizon-demo", swiftSettings: strict),

        // Benchmarks: one release-built executable writing a JSON result and a table.
        .executableTarget(
            name: "horizon-bench",
            dependencies: [
                "HorizonCore", "HorizonRadio", "HorizonSimulatedRadio", "HorizonSecureChannel",
                "HorizonProtocol", "HorizonStores", "HorizonSettlement", "HorizonRoles", "HorizonBlueZ",
                // scale-out: drives real server processes and reads their database back.
                "HorizonLedger", "HorizonAPI", "HorizonServerClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ], path: "Benchmarks/horizon-bench", swiftSettings: strict),
        // libFuzzer entry points for the decoders; without -DFUZZING it replays a corpus (regression runs).
        .executableTarget(
            name: "horizon-fuzz",
            dependencies: [
                "HorizonCore", "HorizonRadio", "HorizonLink", "HorizonSecureChannel", "HorizonProtocol",
                .product(name: "Crypto", package: "swift-crypto"),
            ], path: "Tools/horizon-fuzz", exclude: ["README.md", "corpus"], swiftSettings: strict),

        // Helpers shared by the test targets (not shipped in any product).
        .target(
            name: "HorizonTestSupport",
            dependencies: ["HorizonCore", .product(name: "Logging", package: "swift-log")],
            path: "Tests/HorizonTestSupport", swiftSettings: strict),

        // Drives the built programs as processes; depending on them makes `swift build --build-tests` build them.
        .testTarget(
            name: "HorizonToolsTests",
            dependencies: [
                "horizon-terminal", "horizon-wallet", "horizon-server", "HorizonStores", "HorizonCLISupport",
                "HorizonRadioCLISupport", "HorizonBlueZ", "HorizonRadio", "HorizonRoles",
                "HorizonTestSupport", "HorizonUnixSocket", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict),
        // Seeded fault simulation and corpus replays: the exactly-once invariants under failure.
        .testTarget(
            name: "HorizonFaultTests",
            dependencies: [
                "HorizonTestSupport", "HorizonCore", "HorizonRadio", "HorizonSimulatedRadio", "HorizonLink",
                "HorizonSecureChannel", "HorizonProtocol", "HorizonStores", "HorizonSettlement", "HorizonRoles",
                "HorizonLedger",
                "HorizonLedgerTestSupport", "horizon-fuzz",
                .product(name: "Crypto", package: "swift-crypto"),
            ], swiftSettings: strict),
        .testTarget(
            name: "HorizonStoresTests",
            dependencies: [
                "HorizonTestSupport", "HorizonLedgerTestSupport", "HorizonStores", "HorizonSettlement",
                "HorizonProtocol", "HorizonCore",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "HorizonCoreTests", dependencies: ["HorizonTestSupport", "HorizonCore"], swiftSettings: strict),
        .testTarget(
            name: "HorizonSimulatedRadioTests",
            dependencies: ["HorizonTestSupport", "HorizonCore", "HorizonRadio", "HorizonSimulatedRadio"],
            swiftSettings: strict),
        .testTarget(
            name: "HorizonLinkTests",
            dependencies: [
                "HorizonTestSupport", "HorizonCore", "HorizonRadio", "HorizonLink", "HorizonSimulatedRadio",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "HorizonSecureChannelTests",
            dependencies: [
                "HorizonTestSupport",
                "HorizonCore", "HorizonSecureChannel", .product(name: "Crypto", package: "swift-crypto"),
            ], swiftSettings: strict),
        .testTarget(
            name: "HorizonProtocolTests",
            dependencies: ["HorizonTestSupport", "HorizonCore", "HorizonRadio", "HorizonProtocol"],
            swiftSettings: strict),
        .testTarget(
            name: "HorizonIntegrationTests",
            dependencies: [
                "HorizonTestSupport", "HorizonCore", "HorizonRadio", "HorizonSimulatedRadio", "HorizonLink",
                "HorizonSecureChannel", .product(name: "Crypto", package: "swift-crypto"),
            ], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
