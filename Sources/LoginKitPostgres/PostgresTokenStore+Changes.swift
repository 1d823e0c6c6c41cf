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
        /// Tasks waiting for the state to satisfy a condition (tests await a notification this way).
        var waiters: [(condition: @Sendable (Bool, UInt64) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
        /// Tasks waiting for the notification of a change to a profile.
        var notificationWaiters: [String: [CheckedContinuation<Void, Never>]] = [:]

        /// The waiters whose condition now holds, removed from the list.
        mutating func satisfiedWaiters() -> [CheckedContinuation<Void, Never>] {
            var ready: [CheckedContinuation<Void, Never>] = []
            waiters.removeAll { waiter in
                guard waiter.condition(listening, generation) else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
    }

    /// How many profiles are kept in memory at most; past it, reads go to the database (uncached).
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
            guard state.served[name] != nil || state.served.count < Self.capacity else { return }
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
        invalidate(CollectionOfOne(name))
        let waiting = state.withLock { $0.notificationWaiters.removeValue(forKey: name) } ?? []
        for continuation in waiting { continuation.resume() }
    }

    /// Returns once a notification of a change to `name` has been handled (so every change
    /// committed before it has been too: PostgreSQL delivers in commit order). For tests: not
    /// cancellable; start waiting before making the change.
    package func waitForNotification(of name: String, after change: () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            let (registered, announce) = AsyncStream<Void>.makeStream()
            group.addTask { [self] in
                await withCheckedContinuation { continuation in
                    state.withLock { $0.notificationWaiters[name, default: []].append(continuation) }
                    announce.finish()
                }
            }
            for await _ in registered {}
            try await change()
            try await group.waitForAll()
        }
    }

    /// Something changed, maybe everything.
    func invalidateAll() {
        change { $0.served.removeAll() }
    }

    /// The listener is up (`true`) or gone (`false`): memory starts empty either way.
    func setListening(_ listening: Bool) {
        change { state in
            state.listening = listening
            state.served.removeAll()
        }
    }

    private func change(_ update: (inout State) -> Void) {
        let ready = state.withLock { state in
            state.generation &+= 1
            update(&state)
            return state.satisfiedWaiters()
        }
        for continuation in ready { continuation.resume() }
    }

    var isListening: Bool { state.withLock { $0.listening } }

    /// The generation now (tests note it before a change they then await).
    package var generation: UInt64 { state.withLock { $0.generation } }

    /// Returns once `condition(listening, generation)` holds. For tests: not cancellable.
    package func wait(until condition: @escaping @Sendable (_ listening: Bool, _ generation: UInt64) -> Bool) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if condition(state.listening, state.generation) { return true }
                state.waiters.append((condition, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// The change stamp `AuthService` vouches for its copy with: the generation while listening;
    /// otherwise a new value on every call, so that no copy is ever trusted.
    func stamp() -> UInt64 {
        state.withLock { state in
            if !state.listening { state.generation &+= 1 }
            return state.generation
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
    public var isServingReadsFromMemory: Bool { changes.isListening }

    /// Keeps a connection that `LISTEN`s for changes to the table, so that ``profile(named:)`` (and
    /// `AuthService`'s token calls) are answered from memory rather than by a query per call; runs
    /// until cancelled. Without it every read is a query. ``withStore(_:configuration:_:)`` runs it.
    ///
    /// Every committed change to the table notifies, whoever made it (a trigger that ``migrate()``
    /// installs: another host, an older LoginKit, an operator's `DELETE`). A cached read is as fresh
    /// as PostgreSQL's delivery of that notification; writes always re-read under the lock, so a
    /// refresh is never decided on a stale read. When the connection is lost, memory is dropped
    /// and reads go to the database until the listener is back (retried with backoff up to 30 s).
    /// It takes one connection of the client's pool for as long as it runs.
    public func run() async {
        let logger = configuration.logger
        var failures = 0
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: channel) { notifications in
                        changes.setListening(true)
                        defer { changes.setListening(false) }
                        failures = 0
                        logger.debug("listening for profile changes", metadata: ["table": "\(configuration.table)"])
                        for try await notification in notifications {
                            received(notification.payload)
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

    /// A notification's payload: `[namespace, name]` for a row, `[]` for the whole table (TRUNCATE).
    func received(_ payload: String) {
        guard let fields = try? JSONDecoder().decode([String].self, from: Data(payload.utf8)), fields.count == 2 else {
            changes.invalidateAll()
            return
        }
        guard fields[0] == configuration.namespace else { return }
        changes.notified(fields[1])
    }

    /// The notification channel: `loginkit_` and a hash of the table's name, so that it fits an
    /// identifier (63 bytes) whatever the table is called.
    static func channel(for table: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in table.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return "loginkit_" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}
