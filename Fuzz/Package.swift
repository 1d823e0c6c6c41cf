// swift-tools-version:6.2
// libFuzzer targets, one executable per entry point (docs/reliability.md). Built by Fuzz/run.sh:
//   swift build --package-path Fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
// The entry points live in LoginKit's `LoginKitFuzzing` module, so that `make test` replays the
// committed corpora (Fuzz/Corpus) through the same code without a fuzzing build.
import PackageDescription

let package = Package(
    name: "LoginKitFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "LoginKit", path: "..")],
    targets: [
        .executableTarget(name: "fuzz-jws", dependencies: [.product(name: "LoginKitFuzzing", package: "LoginKit")]),
        .executableTarget(name: "fuzz-jwks", dependencies: [.product(name: "LoginKitFuzzing", package: "LoginKit")]),
        .executableTarget(name: "fuzz-token-response", dependencies: [.product(name: "LoginKitFuzzing", package: "LoginKit")]),
        .executableTarget(name: "fuzz-store-file", dependencies: [.product(name: "LoginKitFuzzing", package: "LoginKit")]),
        .executableTarget(name: "fuzz-semver", dependencies: [.product(name: "LoginKitFuzzing", package: "LoginKit")]),
        .executableTarget(name: "fuzz-cli-config", dependencies: [.product(name: "LoginKitFuzzing", package: "LoginKit")]),
    ]
)
