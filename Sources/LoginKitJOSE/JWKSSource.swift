#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import LoginKitHTTP
import HTTPTypes

/// An issuer's key set fetched from its `jwks_uri` through an `HTTPTransport`, cached, and
/// refetched once when a token names a key it does not hold (key rotation).
///
/// - The cache lives for the response's `Cache-Control: max-age` (at most 24 h; `no-store`/`no-cache`
///   mean 0), or ``defaultMaximumAge`` when there is none. An expired cache is refreshed on the next use; if that
///   fetch fails, the stale keys keep serving (key sets change rarely; a fetch outage must not lock
///   everyone out).
/// - Unknown `kid`: one refetch, unless the last fetch was less than ``minimumRefetchInterval`` ago
///   (a token with a made-up `kid` must not turn the verifier into a request amplifier).
/// - Single flight: any number of concurrent verifications share one request.
///
/// Concurrency contract: an actor; share one instance per issuer.
public actor JWKSSource: JWKSProvider {
    /// Used when the response has no `Cache-Control: max-age`: 1 hour.
    public static let defaultMaximumAge: Duration = .seconds(3600)
    /// The shortest time between two fetches caused by unknown key IDs: 30 s.
    public static let minimumRefetchInterval: Duration = .seconds(30)

    /// The `jwks_uri`.
    public nonisolated let url: String
    private let transport: any HTTPTransport
    private let now: @Sendable () -> Date
    private var cached: (keySet: JWKSet, expiresAt: Date)?
    private var lastFetch: Date?
    private var inFlight: Task<JWKSet, any Error>?
    /// How many HTTP requests this source has made (for diagnostics and tests).
    public private(set) var fetchCount = 0

    /// A source for `url`, fetched through `transport`, timed by `now`.
    public init(url: String, transport: any HTTPTransport, now: @escaping @Sendable () -> Date = { Date() }) {
        self.url = url
        self.transport = transport
        self.now = now
    }

    public func candidates(keyID: String?, algorithm: JWSAlgorithm) async throws(TokenVerificationError) -> [JWK] {
        let keySet = try await currentKeySet()
        let found = keySet.candidates(keyID: keyID, algorithm: algorithm)
        guard found.isEmpty else { return found }
        guard inFlight != nil || mayRefetchForUnknownKey() else { return [] }
        return try await refresh().candidates(keyID: keyID, algorithm: algorithm)
    }

    /// The key set, fetched when there is none or it has expired.
    public func currentKeySet() async throws(TokenVerificationError) -> JWKSet {
        if let cached, now() < cached.expiresAt { return cached.keySet }
        do {
            return try await refresh()
        } catch {
            if let cached { return cached.keySet }  // stale beats nothing
            throw error
        }
    }

    private func mayRefetchForUnknownKey() -> Bool {
        guard let lastFetch else { return true }
        return now().timeIntervalSince(lastFetch) >= Self.minimumRefetchInterval.seconds
    }

    private func refresh() async throws(TokenVerificationError) -> JWKSet {
        let task: Task<JWKSet, any Error>
        if let inFlight {
            task = inFlight
        } else {
            let url = self.url
            let transport = self.transport
            let now = self.now
            task = Task {
                let (keySet, maximumAge) = try await Self.fetch(url: url, transport: transport)
                return self.store(keySet, maximumAge: maximumAge, fetchedAt: now())
            }
            inFlight = task
            lastFetch = now()
            fetchCount += 1
        }
        do {
            let keySet = try await task.value
            if inFlight == task { inFlight = nil }
            return keySet
        } catch {
            if inFlight == task { inFlight = nil }
            if let error = error as? TokenVerificationError { throw error }
            throw TokenVerificationError(.keySetUnavailable, "could not fetch the issuer's keys from \(url)", underlying: error)
        }
    }

    private func store(_ keySet: JWKSet, maximumAge: Duration, fetchedAt: Date) -> JWKSet {
        cached = (keySet, fetchedAt.addingTimeInterval(maximumAge.seconds))
        return keySet
    }

    private static func fetch(url: String, transport: any HTTPTransport) async throws -> (JWKSet, Duration) {
        guard let request = HTTPRequest(method: .get, url: url, headerFields: [.accept: "application/jwk-set+json, application/json"]) else {
            throw TokenVerificationError(.keySetUnavailable, "the key set URL \"\(url)\" is not an absolute http(s) URL")
        }
        let (response, body) = try await transport.send(request, body: nil)
        guard response.status.code == 200 else {
            throw TokenVerificationError(.keySetUnavailable, "the key set endpoint answered HTTP \(response.status.code)")
        }
        let keySet: JWKSet
        do {
            keySet = try JWKSet(jsonText: body)
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
