#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
import LoginKitHTTP
import LoginKitJOSE

/// A service's own tokens (client credentials grant), one per target — resources, audience and
/// scope set — kept in a store: each target has its own profile, and its token is requested once
/// whoever asks, in this process (concurrent callers share one request) and across processes and hosts sharing
/// the store (the request is made under the store's lock for that profile, and whoever takes the
/// lock next finds the token saved).
///
/// A target's profile is named `<base>#<32 hex digits>` (of the target's SHA-256), its
/// attributes naming the target (`resource`, `audience`, `scope`), so `loginkit status` shows it.
/// Tokens are served from memory while they are valid beyond the refresh margin; a token about to
/// expire is replaced under the lock, where one another process just saved is taken instead.
/// An `OAuth2API` whose configuration sets `clientAssertionSource` or `assertionGrantSource` asks
/// its identity source at each new token, so a projected-token file the platform rotated is used
/// without a restart.
///
/// Concurrency contract: `Sendable`; share one instance per API and store.
public final class ClientCredentialsTokens: Sendable {
    /// The API that issues the tokens.
    package let api: any ClientCredentialsAPI
    /// Where tokens are kept.
    package let store: any TokenStore
    /// The base profile name; each target's profile is named after it.
    package let baseProfile: String
    /// How long before expiry a token is replaced. Default 60 s (at most half its lifetime).
    package let refreshMargin: Duration
    /// The time tokens are judged by (and authorized requests' proofs are stamped with).
    let clock: any AuthClock
    private let memory = LockedState<[String: (credentials: Credentials, stored: Date)]>([:])
    /// Tokens dropped by ``invalidate(_:for:)`` (their SHA-256, the last 256), with when they were
    /// refused: credentials that hold one, issued no later than that, count as dropped, so a request
    /// that read one before it was dropped does not put it back; the same token issued again after
    /// it (a provider may) is served and kept.
    private let invalidated = LockedState<[(digest: [UInt8], refusedAt: Date)]>([])
    /// The tokens `send` obtained in place of a refused one, per profile (their SHA-256 and issue
    /// time): refused again within ``TokenRejection/quietPeriod`` of its issue, such a token is not
    /// replaced again (``replacement(for:sentAt:target:)``).
    private let replacements = LockedState<[String: (digest: [UInt8], issuedAt: Date)]>([:])
    private let flights = SingleFlight<String, Credentials>()

    /// Tokens from `api`, kept in `store` under profiles named after `baseProfile`.
    public init(
        api: any ClientCredentialsAPI, store: any TokenStore, baseProfile: String = "default", clock: any AuthClock = SystemClock(),
        refreshMargin: Duration = .seconds(60)
    ) {
        self.api = api
        self.store = store
        self.baseProfile = baseProfile
        self.clock = clock
        self.refreshMargin = refreshMargin
    }

    /// The profile a target's token is kept under: the base name, `#`, and 32 hex digits of the
    /// SHA-256 of the target's ``TokenTarget/cacheKey`` (the empty target too: the base profile
    /// itself may hold a user's login).
    package static func profileName(base: String, target: TokenTarget) -> String {
        let digest = (try? MessageDigest.sha256(Array(target.cacheKey.utf8))) ?? Array(target.cacheKey.utf8)
        let hex = Array("0123456789abcdef")
        return base + "#" + String(digest.prefix(16).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0x0F)]] })
    }

    /// How long a token whose response named no expiry (`expires_in` is only RECOMMENDED, RFC 6749
    /// §5.1) is served before a new one is asked for: 5 minutes.
    package static let lifetimeWithoutExpiry: Duration = .seconds(300)

    /// The most targets held in memory; beyond it, expired ones go first, then any.
    package static let memoryCapacity = 1024

    /// A valid access token for `target`, valid for at least `minimumValidity` beyond the margin,
    /// both capped at half the token's lifetime (see ``credentials(for:minimumValidity:)``).
    ///
    /// - Throws: what ``credentials(for:minimumValidity:)`` throws, and `LoginRequiredError`
    ///   `.noAccessToken` when the provider issued none.
    public func accessToken(for target: TokenTarget = TokenTarget(), minimumValidity: Duration = .zero) async throws -> String {
        let credentials = try await credentials(for: target, minimumValidity: minimumValidity)
        guard let token = credentials.accessToken else {
            throw LoginRequiredError(.noAccessToken, profile: Self.profileName(base: baseProfile, target: target), "the provider issued no access token")
        }
        return token
    }

    /// Valid credentials for `target`: from memory, else from the store, else requested once.
    ///
    /// A `minimumValidity` beyond half the token's lifetime is capped at half of it: a freshly
    /// issued token then meets it, and the provider is not asked again per call.
    ///
    /// - Throws: `LoginError` (`.invalidClient`, `.invalidTarget`, `.invalidScope`, …,
    ///   `.invalidConfiguration`), `ServerError`, `NetworkError`, `TokenStoreError`;
    ///   `LoginRequiredError` `.sourceMismatch` when the target's profile holds what another client,
    ///   provider or target stored (nothing is sent or overwritten); a cancelled caller ends only
    ///   its own wait.
    public func credentials(for target: TokenTarget = TokenTarget(), minimumValidity: Duration = .zero) async throws -> Credentials {
        let name = Self.profileName(base: baseProfile, target: target)
        // The cached path: no lock but the memory's, no metric (it must stay under a microsecond).
        if let known = memory.withLock({ $0[name]?.credentials }), isFresh(known, minimumValidity: minimumValidity) {
            return known
        }
        // One flight per (profile, asked validity): a caller asking for more does not take a token
        // fetched for less.
        let key = "\(name)\n\(minimumValidity.components.seconds).\(minimumValidity.components.attoseconds)"
        let credentials = try await flights.run(key) { [self] in
            // Checked before the store is read: only valid targets' tokens are kept, in the store or in memory.
            try target.validate()
            return try await store.withExclusiveAccess(to: name) { transaction in
                if let stored = transaction[name] {
                    try checkOwnership(of: stored, name: name, target: target)
                    if isFresh(stored.credentials, minimumValidity: minimumValidity), !wasInvalidated(stored.credentials) {
                        Telemetry.count("loginkit_client_tokens_total", [("source", "store")])
                        return stored.credentials  // another task or process got it meanwhile
                    }
                }
                Telemetry.count("loginkit_client_tokens_total", [("source", "requested")])
                var credentials = try await api.clientCredentials(for: target)
                credentials.issuedAt = clock.now
                var attributes = target.attributes
                attributes["grant"] = Self.grantName(of: api)
                transaction[name] = StoredProfile(
                    credentials: credentials, source: api.source, userID: api.source.clientID, attributes: attributes, updatedAt: clock.now)
                return credentials
            }
        }
        remember(credentials, name: name)
        return credentials
    }

    /// Drops `token` for `target` — in memory, and in the store when it still holds it — after a
    /// resource server refused it (HTTP 401): the next call asks for a new one. The token as issued
    /// until now is dropped; the same token issued again later (a provider may) is served.
    ///
    /// - Throws: `TokenStoreError`.
    public func invalidate(_ token: String, for target: TokenTarget = TokenTarget()) async throws {
        try await invalidate(token, for: target, sentAt: clock.now)
    }

    /// Drops `token` for `target`, refused in a request sent at `sentAt`: credentials that hold it,
    /// issued no later than that (``TokenRejection``), in memory and in the store.
    ///
    /// - Throws: `TokenStoreError`.
    func invalidate(_ token: String, for target: TokenTarget, sentAt: Date) async throws {
        let name = Self.profileName(base: baseProfile, target: target)
        let rejection = TokenRejection(accessToken: token, sentAt: sentAt)
        let digest = Self.digest(token)
        invalidated.withLock { list in
            // One entry per token, refused at the latest time it was.
            let earlier = list.first(where: { $0.digest == digest })?.refusedAt
            list.removeAll { $0.digest == digest }
            list.append((digest, max(earlier ?? sentAt, sentAt)))
            if list.count > 256 { list.removeFirst(list.count - 256) }
        }
        memory.withLock { entries in
            if let held = entries[name]?.credentials, rejection.holds(held) { entries[name] = nil }
        }
        try await store.withExclusiveAccess(to: name) { transaction in
            if let stored = transaction[name]?.credentials, rejection.holds(stored) { transaction[name] = nil }
        }
    }

    /// Credentials for `target` in place of `token`, which a resource server refused in a request
    /// sent at `sentAt` (`send`'s `invalid_token`): the token is dropped and a new one asked for,
    /// once, whoever asks (twice at most for this caller: when what comes back is still the refused
    /// token, from a request that read the store before it was dropped). When `send` itself
    /// obtained `token` this way less than ``TokenRejection/quietPeriod`` ago, nothing is dropped
    /// or asked for: the credentials held are handed back (and `send` returns the 401), so a
    /// resource server that refuses every token costs one token request per 30 s, not one per
    /// request. In-process memory only.
    ///
    /// - Throws: what ``credentials(for:minimumValidity:)`` and ``invalidate(_:for:)`` throw.
    func replacement(for token: String, sentAt: Date, target: TokenTarget) async throws -> Credentials {
        let name = Self.profileName(base: baseProfile, target: target)
        let digest = Self.digest(token)
        let now = clock.now
        let justReplaced = replacements.withLock { entries -> Bool in
            guard let entry = entries[name], entry.digest == digest else { return false }
            return abs(now.timeIntervalSince(entry.issuedAt)) < TokenRejection.quietPeriod
        }
        if justReplaced { return try await credentials(for: target) }
        let rejection = TokenRejection(accessToken: token, sentAt: sentAt)
        try await invalidate(token, for: target, sentAt: sentAt)
        var fresh = try await credentials(for: target)
        // Still what was refused: a request that read the store before `invalidate` recorded the
        // token (this call joined it) handed it back. Asked once more, at most: it is dropped now.
        if rejection.holds(fresh) { fresh = try await credentials(for: target) }
        if let issued = fresh.accessToken, !rejection.holds(fresh) {
            let entry = (digest: Self.digest(issued), issuedAt: fresh.issuedAt ?? now)
            replacements.withLock { entries in
                // Bounded: only the targets replaced within the quiet period are kept.
                entries = entries.filter { abs(now.timeIntervalSince($0.value.issuedAt)) < TokenRejection.quietPeriod }
                entries[name] = entry
            }
        }
        return fresh
    }

    /// Forgets the tokens held in memory (the store keeps its own).
    package func forgetCached() {
        memory.withLock { $0.removeAll() }
    }

    /// The `grant` attribute of the profiles `api` fills: `jwt_bearer` for an `OAuth2API` with an
    /// `assertionGrantSource`, `client_credentials` otherwise.
    static func grantName(of api: any ClientCredentialsAPI) -> String {
        (api as? OAuth2API)?.configuration.assertionGrantSource != nil ? "jwt_bearer" : "client_credentials"
    }

    /// A profile of this name holds this client's own token (either grant of
    /// ``StoredProfile/clientGrants``: a configuration may move from one to the other) for this
    /// target, or it is not this object's to use or overwrite.
    private func checkOwnership(of stored: StoredProfile, name: String, target: TokenTarget) throws {
        // Keys compared byte for byte (the profile's name is the SHA-256 of the key's bytes).
        guard stored.source.isSameProvider(as: api.source), stored.attributes["grant"].map({ StoredProfile.clientGrants.contains($0) }) ?? false,
            TokenTarget(attributes: stored.attributes).cacheKey.utf8.elementsEqual(target.cacheKey.utf8)
        else {
            throw LoginRequiredError(
                .sourceMismatch, profile: name,
                "profile \"\(printableExcerpt(name, limit: 200))\" holds another client's, provider's or target's credentials; nothing was sent or overwritten")
        }
    }

    /// Whether `credentials` hold a token ``invalidate(_:for:)`` dropped: that token, issued no
    /// later than it was refused.
    package func wasInvalidated(_ credentials: Credentials) -> Bool {
        guard let token = credentials.accessToken else { return false }
        let digest = Self.digest(token)
        guard let refusedAt = invalidated.withLock({ $0.first(where: { $0.digest == digest })?.refusedAt }) else { return false }
        return TokenRejection(accessToken: token, sentAt: refusedAt).holds(credentials)
    }

    private static func digest(_ token: String) -> [UInt8] {
        (try? MessageDigest.sha256(Array(token.utf8))) ?? Array(token.utf8)
    }

    private func remember(_ credentials: Credentials, name: String) {
        let order = clock.now
        memory.withLock { entries in
            // Checked under the memory's lock: `invalidate` records the token before it takes this
            // lock to remove it, so either this sees the record or that removes what this puts.
            guard !wasInvalidated(credentials) else { return }
            if entries[name] == nil {
                entries.makeRoom(capacity: Self.memoryCapacity, isStale: { !isFresh($0.credentials, minimumValidity: .zero) }, age: \.stored)
            }
            entries[name] = (credentials, order)
        }
    }

    /// When `credentials` stop being served for `minimumValidity` and a new token is asked for:
    /// `nil` when never (no expiry and no issue time).
    package func replacementTime(of credentials: Credentials, minimumValidity: Duration = .zero) -> Date? {
        // No expiry named: treated as expiring `lifetimeWithoutExpiry` after it was received.
        credentials.replacementTime(margin: refreshMargin, minimumValidity: minimumValidity, lifetimeWithoutExpiry: Self.lifetimeWithoutExpiry)
    }

    /// Valid beyond the margin plus `minimumValidity`, both capped at half the token's lifetime.
    /// A token without an expiry is valid for ``lifetimeWithoutExpiry`` from when it was issued.
    private func isFresh(_ credentials: Credentials, minimumValidity: Duration) -> Bool {
        guard let due = replacementTime(of: credentials, minimumValidity: minimumValidity) else { return false }
        return clock.now < due
    }
}

extension Dictionary {
    /// Makes room for one more entry within `capacity`: first drops the entries `isStale` says,
    /// then the oldest by `age`. The bound both token caches keep.
    mutating func makeRoom<Age: Comparable>(capacity: Int, isStale: (Value) -> Bool, age: (Value) -> Age) {
        guard count >= capacity else { return }
        self = filter { !isStale($0.value) }
        while count >= capacity, let oldest = self.min(by: { age($0.value) < age($1.value) })?.key {
            self[oldest] = nil
        }
    }
}
