// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import LoginKit
import LoginKitHTTP
import NIOCore
import PostgresNIO

/// One attempt at a transaction, handed between the caller and the task that holds it. Every
/// hand-over is a ``OneShot``: the first outcome wins, so the task, the caller's deadlines and a
/// closing connection (``ConnectionWatch``) can each end a wait without racing each other.
final class TransactionLink: Sendable {
    /// A connection answered (its first query): the wait `operationTimeout` bounds is over.
    let leased = OneShot<Void>()
    /// The rows, read under the locks.
    let acquired = OneShot<[String: PostgresTokenStore.Row]>()
    /// What the caller decided to write; the task waits for it, holding the locks.
    let decision = OneShot<[PostgresTokenStore.Write]>()
    /// The writes committed (with none: the transaction ended).
    let finished = OneShot<Void>()

    /// Ends every wait of the caller with `error`; a wait already over keeps its outcome.
    func fail(_ error: any Error) {
        leased.fail(error)
        acquired.fail(error)
        finished.fail(error)
    }
}

/// The transaction's connection closed (PostgreSQL restarted or stopped, its session was ended, the
/// network dropped it) before the transaction ended; PostgreSQL rolls back such a transaction, and
/// its locks go with it.
struct ConnectionLost: Error {
    var underlying: (any Error)?

    init(underlying: (any Error)? = nil) {
        self.underlying = underlying
    }
}

extension PostgresTokenStore {
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

        var isQuarantine: Bool {
            if case .quarantine = self { return true }
            return false
        }
    }

    /// How many attempts a transaction's writes get, at most, when connections close under them.
    static let writeAttempts = 4

    /// Runs the transaction on a task of its own and `body` here, in the caller's isolation: the
    /// task leases a connection, locks, reads and hands the rows over, then waits for the writes.
    /// Getting a connection that answers is bounded by `operationTimeout`, the locks by
    /// `lockTimeout`, the writes and their commit by `operationTimeout` again. The transaction's task
    /// is cancelled, not awaited, on every way out before the writes are handed over (it rolls back
    /// on its own): PostgresNIO need not end a connection request or a query whose server stopped
    /// answering, and the caller must not wait on with it (docs/development.md).
    ///
    /// A connection that closes ends the caller's wait at once. Waiting for the lock, the caller
    /// gets `.unavailable` and the lock is not asked for again: its holder lost the lock with its
    /// own connection, most likely in the same restart, and may still be refreshing — taking the
    /// lock now would start a second refresh of the same token. Once the writes are handed over,
    /// they are made again on a new connection (``written(_:objects:scope:validUntil:link:holding:)``).
    nonisolated(nonsending) func transact<T>(scope: String?, _ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        try Task.checkCancellation()  // no connection leased, no BEGIN sent, for a caller already cancelled
        let objects = try await storeObjects()
        let link = TransactionLink()
        let lockTimeout = configuration.lockTimeout
        let holding = Task { await self.hold(objects, scope: scope, link: link, lockTimeout: lockTimeout) }
        let rows: [String: Row]
        do {
            rows = try await lockedRows(link)
        } catch {
            // No rows: abandoned, as a cancelled child task would be, and not awaited.
            link.decision.fail(CancellationError())
            holding.cancel()
            throw mapped(error)
        }
        let decided: (result: T, writes: [Write], quarantined: Set<String>, validUntil: Date?)
        do {
            decided = try await decide(rows, scope: scope, body)
        } catch {
            // Rolled back before the call returns, as a child task would be, but not waited for
            // longer than `operationTimeout`.
            link.decision.fail(CancellationError())
            _ = try? await finished(link, holding: holding, within: configuration.operationTimeout)
            throw error
        }
        link.decision.fulfil(decided.writes)
        // The caches forget what was written whatever the outcome: a commit past the deadline may
        // still land.
        defer {
            forgetDecoded(decided.writes.map(\.name))
            changes.invalidate(decided.writes.map(\.name))
        }
        if decided.writes.isEmpty {
            // Nothing to commit: the rows were read under the locks, whatever COMMIT answers.
            _ = try? await finished(link, holding: holding, within: configuration.operationTimeout)
        } else {
            try await written(decided.writes, objects: objects, scope: scope, validUntil: decided.validUntil, link: link, holding: holding)
        }
        for name in decided.quarantined.sorted() {
            configuration.logger.warning(
                "a profile row that does not decode was moved to the quarantine table",
                metadata: ["profile": "\(name)", "table": "\(configuration.table)", "namespace": "\(configuration.namespace)", "quarantine": "\(objects.quarantine)"])
        }
        return decided.result
    }

    /// The rows the transaction's task read under its locks: a connection that answers within
    /// `operationTimeout`, the locks within `lockTimeout` more.
    private func lockedRows(_ link: TransactionLink) async throws -> [String: Row] {
        let timeouts = (operation: configuration.operationTimeout, lock: configuration.lockTimeout)
        let location = self.location
        let clock = configuration.clock
        let timer = Task {
            try await clock.sleep(for: timeouts.operation)
            link.leased.fail(TokenStoreError(.unavailable, path: location, "no database connection answered within \(timeouts.operation); is PostgreSQL up and reachable?"))
            try await clock.sleep(for: timeouts.lock)
            link.acquired.fail(TokenStoreError(.lockFailed, path: location, "the profile's lock was not granted within \(timeouts.operation + timeouts.lock)"))
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await link.leased.value()
            return try await link.acquired.value()
        } onCancel: {
            link.leased.fail(CancellationError())
            link.acquired.fail(CancellationError())
        }
    }

    /// `body`'s result and the writes it decided on `rows`, with the rows that do not decode to move
    /// to the quarantine table, and when the earliest credentials written expire.
    private nonisolated(nonsending) func decide<T>(
        _ rows: [String: Row], scope: String?, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, writes: [Write], quarantined: Set<String>, validUntil: Date?) {
        // A row that does not decode reads as absent and is moved to the quarantine table when
        // this transaction commits, whether or not the body changes anything (a body that
        // throws rolls it all back). As the file store's corrupt file, it is kept: never
        // overwritten, and deleted only once the quarantine's retention has passed.
        var profiles: [String: StoredProfile] = [:]
        var writes: [Write] = []
        var recovered: TokenStoreError?
        for (name, row) in rows.sorted(by: { $0.key < $1.key }) {
            do {
                profiles[name] = try open(row, name: name)
            } catch {
                guard error.code == .corrupt else { throw error }
                recovered = recovered ?? error
                let reason = isSealed && !row.sealed
                    ? "not sealed, in a store that seals with a key: not read (row format \(row.format))"
                    : "the payload does not decode as a profile (row format \(row.format), \(row.sealed ? "sealed" : "not sealed"))"
                writes.append(.quarantine(name: name, expected: row.version, reason: reason))
            }
        }
        var transaction = TokenStoreTransaction(profiles: profiles, scope: scope)
        transaction.recoveredFrom = recovered
        let result = try await body(&transaction)
        try transaction.checkScope(store: location)
        let quarantined = Set(writes.map(\.name))
        var validUntil: Date?
        for name in transaction.changedNames {
            let expected = quarantined.contains(name) ? nil : rows[name]?.version
            if let profile = transaction[name] {
                if let expiry = profile.credentials.expiresAt { validUntil = min(validUntil ?? expiry, expiry) }
                let row = try seal(profile, name: name, version: (expected ?? 0) + 1)
                writes.append(expected.map { .update(name: name, row, expected: $0) } ?? .insert(name: name, row))
            } else if let expected {
                writes.append(.delete(name: name, expected: expected))
            }
        }
        return (result, writes, quarantined, validUntil)
    }

    /// Waits for the attempt `link` describes to end — its writes committed, or, with none, its
    /// transaction over — at most `timeout`: past it the outcome is unknown, and said so.
    /// Cancelling the caller cancels the attempt's task; its end, or the deadline, ends the wait.
    private func finished(_ link: TransactionLink, holding: Task<Void, Never>, within timeout: Duration) async throws {
        let (clock, location) = (configuration.clock, self.location)
        let timer = Task {
            try await clock.sleep(for: timeout)
            link.finished.fail(
                TokenStoreError(.unavailable, path: location, "PostgreSQL did not confirm the transaction within \(timeout); its writes may or may not have been applied"))
        }
        defer { timer.cancel() }
        try await withTaskCancellationHandler {
            try await link.finished.value()
        } onCancel: {
            holding.cancel()
        }
    }

    /// Waits for the writes handed to `link` to be committed. When the connection closed before
    /// PostgreSQL confirmed the commit, they are made again in a new transaction on a new
    /// connection, under the same locks: not twice (rows already as the writes leave them mean the
    /// first COMMIT landed) and not over another writer's (a row changed since it was read is a
    /// `.conflict`, as ever). Attempts go on until `operationTimeout` has passed since the writes
    /// were handed over — the bound of any commit's confirmation — and never once the credentials
    /// written have expired (`validUntil`), at most ``writeAttempts`` of them.
    private func written(
        _ writes: [Write], objects: StoreObjects, scope: String?, validUntil: Date?, link first: TransactionLink, holding firstTask: Task<Void, Never>
    ) async throws {
        let (clock, timeout, logger) = (configuration.clock, configuration.operationTimeout, configuration.logger)
        let deadline = min(clock.now.addingTimeInterval(timeout.timeInterval), validUntil ?? .distantFuture)
        try await Telemetry.storeOperation("write", store: "postgres") { () async throws -> Void in
            var (link, holding, attempt) = (first, firstTask, 1)
            while true {
                do {
                    // The first attempt has all of `operationTimeout`, as any commit; a later one what is left.
                    let remaining = attempt == 1 ? timeout : Duration(timeInterval: deadline.timeIntervalSince(clock.now))
                    try await finished(link, holding: holding, within: remaining)
                    if attempt > 1 { progress.record(.writtenAgain) }
                    return
                } catch is ConnectionLost where attempt < Self.writeAttempts && clock.now < deadline && !Task.isCancelled {
                    attempt += 1
                    logger.warning(
                        "PostgreSQL closed the connection before it confirmed the writes; writing them again on a new connection",
                        metadata: ["table": "\(configuration.table)", "namespace": "\(configuration.namespace)", "attempt": "\(attempt)"])
                    let again = TransactionLink()
                    again.decision.fulfil(writes)
                    let lockTimeout = Duration(timeInterval: deadline.timeIntervalSince(clock.now))
                    link = again
                    holding = Task { await self.hold(objects, scope: scope, link: again, lockTimeout: lockTimeout, replaying: true) }
                } catch {
                    throw mapped(error, writesHandedOver: true)
                }
            }
        }
    }

    /// One attempt's task: lease, BEGIN, lock, read, hand over, write what the caller decided,
    /// COMMIT; every outcome goes to `link`. With `replaying`, the writes were decided by an earlier
    /// attempt whose connection closed: they are made unless the rows are already as they leave
    /// them (that attempt's COMMIT landed before the connection went).
    ///
    /// Nothing more is sent on a connection that closed or failed as connections do when the server
    /// goes (no ROLLBACK: PostgreSQL rolls back the transaction of a connection that ends), and the
    /// caller hears of the close at once, whatever this task is waiting for: PostgresNIO (1.33)
    /// never answers a query sent on a connection already closed.
    func hold(_ objects: StoreObjects, scope: String?, link: TransactionLink, lockTimeout: Duration, replaying: Bool = false) async {
        let namespace = configuration.namespace
        let namespaceLock = "loginkit:\(configuration.table):\(namespace)"
        let (seconds, attoseconds) = lockTimeout.components
        // At least 1 ms: PostgreSQL reads a lock_timeout of 0 as "wait forever".
        let waitLimit = "\(max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000))ms"
        do {
            try await client.withConnection { connection in
                watches.watch(connection) { link.fail(ConnectionLost()) }
                defer { watches.unwatch(connection) }
                var open = false
                do {
                    try await send("BEGIN", on: connection)
                    open = true
                    // Leased, and answering: the first answer ends the wait `operationTimeout` bounds.
                    try await send("SELECT pg_catalog.set_config('lock_timeout', \(waitLimit), true)", on: connection)
                    // Abandoned while the connection was not answering: no locks taken (PostgresNIO does
                    // not stop a query already sent, so this is the last point to stop at once).
                    try Task.checkCancellation()
                    link.leased.fulfil(())
                    progress.record(.lockRequested)
                    let rows: [String: Row]
                    if let scope {
                        let profileLock = "\(namespaceLock)/\(scope)"
                        for try await _ in try await send(
                            "SELECT pg_catalog.pg_advisory_xact_lock_shared(pg_catalog.hashtextextended(\(namespaceLock), 0)), pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(\(profileLock), 0))",
                            on: connection) {}
                        rows = try await Self.rows(try await send(
                            "SELECT name, format, sealed, payload, version FROM \(unescaped: objects.table) WHERE namespace = \(namespace) AND name = \(scope) FOR UPDATE",
                            on: connection))
                    } else {
                        for try await _ in try await send("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(\(namespaceLock), 0))", on: connection) {}
                        rows = try await Self.rows(try await send(
                            "SELECT name, format, sealed, payload, version FROM \(unescaped: objects.table) WHERE namespace = \(namespace) FOR UPDATE",
                            on: connection))
                    }
                    link.acquired.fulfil(rows)
                    var writes = try await link.decision.value()
                    if replaying, Self.landed(writes, in: rows) { writes = [] }
                    for write in writes {
                        try await apply(write, objects, on: connection)
                    }
                    if writes.contains(where: \.isQuarantine) {
                        try await send(expiredQuarantineDeletion(objects), on: connection)
                    }
                    open = false  // COMMIT ends the transaction, whatever it answers
                    try await send("COMMIT", on: connection)
                    link.finished.fulfil(())
                } catch {
                    let lost = connection.isClosed || Self.isConnectionFailure(error)
                    if lost { throw ConnectionLost(underlying: error) }
                    if open { _ = try? await send("ROLLBACK", on: connection) }
                    throw error
                }
            }
        } catch {
            link.fail(error)
        }
    }

    /// `query` on `connection`; a closed connection is sent nothing.
    @discardableResult
    private func send(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> PostgresRowSequence {
        guard !connection.isClosed else { throw ConnectionLost() }
        return try await connection.query(query, logger: configuration.logger)
    }

    /// Whether `error` is what a connection fails with when the server goes away (shut down, its
    /// session ended, the network gone): the connection is of no further use.
    static func isConnectionFailure(_ error: any Error) -> Bool {
        if error is ConnectionLost { return true }
        guard let error = error as? PSQLError else { return false }
        if error.code == .server {
            let state = error.serverInfo?[.sqlState] ?? ""
            return state.hasPrefix("08") || state.hasPrefix("57P")
        }
        return error.code == .serverClosedConnection || error.code == .connectionError || error.code == .uncleanShutdown
    }

    /// Whether `rows` are already as `writes` leave them: every written row there byte for byte,
    /// every deleted or quarantined one gone.
    static func landed(_ writes: [Write], in rows: [String: Row]) -> Bool {
        var after: [String: Row?] = [:]
        for write in writes {
            switch write {
            case .insert(let name, let row), .update(let name, let row, _):
                after.updateValue(row, forKey: name)
            case .delete(let name, _), .quarantine(let name, _, _):
                after.updateValue(nil, forKey: name)
            }
        }
        return after.allSatisfy { rows[$0.key] == $0.value }
    }

    private func apply(_ write: Write, _ objects: StoreObjects, on connection: PostgresConnection) async throws {
        let namespace = configuration.namespace
        let query: PostgresQuery
        let name: String
        switch write {
        case .insert(let profile, let row):
            name = profile
            query = """
                INSERT INTO \(unescaped: objects.table) (namespace, name, format, sealed, payload, version)
                VALUES (\(namespace), \(profile), \(row.format), \(row.sealed), \(ByteBuffer(bytes: row.payload)), \(row.version))
                ON CONFLICT DO NOTHING RETURNING version
                """
        case .update(let profile, let row, let expected):
            name = profile
            query = """
                UPDATE \(unescaped: objects.table) SET format = \(row.format), sealed = \(row.sealed), payload = \(ByteBuffer(bytes: row.payload)),
                    version = \(row.version), updated_at = pg_catalog.now()
                WHERE namespace = \(namespace) AND name = \(profile) AND version = \(expected) RETURNING version
                """
        case .delete(let profile, let expected):
            name = profile
            query = "DELETE FROM \(unescaped: objects.table) WHERE namespace = \(namespace) AND name = \(profile) AND version = \(expected) RETURNING version"
        case .quarantine(let profile, let expected, let reason):
            name = profile
            // source_table: the table as PostgreSQL names it (schema.name), whatever this host's spelling.
            query = """
                WITH moved AS (
                    DELETE FROM \(unescaped: objects.table) WHERE namespace = \(namespace) AND name = \(profile) AND version = \(expected)
                    RETURNING namespace, name, format, sealed, payload, version, updated_at)
                INSERT INTO \(unescaped: objects.quarantine) (source_table, namespace, name, format, sealed, payload, version, updated_at, reason)
                SELECT \(objects.sourceTable), namespace, name, format, sealed, payload, version, updated_at, \(reason) FROM moved RETURNING version
                """
        }
        var count = 0
        for try await _ in try await send(query, on: connection).decode(Int64.self) { count += 1 }
        guard count == 1 else {
            throw TokenStoreError(.conflict, path: location, "profile \"\(name)\" changed in the database while it was locked (a writer without the lock?); nothing was written, try again")
        }
    }
}
#endif
