#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes
public import LoginKitHTTP
import Synchronization

/// An `HTTPTransport` over libcurl's multi interface.
///
/// One `CURLM` multi handle per client, driven by one dedicated thread that waits in
/// `curl_multi_poll`; new requests and cancellations wake it with `curl_multi_wakeup`. Connections
/// are kept alive and reused (HTTP/2 when a TLS server offers it), easy handles are recycled.
/// A request costs one thread hop each way: the caller's task hands it to the driver thread, and
/// the transfer's completion resumes the caller's continuation.
///
/// Safety defaults: TLS peer and host verification always on, redirects never followed (a token
/// request's credentials never travel to another URL), `http://` only to loopback unless
/// ``Configuration/allowsInsecureHTTP`` (and to link-local addresses for an identity source's
/// request to a cloud metadata service only), loopback never through a proxy, bodies capped at
/// ``Configuration/maximumResponseSize``.
///
/// Concurrency contract: `send` may be called from any number of tasks. Cancelling a task removes
/// its transfer promptly and makes `send` throw `CancellationError`. ``shutdown()`` fails requests
/// under way with ``NetworkError/Code/shutdown``; releasing the last reference to a client shuts it
/// down too, and its thread ends.
public final class CurlHTTPClient: HTTPTransport, PrefersTaskExecutor, NeverResendingTransport {
    /// The limits this client applies to every request.
    package let configuration: Configuration
    let driver: CurlDriver
    private let nextID = Atomic<UInt64>(1)
    /// The last URL this client checked, and what `send` needs from it: a client's requests mostly
    /// go to one endpoint, and the check (`URLParts`) is a parse.
    private let lastDestination = LockedState<Destination?>(nil)

    /// Starts a client and its driver thread.
    ///
    /// - Throws: `NetworkError` with code `.other` when libcurl cannot be initialised or the
    ///   thread cannot be started, `.invalidRequest` when ``Configuration/proxy`` holds user info,
    ///   or when only one of ``TLS/clientCertificate`` and ``TLS/clientKey`` is set, either file is
    ///   a symbolic link, the key file is not a private regular file of the user's own (mode `0600`
    ///   or stricter) in a directory only the user can write, or the certificate file holds no PEM
    ///   certificate; the message names the file (or its directory) and never quotes it. Both files
    ///   are read here, once: every connection presents what was read then.
    public init(configuration: Configuration = Configuration()) throws {
        guard ensureCurlGlobalInit() else {
            throw NetworkError(.other, "libcurl failed to initialise (curl_global_init); check the libcurl installation")
        }
        if let proxy = configuration.proxy, proxy.contains("@") {
            // Never repeat the URL: it may hold a password.
            throw NetworkError(.invalidRequest, "the configured proxy URL holds user info; LoginKit takes no proxy credentials in its configuration")
        }
        let clientCredential = try configuration.tls.readClientCertificate()
        self.configuration = configuration
        self.driver = try CurlDriver.start(configuration: configuration, clientCredential: clientCredential)
    }

    deinit {
        driver.requestShutdown()
    }

    /// The client's driver thread as a task executor (SE-0417). Tasks that prefer it send requests
    /// without any thread hop — for short request-and-parse code; long computations there delay
    /// every other transfer of the client. After ``shutdown()`` its jobs run on the global
    /// concurrent executor.
    package var taskExecutor: any TaskExecutor { driver }

    /// ``taskExecutor`` while the client runs: `AuthService` runs its shared refresh on the driver
    /// thread. `nil` once ``shutdown()`` was asked for, so that work started then does not go
    /// through a stopped driver to reach the global executor.
    package var preferredTaskExecutor: (any TaskExecutor)? {
        driver.state.withLock { $0.shutdownRequested } ? nil : driver
    }

    /// Sends `request` and returns the response head and body. See ``HTTPTransport/send(_:body:)``.
    ///
    /// - Throws: `NetworkError` (refused, timed out, TLS, too large, insecure URL, shut down, a HEAD
    ///   with a body; `.tls` also when libcurl cannot load the client certificate or its key) or
    ///   `CancellationError` when the calling task is cancelled.
    public func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        try await send(request, body: body, freshConnection: false)
    }

    /// Sends `request` on a connection opened for it alone and closed after it. libcurl resends a
    /// request only when a kept-alive connection it reused turns out dead; on a fresh one it never
    /// does, so a connection lost after the request left fails with `NetworkError` (with
    /// `requestSent`), and the request reached the server at most once. For requests that carry a
    /// one-time credential (docs/transport.md, "One-time credentials are never resent").
    ///
    /// - Throws: what ``send(_:body:)`` throws.
    package func sendNeverResent(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        try await send(request, body: body, freshConnection: true)
    }

    private func send(_ request: HTTPRequest, body: Data?, freshConnection: Bool) async throws -> (HTTPResponse, Data) {
        guard let url = request.urlString, let destination = destination(of: url) else {
            throw NetworkError(.invalidRequest, "the request needs an absolute http(s) URL without user info")
        }
        // Link-local (a cloud metadata service) only for the requests that ask for it: an identity
        // source's, never a provider's endpoint that discovery named.
        let isLocal = destination.isLoopback || (destination.isLinkLocal && LinkLocalHTTP.isAllowed)
        if destination.isPlainHTTP && !isLocal && !configuration.allowsInsecureHTTP {
            throw NetworkError(
                .insecureURL,
                "refused plain http:// to \(destination.host) (only loopback takes it): use https://, or allow insecure HTTP explicitly for this client"
            )
        }
        if request.method == .head && body != nil {
            throw NetworkError(.invalidRequest, "a HEAD request cannot carry a body")
        }
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let driver = self.driver
        let exchange = LockedState(Exchange())
        return try await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let submission = Submission(
                    id: id, url: url, bypassesProxy: isLocal, request: request, body: body,
                    freshConnection: freshConnection, continuation: Completion(exchange: exchange, continuation: continuation)
                )
                // A task already cancelled takes no handle (the phase below settles any later race).
                if Task.isCancelled {
                    submission.continuation.resume(throwing: CancellationError())
                    return
                }
                // The request's options are set here, on the caller's thread: the driver thread,
                // which every transfer of the client goes through, only adds the handle.
                let transfer: Transfer
                switch driver.takeHandle() {
                case .success(let handle):
                    transfer = Transfer(submission: submission, handle: handle, configuration: driver.configuration)
                case .failure(let error):
                    submission.continuation.resume(throwing: error)
                    return
                }
                if let failure = transfer.configure() {
                    driver.recycle(transfer)
                    submission.continuation.resume(throwing: failure)
                    return
                }
                // Lock order: the exchange's lock, then the driver's (`enqueue`). The driver
                // thread takes an exchange's lock only to publish an outcome (`Completion`), never
                // while it holds its own state's lock: keep it so, or the two deadlock.
                let outcome = exchange.withLock { exchange -> SubmitOutcome in
                    guard exchange.phase == .new else { return .cancelled }
                    guard driver.enqueue(.add(transfer)) else { return .shutDown }
                    exchange.phase = .submitted
                    return .submitted
                }
                switch outcome {
                case .submitted: break
                case .cancelled:
                    driver.recycle(transfer)
                    submission.continuation.resume(throwing: CancellationError())
                case .shutDown:
                    driver.recycle(transfer)
                    submission.continuation.resume(throwing: CurlDriver.shutdownError)
                }
            }
            guard let result = exchange.withLock({ $0.outcome }) else {
                throw NetworkError(.other, "the request ended without an outcome")  // every resume publishes one first
            }
            let received = try result.get()
            return (received.response(), received.body)
        } onCancel: {
            exchange.withLock { exchange in
                switch exchange.phase {
                case .new: exchange.phase = .cancelled
                case .submitted:
                    exchange.phase = .cancelled
                    _ = driver.enqueue(.cancel(id))
                case .cancelled: break
                }
            }
        }
    }

    /// Starts a client, runs `body` with it, and shuts the client down whatever `body` does.
    public nonisolated(nonsending) static func withClient<T>(
        configuration: Configuration = Configuration(),
        _ body: (CurlHTTPClient) async throws -> T
    ) async throws -> T {
        let client = try CurlHTTPClient(configuration: configuration)
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    /// Stops the client: requests under way fail with ``NetworkError/Code/shutdown``, later ones
    /// are refused, and the driver thread ends before this returns. Calling it again is harmless.
    public func shutdown() async {
        await driver.shutdown()
    }

    /// What `send` needs from `url`, or `nil` when it is no absolute http(s) URL (`URLParts`).
    /// The last URL's answer is kept: the same bytes always split the same way. Compared as bytes,
    /// not with `==`, which calls canonically equivalent spellings equal: `URLParts` splits on
    /// bytes, and the answer must not rest on no rule of it ever telling two such spellings apart.
    private func destination(of url: String) -> Destination? {
        if let last = lastDestination.withLock({ $0 }), Transfer.sameBytes(last.url, url) { return last }
        guard let parts = URLParts(url) else { return nil }
        let destination = Destination(
            url: url, isPlainHTTP: parts.scheme == "http", isLoopback: parts.isLoopback, isLinkLocal: parts.isLinkLocal, host: parts.host)
        lastDestination.withLock { $0 = destination }
        return destination
    }
}

/// A request URL as `send` checks it.
private struct Destination: Sendable {
    let url: String
    let isPlainHTTP: Bool
    let isLoopback: Bool
    let isLinkLocal: Bool
    let host: String
}

/// One request between its caller's task and the driver thread, under one lock (one allocation):
///
/// - `phase` links the task to its transfer so that a cancellation that races the submission is
///   never lost: the phase changes and the driver command are made under the lock;
/// - `outcome` is where the driver publishes the result before it resumes the task (`Completion`).
struct Exchange {
    enum Phase { case new, submitted, cancelled }
    var phase = Phase.new
    var outcome: Result<ReceivedResponse, any Error>?
}

private enum SubmitOutcome { case submitted, cancelled, shutDown }
