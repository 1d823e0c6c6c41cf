// Built with LoginKit's "CLI" and "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI && Postgres
import LoginKitCommandLine

/// `loginkit-fleet`: `loginkit`'s commands with `postgres://` stores too (LoginKitPostgres).
/// `loginkit` runs it in its own place when the store is a database (docs/fleet.md).
@main
enum LoginKitFleetMain {
    /// Synchronous: the tool records the signal mask the process started with before anything
    /// runs on the concurrency runtime's threads (`LoginKitCLI.start(fleet:)`).
    static func main() {
        LoginKitCLI.start(fleet: PostgresStoreOpener())
    }
}
#else
import Foundation

/// Built without the trait this tool needs: says so and exits 2.
@main
enum LoginKitFleetWithoutTrait {
    static func main() {
        FileHandle.standardError.write(Data("loginkit-fleet: built without LoginKit's \"CLI\" and \"Postgres\" traits; build with `swift build --enable-all-traits` (make does)\n".utf8))
        exit(2)
    }
}
#endif
