#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKitJOSE

/// A service's own tokens (client credentials grant), one per target — resources, audience and
/// scope set — kept in a store: each target has its own profile and its own single-flight request,
/// in this process (concurrent callers share one request) and across processes and hosts sharing
/// the store (the request is made under the store's lock for that profile, and whoever takes the
/// lock next finds the token saved).
///
/// A target's profile is named ``profileName(base:target:)``: `<base>#<12 hex digits>`, its
/// attributes naming the target (`resource`, `audience`, `scope`), so `loginkit status` shows it.
/// Tokens are served from memory while they are valid beyond the refresh margin; a token about to
/// expire is replaced under the lock, where one another process just saved is taken instead.
///
/// Concurrency contract: `Sendable`; share one instance per API and store.
public final class ClientCredentialsTokens: Sendable {
    /// The API that issues the tokens.
    public let api: any ClientCredentialsAPI
    /// Where tokens are kept.
    public let store: any TokenStore
    /// The base profile name; each target's profile is named after it.
    public let baseProfile: String
    /// How long before expiry a token is replaced. Default 60 s (at most half its lifetime).
    public let refreshMargin: Duration
    private let clock: any AuthClock
    private let memory = LockedState<[String: Credentials]>([:])
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

    /// The profile a target's token is kept under: the base name, `#`, and the first 12 hex digits
    /// of the SHA-256 of the target's ``TokenTarget/cacheKey``. The empty target uses the base name.
    public static func profileName(base: String, target: TokenTarget) -> String {
        guard target.namesResourceOrAudience || target.scope != nil else { return base }
        let digest = (try? MessageDigest.sha256(Array(target.cacheKey.utf8))) ?? Array(target.cacheKey.utf8)
        return base + "#" + digest.prefix(6).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    /// A valid access token for `target`, valid for at least `minimumValidity` beyond the margin
    /// when the provider grants that long.
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
    /// - Throws: `LoginError` (`.invalidClient`, `.invalidTarget`, `.invalidScope`, …),
    ///   `ServerError`, `NetworkError`, `ConfigurationError`, `TokenStoreError`; a cancelled
    ///   caller ends only its own wait.
    public func credentials(for target: TokenTarget = TokenTarget(), minimumValidity: Duration = .zero) async throws -> Credentials {
        let name = Self.profileName(base: baseProfile, target: target)
        if let known = memory.withLock({ $0[name] }), isFresh(known, minimumValidity: minimumValidity) { return known }
        // One flight per (profile, asked validity): a caller asking for more does not take a token
        // fetched for less.
        let key = name + "\n" + String(minimumValidity.components.seconds)
        let credentials = try await flights.run(key) { [self] in
            try await store.withExclusiveAccess(to: name) { transaction in
                if let stored = transaction[name], isFresh(stored.credentials, minimumValidity: minimumValidity) {
                    return stored.credentials  // another task or process got it meanwhile
                }
                var credentials = try await api.clientCredentials(for: target)
                credentials.issuedAt = clock.now
                var attributes = target.attributes
                attributes["grant"] = "client_credentials"
                transaction[name] = StoredProfile(
                    credentials: credentials, source: api.source, userID: api.source.clientID, attributes: attributes, updatedAt: clock.now)
                return credentials
            }
        }
        memory.withLock { $0[name] = credentials }
        return credentials
    }

    /// Forgets the tokens held in memory (the store keeps its own).
    public func forgetCached() {
        memory.withLock { $0.removeAll() }
    }

    /// Valid beyond the margin (at most half the token's lifetime) plus `minimumValidity`. A token
    /// without an expiry is fresh.
    private func isFresh(_ credentials: Credentials, minimumValidity: Duration) -> Bool {
        guard let expiry = credentials.expiresAt else { return true }
        var margin = refreshMargin.timeInterval
        if let issued = credentials.issuedAt { margin = min(margin, expiry.timeIntervalSince(issued) / 2) }
        return expiry.timeIntervalSince(clock.now) > margin + minimumValidity.timeInterval
    }
}
