// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import LoginKitCommandLine

/// `loginkit`: the command-line tool over file stores (docs/cli.md). A `postgres://` store is
/// handed to `loginkit-fleet`, so that this executable links no swift-nio.
@main
enum LoginKitMain {
    /// Synchronous: the tool records the signal mask the process started with before anything
    /// runs on the concurrency runtime's threads (`LoginKitCLI.start(fleet:)`).
    static func main() {
        LoginKitCLI.start(fleet: nil)
    }
}
#else
import Foundation

/// Built without the trait this tool needs: says so and exits 2.
@main
enum LoginKitWithoutTrait {
    static func main() {
        FileHandle.standardError.write(Data("loginkit: built without LoginKit's \"CLI\" trait; build with `swift build --enable-all-traits` (make does)\n".utf8))
        exit(2)
    }
}
#endif
