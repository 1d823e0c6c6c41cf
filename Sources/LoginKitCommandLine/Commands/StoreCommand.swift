// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
import LoginKit

/// `loginkit store migrate --to keyring|plaintext`: reseal the store file now.
struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store", abstract: "Manage the token store file.", subcommands: [MigrateCommand.self])

    struct MigrateCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate",
            abstract: "Reseal the store: into the OS keyring, or back to a plain 0600 file.",
            discussion: """
                --to keyring seals with a new key in the Secret Service, else the kernel keyring (never \
                LOGINKIT_STORE_KEY, never a plaintext fallback: exit 1 when no keyring is usable); \
                --to plaintext writes plain JSON. The old key is removed from its keyring afterwards.
                """)

        @Option(help: "keyring or plaintext.") var to: String
        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            try await reportingFailures {
                let target: StoreSealing
                switch to {
                case "keyring": target = .automatic(AutomaticSealing())
                case "plaintext": target = .none
                default: throw CLIFailure.usage("--to \"\(Terminal.printable(to))\" is not keyring or plaintext")
                }
                let given = storeOptions.store ?? storeOptions.environment["LOGINKIT_STORE"]
                if let given, StoreOptions.isRemote(given) {
                    throw CLIFailure.usage("store migrate is for file stores; a postgres:// store is sealed with LOGINKIT_STORE_KEY")
                }
                let opened = try await storeOptions.openStore()
                guard let file = opened.store as? IDTokenStore else {
                    throw CLIFailure.usage("store migrate is for file stores")
                }
                let protection = try await file.migrate(to: target)
                Terminal.standardError("Store \(file.path) is now \(protection).")
            }
        }
    }
}
#endif
