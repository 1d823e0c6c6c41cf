// Built with LoginKit's "CLI" and "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI && Postgres
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import LoginKit
import LoginKitCommandLine
import LoginKitHTTP
import LoginKitPostgres
import PostgresNIO

/// Opens `--store postgres://…` for the CLI: a `PostgresTokenStore` on a client of its own, run
/// until the command is done. The CLI reads without memory (a command is one short run; every
/// read is a query) and migrates the table when it, its trigger or the quarantine table is missing.
///
/// The URL: `postgres://user[:password]@host[:port]/database?sslmode=…&sslrootcert=…` as
/// `PostgresTokenStore.connection(url:)` reads it, plus `namespace` and `table`. A password is
/// taken from the URL only in `LOGINKIT_STORE`, never from `--store` (argv is readable by every
/// user through `ps`); else from `PGPASSWORD`.
final class PostgresStoreOpener: FleetStoreOpener {
    private let running = LockedState<[(client: PostgresClient, task: Task<Void, Never>)]>([])

    func open(url: String, fromFlag: Bool, environment: [String: String]) async throws -> CommandLineStore {
        guard var components = URLComponents(string: url) else {
            throw CLIFailure.usage("the store URL is not a URL; write postgres://user@host:port/database")
        }
        if fromFlag, components.password != nil {
            throw CLIFailure.usage(
                "the --store URL holds a password, which any user can read on the command line; put the URL in LOGINKIT_STORE or the password in PGPASSWORD")
        }
        var configuration = PostgresTokenStore.Configuration()
        configuration.sealing = .environment
        configuration.readsFromMemory = false
        configuration.logger = Logger(label: "loginkit.postgres")
        var remaining: [URLQueryItem] = []
        for item in components.queryItems ?? [] {
            switch item.name {
            case "namespace": configuration.namespace = item.value ?? ""
            case "table": configuration.table = item.value ?? ""
            default: remaining.append(item)
            }
        }
        guard !configuration.namespace.isEmpty else { throw CLIFailure.usage("the store URL's namespace is empty") }
        components.queryItems = remaining.isEmpty ? nil : remaining
        guard let stripped = components.string else { throw CLIFailure.usage("the store URL is not a URL") }
        var connection: PostgresClient.Configuration
        do {
            connection = try PostgresTokenStore.connection(url: stripped)
        } catch {
            throw CLIFailure.usage("the store URL: \(error.message)")  // never repeats the password
        }
        if connection.password == nil, let password = environment["PGPASSWORD"], !password.isEmpty {
            connection.password = password
        }
        let client = PostgresClient(configuration: connection, backgroundLogger: configuration.logger)
        running.withLock { $0.append((client, Task { await client.run() })) }
        let store = try PostgresTokenStore(client: client, configuration: configuration)
        try await store.migrateWhenMissing()
        components.password = nil
        let location = components.string ?? "postgres://\(connection.host ?? "")"
        let (table, namespace) = (configuration.table, configuration.namespace)
        let kept = "kept \(configuration.quarantineRetention.components.seconds / 86_400) days; loginkit store quarantine list"
        // The store's client runs until `shutdown()`, after the command: these closures may query it.
        let quarantine = QuarantineAccess(
            list: {
                try await store.quarantinedRows().map {
                    QuarantineAccess.Row(id: $0.id, name: $0.name, quarantinedAt: $0.quarantinedAt, reason: $0.reason)
                }
            },
            purge: { ids in try await store.purgeQuarantinedRows(ids: ids) })
        return CommandLineStore(store: store, location: location, isSealed: store.isSealed, quarantine: quarantine) {
            let quarantined = try await store.quarantinedRows()
            let names = Set(quarantined.map(\.name)).sorted().map { "\"\($0)\"" }.joined(separator: ", ")
            return [
                .init(key: "table", label: "table", value: table),
                .init(key: "namespace", label: "namespace", value: namespace),
                .init(
                    key: "quarantined", label: "quarantined",
                    value: quarantined.isEmpty ? "none" : "\(quarantined.count) row(s) of \(names) in loginkit_quarantine (\(kept))"),
            ]
        }
    }

    func shutdown() async {
        let clients = running.withLock { running in
            defer { running.removeAll() }
            return running
        }
        for (_, task) in clients {
            task.cancel()
            await task.value
        }
    }
}
#endif
