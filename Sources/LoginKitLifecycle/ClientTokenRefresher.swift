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
/// a failure is retried with jittered exponential backoff while the current token stays served,
/// and the service stops cleanly on graceful shutdown.
///
/// ```swift
/// let refresher = ClientTokenRefresher(tokens: tokens, targets: [billing, stock], logger: logger)
/// let group = ServiceGroup(services: [refresher, server], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// // anywhere: refresher.accessToken(for: billing) — no await; nil only before the first token
/// ```
///
/// The tokens come from ``ClientCredentialsTokens``, so processes and hosts sharing its store still
/// make one request per target; this service only moves the request ahead of the callers.
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
        /// The first retry delay after a failure; it doubles per failure, with full jitter. Default 1 s.
        public var initialBackoff: Duration = .seconds(1)
        /// The longest retry delay. Default 60 s.
        public var maximumBackoff: Duration = .seconds(60)
        /// The longest sleep between checks (tokens without an expiry, clock jumps). Default 5 minutes.
        public var maximumInterval: Duration = .seconds(300)

        /// The defaults.
        public init() {}
    }

    /// Where the tokens come from.
    public let tokens: ClientCredentialsTokens
    /// The targets kept fresh.
    public let targets: [TokenTarget]
    /// Timing.
    public let configuration: Configuration
    /// What happened, newest 256 kept when nobody reads.
    public let events: AsyncStream<Event>
    private let eventSink: AsyncStream<Event>.Continuation
    private let clock: any AuthClock
    private let logger: Logger
    private let current = LockedState<[String: Credentials]>([:])

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

    /// `target`'s current token, without waiting: `nil` before the first one arrived, or when the
    /// last one has expired (the refresher keeps failing).
    public func accessToken(for target: TokenTarget) -> String? {
        guard let credentials = current.withLock({ $0[target.cacheKey] }) else { return nil }
        if let expiry = credentials.expiresAt, expiry <= clock.now { return nil }
        return credentials.accessToken
    }

    /// Runs until graceful shutdown or cancellation; never throws for a provider's failure (it
    /// retries), only ends.
    public func run() async throws {
        defer {
            eventSink.yield(.stopped)
            logger.debug("token refresher stopped")
        }
        do {
            try await cancelWhenGracefulShutdown { [self] in try await loop() }
        } catch is CancellationError {
            // A graceful shutdown or a cancellation: a clean stop.
        }
    }

    private func loop() async throws {
        var failures: [String: Int] = [:]
        while true {
            try Task.checkCancellation()
            var wake = configuration.maximumInterval
            for target in targets {
                let key = target.cacheKey
                do {
                    let credentials = try await tokens.credentials(for: target, minimumValidity: configuration.refreshAhead)
                    failures[key] = nil
                    let previous = current.withLock { current in
                        defer { current[key] = credentials }
                        return current[key]
                    }
                    if previous?.accessToken != credentials.accessToken {
                        eventSink.yield(.refreshed(target, expiresAt: credentials.expiresAt))
                    }
                    if let due = tokens.replacementTime(of: credentials, minimumValidity: configuration.refreshAhead) {
                        wake = min(wake, max(.seconds(1), Duration(seconds: due.timeIntervalSince(clock.now))))
                    }
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    let count = (failures[key] ?? 0) + 1
                    failures[key] = count
                    let delay = backoff(afterFailures: count)
                    wake = min(wake, delay)
                    logger.warning("refreshing a token failed; retrying", metadata: ["target": "\(target)", "error": "\(error)", "retry_in": "\(delay)"])
                    eventSink.yield(.failed(target, error, retryIn: delay))
                }
            }
            try await clock.sleep(for: wake)
        }
    }

    /// Full jitter over `initialBackoff · 2^(failures−1)`, at most `maximumBackoff`, at least 1 s.
    private func backoff(afterFailures failures: Int) -> Duration {
        let base = configuration.initialBackoff.seconds * Double(1 << min(failures - 1, 20))
        let ceiling = min(base, configuration.maximumBackoff.seconds)
        return Duration(seconds: max(1, Double.random(in: 0...ceiling)))
    }
}

extension Duration {
    fileprivate init(seconds: Double) {
        self = .milliseconds(Int64((min(max(seconds, 0), 1e9) * 1000).rounded()))
    }

    fileprivate var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
