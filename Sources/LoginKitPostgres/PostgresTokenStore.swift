// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import Logging
public import LoginKit
import LoginKitJOSE
import NIOCore
public import PostgresNIO
import LoginKitHTTP

/// A `TokenStore` in a PostgreSQL table, shared by every instance of a fleet: one refresh across
/// machines, the way `IDTokenStore`'s file lock gives one refresh across processes.
///
/// - One row per profile (see docs/fleet.md for the schema), created by ``migrate()``. Every object
///   is named with its schema (an unqualified ``Configuration/table`` is in `current_schema()`,
///   resolved once), and must be owned by the connecting role or a role it is a member of by a grant (a superuser is not, by its implicit membership), or a superuser: a table,
///   quarantine table or change function that another role made first is refused
///   (`TokenStoreError` `.wrongOwner`), as is a quarantine table that grants privileges to others
///   (`.insecurePermissions`).
/// - ``withExclusiveAccess(to:_:)`` is a transaction that holds `pg_advisory_xact_lock` on the
///   profile (and the namespace's lock in shared mode), then re-reads the row `FOR UPDATE`: another
///   host's refresh is waited for, and seen. A host that dies mid-refresh drops its connection, and
///   PostgreSQL releases its locks with the transaction. ``withExclusiveAccess(_:)`` takes the
///   namespace's lock exclusively and reads every profile.
/// - Writes check the row's `version` (optimistic: a writer that bypassed the lock makes the write
///   fail with `.conflict` rather than be overwritten). Writes whose connection closed before
///   PostgreSQL confirmed them (a restart) are made again on a new connection, within
///   `operationTimeout` and while the credentials written are valid.
/// - With a sealing key, `payload` is AES-256-GCM sealed (the same as the file store) with the
///   namespace and profile name as associated data: the database never sees a token in clear,
///   and a row copied to another profile does not open. An unsealed row is then never read: it
///   is handled as a corrupt one.
/// - The database unreachable, not answering within `operationTimeout`, or closing the connection
///   while a transaction waits for its lock → `TokenStoreError` `.unavailable`; `AuthService` then
///   keeps serving a token that is still valid.
/// - While ``run()`` listens (`LISTEN`/`NOTIFY`), reads are served from memory and `AuthService`'s
///   token calls do not query at all; any committed change to a row drops what memory had of it.
/// - A row that does not decode is moved to the `loginkit_quarantine` table the next time it is
///   read under the lock (a login, a refresh), logged, and listed by ``quarantinedRows()``; it is
///   kept there for ``Configuration/quarantineRetention``.
///
/// The `PostgresClient` is the caller's: its pool size and connect timeout are its configuration,
/// and its `run()` must be running (``withStore(_:configuration:_:)`` does both for you, and runs
/// the store's ``run()`` too).
public final class PostgresTokenStore: TokenStore {
    /// Where and how the store keeps its rows.
    public struct Configuration: Sendable {
        /// The table, `[schema.]name` of letters, digits and `_`. Default `loginkit_profiles`, in the
        /// schema `current_schema()` names when the store first reaches the database.
        public var table = "loginkit_profiles"
        /// Profiles of different applications sharing a table stay apart by namespace. Default `default`.
        public var namespace = "default"
        /// How payloads are sealed: `.none`, `.key`, `.keyFile` or `.environment`
        /// (`LOGINKIT_STORE_KEY`). Default `.environment`, as for the file store.
        public var sealing: StoreSealing = .environment
        /// The longest wait for a connection and for a read; past it, `.unavailable`. Default 10 s.
        public var operationTimeout: Duration = .seconds(10)
        /// The longest wait for another holder's lock (a refresh elsewhere). Set as the
        /// transaction's `lock_timeout` too. Default 120 s, beyond AuthService's refresh deadline.
        public var lockTimeout: Duration = .seconds(120)
        /// How long rows set aside in the quarantine table are kept: older ones are deleted when the
        /// store starts (``migrate()``, ``withStore(_:configuration:_:)``) and whenever a row is set
        /// aside. The quarantine table is shared by the stores of a schema, so the shortest
        /// retention among them wins. Default 30 days.
        public var quarantineRetention: Duration = .seconds(30 * 24 * 3600)
        /// Where the store and the queries log; nothing secret is logged. Default: nowhere.
        public var logger = Logger(label: "loginkit.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        /// The clock the store's own waits run on: ``operationTimeout``, and ``lockTimeout`` on this
        /// side (PostgreSQL enforces its `lock_timeout` in real time). Default `SystemClock()`; tests
        /// pass a manual clock so that a timeout fires without waiting in real time.
        package var clock: any AuthClock = SystemClock()
        /// Whether ``withStore(_:configuration:_:)`` runs the store's ``run()``, which serves reads
        /// from memory between notifications of change. Default `true`; `false`: every read is a query.
        public var readsFromMemory = true
        /// How often ``run()`` checks that its `LISTEN` connection still delivers (a notification it
        /// sends itself must come back within ``operationTimeout``). Default 10 s.
        public var listenerHeartbeat: Duration = .seconds(10)

        /// The default configuration: table `loginkit_profiles`, namespace `default`, 10 s to reach
        /// the database, 120 s to wait for a lock, quarantined rows kept 30 days.
        public init() {}
    }

    /// The client the store queries through.
    package let client: PostgresClient
    /// The configuration.
    package let configuration: Configuration
    private let key: SymmetricKey?
    /// The profile table's name as configured, lowercased, without its schema.
    let tableName: String
    /// The store's objects: set by `init` when ``Configuration/table`` names its schema, else by the
    /// first call that needs them (``storeObjects()``).
    let resolvedObjects: LockedState<StoreObjects?>
    /// What reads serve from memory while ``run()`` listens.
    package let changes = StoreChanges()
    /// What the store's transactions went through, counted (tests await it).
    package let progress = TransactionProgress()
    /// Ends the waits of a transaction whose connection closes.
    let watches = ConnectionWatch()
    /// Rows decoded before, by name: a read of the same row (every column the same, not only the
    /// version: a writer outside LoginKit may not bump it) skips opening the payload.
    private let decoded = LockedState<[String: (row: Row, profile: StoredProfile)]>([:])

    /// The row format this code writes; a row with a newer one is refused, never overwritten.
    package static let format: Int32 = 1

    /// A store over `client` (which the caller runs). Call ``migrate()`` once before use.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` for a table name that is not `[schema.]name`
    ///   or a quarantine retention that is not positive; `TokenStoreError` `.invalidKey` for a bad
    ///   sealing key.
    public init(client: PostgresClient, configuration: Configuration = Configuration()) throws {
        let parts = configuration.table.split(separator: ".", omittingEmptySubsequences: false)
        let valid = (1...2).contains(parts.count) && parts.allSatisfy { part in
            guard let first = part.first, first == "_" || first.isLetter else { return false }
            return part.count <= 63 && part.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
        }
        guard valid else {
            throw LoginError(
                .invalidConfiguration,
                "PostgresTokenStore.Configuration.table \"\(configuration.table)\" must be [schema.]name of ASCII letters, digits and _")
        }
        guard configuration.quarantineRetention > .zero else {
            throw LoginError(.invalidConfiguration, "PostgresTokenStore.Configuration.quarantineRetention must be longer than zero")
        }
        self.client = client
        self.configuration = configuration
        let names = parts.map { $0.lowercased() }
        self.tableName = names.last ?? configuration.table
        self.resolvedObjects = LockedState<StoreObjects?>(names.count == 2 ? StoreObjects(schema: names[0], tableName: names[1]) : nil)
        if case .provider = configuration.sealing {
            throw TokenStoreError(
                .invalidKey, path: "PostgresTokenStore",
                "PostgresTokenStore seals with a key given in code, a key file or LOGINKIT_STORE_KEY; key providers are for file stores")
        }
        self.key = try configuration.sealing.resolveKey(environment: ProcessInfo.processInfo.environment)
    }

    /// Runs `body` with a store on a client of its own (run for `body`'s duration, closed after),
    /// after creating what is missing of its tables (as ``migrate()`` does) and checking who owns
    /// them, with the store's ``run()`` serving reads from memory.
    public static func withStore<T>(
        _ connection: PostgresClient.Configuration, configuration: Configuration = Configuration(),
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresTokenStore) async throws -> T
    ) async throws -> T {
        let client = PostgresClient(configuration: connection, backgroundLogger: configuration.logger)
        let store = try PostgresTokenStore(client: client, configuration: configuration)
        return try await withThrowingTaskGroup(of: Void.self, isolation: isolation) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await store.migrateWhenMissing()
            if configuration.readsFromMemory { group.addTask { await store.run() } }
            return try await body(store)
        }
    }

    /// Whether payloads are sealed (a key is configured).
    package var isSealed: Bool { key != nil }

    var location: String { "PostgreSQL table \(configuration.table), namespace \(configuration.namespace)" }

    /// The quarantine table, schema-qualified once the store's objects are known.
    var quarantineName: String { resolvedObjects.withLock { $0 }?.quarantine ?? "loginkit_quarantine" }

    /// The store's objects, each named with its schema. An unqualified ``Configuration/table`` is in
    /// the schema `current_schema()` names on the first call (the first schema of `search_path` that
    /// exists), and stays there for the store's life: nothing is looked up through `search_path`
    /// after that.
    func storeObjects() async throws -> StoreObjects {
        if let objects = resolvedObjects.withLock({ $0 }) { return objects }
        let schema = try await withDeadline(configuration.operationTimeout) { [client, logger = configuration.logger] () async throws -> String? in
            var schema: String?
            for try await value in try await client.query("SELECT pg_catalog.current_schema()::text", logger: logger).decode(String?.self) {
                schema = value
            }
            return schema
        }
        guard let schema else {
            throw TokenStoreError(
                .io, path: location,
                "no schema named by PostgreSQL's search_path exists, so the table has none; name it in PostgresTokenStore.Configuration.table as schema.name")
        }
        let found = StoreObjects(schema: schema, tableName: tableName)
        resolvedObjects.withLock { resolved in
            if resolved == nil { resolved = found }
        }
        return resolvedObjects.withLock { $0 } ?? found
    }

    // MARK: Reads

    public func profile(named name: String) async throws -> StoredProfile? {
        if let served = changes.cached(name) { return served }
        let objects = try await storeObjects()
        let generation = changes.beginRead()
        let query: PostgresQuery = "SELECT name, format, sealed, payload, version FROM \(unescaped: objects.table) WHERE namespace = \(configuration.namespace) AND name = \(name)"
        let rows = try await Telemetry.storeOperation("read", store: "postgres") {
            try await withDeadline(configuration.operationTimeout) { [client, logger = configuration.logger] in
                try await Self.rows(try await client.query(query, logger: logger))
            }
        }
        guard let row = rows[name] else {
            decoded.withLock { _ = $0.removeValue(forKey: name) }
            changes.remember(nil, as: name, readUnder: generation)
            return nil
        }
        let profile = try open(row, name: name)
        changes.remember(profile, as: name, readUnder: generation)
        return profile
    }

    public func profileNames() async throws -> [String] {
        let objects = try await storeObjects()
        let query: PostgresQuery = "SELECT name FROM \(unescaped: objects.table) WHERE namespace = \(configuration.namespace) ORDER BY name"
        return try await withDeadline(configuration.operationTimeout) { [client, logger = configuration.logger] in
            var names: [String] = []
            for try await name in try await client.query(query, logger: logger).decode(String.self) { names.append(name) }
            return names
        }
    }

    // MARK: Transactions

    public nonisolated(nonsending) func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        try await transact(scope: nil, body)
    }

    public nonisolated(nonsending) func withExclusiveAccess<T>(to name: String, _ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        try await transact(scope: name, body)
    }

    /// Forgets what was decoded of `names` (they are being written).
    func forgetDecoded(_ names: some Sequence<String>) {
        decoded.withLock { cache in
            for name in names { cache[name] = nil }
        }
    }

    // MARK: Rows ↔ profiles

    static func rows(_ sequence: PostgresRowSequence) async throws -> [String: Row] {
        var rows: [String: Row] = [:]
        for try await (name, format, sealed, payload, version) in sequence.decode((String, Int32, Bool, ByteBuffer, Int64).self) {
            rows[name] = Row(format: format, sealed: sealed, payload: Array(payload.readableBytesView), version: version)
        }
        return rows
    }

    private func associatedData(_ name: String) -> [UInt8] {
        Array("loginkit-postgres:\(Self.format):\(configuration.namespace)\u{0}\(name)".utf8)
    }

    func seal(_ profile: StoredProfile, name: String, version: Int64) throws(TokenStoreError) -> Row {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = .sortedKeys
        let json: [UInt8]
        do {
            json = Array(try encoder.encode(profile))
        } catch {
            throw TokenStoreError(.io, path: location, "profile \"\(name)\" could not be encoded")
        }
        guard let key else { return Row(format: Self.format, sealed: false, payload: json, version: version) }
        do {
            return Row(format: Self.format, sealed: true, payload: try AESGCM.seal(json, key: key, associatedData: associatedData(name)), version: version)
        } catch {
            throw TokenStoreError(.io, path: location, "profile \"\(name)\" could not be sealed: \(error)")
        }
    }

    func open(_ row: Row, name: String) throws(TokenStoreError) -> StoredProfile {
        // With a key, every row LoginKit writes is sealed: an unsealed one was put there by someone
        // who can write the table but has no key, and would choose the issuer, endpoints and
        // client the next refresh sends its credentials to. Never read; set aside as a corrupt row.
        guard row.sealed || key == nil else {
            throw TokenStoreError(
                .corrupt, path: location,
                "profile \"\(name)\" is not sealed, but this store seals with a key: it was not written by LoginKit with that key and is not read; the next login or refresh moves it to the table \(quarantineName) (it is kept there, not deleted)")
        }
        if let cached = decoded.withLock({ $0[name] }), cached.row == row { return cached.profile }
        guard row.format <= Self.format else {
            throw TokenStoreError(
                .unsupportedVersion, path: location,
                "profile \"\(name)\" has row format \(row.format), newer than this LoginKit's \(Self.format); upgrade LoginKit (the row is left as it is)")
        }
        var json = row.payload
        if row.sealed {
            guard let key else {
                throw TokenStoreError(.sealedWithoutKey, path: location, "profile \"\(name)\" is sealed; configure its key (LOGINKIT_STORE_KEY or a key file)")
            }
            do {
                json = try AESGCM.open(row.payload, key: key, associatedData: associatedData(name))
            } catch {
                throw TokenStoreError(.wrongKey, path: location, "profile \"\(name)\" does not open with the configured key (wrong key, or the row was tampered with or copied from another profile)")
            }
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        guard let profile = try? decoder.decode(StoredProfile.self, from: Data(json)) else {
            if row.sealed {
                // It opened with our key, so a key holder wrote it whole: a profile this LoginKit
                // cannot read (a newer one's, in a rolling upgrade), not damage. Left where it is.
                throw TokenStoreError(
                    .unsupportedVersion, path: location,
                    "profile \"\(name)\" is sealed with this key but not a profile this LoginKit can read (written by a newer version?); upgrade LoginKit (the row is left as it is)")
            }
            throw TokenStoreError(
                .corrupt, path: location,
                "profile \"\(name)\" is not a readable profile; the next login or refresh moves it to the table \(quarantineName) (it is kept there, not deleted)")
        }
        decoded.withLock { $0[name] = (row, profile) }
        return profile
    }

    // MARK: Errors and deadlines

    /// Runs `operation`, failing with `.unavailable` when it takes longer than `timeout`.
    func withDeadline<R: Sendable>(_ timeout: Duration, _ operation: @escaping @Sendable () async throws -> R) async throws -> R {
        do {
            return try await withTimeout(timeout, on: configuration.clock, location, "PostgreSQL did not answer within \(timeout); is it up and reachable?", operation)
        } catch {
            throw mapped(error)
        }
    }

    /// A PostgresNIO error as a `TokenStoreError` that says what to do; others unchanged.
    ///
    /// In a cancelled task a PostgresNIO error is `CancellationError` (unless `writesHandedOver`): a
    /// connection request cancelled while queued fails with `ConnectionPoolError`, a query cancelled
    /// on its connection with `clientClosedConnection`, and neither means the database is
    /// unavailable. Once a transaction's writes are handed over, the outcome of its COMMIT is
    /// unknown: the caller gets the failure as such (`.unavailable`), never a `CancellationError`
    /// that would read as "nothing was written".
    func mapped(_ error: any Error, writesHandedOver: Bool = false) -> any Error {
        switch error {
        case is TokenStoreError, is CancellationError:
            return error
        case _ where Task.isCancelled && !writesHandedOver:
            return CancellationError()
        case is ConnectionLost where writesHandedOver:
            return TokenStoreError(
                .unavailable, path: location,
                "PostgreSQL closed the connection (a restart, a stop, an ended session or the network) before it confirmed the transaction, and it could not be written again in time; its writes may or may not have been applied")
        case is ConnectionLost:
            return TokenStoreError(
                .unavailable, path: location,
                "PostgreSQL closed the connection (a restart, a stop, an ended session or the network) before the transaction had its lock and rows; nothing was written, try again once it answers")
        case let error as PostgresTransactionError:
            // What went wrong first: BEGIN, the work inside, or COMMIT.
            guard let cause = error.beginError ?? error.closureError ?? error.commitError ?? error.rollbackError else {
                return TokenStoreError(.io, path: location, "the PostgreSQL transaction failed")
            }
            return mapped(cause, writesHandedOver: writesHandedOver)
        case let error as PSQLError where error.code == .server:
            let state = error.serverInfo?[.sqlState] ?? "?"
            let message = error.serverInfo?[.message] ?? "no message"
            switch state {
            case "55P03":
                return TokenStoreError(.lockFailed, path: location, "the profile's lock was not granted within \(configuration.lockTimeout) (another holder is still busy)")
            case "42P01":
                return TokenStoreError(.io, path: location, "the table does not exist; run PostgresTokenStore.migrate() (SQLSTATE 42P01)")
            case let state where state.hasPrefix("08") || state.hasPrefix("57P"):
                return TokenStoreError(.unavailable, path: location, "PostgreSQL is shutting down or unreachable: \(message) (SQLSTATE \(state))")
            default:
                return TokenStoreError(.io, path: location, "PostgreSQL refused the query: \(message) (SQLSTATE \(state))")
            }
        case is PostgresDecodingError:
            return TokenStoreError(.corrupt, path: location, "the table's columns are not what this LoginKit expects; compare it with the schema in docs/fleet.md")
        case let error as PSQLError:
            return TokenStoreError(.unavailable, path: location, "PostgreSQL could not be reached or dropped the connection (\(error.code)); is it up?")
        default:
            return TokenStoreError(.unavailable, path: location, "PostgreSQL could not be reached: \(type(of: error))")
        }
    }
}
#endif
