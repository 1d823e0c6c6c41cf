// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit

/// `loginkit store migrate --to keyring|plaintext`: reseal the store file now.
/// `loginkit store quarantine list|purge`: the rows of a `postgres://` store set aside as unreadable.
struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store", abstract: "Manage the token store.",
        subcommands: [MigrateCommand.self, QuarantineCommand.self])

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
                let opened = try await storeOptions.openStore(choosingProfile: false)
                guard let file = opened.store as? IDTokenStore else {
                    throw CLIFailure.usage("store migrate is for file stores")
                }
                let protection = try await file.migrate(to: target)
                Terminal.standardError("Store \(file.path) is now \(protection).")
            }
        }
    }

    struct QuarantineCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "quarantine",
            abstract: "List or delete the rows of a postgres:// store set aside as unreadable.",
            discussion: """
                A row of the store's table that does not decode is moved to the quarantine table by the \
                next login or refresh, and kept there for 30 days. These commands see the rows of the \
                store's table and namespace only; payloads are never printed.
                """,
            subcommands: [ListCommand.self, PurgeCommand.self])

        /// The quarantine of the store `storeOptions` name: a usage failure (exit 2) for a file store.
        static func quarantine(of storeOptions: StoreOptions) async throws -> QuarantineAccess {
            let variable = storeOptions.environment["LOGINKIT_STORE"].flatMap { $0.isEmpty ? nil : $0 }
            guard let given = storeOptions.store ?? variable, StoreOptions.isRemote(given) else { throw notRemote }
            let opened = try await storeOptions.openStore(choosingProfile: false)
            guard let quarantine = opened.quarantine else { throw notRemote }
            return quarantine
        }

        static let notRemote = CLIFailure.usage("store quarantine is for postgres:// stores")

        struct ListCommand: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "List the rows set aside: number, time, profile, reason (never the payload).")

            @Flag(help: "Print a JSON array on stdout.") var json = false
            @OptionGroup var storeOptions: StoreOptions

            func run() async throws {
                try await reportingFailures {
                    let rows = try await QuarantineCommand.quarantine(of: storeOptions).list()
                    if json {
                        JSONOutput.printArray(rows.map { row -> [String: JSONOutput.Value] in
                            [
                                "id": .number(row.id), "profile": .text(row.name),
                                "quarantined_at": JSONOutput.timestamp(row.quarantinedAt), "reason": .text(row.reason),
                            ]
                        })
                    } else if rows.isEmpty {
                        Terminal.standardError("no rows set aside")
                    } else {
                        // Profile names and reasons are the database's: escaped before they reach the terminal.
                        for row in rows {
                            print(
                                "\(row.id)  \(row.quarantinedAt.formatted(.iso8601))  \(Terminal.printable(row.name, limit: 200))  "
                                    + Terminal.printable(row.reason, limit: 500))
                        }
                    }
                }
            }
        }

        struct PurgeCommand: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "purge",
                abstract: "Delete rows set aside: every one (--all), or those numbered (--id N, repeatable).")

            @Flag(help: "Delete every row of the store's table and namespace.") var all = false
            @Option(name: .customLong("id"), help: "The number of a row to delete, as `list` shows it; repeatable.")
            var ids: [Int64] = []
            @OptionGroup var storeOptions: StoreOptions

            func validate() throws {
                guard all == ids.isEmpty else {
                    throw ValidationError("purge needs --all or --id N (repeatable), not both")
                }
            }

            func run() async throws {
                try await reportingFailures {
                    let deleted = try await QuarantineCommand.quarantine(of: storeOptions).purge(all ? nil : ids)
                    Terminal.standardError("Deleted \(deleted) row(s) from the quarantine table.")
                }
            }
        }
    }
}
#endif
