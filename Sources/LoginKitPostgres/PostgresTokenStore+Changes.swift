// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
package import LoginKit
import LoginKitHTTP
import PostgresNIO

/// What the store serves from memory, and whether memory may be trusted: only while a `LISTEN`
/// connection is up, so that every change committed to the table (by any writer: the table's
/// trigger notifies) drops what it changed.
///
/// The rule that keeps a read from caching a row that changed under it: a read notes the
/// generation before it queries and remembers its result only when no notification (and no
/// listener change) came in between. Every notification, every write through this store and every
/// start or loss of the listener bumps the generation.
package final class StoreChanges: Sendable {
    private struct State {
        var listening = false
        var generation: UInt64 = 0
        var served: [String: StoredProfile?] = [:]
        /// Streams of the tasks watching the state (tests await a notification this way).
        var watchers: [UInt64: AsyncStream<Void>.Continuation] = [:]
        var nextWatcher: UInt64 = 0
        /// Heartbeats sent and not yet seen back, by token.
        var pings: [String: AsyncStream<Void>.Continuation] = [:]
        /// The profiles whose notifications tests wait for, and how many arrived.
        var notifications: [String: Int] = [:]
    }

    /// How many profiles are kept in memory at most; when full, memory starts over.
    static let capacity = 4096

    private let state = LockedState(State())

    /// The profile (or its absence) served from memory: `nil` when memory is not to be trusted.
    package func cached(_ name: String) -> StoredProfile?? {
        state.withLock { state in state.listening ? state.served[name] : nil }
    }

    /// The generation a read starts under; `nil` when nothing it reads may be remembered.
    func beginRead() -> UInt64? {
        state.withLock { state in state.listening ? state.generation : nil }
    }

    /// Remembers what a read that began under `generation` found, when nothing changed since.
    func remember(_ profile: StoredProfile?, as name: String, readUnder generation: UInt64?) {
        guard let generation else { return }
        state.withLock { state in
            guard state.listening, state.generation == generation else { return }
            if state.served[name] == nil, state.served.count >= Self.capacity { state.served.removeAll() }
            state.served[name] = .some(profile)
        }
    }

    /// Something changed: `names`.
    func invalidate(_ names: some Sequence<String>) {
        change { state in
            for name in names { state.served[name] = nil }
        }
    }

    /// A notification said `name` changed.
    func notified(_ name: String) {
        change { state in
            state.served[name] = nil
            if state.notifications[name] != nil { state.notifications[name, default: 0] += 1 }
        }
    }

    /// Something changed, maybe everything (`TRUNCATE`, an unreadable notification).
    func invalidateAll() {
        change { state in
            state.served.removeAll()
            for name in state.notifications.keys { state.notifications[name, default: 0] += 1 }
        }
    }

    /// The listener is up (`true`) or gone (`false`): memory starts empty either way.
    func setListening(_ listening: Bool) {
        change { state in
            state.listening = listening
            state.served.removeAll()
        }
    }

    private func change(_ update: (inout State) -> Void) {
        let watchers = state.withLock { state in
            state.generation &+= 1
            update(&state)
            return Array(state.watchers.values)
        }
        for watcher in watchers { watcher.yield() }
    }

    var isListening: Bool { state.withLock { $0.listening } }

    /// The change stamp `AuthService` vouches for its copy with: the generation while listening;
    /// otherwise a new value on every call, so that no copy is ever trusted.
    func stamp() -> UInt64 {
        state.withLock { state in
            if !state.listening { state.generation &+= 1 }
            return state.generation
        }
    }

    // MARK: Heartbeats

    /// A stream that yields once the heartbeat `token` comes back.
    func expectPing(_ token: String) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        state.withLock { $0.pings[token] = continuation }
        return stream
    }

    func pinged(_ token: String) {
        state.withLock { $0.pings.removeValue(forKey: token) }?.yield()
    }

    func forgetPing(_ token: String) {
        state.withLock { $0.pings.removeValue(forKey: token) }?.finish()
    }

    // MARK: Waiting, for tests

    /// The generation now.
    package var generation: UInt64 { state.withLock { $0.generation } }

    /// Returns once `condition(listening, generation)` holds; throws after `timeout` or on cancellation.
    package func wait(
        timeout: Duration = .seconds(30), until condition: @escaping @Sendable (_ listening: Bool, _ generation: UInt64) -> Bool
    ) async throws {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            state.nextWatcher += 1
            state.watchers[state.nextWatcher] = continuation
            return state.nextWatcher
        }
        defer { state.withLock { $0.watchers.removeValue(forKey: id) }?.finish() }
        continuation.yield()  // look once at the state as it is
        try await withTimeout(timeout, "PostgresTokenStore", "the awaited change did not happen within \(timeout)") {
            for await _ in stream {
                let (listening, generation) = self.state.withLock { ($0.listening, $0.generation) }
                if condition(listening, generation) { return }
            }
            throw CancellationError()
        }
    }

    /// Runs `change`, then returns once a notification of a change to `name` has been handled (so
    /// every change committed before it has been too: PostgreSQL delivers in commit order); throws
    /// after `timeout` or on cancellation.
    package func waitForNotification(of name: String, timeout: Duration = .seconds(30), after change: () async throws -> Void) async throws {
        state.withLock { $0.notifications[name] = 0 }
        defer { state.withLock { _ = $0.notifications.removeValue(forKey: name) } }
        try await change()
        try await wait(timeout: timeout) { [self] _, _ in state.withLock { ($0.notifications[name] ?? 0) > 0 } }
    }
}

/// `body`'s result, or a `TokenStoreError` `.unavailable` at `location` saying `message` after
/// `timeout` on `clock`. `body` runs on a task of its own that is cancelled, not awaited, when the
/// deadline passes or the caller is cancelled: PostgresNIO need not end a query whose server stopped
/// answering (a frozen or partitioned server), and the caller must not wait on with it.
func withTimeout<T: Sendable>(
    _ timeout: Duration, on clock: any AuthClock = SystemClock(), _ location: String, _ message: String,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let work = Task { try await body() }
    do {
        return try await outcome(of: work, within: timeout, on: clock, whenCancelled: .giveUp) {
            TokenStoreError(.unavailable, path: location, message)
        }.get()
    } catch {
        work.cancel()
        throw error
    }
}

/// What a caller waiting on a task with ``outcome(of:within:on:whenCancelled:expired:)`` does when
/// it is cancelled.
enum CancelledWait {
    /// Throw `CancellationError` at once; the task is the caller's to cancel.
    case giveUp
    /// Cancel the task and wait on for its outcome (still bounded by the deadline): what it did
    /// must be known.
    case cancelTaskAndWait
}

/// `task`'s outcome, or `expired()` thrown once `timeout` has passed on `clock`; the task is not
/// awaited past that. The one race of a task against a deadline the store's calls share.
func outcome<T: Sendable>(
    of task: Task<T, any Error>, within timeout: Duration, on clock: any AuthClock, whenCancelled: CancelledWait,
    expired: @escaping @Sendable () -> TokenStoreError
) async throws -> Result<T, any Error> {
    let outcome = OneShot<Result<T, any Error>>()
    let forwarder = Task { outcome.fulfil(await task.result) }
    let timer = Task {
        try await clock.sleep(for: timeout)
        outcome.fail(expired())
    }
    defer {
        timer.cancel()
        forwarder.cancel()
    }
    return try await withTaskCancellationHandler {
        try await outcome.value()
    } onCancel: {
        switch whenCancelled {
        case .giveUp: outcome.fail(CancellationError())
        case .cancelTaskAndWait: task.cancel()
        }
    }
}

extension PostgresTokenStore: TokenStoreChangeStamp {
    /// While ``run()`` listens: changes only when a profile of this namespace changed (anywhere in
    /// the fleet; seen as soon as PostgreSQL delivers the notification). Otherwise: a new value
    /// every call, so `AuthService` reads the store on every token call.
    package func changeStamp() -> UInt64 {
        changes.stamp()
    }
}

extension PostgresTokenStore {
    /// Whether reads are being served from memory now (``run()`` is listening for changes).
    package var isServingReadsFromMemory: Bool { changes.isListening }

    /// Keeps a connection that `LISTEN`s for changes to the table, so that ``profile(named:)`` (and
    /// `AuthService`'s token calls) are answered from memory rather than by a query per call; runs
    /// until cancelled. Without it every read is a query. ``withStore(_:configuration:_:)`` runs it.
    ///
    /// Every committed change to the table notifies, whoever made it (triggers that ``migrate()``
    /// installs: another host, an older LoginKit, an operator's `DELETE`). A cached read is as fresh
    /// as PostgreSQL's delivery of that notification; writes always re-read under the lock, so a
    /// refresh is never decided on a stale read. Memory is used only while the triggers are there
    /// and enabled, and while a heartbeat sent through the table's channel every
    /// ``Configuration/listenerHeartbeat`` comes back within `operationTimeout`: a connection that
    /// died without closing (a NAT timeout, a pooler that does not forward notifications) is noticed
    /// within both. When the listener is lost, memory is dropped and reads go to the database until
    /// it is back (retried with backoff, 0.5 s doubling up to 30 s). It takes one connection of the
    /// client's pool for as long as it runs.
    public func run() async {
        let logger = configuration.logger
        var failures = 0
        while !Task.isCancelled {
            do {
                guard let oid = try await listenableTable() else {
                    throw TokenStoreError(
                        .io, path: location, "the change triggers are missing or disabled on the table; run migrate() (reads stay queries until then)")
                }
                let channel = Self.channel(forTable: oid)
                try await client.withConnection { connection in
                    try await connection.listen(on: channel) { notifications in
                        changes.setListening(true)
                        defer { changes.setListening(false) }
                        failures = 0
                        logger.debug("listening for profile changes", metadata: ["table": "\(configuration.table)", "channel": "\(channel)"])
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            group.addTask {
                                for try await notification in notifications { self.received(notification.payload) }
                                throw TokenStoreError(.unavailable, path: self.location, "the listening connection was closed")
                            }
                            group.addTask { try await self.heartbeat(channel: channel, table: oid) }
                            defer { group.cancelAll() }
                            try await group.next()
                        }
                    }
                }
            } catch {
                if Task.isCancelled { break }
                logger.warning(
                    "not listening for profile changes; reads go to the database until the listener is back",
                    metadata: ["table": "\(configuration.table)", "error": "\(String(describing: mapped(error)))"])
            }
            changes.setListening(false)
            failures += 1
            let delay = Duration.milliseconds(250) * (1 << min(failures, 7))
            do {
                try await configuration.clock.sleep(for: min(delay, .seconds(30)))
            } catch {
                break
            }
        }
        changes.setListening(false)
    }

    /// Every ``Configuration/listenerHeartbeat``: checks that the table is still the one listened
    /// for (same oid: not dropped and made again) with both triggers enabled, and sends a heartbeat
    /// through `channel`; throws when either fails or the heartbeat does not come back within
    /// `operationTimeout`.
    private func heartbeat(channel: String, table oid: UInt32) async throws {
        let (interval, timeout, clock) = (configuration.listenerHeartbeat, configuration.operationTimeout, configuration.clock)
        while true {
            try await clock.sleep(for: interval)
            guard try await listenableTable() == oid else {
                throw TokenStoreError(.io, path: location, "the table was made again, or its change triggers were removed or disabled")
            }
            let token = "ping:" + UUID().uuidString
            let back = changes.expectPing(token)
            defer { changes.forgetPing(token) }
            try await withDeadline(timeout) { [client, logger = configuration.logger] in
                try await client.query("SELECT pg_catalog.pg_notify(\(channel), \(token))", logger: logger)
                for await _ in back { return }
                throw CancellationError()
            }
        }
    }

    /// A notification's payload: `[namespace, name]` for a row, `[]` for the whole table, or a
    /// heartbeat. Anything else (a payload someone else sent) drops all of memory: never wrong,
    /// only slower.
    func received(_ payload: String) {
        if payload.hasPrefix("ping:") {
            changes.pinged(payload)
            return
        }
        guard let fields = try? JSONDecoder().decode([String].self, from: Data(payload.utf8)), fields.count == 2 else {
            changes.invalidateAll()
            return
        }
        guard fields[0] == configuration.namespace else { return }
        changes.notified(fields[1])
    }

    /// The notification channel of the table with `oid` (what the trigger function notifies on).
    static func channel(forTable oid: UInt32) -> String {
        "loginkit_\(oid)"
    }
}
#endif
