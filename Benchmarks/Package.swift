// swift-tools-version:6.2
// `make bench`: LoginKit against its peers, measured in the same run (docs/benchmarks.md).
// A package of its own so that the peers (async-http-client, jwt-kit) never become dependencies
// of LoginKit itself.
import PackageDescription

let package = Package(
    name: "LoginKitBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The DevServer trait: the storm's identity provider (LoginKitDevServer, loginkit-dev-server).
        // The Postgres trait: the fleet store under load (LoginKitPostgres; Fleet.swift).
        .package(name: "LoginKit", path: "..", traits: ["DevServer", "Postgres"]),
        // The fleet bench's own clients (one per simulated host) and their loggers; the versions
        // LoginKit itself requires.
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        // jwt-kit's own crypto (BoringSSL), measured alone for the ES256 comparison.
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    ],
    targets: [
        .target(name: "CBench", path: "Sources/CBench", linkerSettings: [.linkedLibrary("crypto")]),
        // The output, statistics and HTTP loop every executable shares; LoginKit only.
        .target(
            name: "BenchCore",
            dependencies: ["CBench", .product(name: "LoginKit", package: "LoginKit")],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        // LoginKit's HTTP runs, in a process with nothing else linked in (its own RSS and CPU).
        // The smallest Swift process, for the RSS floors (built with the runtime linked statically,
        // and with it as shared libraries).
        .executableTarget(name: "swift-floor", swiftSettings: [.enableUpcomingFeature("ExistentialAny")]),
        .executableTarget(
            name: "loginkit-alone",
            dependencies: ["BenchCore"],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .executableTarget(
            name: "loginkit-bench",
            dependencies: [
                "CBench", "BenchCore",
                .product(name: "LoginKit", package: "LoginKit"),
                .product(name: "LoginKitDevServer", package: "LoginKit"),
                .product(name: "LoginKitPostgres", package: "LoginKit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ]
)
