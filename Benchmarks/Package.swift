// swift-tools-version:6.2
// `make bench`: LoginKit against its peers, measured in the same run (docs/benchmarks.md).
// A package of its own so that the peers (async-http-client, jwt-kit) never become dependencies
// of LoginKit itself.
import PackageDescription

let package = Package(
    name: "LoginKitBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "LoginKit", path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
    ],
    targets: [
        .target(name: "CBench", path: "Sources/CBench"),
        .executableTarget(
            name: "loginkit-bench",
            dependencies: [
                "CBench",
                .product(name: "LoginKit", package: "LoginKit"),
                .product(name: "LoginKitDevServer", package: "LoginKit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ]
)
