/// The server could not be reached, or its answer did not arrive whole: no connection, an unknown
/// host, a TLS failure, a timeout, a dropped connection, an answer too large. Trying again later, or
/// on another network, may help.
///
/// Match on `code`; `message` is for people. Neither ever contains a request body, a header value,
/// a query string or anything else that may hold a secret.
public struct NetworkError: LoginKitError {
    /// What kind of network failure this is. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case connectFailed, hostNotFound, timedOut, tls, connectionLost, responseTooLarge
            case insecureURL, invalidRequest, shutdown, other
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The connection was refused or could not be made.
        public static let connectFailed = Code(.connectFailed)
        /// The host name did not resolve.
        public static let hostNotFound = Code(.hostNotFound)
        /// The connect timeout or the total timeout passed.
        public static let timedOut = Code(.timedOut)
        /// TLS failed: unknown CA, host name mismatch, expired certificate, pinned key mismatch.
        public static let tls = Code(.tls)
        /// The connection broke before the whole response arrived (reset, truncated body).
        public static let connectionLost = Code(.connectionLost)
        /// The response body is larger than the configured maximum; nothing past the cap was kept.
        public static let responseTooLarge = Code(.responseTooLarge)
        /// Plain `http://` to a host that is not loopback, refused before any network activity.
        public static let insecureURL = Code(.insecureURL)
        /// The request itself cannot be sent (no absolute http(s) URL, user info in the URL, …).
        public static let invalidRequest = Code(.invalidRequest)
        /// The transport was shut down before or while the request ran.
        public static let shutdown = Code(.shutdown)
        /// Any other transport failure; `transportCode` has the detail.
        public static let other = Code(.other)

        public var description: String {
            switch base {
            case .connectFailed: "connect failed"
            case .hostNotFound: "host not found"
            case .timedOut: "timed out"
            case .tls: "TLS failure"
            case .connectionLost: "connection lost"
            case .responseTooLarge: "response too large"
            case .insecureURL: "insecure URL"
            case .invalidRequest: "invalid request"
            case .shutdown: "transport shut down"
            case .other: "network failure"
            }
        }
    }

    /// What failed, what to do next, the error underneath and where it was thrown.
    public let details: ErrorDetails<Code>
    /// The underlying transport's own code (libcurl's `CURLcode`), when there is one.
    public let transportCode: Int?
    /// Whether any of the request was written to the connection before it failed: `false` when
    /// the transport knows none was (no host, no connection, a timeout before sending), so the
    /// server cannot have acted on it; `true` when it may have (the answer was lost); `nil` when
    /// the transport cannot tell. `AuthService` never sends a refresh token again after a failure
    /// that may have reached the provider.
    package var requestSent: Bool?

    /// A network failure; transports put their own code in `transportCode` and keep request
    /// details that may hold a secret out of `message`.
    public init(
        _ code: Code, _ message: String, transportCode: Int? = nil, underlying: (any Error)? = nil,
        file: String = #fileID, line: Int = #line
    ) {
        self.details = ErrorDetails(code, message, underlying: underlying, file: file, line: line)
        self.transportCode = transportCode
    }

    public var description: String {
        var text = "NetworkError(\(code)): \(message)"
        if let transportCode { text += " [transport code \(transportCode)]" }
        return text
    }
}
