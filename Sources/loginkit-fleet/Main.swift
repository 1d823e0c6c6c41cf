import LoginKitCommandLine

/// `loginkit-fleet`: `loginkit`'s commands with `postgres://` stores too (LoginKitPostgres).
/// `loginkit` runs it in its own place when the store is a database (docs/fleet.md).
@main
enum LoginKitFleetMain {
    static func main() async {
        await LoginKitCLI.main(fleet: PostgresStoreOpener())
    }
}
