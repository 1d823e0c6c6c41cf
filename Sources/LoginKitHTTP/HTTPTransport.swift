#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// Sends one HTTP request and returns the whole response.
///
/// Every LoginKit layer above the wire depends on this protocol only, so tests can inject a mock
/// (`MockHTTPTransport` in `LoginKitMocks`) and production code a `CurlHTTPClient`.
///
/// Concurrency contract: `send` may be called from any number of tasks at once. When the calling
/// task is cancelled, an implementation stops the transfer promptly and throws `CancellationError`.
public protocol HTTPTransport: Sendable {
    /// Sends `request` with an optional `body` and returns the response head and its body.
    ///
    /// - Throws: `NetworkError` when no complete response arrived (refused, timed out, TLS failure,
    ///   response too large, transport shut down); `CancellationError` when the task was cancelled.
    ///   A response with any status code, including 4xx and 5xx, is returned, not thrown.
    func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data)
}

/// A transport that can send a request so that nothing below it ever sends it a second time: for
/// requests that carry a one-time credential (a refresh token, an authorization code, a device
/// code), which a provider honours once — and may take as stolen, revoking the whole token family,
/// when it sees it again. `TokenEndpoint` sends those grants through it; a transport that does not
/// adopt it gets them through `send(_:body:)`, and should then never resend a request on its own.
package protocol NeverResendingTransport: HTTPTransport {
    /// Sends `request` as ``HTTPTransport/send(_:body:)`` does, and never twice: a connection lost
    /// after the request left is a `NetworkError`, not a second copy sent on another connection.
    func sendNeverResent(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data)
}

/// A transport or an API with an executor of its own: the executor that runs its completions (for
/// `CurlHTTPClient`, its driver thread), or `nil`. A task that prefers it sends and resumes without
/// a thread hop; `AuthService` runs its shared refresh there, so that a storm of callers queued on
/// the global executor does not delay it (docs/refresh.md). Anything that does not conform has no
/// executor of its own: its work runs on the global concurrent executor.
package protocol PrefersTaskExecutor: Sendable {
    /// The executor to prefer, or `nil` for the global concurrent executor.
    var preferredTaskExecutor: (any TaskExecutor)? { get }
}

extension HTTPRequest {
    /// A request for an absolute `http` or `https` URL string, e.g. `"https://id.example.com/token"`.
    ///
    /// Returns `nil` when the string is not an absolute http(s) URL with a host.
    package init?(method: Method, url: String, headerFields: HTTPFields = [:]) {
        guard let parsed = URLParts(url) else { return nil }
        self.init(
            method: method,
            scheme: parsed.scheme,
            authority: parsed.authority,
            path: parsed.pathAndQuery,
            headerFields: headerFields
        )
    }

    /// The absolute URL string this request targets (`scheme://authority/path?query`), or `nil` when
    /// scheme or authority is missing.
    package var urlString: String? {
        guard let scheme, let authority else { return nil }
        return "\(scheme)://\(authority)\(path ?? "/")"
    }
}
