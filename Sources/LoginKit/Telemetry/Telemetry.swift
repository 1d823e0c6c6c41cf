import CoreMetrics
import Tracing

/// LoginKit's metrics (swift-metrics) and spans (swift-distributed-tracing): no-ops until the host
/// bootstraps `MetricsSystem` or `InstrumentationSystem`. Labels and attributes name grants,
/// outcomes, issuers, profiles and store kinds; never a token, secret, assertion or user name.
///
/// The metrics (docs/server-side.md lists them with their dimensions):
/// - `loginkit_token_requests_total` (`grant`, `outcome`, `issuer`) and
///   `loginkit_token_request_duration_seconds` (`grant`, `issuer`): requests to token endpoints;
/// - `loginkit_refreshes_total` (`outcome`, `profile`): `AuthService`'s shared refreshes;
/// - `loginkit_shared_refresh_waits_total` (`profile`): token calls served by a refresh another
///   caller started;
/// - `loginkit_client_tokens_total` (`source`: store, requested): `ClientCredentialsTokens`'s
///   requests and the tokens another process saved (memory hits are the cached path: not counted);
/// - `loginkit_store_operations_total` (`operation`: read, write; `outcome`; `store`) and
///   `loginkit_store_operation_duration_seconds` (`operation`, `store`: file, postgres): reads and
///   writes of a store's file or table (not cache hits).
package enum Telemetry {
    /// The grant's short name for labels: `password`, `refresh_token`, `client_credentials`,
    /// `device_code`, `authorization_code`, `token_exchange`, `jwt_bearer`, or `other`.
    static func grantName(_ grantType: String?) -> String {
        switch grantType {
        case "password", "refresh_token", "client_credentials", "authorization_code": grantType ?? "other"
        case "urn:ietf:params:oauth:grant-type:device_code": "device_code"
        case "urn:ietf:params:oauth:grant-type:token-exchange": "token_exchange"
        case "urn:ietf:params:oauth:grant-type:jwt-bearer": "jwt_bearer"
        default: "other"
        }
    }

    /// An error's outcome label: `rejected` (the provider refused: a `LoginError` from the provider,
    /// a `LoginRequiredError`), `cancelled`, or `failed` (network, server, malformed answers, the
    /// configuration, …).
    static func outcome(of error: any Error) -> String {
        switch error {
        case let error as LoginError where error.isProviderRejection: "rejected"
        case is LoginRequiredError: "rejected"
        case is CancellationError: "cancelled"
        default: "failed"
        }
    }

    /// Runs a token request in a client span, counting and timing it.
    static func tokenRequest<T>(grantType: String?, issuer: String, _ operation: () async throws -> T) async throws -> T {
        let grant = grantName(grantType)
        let start = ContinuousClock.now
        func record(_ outcome: String) {
            Counter(label: "loginkit_token_requests_total", dimensions: [("grant", grant), ("outcome", outcome), ("issuer", issuer)]).increment()
            CoreMetrics.Timer(label: "loginkit_token_request_duration_seconds", dimensions: [("grant", grant), ("issuer", issuer)])
                .recordNanoseconds(nanoseconds(since: start))
        }
        // Started and ended here rather than with `withSpan`, which records the error itself, and
        // an error's description may quote what a provider sent.
        let span = startSpan("LoginKit token request", ofKind: .client)
        defer { span.end() }
        span.attributes["loginkit.grant"] = grant
        span.attributes["loginkit.issuer"] = issuer
        do {
            let result = try await operation()
            record("success")
            return result
        } catch {
            let outcome = outcome(of: error)
            record(outcome)
            span.attributes["loginkit.outcome"] = outcome
            span.setStatus(SpanStatus(code: .error, message: String(describing: type(of: error))))
            throw error
        }
    }

    /// A counter made once (for a hot path: no lookup per increment). It reports to the metrics
    /// system bootstrapped when it was made.
    package struct SharedCounter: Sendable {
        private let counter: Counter

        package init(_ label: String, _ dimensions: [(String, String)]) {
            counter = Counter(label: label, dimensions: dimensions)
        }

        package func increment() { counter.increment() }
    }

    /// Counts `label` once with `dimensions`.
    static func count(_ label: String, _ dimensions: [(String, String)]) {
        Counter(label: label, dimensions: dimensions).increment()
    }

    /// Times and counts a store read or write of the `store` kind.
    static func storeOperation<T>(_ operation: String, store: String, _ body: () throws(TokenStoreError) -> T) throws(TokenStoreError) -> T {
        let start = ContinuousClock.now
        do {
            let result = try body()
            recordStoreOperation(operation, store: store, outcome: "success", since: start)
            return result
        } catch {
            recordStoreOperation(operation, store: store, outcome: "failed", since: start)
            throw error
        }
    }

    /// Times and counts an asynchronous store read or write (the fleet store's queries).
    package static func storeOperation<T>(_ operation: String, store: String, _ body: () async throws -> T) async throws -> T {
        let start = ContinuousClock.now
        do {
            let result = try await body()
            recordStoreOperation(operation, store: store, outcome: "success", since: start)
            return result
        } catch {
            recordStoreOperation(operation, store: store, outcome: "failed", since: start)
            throw error
        }
    }

    static func recordStoreOperation(_ operation: String, store: String, outcome: String, since start: ContinuousClock.Instant) {
        Counter(label: "loginkit_store_operations_total", dimensions: [("operation", operation), ("outcome", outcome), ("store", store)]).increment()
        CoreMetrics.Timer(label: "loginkit_store_operation_duration_seconds", dimensions: [("operation", operation), ("store", store)])
            .recordNanoseconds(nanoseconds(since: start))
    }

    private static func nanoseconds(since start: ContinuousClock.Instant) -> Int64 {
        let elapsed = ContinuousClock.now - start
        return elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000
    }
}

extension Result where Failure == any Error {
    /// The outcome label of a failure (see ``Telemetry/outcome(of:)``); `success` for a success.
    var failureOutcome: String {
        switch self {
        case .success: "success"
        case .failure(let error): Telemetry.outcome(of: error)
        }
    }
}
