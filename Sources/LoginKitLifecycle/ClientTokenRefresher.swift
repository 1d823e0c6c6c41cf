// Built with LoginKit's "Lifecycle" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Lifecycle
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import LoginKit
import LoginKitHTTP
public import Logging
public import ServiceLifecycle

/// A `swift-service-lifecycle` `Service` that keeps chosen client-credentials tokens fresh in the
/// background, so that the rest of the service never waits for one: each target's token is
/// replaced `refreshAhead` before it would need replacing on demand (at most half its lifetime in),
/// a failure is retried with jittered exponential backoff while the current token stays served
/// (each target on its own schedule, the targets due fetched concurrently), and the service stops
/// cleanly on graceful shutdown (a request under way then finishes and is saved in the background).
///
/// ```swift
/// let refresher = ClientTokenRefresher(tokens: tokens, targets: [billing, stock], logger: logger)
/// let group = ServiceGroup(services: [refresher, server], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// // anywhere: refresher.accessToken(for: billing) — no await; nil only before the first token
/// ```
///
/// The tokens come from ``ClientCredentialsTokens``, so processes and hosts sharing its store still
/// make one request per target; this service only moves the request ahead of the callers. An
/// `OAuth2API` configured with `clientAssertionSource` or `assertionGrantSource` asks its identity
/// source at each new token, so a projected-token file the platform rotated is picked up without a
/// restart.
public final class ClientTokenRefresher: Service, Sendable {
    /// What the refresher did; for logs, health checks and tests.
    public enum Event: Sendable {
        /// `target` has a new token, valid until `expiresAt` (when known).
        case refreshed(TokenTarget, expiresAt: Date?)
        /// Getting `target`'s token failed; the next attempt is in `retryIn`.
        case failed(TokenTarget, any Error, retryIn: Duration)
        /// The service stopped (graceful shutdown or cancellation).
        case stopped
    }

    /// Timing.
    public struct Configuration: Sendable {
        /// How long before a token would be replaced on demand it is replaced in the background.
        /// Default 5 minutes (capped, as every asked validity, at half the token's lifetime).
        public var refreshAhead: Duration = .seconds(300)
        /// The first retry delay after a failure; it doubles per failure up to `maximumBackoff`, with
        /// equal jitter (each retry waits between half and all of the doubled delay). Default 1 s.
        public var initialBackoff: Duration = .seconds(1)
        /// The longest retry delay. Default 60 s.
        public var maximumBackoff: Duration = .seconds(60)
        /// The longest sleep between checks (tokens without an expiry, clock jumps). Default 5 minutes.
        public var maximumInterval: Duration = .seconds(300)

        /// The defaults.
        public init() {}
    }

    /// Where the tokens come from.
    package let tokens: ClientCredentialsTokens
    /// The targets kept fresh.
    package let targets: [TokenTarget]
    /// Timing.
    package let configuration: Configuration
    /// What happened, newest 256 kept when nobody reads; finishes when `run()` returns.
    public let events: AsyncStream<Event>
    private let eventSink: AsyncStream<Event>.Continuation
    private let clock: any AuthClock
    private let logger: Logger
    private let current = LockedState<[String: Credentials]>([:])
    private let started = LockedState(false)

    /// A refresher of `targets` through `tokens`.
    public init(
        tokens: ClientCredentialsTokens, targets: [TokenTarget], configuration: Configuration = Configuration(), clock: any AuthClock = SystemClock(),
        logger: Logger = Logger(label: "loginkit.refresher")
    ) {
        self.tokens = tokens
        self.targets = targets
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        (events, eventSink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(256))
    }

    /// `target`'s current token, without waiting: `nil` before the first one arrived, when it was
    /// invalidated, or when it is within 10 s of its expiry (the refresher keeps failing). A token
    /// without an expiry counts as expiring 5 minutes after it was received.
    public func accessToken(for target: TokenTarget) -> String? {
        guard let credentials = current.withLock({ $0[target.cacheKey] }), !tokens.wasInvalidated(credentials) else { return nil }
        guard let expiry = credentials.expiry(orAfterReceipt: ClientCredentialsTokens.lifetimeWithoutExpiry), expiry.timeIntervalSince(clock.now) > 10 else {
            return nil
        }
        return credentials.accessToken
    }

    /// Drops `token` (a resource server refused it) and gets `target` a new one now.
    ///
    /// - Throws: what ``ClientCredentialsTokens/credentials(for:minimumValidity:)`` throws; the
    ///   background loop keeps retrying then.
    @discardableResult
    public func invalidate(_ token: String, for target: TokenTarget) async throws -> String? {
        try await tokens.invalidate(token, for: target)
        let credentials = try await tokens.credentials(for: target, minimumValidity: configuration.refreshAhead)
        current.withLock { $0[target.cacheKey] = credentials }
        eventSink.yield(.refreshed(target, expiresAt: credentials.expiresAt))
        return credentials.accessToken
    }

    /// Runs until graceful shutdown or cancellation; never throws for a provider's failure (it
    /// retries), only ends. A refresher runs once: `events` finishes when it stops.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` when it runs or ran already.
    public func run() async throws {
        guard started.withLock({ started in
            defer { started = true }
            return !started
        }) else {
            throw LoginError(.invalidConfiguration, "a ClientTokenRefresher runs once; make another one")
        }
        defer {
            eventSink.yield(.stopped)
            eventSink.finish()
            logger.debug("token refresher stopped")
        }
        do {
            try await cancelWhenGracefulShutdown { [self] in try await loop() }
        } catch is CancellationError {
            // A graceful shutdown or a cancellation: a clean stop.
        }
    }

    /// Each target has its own next attempt: its token's replacement point minus `refreshAhead`,
    /// or its backoff after a failure. The targets due run concurrently, so a provider that hangs
    /// for one target does not delay the others.
    private func loop() async throws {
        var schedule = Dictionary(uniqueKeysWithValues: targets.map { ($0.cacheKey, (target: $0, due: clock.now, failures: 0)) })
        while true {
            try Task.checkCancellation()
            let now = clock.now
            let due = schedule.values.filter { $0.due <= now }
            let outcomes = await withTaskGroup(of: (String, Result<Credentials, any Error>).self) { group in
                for entry in due {
                    group.addTask { [tokens, configuration] in
                        do {
                            return (entry.target.cacheKey, .success(try await tokens.credentials(for: entry.target, minimumValidity: configuration.refreshAhead)))
                        } catch {
                            return (entry.target.cacheKey, .failure(error))
                        }
                    }
                }
                var outcomes: [(String, Result<Credentials, any Error>)] = []
                for await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            try Task.checkCancellation()
            for (key, outcome) in outcomes {
                guard var entry = schedule[key] else { continue }
                switch outcome {
                case .success(let credentials):
                    entry.failures = 0
                    let previous = current.withLock { current in
                        defer { current[key] = credentials }
                        return current[key]
                    }
                    if previous?.accessToken != credentials.accessToken {
                        eventSink.yield(.refreshed(entry.target, expiresAt: credentials.expiresAt))
                    }
                    let replacement = tokens.replacementTime(of: credentials, minimumValidity: configuration.refreshAhead)
                    let seconds = replacement.map { max(1, $0.timeIntervalSince(clock.now)) } ?? configuration.maximumInterval.timeInterval
                    entry.due = clock.now.addingTimeInterval(min(seconds, configuration.maximumInterval.timeInterval))
                case .failure(let error):
                    entry.failures += 1
                    let delay = backoff(afterFailures: entry.failures)
                    entry.due = clock.now.addingTimeInterval(delay.timeInterval)
                    logger.warning(
                        "refreshing a token failed; retrying", metadata: ["target": "\(entry.target)", "error": "\(error)", "retry_in": "\(delay)"])
                    eventSink.yield(.failed(entry.target, error, retryIn: delay))
                }
                schedule[key] = entry
            }
            guard let next = schedule.values.map(\.due).min() else { return }
            let wait = next.timeIntervalSince(clock.now)
            if wait > 0 { try await clock.sleep(for: Duration(timeInterval: wait)) }
        }
    }

    /// Equal jitter over `initialBackoff · 2^(failures−1)` capped at `maximumBackoff`: between half
    /// of that and all of it, at least 100 ms.
    private func backoff(afterFailures failures: Int) -> Duration {
        let initial = max(0.1, configuration.initialBackoff.timeInterval)
        let ceiling = max(initial, min(initial * Double(1 << min(failures - 1, 20)), configuration.maximumBackoff.timeInterval))
        return Duration(timeInterval: Double.random(in: (ceiling / 2)...ceiling))
    }
}
#endif
