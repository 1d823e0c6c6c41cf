#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import LoginKitHTTP
import HTTPTypes
public import Logging

/// A remote minimum-version policy, checked before every login and refresh.
///
/// - Fetches the policy URL through an `HTTPTransport` at most once per ``Configuration/minimumFetchInterval``
///   (default 10 minutes; 0 for development), sending `If-None-Match` with the last ETag (a 304 keeps
///   the policy).
/// - Keeps the last good policy; a malformed one is logged and ignored. With nothing ever fetched, the
///   defaults given in code apply.
/// - Fails open by default (a policy server that cannot be reached does not stop anyone); closed
///   when ``Configuration/failsClosed`` is set and no policy was ever obtained.
/// - Below the minimum, ``check()`` throws a `LoginError` `.upgradeRequired` carrying the policy
///   (``LoginError/upgradePolicy``).
///
/// Concurrency contract: an actor; concurrent checks share one fetch.
public actor VersionGate: AuthGate {
    /// Where the policy is and how to treat it.
    public struct Configuration: Sendable {
        /// The policy URL (JSON: `title`, `message`, `version`, `url`).
        public var url: String
        /// This client's version.
        public var currentVersion: SemanticVersion
        /// The policy until one is fetched.
        public var defaultPolicy: VersionPolicy?
        /// The shortest time between two fetches. Default 10 minutes.
        public var minimumFetchInterval: Duration = .seconds(600)
        /// Whether an unreachable policy (and no default) refuses logins. Default `false`.
        public var failsClosed = false

        /// The policy at `url`, this client's `currentVersion`, and the policy until one is fetched.
        public init(url: String, currentVersion: SemanticVersion, defaultPolicy: VersionPolicy? = nil) {
            self.url = url
            self.currentVersion = currentVersion
            self.defaultPolicy = defaultPolicy
        }
    }

    /// The configuration.
    package nonisolated let configuration: Configuration
    private let transport: any HTTPTransport
    private let clock: any AuthClock
    private let logger: Logger
    private var lastGood: VersionPolicy?
    private var etag: String?
    /// When the last fetch ended (successful or not): the next is due an interval later.
    private var lastFetch: Date?
    private nonisolated let fetches = SingleFlight<Int, Void>()
    /// How many requests the gate has made.
    package private(set) var fetchCount = 0

    /// A gate that fetches `configuration.url` through `transport`, timed by `clock`.
    public init(configuration: Configuration, transport: any HTTPTransport, clock: any AuthClock = SystemClock(), logger: Logger = Logger(label: "loginkit.version-gate")) {
        self.configuration = configuration
        self.transport = transport
        self.clock = clock
        self.logger = logger
    }

    /// The policy in force: the last good fetched one, else the default.
    public func currentPolicy() async -> VersionPolicy? {
        try? await refreshIfDue()
        return lastGood ?? configuration.defaultPolicy
    }

    /// Throws `LoginError` `.upgradeRequired` (with ``LoginError/upgradePolicy``) when this client is
    /// below the policy's minimum.
    public func check() async throws {
        try await refreshIfDue()
        guard let policy = lastGood ?? configuration.defaultPolicy else {
            if configuration.failsClosed {
                throw ServerError(.unavailable, "the version policy at \(configuration.url) could not be fetched, and the gate fails closed")
            }
            return
        }
        if configuration.currentVersion < policy.version {
            throw LoginError(upgradeRequiredBy: policy, currentVersion: configuration.currentVersion)
        }
    }

    /// Fetches when due; concurrent callers share the one fetch and all see its result (none of
    /// them is judged against the defaults while the first fetch is under way).
    private func refreshIfDue() async throws {
        if let lastFetch, clock.now.timeIntervalSince(lastFetch) < configuration.minimumFetchInterval.timeInterval { return }
        try await fetches.run(0) { await self.fetch() }
    }

    private func fetch() async {
        fetchCount += 1
        defer { lastFetch = clock.now }
        var headers: HTTPFields = [.accept: "application/json"]
        if let etag { headers[.ifNoneMatch] = etag }
        guard let request = HTTPRequest(method: .get, url: configuration.url, headerFields: headers) else {
            logger.error("the version policy URL is not an absolute http(s) URL")
            return
        }
        do {
            let (response, body) = try await transport.send(request, body: nil)
            switch response.status.code {
            case 304:
                return
            case 200:
                let decoder = JSONDecoder()
                decoder.keyDecodingStrategy = .convertFromSnakeCase
                do {
                    lastGood = try decoder.decode(VersionPolicy.self, from: body)
                    etag = response.headerFields[.eTag]
                } catch {
                    logger.warning("ignored a malformed version policy; keeping the last good one", metadata: ["url": "\(configuration.url)"])
                }
            default:
                logger.warning("the version policy endpoint answered HTTP \(response.status.code)")
            }
        } catch {
            logger.warning("could not fetch the version policy: \(error)")
        }
    }
}
