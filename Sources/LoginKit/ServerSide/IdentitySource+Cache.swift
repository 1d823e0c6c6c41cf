#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP

extension IdentitySource {
    /// What a token is kept, fetched and a failure remembered under: the source, and what its token
    /// depends on in the environment it is read with. Callers whose environments differ there never
    /// share a token, a fetch or a failure.
    struct FetchKey: Hashable, Sendable {
        let source: IdentitySource
        let inputs: Inputs

        /// What of the environment a source's token depends on. A struct, not an enum with
        /// payloads: an enum may keep its case in the spare bits of a payload's pointer, which hides
        /// the pointer from LeakSanitizer's scan of the cache.
        struct Inputs: Hashable, Sendable {
            /// The values of the variables it reads: an `environment(_:)` source's variable, GitHub
            /// Actions' two (`nil`: unset); empty for the other kinds.
            var values: [String?] = []
            /// For a program started with an environment handed in: the SHA-256 of the environment
            /// the program gets (without `ChildProcess.secretVariables`); `nil` for this process's
            /// environment, and for the other kinds.
            var environmentDigest: [UInt8]? = nil
        }
    }

    /// What a kept token must still match to be handed out.
    enum Validator: Hashable, Sendable {
        /// Nothing: programs, URLs and variables (their tokens are kept until they near expiry; a
        /// variable's value is part of the `FetchKey`).
        case unchanging
        /// The file's identity before the read that gave the token (`nil`: it could not be
        /// inspected), compared with the file's now: a rename or a rewrite changes it.
        case file(FileIdentity?)
    }

    /// A token as one fetch got it: what its source said of its expiry (a program's
    /// `expiration_time`, a metadata answer's `expires_in`) beside the JWT's own `exp`, and what it
    /// must still match later.
    struct FetchedToken: Sendable {
        let token: String
        let statedExpiry: Date?
        let validator: Validator
    }

    /// The tokens this process keeps, one per `FetchKey` (at most `capacity`), the recent failures
    /// of fetches that are slow or costly to repeat, and how many fetches each source had. A pure
    /// value: the lock around it is `IdentitySource/cache`.
    struct Cache {
        /// One kept token.
        struct Entry {
            let token: String
            /// The JWT's `exp` or the expiry the source stated, whichever is earlier; `nil`: unknown.
            let expiresAt: Date?
            let fetchedAt: Date
            let validator: Validator
        }

        /// A fetch that failed: its error, handed to the callers that come within `failureLifetime`.
        struct Failure {
            let error: any Error
            let failedAt: Date
        }

        /// The most tokens kept, and the most failures remembered: when full, those no longer
        /// usable go first, then the oldest.
        static let capacity = 64
        /// The most sources whose fetches are counted; past it, counts of sources with no kept token
        /// are dropped.
        static let countedSources = 1024
        /// A token is handed out while it is valid for longer than this.
        static let refreshMargin: TimeInterval = 60
        /// How long a token whose expiry is unknown is handed out.
        static let unknownExpiryLifetime: TimeInterval = 300
        /// How long the failure of a program run, a URL's or GitHub Actions' request is handed out
        /// again instead of a new fetch.
        static let failureLifetime: TimeInterval = 10

        private(set) var entries: [FetchKey: Entry] = [:]
        private(set) var failures: [FetchKey: Failure] = [:]
        private(set) var fetchCounts: [IdentitySource: Int] = [:]

        /// What a caller gets for `key` at `now` without a fetch: the kept token when it still
        /// matches `validator` and is usable, else the error of a fetch that failed less than
        /// `failureLifetime` ago; `nil`: fetch.
        func kept(for key: FetchKey, validator: Validator, now: Date) -> Result<String, any Error>? {
            if let token = token(for: key, validator: validator, now: now) { return .success(token) }
            if let failure = failures[key], Self.isRecent(failure, now: now) { return .failure(failure.error) }
            return nil
        }

        /// The token kept for `key`, when it still matches `validator` and is usable at `now`.
        func token(for key: FetchKey, validator: Validator, now: Date) -> String? {
            guard let entry = entries[key], entry.validator == validator, Self.isUsable(entry, now: now) else { return nil }
            return entry.token
        }

        /// Whether `entry` may still be handed out at `now` (its validator aside).
        static func isUsable(_ entry: Entry, now: Date) -> Bool {
            if let expiresAt = entry.expiresAt { return expiresAt.timeIntervalSince(now) > refreshMargin }
            let age = now.timeIntervalSince(entry.fetchedAt)
            return age >= 0 && age < unknownExpiryLifetime
        }

        /// Whether `failure` is still handed out at `now`.
        static func isRecent(_ failure: Failure, now: Date) -> Bool {
            let age = now.timeIntervalSince(failure.failedAt)
            return age >= 0 && age < failureLifetime
        }

        /// Keeps `entry` for `key`, making room when full, and forgets the key's failure.
        mutating func store(_ entry: Entry, for key: FetchKey) {
            failures[key] = nil
            if entries[key] == nil, entries.count >= Self.capacity {
                entries = entries.filter { Self.isUsable($0.value, now: entry.fetchedAt) }
                if entries.count >= Self.capacity, let oldest = entries.min(by: { $0.value.fetchedAt < $1.value.fetchedAt })?.key {
                    entries[oldest] = nil
                }
            }
            entries[key] = entry
        }

        /// Remembers that the fetch for `key` failed with `error` at `now`, making room when full.
        mutating func remember(_ error: any Error, for key: FetchKey, at now: Date) {
            if failures[key] == nil, failures.count >= Self.capacity {
                failures = failures.filter { Self.isRecent($0.value, now: now) }
                if failures.count >= Self.capacity, let oldest = failures.min(by: { $0.value.failedAt < $1.value.failedAt })?.key {
                    failures[oldest] = nil
                }
            }
            failures[key] = Failure(error: error, failedAt: now)
        }

        /// Drops every token kept for `source`, whatever the environment, that is still `token`.
        mutating func discard(_ token: String, for source: IdentitySource) {
            entries = entries.filter { $0.key.source != source || $0.value.token != token }
        }

        /// Counts one fetch of `source`.
        mutating func countFetch(of source: IdentitySource) {
            if fetchCounts[source] == nil, fetchCounts.count >= Self.countedSources {
                let sourcesKept = Set(entries.keys.map(\.source))
                fetchCounts = fetchCounts.filter { sourcesKept.contains($0.key) }
            }
            fetchCounts[source, default: 0] += 1
        }

        /// Drops every kept token and remembered failure (the counts stay).
        mutating func forgetAll() {
            entries.removeAll()
            failures.removeAll()
        }
    }

    /// The tokens this process keeps.
    static let cache = LockedState(Cache())
    /// The fetches under way, one per `FetchKey`.
    static let fetches = SingleFlight<FetchKey, String>()

    /// Forgets every token kept and every failure remembered in this process (for tests): the next
    /// call for any source fetches again. The fetch counts stay, so tests running at the same time
    /// keep theirs.
    package static func forgetCachedTokens() {
        cache.withLock { $0.forgetAll() }
    }

    /// Drops the token kept for `source` — under every environment it was fetched with — when it is
    /// still `token`, so that the next call fetches a new one; a token fetched since stays. For a
    /// token the provider refused (`invalid_client`, `invalid_grant`), which would otherwise be sent
    /// again until it nears expiry.
    package static func discard(_ token: String, for source: IdentitySource) {
        cache.withLock { $0.discard(token, for: source) }
    }

    /// How many fetches this process made for `source` — file reads, program runs, HTTP requests,
    /// variable reads — whether they succeeded or not (for tests and telemetry: concurrent callers
    /// share one, and a remembered failure counts none).
    package static func fetchCount(of source: IdentitySource) -> Int {
        cache.withLock { $0.fetchCounts[source] ?? 0 }
    }
}
