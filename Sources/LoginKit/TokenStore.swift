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
}

extension TokenStore {
    /// Saves `profile` under `name`, replacing what was there.
    public func save(_ profile: StoredProfile, as name: String) async throws {
        try await withExclusiveAccess { $0[name] = profile }
    }

    /// Removes the profile named `name`; removing a missing profile is not an error.
    public func removeProfile(named name: String) async throws {
        try await withExclusiveAccess { $0[name] = nil }
    }
}

/// The profiles as read under the store's lock; change them and the store writes them back.
public struct TokenStoreTransaction: Sendable {
    /// Every profile, by name.
    public var profiles: [String: StoredProfile]
    private let original: [String: StoredProfile]

    init(profiles: [String: StoredProfile]) {
        self.profiles = profiles
        self.original = profiles
    }

    /// When the stored file was corrupt: the error that reading it gave. The profiles then start
    /// empty, and saving moves the corrupt file aside before writing.
    public internal(set) var recoveredFrom: TokenStoreError?

    /// Whether anything changed since the transaction began.
    public var hasChanges: Bool { profiles != original }

    /// The profile named `name`.
    public subscript(name: String) -> StoredProfile? {
        get { profiles[name] }
        set { profiles[name] = newValue }
    }
}
