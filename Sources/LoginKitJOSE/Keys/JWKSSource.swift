#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
public import LoginKitHTTP
import HTTPTypes

/// An issuer's key set fetched from its `jwks_uri` through an `HTTPTransport`, cached, and
/// refetched once when a token names a key it does not hold (key rotation).
///
/// - The cache lives for the response's `Cache-Control: max-age` (at most 24 h; `no-store`/`no-cache`
///   mean 0), or 1 hour when there is none, and never less than
///   ``Configuration/minimumCacheLifetime`` (5 s): a `no-store` key set is not fetched per token.
///   An expired cache is refreshed on the next use; if that fetch fails, the stale keys keep serving
///   (key sets change rarely; a fetch outage must not lock everyone out) — for at most
///   ``Configuration/maximumStaleness`` (24 h) past their expiry, after which they are no longer trusted.
/// - While the endpoint fails, fetches back off: none for ``Configuration/initialBackoff`` (2 s) after a
///   failure, doubling with each further failure up to ``Configuration/maximumBackoff`` (5 min). In
///   between, the stale keys serve (or the last failure is thrown, without a request).
/// - Unknown `kid`: one refetch, unless the last fetch was less than 30 s ago
///   (a token with a made-up `kid` must not turn the verifier into a request amplifier) or fetches
///   are backing off.
/// - A key set with more than ``Configuration/maximumKeyCount`` (100) keys is refused whole
///   (`.keySetTooLarge`): nothing of it is cached.
/// - A key that the new document holds unchanged keeps its algorithm binding (see `JWK`).
/// - One fetch at a time: any number of concurrent verifications share one request.
///
/// Time comes from the system clock, or from the `now` the package's tests inject.
///
/// Concurrency contract: an actor; share one instance per issuer.
public actor JWKSSource: JWKSProvider {
    /// Used when the response has no `Cache-Control: max-age`: 1 hour.
    package static let defaultMaximumAge: Duration = .seconds(3600)
    /// The shortest time between two fetches caused by unknown key IDs: 30 s.
    package static let minimumRefetchInterval: Duration = .seconds(30)

    /// Limits of the cache; each has a default.
    public struct Configuration: Sendable {
        /// The shortest time a fetched key set is cached, whatever its `Cache-Control` says. Default 5 s.
        public var minimumCacheLifetime: Duration = .seconds(5)
        /// How long after a failed fetch the next one may start. Default 2 s.
        public var initialBackoff: Duration = .seconds(2)
        /// The longest wait between fetches while the endpoint keeps failing. Default 5 min.
        public var maximumBackoff: Duration = .seconds(300)
        /// How long past their expiry cached keys keep serving while fetches fail. Default 24 h.
        public var maximumStaleness: Duration = .seconds(86_400)
        /// The most keys a key set may hold; a larger one is refused whole. Default 100.
        public var maximumKeyCount: Int = JWKSet.defaultMaximumKeyCount

        /// The defaults; change the properties you need.
        public init() {}
    }

    /// The `jwks_uri`.
    package nonisolated let url: String
    /// The cache's limits.
    package nonisolated let configuration: Configuration
    private let transport: any HTTPTransport
    private let now: @Sendable () -> Date
    private var cached: (keySet: JWKSet, expiresAt: Date)?
    private var lastFetch: Date?
    private nonisolated let fetches = SingleFlight<Int, JWKSet>()
    /// Failed fetches since the last successful one, the last failure, and when the next fetch may start.
    private var backoff: (failures: Int, lastError: any Error, retryAt: Date)?
    /// How many HTTP requests this source has made (for diagnostics and tests).
    package private(set) var fetchCount = 0

    /// A source for `url`, fetched through `transport` within `configuration`'s limits.
    public init(url: String, transport: any HTTPTransport, configuration: Configuration = Configuration()) {
        self.init(url: url, transport: transport, configuration: configuration, now: { Date() })
    }

    /// A source timed by `now`.
    package init(
        url: String, transport: any HTTPTransport, configuration: Configuration = Configuration(),
        now: @escaping @Sendable () -> Date
    ) {
        self.url = url
        self.transport = transport
        self.configuration = configuration
        self.now = now
    }

    public func candidates(keyID: String?, algorithm: JWSAlgorithm) async throws(TokenVerificationError) -> [JWK] {
        let keySet = try await currentKeySet()
        let found = keySet.candidates(keyID: keyID, algorithm: algorithm)
        guard found.isEmpty else { return found }
        guard fetches.isRunning(0) || (mayRefetchForUnknownKey() && !isBackingOff()) else { return [] }
        return try await refresh().candidates(keyID: keyID, algorithm: algorithm)
    }

    /// The key set, fetched when there is none or it has expired (unless fetches are backing off).
    ///
    /// - Throws: `TokenVerificationError` `.keySetUnavailable` when no fetch succeeds and there are
    ///   no cached keys, or only keys expired longer ago than ``Configuration/maximumStaleness``.
    package func currentKeySet() async throws(TokenVerificationError) -> JWKSet {
        if let cached, now() < cached.expiresAt { return cached.keySet }
        if !fetches.isRunning(0), isBackingOff(), let backoff {
            return try staleKeySet(orThrow: Self.unavailable(url: url, underlying: backoff.lastError))
        }
        do {
            return try await refresh()
        } catch {
            return try staleKeySet(orThrow: error)  // stale beats nothing, within the staleness limit
        }
    }

    /// The cached keys while they expired no longer than ``Configuration/maximumStaleness`` ago;
    /// otherwise `failure` (as `.keySetUnavailable`).
    private func staleKeySet(orThrow failure: TokenVerificationError) throws(TokenVerificationError) -> JWKSet {
        guard let cached else { throw failure }
        guard now() < cached.expiresAt.addingTimeInterval(configuration.maximumStaleness.seconds) else {
            throw TokenVerificationError(
                .keySetUnavailable,
                "the issuer's keys from \(printableExcerpt(url, limit: 200)) expired more than "
                    + "\(configuration.maximumStaleness) ago and cannot be refetched; they are no longer trusted",
                underlying: failure
            )
        }
        return cached.keySet
    }

    private func mayRefetchForUnknownKey() -> Bool {
        guard let lastFetch else { return true }
        return now().timeIntervalSince(lastFetch) >= Self.minimumRefetchInterval.seconds
    }

    /// Whether a fetch failed recently enough that the next one must wait.
    private func isBackingOff() -> Bool {
        guard let backoff else { return false }
        return now() < backoff.retryAt
    }

    /// Counts a failed fetch: the next may start after `initialBackoff`, doubled per further failure,
    /// at most `maximumBackoff`.
    private func recordFailure(_ error: any Error, at failedAt: Date) {
        let failures = (backoff?.failures ?? 0) + 1
        let factor = Double(1 << min(failures - 1, 30))
        let delay = min(configuration.initialBackoff.seconds * factor, configuration.maximumBackoff.seconds)
        backoff = (failures, error, failedAt.addingTimeInterval(delay))
    }

    private static func unavailable(url: String, underlying: any Error) -> TokenVerificationError {
        if let error = underlying as? TokenVerificationError { return error }
        return TokenVerificationError(
            .keySetUnavailable, "could not fetch the issuer's keys from \(printableExcerpt(url, limit: 200))", underlying: underlying
        )
    }

    /// Fetches the key set; concurrent callers share the one fetch (the package's `SingleFlight`).
    private func refresh() async throws(TokenVerificationError) -> JWKSet {
        do {
            return try await fetches.run(0) { try await self.fetchAndStore() }
        } catch {
            throw Self.unavailable(url: url, underlying: error)
        }
    }

    private func fetchAndStore() async throws -> JWKSet {
        lastFetch = now()
        fetchCount += 1
        do {
            let (keySet, maximumAge) = try await Self.fetch(url: url, transport: transport, maximumKeyCount: configuration.maximumKeyCount)
            return store(keySet, maximumAge: maximumAge, fetchedAt: now())
        } catch {
            recordFailure(error, at: now())
            throw error
        }
    }


    /// Caches a fetched set for `maximumAge`, at least `minimumCacheLifetime`; keys it holds unchanged
    /// are taken from the previous set (their algorithm bindings stay). Ends any backoff.
    private func store(_ keySet: JWKSet, maximumAge: Duration, fetchedAt: Date) -> JWKSet {
        let kept = keySet.keepingKeys(of: cached?.keySet)
        let lifetime = max(maximumAge, configuration.minimumCacheLifetime)
        cached = (kept, fetchedAt.addingTimeInterval(lifetime.seconds))
        backoff = nil
        return kept
    }

    private static func fetch(url: String, transport: any HTTPTransport, maximumKeyCount: Int) async throws -> (JWKSet, Duration) {
        guard let request = HTTPRequest(method: .get, url: url, headerFields: [.accept: "application/jwk-set+json, application/json"]) else {
            throw TokenVerificationError(
                .keySetUnavailable, "the key set URL \"\(printableExcerpt(url, limit: 200))\" is not an absolute http(s) URL"
            )
        }
        let (response, body) = try await transport.send(request, body: nil)
        guard response.status.code == 200 else {
            throw TokenVerificationError(.keySetUnavailable, "the key set endpoint answered HTTP \(response.status.code)")
        }
        let keySet: JWKSet
        do {
            keySet = try JWKSet(jsonText: body, maximumKeyCount: maximumKeyCount)
        } catch where error.code == .keySetTooLarge {
            throw error
        } catch {
            throw TokenVerificationError(.keySetUnavailable, "the key set endpoint sent an invalid key set: \(error)", underlying: error)
        }
        return (keySet, maximumAge(cacheControl: response.headerFields[.cacheControl]))
    }

    /// `max-age` from a `Cache-Control` value, capped at 24 h; `no-store`/`no-cache` give 0.
    static func maximumAge(cacheControl: String?) -> Duration {
        guard let cacheControl else { return defaultMaximumAge }
        var maximumAge: Int?
        for directive in cacheControl.lowercased().split(separator: ",") {
            let trimmed = directive.drop(while: { $0 == " " || $0 == "\t" })
            if trimmed == "no-store" || trimmed == "no-cache" { return .zero }
            if trimmed.hasPrefix("max-age="), let seconds = Int(trimmed.dropFirst("max-age=".count)), seconds >= 0 {
                maximumAge = seconds
            }
        }
        guard let maximumAge else { return defaultMaximumAge }
        return .seconds(min(maximumAge, 86_400))
    }
}

extension Duration {
    /// The duration in (fractional) seconds.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
