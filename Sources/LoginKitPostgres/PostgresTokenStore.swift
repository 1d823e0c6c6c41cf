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
/// - One row per profile (see docs/fleet.md for the schema), created by ``migrate()``.
/// - ``withExclusiveAccess(to:_:)`` is a transaction that holds `pg_advisory_xact_lock` on the
///   profile (and the namespace's lock in shared mode), then re-reads the row `FOR UPDATE`: another
///   host's refresh is waited for, and seen. A host that dies mid-refresh drops its connection, and
///   PostgreSQL releases its locks with the transaction. ``withExclusiveAccess(_:)`` takes the
///   namespace's lock exclusively and reads every profile.
/// - Writes check the row's `version` (optimistic: a writer that bypassed the lock makes the write
///   fail with `.conflict` rather than be overwritten).
/// - With a sealing key, `payload` is AES-256-GCM sealed (the same as the file store) with the
///   namespace and profile name as associated data: the database never sees a token in clear,
///   and a row copied to another profile does not open.
/// - The database unreachable, or not answering within `operationTimeout` → `TokenStoreError`
///   `.unavailable`; `AuthService` then keeps serving a token that is still valid.
/// - While ``run()`` listens (`LISTEN`/`NOTIFY`), reads are served from memory and `AuthService`'s
///   token calls do not query at all; any committed change to a row drops what memory had of it.
/// - A row that does not decode is moved to the `loginkit_quarantine` table the next time it is
///   read under the lock (a login, a refresh), logged, and listed by ``quarantinedRows()``;
///   never deleted.
///
/// The `PostgresClient` is the caller's: its pool size and connect timeout are its configuration,
/// and its `run()` must be running (``withStore(_:configuration:_:)`` does both for you, and runs
/// the store's ``run()`` too).
public final class PostgresTokenStore: TokenStore {
    /// Where and how the store keeps its rows.
    public struct Configuration: Sendable {
        /// The table, `[schema.]name` of letters, digits and `_`. Default `loginkit_profiles`.
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
        /// the database, 120 s to wait for a lock.
        public init() {}
    }

    /// The client the store queries through.
    package let client: PostgresClient
    /// The configuration.
    package let configuration: Configuration
    private let key: SymmetricKey?
    /// The table, quoted: `"schema"."name"` or `"name"`.
    let table: String
    /// The quarantine table, in the same schema as ``Configuration/table``.
    let quarantineTable: String
    /// What reads serve from memory while ``run()`` listens.
    package let changes = StoreChanges()
    /// Rows decoded before, by name: a read of the same row (every column the same, not only the
    /// version: a writer outside LoginKit may not bump it) skips opening the payload.
    private let decoded = LockedState<[String: (row: Row, profile: StoredProfile)]>([:])

    /// The row format this code writes; a row with a newer one is refused, never overwritten.
    package static let format: Int32 = 1

    /// A store over `client` (which the caller runs). Call ``migrate()`` once before use.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` for a table name that is not `[schema.]name`;
    ///   `TokenStoreError` `.invalidKey` for a bad sealing key.
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
        self.client = client
        self.configuration = configuration
        self.table = parts.map { "\"\($0.lowercased())\"" }.joined(separator: ".")
        self.quarantineTable = (parts.dropLast().map { "\"\($0.lowercased())\"" } + ["\"loginkit_quarantine\""]).joined(separator: ".")
        if case .provider = configuration.sealing {
            throw TokenStoreError(
                .invalidKey, path: "PostgresTokenStore",
                "PostgresTokenStore seals with a key given in code, a key file or LOGINKIT_STORE_KEY; key providers are for file stores")
        }
        self.key = try configuration.sealing.resolveKey(environment: ProcessInfo.processInfo.environment)
    }

    /// Runs `body` with a store on a client of its own (run for `body`'s duration, closed after),
    /// after creating what is missing of its tables (as ``migrate()`` does), with the store's ``run()``
    /// serving reads from memory.
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

    // MARK: Reads

    public func profile(named name: String) async throws -> StoredProfile? {
        if let served = changes.cached(name) { return served }
        let generation = changes.beginRead()
        let query: PostgresQuery = "SELECT name, format, sealed, payload, version FROM \(unescaped: table) WHERE namespace = \(configuration.namespace) AND name = \(name)"
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
        let query: PostgresQuery = "SELECT name FROM \(unescaped: table) WHERE namespace = \(configuration.namespace) ORDER BY name"
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

    /// A row as stored.
    struct Row: Sendable, Equatable {
        var format: Int32
        var sealed: Bool
        var payload: [UInt8]
        var version: Int64
    }

    /// What the transaction's task writes before it commits.
    enum Write: Sendable {
        case insert(name: String, Row)
        case update(name: String, Row, expected: Int64)
        case delete(name: String, expected: Int64)
        /// Moves a row that did not decode to the quarantine table.
        case quarantine(name: String, expected: Int64, reason: String)

        var name: String {
            switch self {
            case .insert(let name, _), .update(let name, _, _), .delete(let name, _), .quarantine(let name, _, _): name
            }
        }
    }

    /// Runs the transaction on a task of its own and `body` here, in the caller's isolation: the
    /// task leases a connection, locks, reads and hands the rows over, then waits for the writes.
    /// Getting a connection that answers is bounded by `operationTimeout`, the locks by
    /// `lockTimeout`, the writes and their commit by `operationTimeout` again. The transaction's task
    /// is cancelled, not awaited, on every way out before the writes are handed over (it rolls back
    /// on its own): PostgresNIO need not end a connection request or a query whose server stopped
    /// answering, and the caller must not wait on with it (this hung `make test`,
    /// docs/development.md).
    private nonisolated(nonsending) func transact<T>(scope: String?, _ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        let leased = OneShot<Void>()
        let acquired = OneShot<[String: Row]>()
        let decision = OneShot<[Write]>()
        try Task.checkCancellation()  // no connection leased, no BEGIN sent, for a caller already cancelled
        let holding = Task { try await self.hold(scope: scope, leased: leased, acquired: acquired, decision: decision) }
        let rows: [String: Row]
        do {
            rows = try await lockedRows(leased: leased, acquired: acquired)
        } catch {
            // No rows: abandoned, as a cancelled child task would be, and not awaited.
            decision.fail(CancellationError())
            holding.cancel()
            throw mapped(error)
        }
        let decided: (result: T, writes: [Write], quarantined: Set<String>)
        do {
            decided = try await decide(rows, scope: scope, body)
        } catch {
            // Rolled back before the call returns, as a child task would be, but not waited for
            // longer than `operationTimeout`.
            decision.fail(CancellationError())
            _ = try? await committed(holding, writes: false)
            throw error
        }
        decision.fulfil(decided.writes)
        // The caches forget what was written whatever the outcome: a commit past the deadline may
        // still land.
        defer {
            decoded.withLock { cache in
                for write in decided.writes { cache[write.name] = nil }
            }
            changes.invalidate(decided.writes.map(\.name))
        }
        if decided.writes.isEmpty {
            // Nothing to commit: the rows were read under the locks, whatever COMMIT answers.
            _ = try? await committed(holding, writes: false)
        } else {
            try await committed(holding, writes: true)
        }
        for name in decided.quarantined.sorted() {
            configuration.logger.warning(
                "a profile row that does not decode was moved to the quarantine table",
                metadata: ["profile": "\(name)", "table": "\(configuration.table)", "namespace": "\(configuration.namespace)", "quarantine": "\(quarantineTable)"])
        }
        return decided.result
    }

    /// The rows the transaction's task read under its locks: a connection that answers within
    /// `operationTimeout`, the locks within `lockTimeout` more.
    private func lockedRows(leased: OneShot<Void>, acquired: OneShot<[String: Row]>) async throws -> [String: Row] {
        let timeouts = (operation: configuration.operationTimeout, lock: configuration.lockTimeout)
        let location = self.location
        let clock = configuration.clock
        let timer = Task {
            try await clock.sleep(for: timeouts.operation)
            leased.fail(TokenStoreError(.unavailable, path: location, "no database connection answered within \(timeouts.operation); is PostgreSQL up and reachable?"))
            try await clock.sleep(for: timeouts.lock)
            acquired.fail(TokenStoreError(.lockFailed, path: location, "the profile's lock was not granted within \(timeouts.operation + timeouts.lock)"))
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await leased.value()
            return try await acquired.value()
        } onCancel: {
            leased.fail(CancellationError())
            acquired.fail(CancellationError())
        }
    }

    /// `body`'s result and the writes it decided on `rows`, with the rows that do not decode to move
    /// to the quarantine table.
    private nonisolated(nonsending) func decide<T>(
        _ rows: [String: Row], scope: String?, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, writes: [Write], quarantined: Set<String>) {
        // A row that does not decode reads as absent and is moved to the quarantine table when
        // this transaction commits, whether or not the body changes anything (a body that
        // throws rolls it all back). As the file store's corrupt file, it is kept: never
        // overwritten, never deleted.
        var profiles: [String: StoredProfile] = [:]
        var writes: [Write] = []
        var recovered: TokenStoreError?
        for (name, row) in rows.sorted(by: { $0.key < $1.key }) {
            do {
                profiles[name] = try open(row, name: name)
            } catch {
                guard error.code == .corrupt else { throw error }
                recovered = recovered ?? error
                writes.append(.quarantine(name: name, expected: row.version, reason: "the payload does not decode as a profile (row format \(row.format), \(row.sealed ? "sealed" : "not sealed"))"))
            }
        }
        var transaction = TokenStoreTransaction(profiles: profiles, scope: scope)
        transaction.recoveredFrom = recovered
        let result = try await body(&transaction)
        try transaction.checkScope(store: location)
        let quarantined = Set(writes.map(\.name))
        for name in transaction.changedNames {
            let expected = quarantined.contains(name) ? nil : rows[name]?.version
            if let profile = transaction[name] {
                let row = try seal(profile, name: name, version: (expected ?? 0) + 1)
                writes.append(expected.map { .update(name: name, row, expected: $0) } ?? .insert(name: name, row))
            } else if let expected {
                writes.append(.delete(name: name, expected: expected))
            }
        }
        return (result, writes, quarantined)
    }

    /// Waits for the transaction's task to write and commit, at most `operationTimeout`: past it the
    /// outcome is unknown, and said so. Cancelling the caller cancels the task and waits for it.
    private func committed(_ holding: Task<Void, any Error>, writes: Bool) async throws {
        let (timeout, location) = (configuration.operationTimeout, self.location)
        let confirmed = {
            try await outcome(of: holding, within: timeout, on: self.configuration.clock, whenCancelled: .cancelTaskAndWait) {
                TokenStoreError(
                    .unavailable, path: location,
                    "PostgreSQL did not confirm the transaction within \(timeout); its writes may or may not have been applied")
            }.get()
        }
        do {
            if writes {
                try await Telemetry.storeOperation("write", store: "postgres") { try await confirmed() }
            } else {
                try await confirmed()
            }
        } catch {
            throw mapped(error, writesHandedOver: true)
        }
    }

    /// The transaction's task: lease, BEGIN, lock, read, hand over, write what the caller decided, COMMIT.
    private func hold(scope: String?, leased: OneShot<Void>, acquired: OneShot<[String: Row]>, decision: OneShot<[Write]>) async throws {
        let logger = configuration.logger
        let namespace = configuration.namespace
        let lockTimeout = "\(Int(configuration.lockTimeout.components.seconds) * 1000)ms"
        let namespaceLock = "loginkit:\(configuration.table):\(namespace)"
        do {
            try await client.withTransaction(logger: logger) { connection in
                // Leased, and answering: the first answer ends the wait `operationTimeout` bounds.
                try await connection.query("SELECT set_config('lock_timeout', \(lockTimeout), true)", logger: logger)
                // Abandoned while the connection was not answering: no locks taken (PostgresNIO does
                // not stop a query already sent, so this is the last point to stop at once).
                try Task.checkCancellation()
                leased.fulfil(())
                let rows: [String: Row]
                if let scope {
                    let profileLock = "\(namespaceLock)/\(scope)"
                    try await connection.query(
                        "SELECT pg_advisory_xact_lock_shared(hashtextextended(\(namespaceLock), 0)), pg_advisory_xact_lock(hashtextextended(\(profileLock), 0))",
                        logger: logger)
                    rows = try await Self.rows(try await connection.query(
                        "SELECT name, format, sealed, payload, version FROM \(unescaped: table) WHERE namespace = \(namespace) AND name = \(scope) FOR UPDATE",
                        logger: logger))
                } else {
                    try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(namespaceLock), 0))", logger: logger)
                    rows = try await Self.rows(try await connection.query(
                        "SELECT name, format, sealed, payload, version FROM \(unescaped: table) WHERE namespace = \(namespace) FOR UPDATE",
                        logger: logger))
                }
                acquired.fulfil(rows)
                for write in try await decision.value() {
                    try await apply(write, on: connection)
                }
            }
        } catch {
            leased.fail(error)
            acquired.fail(error)
            throw error
        }
    }

    private func apply(_ write: Write, on connection: PostgresConnection) async throws {
        let logger = configuration.logger
        let namespace = configuration.namespace
        let query: PostgresQuery
        let name: String
        switch write {
        case .insert(let profile, let row):
            name = profile
            query = """
                INSERT INTO \(unescaped: table) (namespace, name, format, sealed, payload, version)
                VALUES (\(namespace), \(profile), \(row.format), \(row.sealed), \(ByteBuffer(bytes: row.payload)), \(row.version))
                ON CONFLICT DO NOTHING RETURNING version
                """
        case .update(let profile, let row, let expected):
            name = profile
            query = """
                UPDATE \(unescaped: table) SET format = \(row.format), sealed = \(row.sealed), payload = \(ByteBuffer(bytes: row.payload)),
                    version = \(row.version), updated_at = now()
                WHERE namespace = \(namespace) AND name = \(profile) AND version = \(expected) RETURNING version
                """
        case .delete(let profile, let expected):
            name = profile
            query = "DELETE FROM \(unescaped: table) WHERE namespace = \(namespace) AND name = \(profile) AND version = \(expected) RETURNING version"
        case .quarantine(let profile, let expected, let reason):
            name = profile
            // source_table: the name PostgreSQL resolves the table to, whatever this host's spelling.
            query = """
                WITH moved AS (
                    DELETE FROM \(unescaped: table) WHERE namespace = \(namespace) AND name = \(profile) AND version = \(expected)
                    RETURNING namespace, name, format, sealed, payload, version, updated_at)
                INSERT INTO \(unescaped: quarantineTable) (source_table, namespace, name, format, sealed, payload, version, updated_at, reason)
                SELECT (SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE c.oid = to_regclass(\(table))),
                    namespace, name, format, sealed, payload, version, updated_at, \(reason) FROM moved RETURNING version
                """
        }
        var count = 0
        for try await _ in try await connection.query(query, logger: logger).decode(Int64.self) { count += 1 }
        guard count == 1 else {
            throw TokenStoreError(.conflict, path: location, "profile \"\(name)\" changed in the database while it was locked (a writer without the lock?); nothing was written, try again")
        }
    }

    // MARK: Rows ↔ profiles

    private static func rows(_ sequence: PostgresRowSequence) async throws -> [String: Row] {
        var rows: [String: Row] = [:]
        for try await (name, format, sealed, payload, version) in sequence.decode((String, Int32, Bool, ByteBuffer, Int64).self) {
            rows[name] = Row(format: format, sealed: sealed, payload: Array(payload.readableBytesView), version: version)
        }
        return rows
    }

    private func associatedData(_ name: String) -> [UInt8] {
        Array("loginkit-postgres:\(Self.format):\(configuration.namespace)\u{0}\(name)".utf8)
    }

    private func seal(_ profile: StoredProfile, name: String, version: Int64) throws(TokenStoreError) -> Row {
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

    private func open(_ row: Row, name: String) throws(TokenStoreError) -> StoredProfile {
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
                "profile \"\(name)\" is not a readable profile; the next login or refresh moves it to the table \(quarantineTable) (it is kept there, not deleted)")
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
            return TokenStoreError(.corrupt, path: location, "the table's columns are not what this LoginKit expects; compare it with PostgresTokenStore.schema")
        case let error as PSQLError:
            return TokenStoreError(.unavailable, path: location, "PostgreSQL could not be reached or dropped the connection (\(error.code)); is it up?")
        default:
            return TokenStoreError(.unavailable, path: location, "PostgreSQL could not be reached: \(type(of: error))")
        }
    }
}
#endif
