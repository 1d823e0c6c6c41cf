import LoginKitHTTP
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A store that can say, cheaply and without a hop onto an actor, whether what it serves may have
/// changed. `AuthService` answers a token call from its own copy of the profile while the stamp it
/// read that copy under is still the store's (docs/refresh.md, "The cached path").
///
/// The contract: a write through this store instance changes the stamp before the write returns
/// and after its result is visible to readers; a change made elsewhere (another instance, another
/// process) changes it within the store's staleness bound. Read the stamp *before* reading the
/// profile it is to vouch for.
package protocol TokenStoreChangeStamp: TokenStore, AnyObject {
    nonisolated func changeStamp() -> UInt64

    /// What vouches for one profile: a change to another profile need not move it (the file
    /// store's format 2 keeps a file per profile). `AuthService` asks once and keeps it. The
    /// default answers ``changeStamp()``.
    nonisolated func changeStampSource(for name: String) -> any ChangeStampSource

    /// ``TokenStore/withExclusiveAccess(to:_:)``, also answering the change stamp read after
    /// `body`'s changes were written and before the exclusive access ended: no other writer's
    /// change can be in it, so it vouches for what `body` left in the store (`AuthService`
    /// remembers the credentials a refresh saved under it, and the storm's late callers are served
    /// them without reading the store again). `nil` when the store cannot say (the default).
    nonisolated(nonsending) func withExclusiveAccessStamped<T>(
        to name: String, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?)
}

/// A change stamp for one profile (``TokenStoreChangeStamp/changeStampSource(for:)``): read
/// without a hop onto an actor; a new value whenever what it vouches for may have changed.
package protocol ChangeStampSource: AnyObject, Sendable {
    func stamp() -> UInt64
}

/// A store's own stamp, for a store that keeps no stamp per profile.
final class StoreWideStamp: ChangeStampSource {
    let store: any TokenStoreChangeStamp
    init(_ store: any TokenStoreChangeStamp) { self.store = store }
    func stamp() -> UInt64 { store.changeStamp() }
}

extension TokenStoreChangeStamp {
    package nonisolated func changeStampSource(for name: String) -> any ChangeStampSource {
        StoreWideStamp(self)
    }

    /// No stamp: for a store whose own write may reach its stamp only later (PostgreSQL's change
    /// notifications arrive after the commit).
    package nonisolated(nonsending) func withExclusiveAccessStamped<T>(
        to name: String, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?) {
        (try await withExclusiveAccess(to: name, body), nil)
    }
}

/// A store whose own exclusive access can read its change stamp after its write, before it lets
/// the lock go: ``TokenStoreChangeStamp/withExclusiveAccessStamped(to:_:)`` comes with it.
package protocol StampedExclusiveAccess: TokenStoreChangeStamp {
    /// The exclusive access over the whole store; with `stamped`, also the change stamp read after
    /// the write (if any) and before the lock is released.
    nonisolated(nonsending) func exclusiveAccess<T>(
        stamped: Bool, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?)
}

extension StampedExclusiveAccess {
    /// The stamp is read holding the store's lock, after the write: every writer that takes the
    /// lock writes after it.
    package nonisolated(nonsending) func withExclusiveAccessStamped<T>(
        to name: String, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?) {
        try await exclusiveAccess(stamped: true) { all in
            try await all.scoped(to: name, store: "\(Self.self)", body)
        }
    }
}

extension IDTokenStore: TokenStoreChangeStamp {
    /// Follows the store's path and its profile directory: bumped by this store's own writes at
    /// once, and by another writer's within ``StoreFileWatch/defaultRecheckInterval`` (one look
    /// per interval at most, not one per call). A directory's times are as coarse as the file
    /// system keeps them: ``changeStampSource(for:)`` is exact for one profile.
    package nonisolated func changeStamp() -> UInt64 {
        fileWatch.stamp()
    }

    /// Follows the store's path and the profile's file (a format 1 store changes its path with
    /// every write; a format 2 store, the profile's file): another profile's save does not move it.
    package nonisolated func changeStampSource(for name: String) -> any ChangeStampSource {
        profileWatch(for: name)
    }

    /// The stamp is read holding the profile's lock, after the write: every writer of this profile
    /// takes that lock and writes after it, and a migration waits for it.
    package nonisolated(nonsending) func withExclusiveAccessStamped<T>(
        to name: String, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?) {
        try await profileAccess(to: name, stamped: true, body)
    }
}

extension InMemoryTokenStore: StampedExclusiveAccess {
    package nonisolated func changeStamp() -> UInt64 {
        generation.withLock { $0 }
    }
}

/// Follows the identities (inode, mtime, ctime, size) of a few paths — the store's, and a
/// profile's file or the profile directory — with at most one look per recheck interval, and turns
/// every change into a new stamp.
final class StoreFileWatch: ChangeStampSource {
    /// How long another process's write may go unseen by a cached read: 10 ms.
    static let defaultRecheckInterval: UInt64 = 10_000_000

    private struct State {
        var generation: UInt64 = 0
        /// The identities last seen (`nil` for a path that does not exist); `nil` before the first
        /// look and after a failed one.
        var identities: [FileIdentity?]?
        var checkedAt: UInt64 = 0
    }

    private let paths: [String]
    /// Nanoseconds between two looks at the files.
    private let recheckInterval: UInt64
    private let state = LockedState(State())
    /// `state`'s generation and the time of its last look (0: none yet), published from inside its
    /// lock, generation first: between two looks a stamp is two atomic loads, and the lock (written
    /// by every acquisition, so bounced between cores when a storm's callers all ask) is taken only
    /// to look again.
    private let publishedGeneration = Atomic<UInt64>(0)
    private let publishedCheckedAt = Atomic<UInt64>(0)

    init(paths: [String], recheckInterval: UInt64 = defaultRecheckInterval) {
        self.paths = paths
        self.recheckInterval = recheckInterval
    }

    func stamp() -> UInt64 {
        let now = Self.monotonicNanoseconds()
        // A look time seen here was published after its generation: the generation read next is
        // that one or a later one.
        let checkedAt = publishedCheckedAt.load(ordering: .acquiring)
        if checkedAt != 0, now &- checkedAt < recheckInterval {
            return publishedGeneration.load(ordering: .acquiring)
        }
        let (current, due) = state.withLock { state in
            (state.generation, state.identities == nil || now &- state.checkedAt >= recheckInterval)
        }
        guard due else { return current }
        // A failed `stat` (other than "no such file") is never trusted: a new stamp each time, so
        // the caller takes the store's own path, which reports the error.
        let seen = look()
        return state.withLock { state in
            // The store wrote (or another look finished) meanwhile: its record is the newer one.
            guard state.generation == current else { return state.generation }
            guard let seen else {
                state.generation &+= 1
                state.identities = nil
                publish(state)
                return state.generation
            }
            if state.identities != seen {
                state.generation &+= 1
                state.identities = seen
            }
            state.checkedAt = now
            publish(state)
            return state.generation
        }
    }

    /// This store wrote or removed a file it follows: a new stamp at once. The files are looked at
    /// by the next ``stamp()``, not here — a save does not pay for a look nobody may ask for (that
    /// look records them, and moves the stamp once more).
    func changed() {
        state.withLock { state in
            state.generation &+= 1
            state.identities = nil
            publish(state)
        }
    }

    /// The paths' identities now; `nil` when one could not be looked at.
    private func look() -> [FileIdentity?]? {
        var seen: [FileIdentity?] = []
        seen.reserveCapacity(paths.count)
        for path in paths {
            do { seen.append(try StoreFileSystem.identity(of: path)) } catch { return nil }
        }
        return seen
    }

    /// Publishes `state` for the lock-free path; called inside the lock. A failed look (no identity)
    /// publishes no look time, so that the next call looks again.
    private func publish(_ state: State) {
        publishedGeneration.store(state.generation, ordering: .releasing)
        publishedCheckedAt.store(state.identities == nil ? 0 : state.checkedAt, ordering: .releasing)
    }

    private static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)  // the vDSO: no system call
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
