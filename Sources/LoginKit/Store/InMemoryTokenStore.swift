import LoginKitHTTP

/// A `TokenStore` in memory: the same semantics as `IDTokenStore` minus the disk and the other
/// processes. For tests, and for servers that want no token on disk.
public final class InMemoryTokenStore: TokenStore {
    private let lock = AsyncLock()
    private let storage: Storage
    /// Bumped after every change, for ``changeStamp()``.
    let generation = LockedState<UInt64>(0)

    private actor Storage {
        var profiles: [String: StoredProfile]
        init(_ profiles: [String: StoredProfile]) { self.profiles = profiles }
        func replace(with profiles: [String: StoredProfile]) { self.profiles = profiles }
    }

    /// A store holding `profiles`.
    public init(profiles: [String: StoredProfile] = [:]) {
        storage = Storage(profiles)
    }

    public func profile(named name: String) async throws -> StoredProfile? {
        await storage.profiles[name]
    }

    public func profileNames() async throws -> [String] {
        await storage.profiles.keys.sorted()
    }

    public nonisolated(nonsending) func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        try await exclusiveAccess(stamped: false, body).result
    }

    /// The exclusive access; with `stamped`, also the change stamp read after the change and
    /// before the lock is released (``TokenStoreChangeStamp/withExclusiveAccessStamped(to:_:)``).
    package nonisolated(nonsending) func exclusiveAccess<T>(
        stamped: Bool, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?) {
        try await lock.withLock {
            var transaction = TokenStoreTransaction(profiles: await storage.profiles)
            let result = try await body(&transaction)
            if transaction.hasChanges {
                await storage.replace(with: transaction.profiles)
                generation.withLock { $0 &+= 1 }
            }
            return (result, stamped ? generation.withLock { $0 } : nil)
        }
    }
}
