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

    /// ``TokenStore/withExclusiveAccess(to:_:)``, also answering the change stamp read after
    /// `body`'s changes were written and before the exclusive access ended: no other writer's
    /// change can be in it, so it vouches for what `body` left in the store (`AuthService`
    /// remembers the credentials a refresh saved under it, and the storm's late callers are served
    /// them without reading the store again). `nil` when the store cannot say (the default).
    nonisolated(nonsending) func withExclusiveAccessStamped<T>(
        to name: String, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?)
}

extension TokenStoreChangeStamp {
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

extension IDTokenStore: StampedExclusiveAccess {
    /// Bumped by this store's own writes at once, and by another writer's within
    /// ``StoreFileWatch/defaultRecheckInterval`` (one `stat` per interval at most, not one per call).
    package nonisolated func changeStamp() -> UInt64 {
        fileWatch.stamp()
    }
}

extension InMemoryTokenStore: StampedExclusiveAccess {
    package nonisolated func changeStamp() -> UInt64 {
        generation.withLock { $0 }
    }
}

/// Follows the store file's identity (inode, mtime, ctime, size) with at most one `stat` per
/// recheck interval, and turns every change into a new stamp.
final class StoreFileWatch: Sendable {
    /// How long another process's write may go unseen by a cached read: 10 ms.
    static let defaultRecheckInterval: UInt64 = 10_000_000

    private struct State {
        var generation: UInt64 = 0
        /// The identity last seen; `.none` before the first look.
        var identity: FileIdentity??
        var checkedAt: UInt64 = 0
    }

    private let path: String
    /// Nanoseconds between two looks at the file.
    private let recheckInterval: UInt64
    private let state = LockedState(State())
    /// `state`'s generation and the time of its last look (0: none yet), published from inside its
    /// lock, generation first: between two looks a stamp is two atomic loads, and the lock (written
    /// by every acquisition, so bounced between cores when a storm's callers all ask) is taken only
    /// to look again.
    private let publishedGeneration = Atomic<UInt64>(0)
    private let publishedCheckedAt = Atomic<UInt64>(0)

    init(path: String, recheckInterval: UInt64 = defaultRecheckInterval) {
        self.path = path
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
            (state.generation, state.identity == nil || now &- state.checkedAt >= recheckInterval)
        }
        guard due else { return current }
        // A failed `stat` (other than "no such file") is never trusted: a new stamp each time, so
        // the caller takes the store's own path, which reports the error.
        let seen: FileIdentity??
        do { seen = .some(try StoreFileSystem.identity(of: path)) } catch { seen = nil }
        return state.withLock { state in
            // The store wrote (or another look finished) meanwhile: its record is the newer one.
            guard state.generation == current else { return state.generation }
            guard let seen else {
                state.generation &+= 1
                state.identity = nil
                publish(state)
                return state.generation
            }
            if state.identity != .some(seen) {
                state.generation &+= 1
                state.identity = .some(seen)
            }
            state.checkedAt = now
            publish(state)
            return state.generation
        }
    }

    /// This store wrote or removed the file (its new identity, `nil` when it is gone): a new stamp.
    func changed(to identity: FileIdentity?) {
        let now = Self.monotonicNanoseconds()
        state.withLock { state in
            state.generation &+= 1
            state.identity = .some(identity)
            state.checkedAt = now
            publish(state)
        }
    }

    /// Publishes `state` for the lock-free path; called inside the lock. A failed look (no identity)
    /// publishes no look time, so that the next call looks again.
    private func publish(_ state: State) {
        publishedGeneration.store(state.generation, ordering: .releasing)
        publishedCheckedAt.store(state.identity == nil ? 0 : state.checkedAt, ordering: .releasing)
    }

    private static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)  // the vDSO: no system call
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
