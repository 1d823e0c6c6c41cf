// swift-tools-version:6.2
// libFuzzer targets, one executable per entry point (docs/reliability.md). Built by Fuzz/run.sh:
//   swift build --package-path Fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
// The entry points live in LoginKit itself, behind `@_spi(Fuzzing)` (`FuzzEntries`), so that
// `make test` replays the committed corpora (Fuzz/Corpus) through the same code without a fuzzing
// build.
import PackageDescription

let package = Package(
    name: "LoginKitFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "LoginKit", path: "..")],
    targets: [
        .target(name: "FuzzDriver"),
        .executableTarget(name: "fuzz-jws", dependencies: ["FuzzDriver", .product(name: "LoginKit", package: "LoginKit")]),
        .executableTarget(name: "fuzz-jwks", dependencies: ["FuzzDriver", .product(name: "LoginKit", package: "LoginKit")]),
        .executableTarget(name: "fuzz-token-response", dependencies: ["FuzzDriver", .product(name: "LoginKit", package: "LoginKit")]),
        .executableTarget(name: "fuzz-store-file", dependencies: ["FuzzDriver", .product(name: "LoginKit", package: "LoginKit")]),
        .executableTarget(name: "fuzz-semver", dependencies: ["FuzzDriver", .product(name: "LoginKit", package: "LoginKit")]),
        .executableTarget(name: "fuzz-cli-config", dependencies: ["FuzzDriver", .product(name: "LoginKit", package: "LoginKit")]),
        .executableTarget(name: "fuzz-signing-key", dependencies: ["FuzzDriver", .product(name: "LoginKit", package: "LoginKit")]),
    ]
)
