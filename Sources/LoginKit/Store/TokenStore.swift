/// Where profiles (credentials plus what refreshing them needs) are kept.
///
/// `IDTokenStore` keeps them in a file, `InMemoryTokenStore` in memory, `PostgresTokenStore` in a
/// database shared by a fleet. `AuthService` depends on this protocol only.
///
/// Concurrency contract: every method may be called from any task. ``withExclusiveAccess(_:)``
/// serialises read-modify-write cycles across tasks and, for stores that can, across processes or
/// hosts.
public protocol TokenStore: Sendable {
    /// The profile named `name`, or `nil`.
    ///
    /// - Throws: `TokenStoreError` when the store cannot be read (permissions, corrupt, sealed…).
    func profile(named name: String) async throws -> StoredProfile?

    /// The names of all profiles, sorted.
    func profileNames() async throws -> [String]

    /// Takes the store's exclusive lock, re-reads the stored profiles, runs `body` with them, and,
    /// if `body` changed them, writes them before the lock is released.
    ///
    /// `body` runs in the caller's isolation and may await (a token refresh over the network holds
    /// the lock so that other tasks and processes wait for it instead of refreshing too).
    /// When `body` throws, nothing is written.
    nonisolated(nonsending) func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T

    /// Like ``withExclusiveAccess(_:)``, for one profile: the transaction holds only the profile
    /// named `name` (or nothing, when there is none) and may change only that profile.
    ///
    /// Stores that can lock a single profile (`IDTokenStore`, `PostgresTokenStore`) let work on
    /// other profiles go on meanwhile; the default takes the whole store's lock. `AuthService` refreshes and saves
    /// through this.
    ///
    /// - Throws: `TokenStoreError` `.outOfScope` when `body` changed another profile (nothing is
    ///   written then), and whatever the store or `body` throws.
    nonisolated(nonsending) func withExclusiveAccess<T>(to name: String, _ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T

    /// Runs `body`, an interactive login for profile `name` (a browser sign-in that may take
    /// minutes), while no other interactive login of this store runs — in this process and, for
    /// stores that can, in others — waiting at most `timeout` for one under way. The store's lock
    /// is not held meanwhile, so refreshes go on.
    ///
    /// The default runs `body` at once; `IDTokenStore` holds `<path>.login.lock`.
    ///
    /// - Throws: `TokenStoreError` `.lockTimedOut` after `timeout`, and what `body` throws.
    nonisolated(nonsending) func withInteractiveLogin<T>(for name: String, timeout: Duration, _ body: () async throws -> T) async throws -> T
}

extension TokenStore {
    /// A store that locks one profile on its own (``IDTokenStore``) does so; any other runs `body`
    /// in a whole-store transaction, scoped to `name`.
    public nonisolated(nonsending) func withExclusiveAccess<T>(to name: String, _ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        if let store = self as? any ProfileLockingStore {
            return try await store.profileAccess(to: name, stamped: false, body).result
        }
        return try await withExclusiveAccess { all in
            try await all.scoped(to: name, store: "\(Self.self)", body)
        }
    }
}

/// A store with a lock per profile: transactions on different profiles do not wait for each other.
package protocol ProfileLockingStore: TokenStore {
    /// The exclusive access to one profile; with `stamped`, also the change stamp read after the
    /// write and before the profile's lock is released.
    nonisolated(nonsending) func profileAccess<T>(
        to name: String, stamped: Bool, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?)
}

extension TokenStore {
    /// Runs `body` at once: no exclusion beyond what the caller provides.
    public nonisolated(nonsending) func withInteractiveLogin<T>(
        for name: String, timeout: Duration, _ body: () async throws -> T
    ) async throws -> T {
        try await body()
    }

    /// Saves `profile` under `name`, replacing what was there.
    public func save(_ profile: StoredProfile, as name: String) async throws {
        try await withExclusiveAccess(to: name) { $0[name] = profile }
    }

    /// Removes the profile named `name`; removing a missing profile is not an error.
    public func removeProfile(named name: String) async throws {
        try await withExclusiveAccess(to: name) { $0[name] = nil }
    }
}

/// The profiles as read under the store's lock; change them and the store writes them back.
public struct TokenStoreTransaction: Sendable {
    /// Every profile, by name (only the one in scope, for a single-profile transaction).
    public var profiles: [String: StoredProfile]
    /// The profiles as read, before `body` changed anything.
    package let original: [String: StoredProfile]
    /// The one profile this transaction may change, or `nil` for the whole store.
    package let scope: String?

    /// A transaction over `profiles` as read under the store's lock (for `TokenStore`
    /// implementations: write ``profiles`` back when ``hasChanges``); `scope` limits it to one
    /// profile.
    public init(profiles: [String: StoredProfile], scope: String? = nil) {
        self.profiles = profiles
        self.original = profiles
        self.scope = scope
    }

    /// The names whose profile was added, changed or removed, sorted.
    package var changedNames: [String] {
        Set(profiles.keys).union(original.keys).filter { profiles[$0] != original[$0] }.sorted()
    }

    /// Runs `body` with a transaction holding only the profile `name` (the default scoping of
    /// ``TokenStore/withExclusiveAccess(to:_:)`` over a whole-store transaction), then takes its
    /// change of that profile into this one.
    ///
    /// - Throws: `TokenStoreError` `.outOfScope` when `body` changed another profile (nothing is
    ///   taken over then), and what `body` throws.
    package mutating func scoped<T>(to name: String, store: String, _ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        var scoped = TokenStoreTransaction(profiles: self[name].map { [name: $0] } ?? [:], scope: name)
        scoped.recoveredFrom = recoveredFrom
        scoped.saveCheck = saveCheck
        let result = try await body(&scoped)
        try scoped.checkScope(store: store)
        self[name] = scoped[name]
        return result
    }

    /// Throws `.outOfScope` when a single-profile transaction changed another profile.
    package func checkScope(store: String) throws(TokenStoreError) {
        guard let scope else { return }
        let others = changedNames.filter { $0 != scope }
        guard others.isEmpty else {
            throw TokenStoreError(
                .outOfScope, path: store,
                "a transaction for profile \"\(scope)\" changed \(others.map { "\"\($0)\"" }.joined(separator: ", ")); use withExclusiveAccess(_:) for several profiles")
        }
    }

    /// When the stored file was corrupt: the error that reading it gave. The profiles then start
    /// empty, and saving moves the corrupt file aside before writing.
    package var recoveredFrom: TokenStoreError?

    /// Whether anything changed since the transaction began.
    public var hasChanges: Bool { profiles != original }

    /// The store's check that a save would go through now, when it can tell (`IDTokenStore`: room
    /// and write access in its directory); `nil` for stores that cannot.
    var saveCheck: (@Sendable () throws(TokenStoreError) -> Void)?

    /// Throws when the store already knows that saving this transaction would fail: called before
    /// work whose result must be saved or is lost (a refresh, whose new refresh token replaces the
    /// old one at the provider). Does nothing for stores that cannot tell.
    ///
    /// - Throws: `TokenStoreError` naming the store and why (`.noSpace`, `.io`, …).
    func checkCanSave() throws(TokenStoreError) {
        try saveCheck?()
    }

    /// The profile named `name`.
    public subscript(name: String) -> StoredProfile? {
        get { profiles[name] }
        set { profiles[name] = newValue }
    }
}
