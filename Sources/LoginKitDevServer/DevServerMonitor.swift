// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import LoginKitHTTP

/// The switches a test flips while a `DevServer` runs: faults injected into the next requests to a
/// path, and the version policy it serves. (Within this package it also counts connections and
/// requests, and streams arrivals a test can await instead of sleeping.)
public final class DevServerMonitor: Sendable {
    private struct State {
        var connections: Set<String> = []
        var requestsByPath: [String: Int] = [:]
        var subscribers: [Int: AsyncStream<String>.Continuation] = [:]
        var nextSubscriber = 0
        var testKeySet = TestKeySet(json: #"{"keys":[]}"#, cacheControl: nil)
        var faults: [String: [DevFault]] = [:]
        var versionPolicy = DevVersionPolicy()
        var counts: [Counter: Int] = [:]
    }

    /// What the identity provider counts besides requests per path.
    enum Counter: Hashable {
        case dpopProofAccepted, dpopNonceChallenge, parRequest, resourceRequest, certificateTokenRequest, workloadTokenIssued
    }

    /// The policy `/version-policy` serves; change `minimumVersion` while the server runs.
    public var versionPolicy: DevVersionPolicy {
        get { state.withLock { $0.versionPolicy } }
        set { state.withLock { $0.versionPolicy = newValue } }
    }

    /// Queues `faults` for the next requests to `path`, one fault per request, in order.
    public func injectFaults(_ faults: [DevFault], path: String) {
        state.withLock { $0.faults[path, default: []].append(contentsOf: faults) }
    }

    /// Drops every queued fault.
    public func clearFaults() {
        state.withLock { $0.faults.removeAll() }
    }

    func takeFault(path: String) -> DevFault? {
        state.withLock { state in
            guard var queue = state.faults[path], !queue.isEmpty else { return nil }
            let fault = queue.removeFirst()
            state.faults[path] = queue
            return fault
        }
    }

    /// What `/test/jwks` serves: a JWKS document and an optional `Cache-Control` header.
    package struct TestKeySet: Sendable {
        /// The JWKS JSON text.
        package var json: String
        /// The `Cache-Control` header value, if any.
        package var cacheControl: String?

        /// The key set `json`, served with `cacheControl` as its `Cache-Control` header when set.
        package init(json: String, cacheControl: String? = nil) {
            self.json = json
            self.cacheControl = cacheControl
        }
    }

    /// The key set `/test/jwks` serves; change it to simulate a key rotation.
    package var testKeySet: TestKeySet {
        get { state.withLock { $0.testKeySet } }
        set { state.withLock { $0.testKeySet = newValue } }
    }
    private let state = LockedState(State())

    init() {}

    /// How many distinct client connections (address and port) have sent a request.
    package var connectionCount: Int {
        state.withLock { $0.connections.count }
    }

    /// How many requests arrived for `path` (the path without its query).
    package func requestCount(path: String) -> Int {
        state.withLock { $0.requestsByPath[path, default: 0] }
    }

    /// How many DPoP proofs the identity provider accepted (token, PAR and resource endpoints).
    package var dpopProofsAccepted: Int {
        state.withLock { $0.counts[.dpopProofAccepted, default: 0] }
    }

    /// How many `use_dpop_nonce` challenges the identity provider answered (token, PAR and resource endpoints).
    package var dpopNonceChallenges: Int {
        state.withLock { $0.counts[.dpopNonceChallenge, default: 0] }
    }

    /// How many requests reached the pushed authorization request endpoint.
    package var parRequests: Int {
        state.withLock { $0.counts[.parRequest, default: 0] }
    }

    /// How many requests reached the protected resource, `/api/resource`.
    package var resourceRequests: Int {
        state.withLock { $0.counts[.resourceRequest, default: 0] }
    }

    /// How many token requests came with a TLS client certificate (through the TLS-terminating
    /// proxy, `IdentityProviderConfiguration.mtlsCertificateHeader`).
    package var tokenRequestsWithCertificate: Int {
        state.withLock { $0.counts[.certificateTokenRequest, default: 0] }
    }

    /// How many workload identity tokens the workload issuer's token endpoints (GitHub-style and
    /// metadata-style, under `/workload`) issued; tokens minted in the process are not counted.
    package var workloadTokensIssued: Int {
        state.withLock { $0.counts[.workloadTokenIssued, default: 0] }
    }

    /// Forgets connections, request counts and the identity provider's counters (subscribers stay).
    package func reset() {
        state.withLock {
            $0.connections.removeAll()
            $0.requestsByPath.removeAll()
            $0.counts.removeAll()
        }
    }

    func count(_ counter: Counter) {
        state.withLock { $0.counts[counter, default: 0] += 1 }
    }

    /// The paths of requests as they arrive, from now on, until the stream is dropped.
    ///
    /// Subscribe before causing the request, then `await` the arrival.
    package func arrivals() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream<String>.makeStream()
        let id = state.withLock { state in
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func record(path: String, connection: String?) {
        let subscribers = state.withLock { state in
            if let connection { state.connections.insert(connection) }
            state.requestsByPath[path, default: 0] += 1
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.yield(path) }
    }
}

/// The minimum-version policy the dev server serves at `/version-policy`.
public struct DevVersionPolicy: Sendable, Hashable {
    /// The dialog title.
    package var title = "Update required"
    /// What to tell the user.
    package var message = "This version of LoginKit is no longer supported."
    /// The minimum version, e.g. `0.1.0`.
    public var minimumVersion = "0.0.0"
    /// Where to upgrade.
    package var url: String? = "https://example.com/loginkit/releases"

    /// A policy whose minimum version, `0.0.0`, every client meets.
    package init() {}
}
#endif
