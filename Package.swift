// swift-tools-version:6.2
// LoginKit: log in over HTTP, keep tokens safe on disk, and give every concurrent caller a valid
// token. Layout and contracts: docs/architecture.md.
//
// Weight: an app that depends on the `LoginKit` product (or LoginKitViewModel, LoginKitMocks)
// resolves only swift-http-types, swift-log, swift-metrics, swift-distributed-tracing and
// swift-service-context. The dev server (Hummingbird), the fleet store (postgres-nio), the
// service-lifecycle integration and the CLI (swift-argument-parser) are behind package traits that
// are off by default: a package that wants one of those products enables its trait, e.g.
//     .package(url: "…/LoginKit.git", branch: "main", traits: ["Postgres"])
// SwiftPM then resolves that trait's packages only. This repository's own builds enable every trait
// (`make` passes --enable-all-traits; `swift build --enable-all-traits` by hand). Measured and
// explained in docs/architecture.md, "Weight".
import PackageDescription

/// Settings every LoginKit target shares: Swift 6 mode comes from the tools version; warnings are
/// errors in this package only (SwiftPM ignores warning control for packages that depend on us).
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// Dependencies of a trait's products only: resolved and built only when the trait is enabled.
func when(_ trait: String) -> TargetDependencyCondition? { .when(traits: [trait]) }

let package = Package(
    name: "LoginKit",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LoginKit", targets: ["LoginKit"]),
        .library(name: "LoginKitViewModel", targets: ["LoginKitViewModel"]),
        .library(name: "LoginKitMocks", targets: ["LoginKitMocks"]),
        .library(name: "LoginKitDevServer", targets: ["LoginKitDevServer"]),
        .library(name: "LoginKitPostgres", targets: ["LoginKitPostgres"]),
        .library(name: "LoginKitLifecycle", targets: ["LoginKitLifecycle"]),
        .executable(name: "loginkit", targets: ["loginkit"]),
        .executable(name: "loginkit-fleet", targets: ["loginkit-fleet"]),
        // The dev identity provider on its own, so that `loginkit` links no server framework.
        .executable(name: "loginkit-dev-server", targets: ["loginkit-dev-server"]),
    ],
    traits: [
        .trait(name: "DevServer", description: "LoginKitDevServer and loginkit-dev-server: the embedded identity provider (Hummingbird)."),
        .trait(name: "Postgres", description: "LoginKitPostgres and loginkit-fleet: the PostgreSQL token store (postgres-nio)."),
        .trait(name: "Lifecycle", description: "LoginKitLifecycle: keeping tokens fresh under a swift-service-lifecycle ServiceGroup."),
        .trait(name: "CLI", description: "The loginkit command-line tool (swift-argument-parser)."),
        .trait(
            name: "Development", description: "Everything, and what this package's own tests use (swift-property-based).",
            enabledTraits: ["DevServer", "Postgres", "Lifecycle", "CLI"]),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        // `swift package generate-documentation` (scripts/docs.sh, `make docs`); no target links it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // C libraries from Debian, wrapped by typed shims (Swift cannot call C variadics).
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // prctl(2) and syscall(2), variadic in C: the CLI's process hardening, and the pidfds that
        // watch and kill identity programs. A header only: nothing to link.
        .systemLibrary(name: "CProcessControl"),
        // The OS keyrings: keyctl(2) system calls, and libsecret loaded at run time (dlopen), so
        // that nothing more is needed to build or start (docs/storage.md, "Key providers").
        .target(name: "CKeyring", linkerSettings: [.linkedLibrary("dl")]),

        // Abstractions with no I/O.
        .target(
            name: "LoginKitHTTP",
            dependencies: [.product(name: "HTTPTypes", package: "swift-http-types")],
            swiftSettings: strict
        ),
        // The only module that imports CCurl.
        .target(
            name: "LoginKitCurl",
            dependencies: ["CCurl", "LoginKitHTTP"],
            swiftSettings: strict
        ),
        // The only module that imports COpenSSL.
        .target(
            name: "LoginKitJOSE",
            dependencies: ["COpenSSL", "LoginKitHTTP", .product(name: "HTTPTypes", package: "swift-http-types")],
            swiftSettings: strict
        ),
        .target(
            name: "LoginKit",
            dependencies: [
                "LoginKitHTTP", "LoginKitCurl", "LoginKitJOSE", "CKeyring", "CProcessControl",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "LoginKitViewModel",
            dependencies: ["LoginKit", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        // The scripted browser's steps, shared by LoginKitMocks' TestBrowser and
        // `loginkit-dev-server browse`; in no product of its own.
        .target(
            name: "LoginKitBrowserScript",
            dependencies: ["LoginKitHTTP", .product(name: "HTTPTypes", package: "swift-http-types")],
            swiftSettings: strict
        ),
        .target(
            name: "LoginKitMocks",
            dependencies: ["LoginKit", "LoginKitHTTP", "LoginKitBrowserScript"],
            path: "Mocks",
            swiftSettings: strict
        ),
        .target(
            name: "LoginKitDevServer",
            dependencies: [
                "LoginKitHTTP", "LoginKitJOSE",
                .product(name: "Hummingbird", package: "hummingbird", condition: when("DevServer")),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: when("DevServer")),
                .product(name: "NIOCore", package: "swift-nio", condition: when("DevServer")),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Keeping tokens fresh inside a swift-service-lifecycle ServiceGroup (docs/server-side.md).
        .target(
            name: "LoginKitLifecycle",
            dependencies: [
                "LoginKit", "LoginKitHTTP",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: when("Lifecycle")),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "LoginKitPostgres",
            dependencies: [
                "LoginKit", "LoginKitHTTP", "LoginKitJOSE",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: when("Postgres")),
                .product(name: "NIOCore", package: "swift-nio", condition: when("Postgres")),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The CLI's commands, shared by `loginkit` and `loginkit-fleet`; in no product of its own.
        .target(
            name: "LoginKitCommandLine",
            dependencies: [
                "LoginKit", "LoginKitHTTP", "LoginKitViewModel", "CProcessControl",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: when("CLI")),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(name: "loginkit", dependencies: ["LoginKitCommandLine"], swiftSettings: strict),
        // `loginkit` with postgres:// stores (LoginKitPostgres, on swift-nio); `loginkit` execs it.
        .executableTarget(
            name: "loginkit-fleet",
            dependencies: [
                "LoginKitCommandLine", "LoginKit", "LoginKitHTTP", "LoginKitPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: when("Postgres")),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `loginkit dev-server` and `loginkit demo` run it; `browse` is a scripted browser for it.
        .executableTarget(
            name: "loginkit-dev-server",
            dependencies: [
                "LoginKitDevServer", "LoginKit", "LoginKitHTTP", "LoginKitBrowserScript",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: when("DevServer")),
            ],
            swiftSettings: strict
        ),

        // The child process of the multi-process store and refresh tests.
        .executableTarget(
            name: "loginkit-test-helper",
            dependencies: [
                "LoginKit", "LoginKitMocks", "LoginKitPostgres", "LoginKitLifecycle",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: when("Lifecycle")),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/TestHelper",
            swiftSettings: strict
        ),

        // Helpers the test targets share (temp dirs, child processes).
        .target(
            name: "LoginKitTestSupport",
            dependencies: [
                "LoginKit", "LoginKitHTTP",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            path: "Tests/TestSupport", swiftSettings: strict),

        .testTarget(name: "LoginKitHTTPTests", dependencies: ["LoginKitHTTP"], swiftSettings: strict),
        .testTarget(
            name: "LoginKitJOSETests",
            dependencies: ["LoginKitJOSE", "LoginKitHTTP", "LoginKitCurl", "LoginKitDevServer", "LoginKitTestSupport"],
            resources: [.copy("Vectors")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LoginKitTests",
            dependencies: [
                "LoginKit", "LoginKitHTTP", "LoginKitJOSE", "LoginKitDevServer", "LoginKitMocks", "LoginKitTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PropertyBased", package: "swift-property-based", condition: when("Development")),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LoginKitViewModelTests",
            dependencies: [
                "LoginKitViewModel", "LoginKitMocks", "LoginKit", "LoginKitDevServer", "LoginKitTestSupport",
                .product(name: "Logging", package: "swift-log"), .product(name: "InMemoryLogging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LoginKitMocksTests",
            dependencies: ["LoginKitMocks", "LoginKit", "LoginKitViewModel", "LoginKitTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CLITests",
            dependencies: [
                "LoginKit", "LoginKitHTTP", "LoginKitJOSE", "LoginKitDevServer", "LoginKitTestSupport", "LoginKitPostgres",
                .target(name: "LoginKitCommandLine", condition: when("CLI")),
                .product(name: "PostgresNIO", package: "postgres-nio", condition: when("Postgres")),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "LoginKit", "LoginKitHTTP", "LoginKitJOSE", "LoginKitDevServer", "LoginKitMocks", "LoginKitTestSupport", "LoginKitViewModel",
                "LoginKitLifecycle",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: when("Lifecycle")),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LoginKitPostgresTests",
            dependencies: [
                "LoginKitPostgres", "LoginKit", "LoginKitJOSE", "LoginKitDevServer", "LoginKitMocks", "LoginKitTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: when("Postgres")),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Every Swift block of README.md, docs/ and the DocC catalogs, compiled and never run: one file
        // per block in Tests/DocSnippetTests/Generated, written by scripts/doc-snippets.py (`make snippets`).
        .testTarget(
            name: "DocSnippetTests",
            dependencies: [
                "LoginKit", "LoginKitViewModel", "LoginKitMocks", "LoginKitLifecycle", "LoginKitPostgres", "LoginKitDevServer",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: when("Lifecycle")),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/DocSnippetTests",
            swiftSettings: strict
        ),
        .testTarget(
            name: "LoginKitCurlTests",
            dependencies: [
                "LoginKitCurl", "LoginKitHTTP", "LoginKitJOSE", "LoginKitDevServer", "LoginKitTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: when("DevServer")),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
    ]
)
