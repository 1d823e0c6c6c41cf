import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

// What the DPoP, PAR and authorized-request tests share: an API with DPoP on, the dev server's
// resource and counters, JWT payloads read without checks, and a transport that records what
// LoginKit sends.

/// The fixture's API (same issuer, client and scope) with DPoP on: every login makes a fresh key of
/// `algorithm`. `transport` replaces the fixture's client; `configure` changes the rest.
func dpopAPI(
    _ fixture: Fixture, algorithm: JWSAlgorithm = .es256, transport: (any HTTPTransport)? = nil,
    configure: (inout OAuth2API.Configuration) -> Void = { _ in }
) -> OAuth2API {
    var configuration = fixture.api.configuration
    configuration.dpopAlgorithm = algorithm
    configure(&configuration)
    let clock = fixture.clock
    return OAuth2API(configuration: configuration, transport: transport ?? fixture.client, now: { clock.now })
}

/// A service for the default profile of `store` (the fixture's by default) over `api`, on the
/// fixture's clock with the standard test configuration.
func dpopService(_ fixture: Fixture, api: OAuth2API, store: (any TokenStore)? = nil) -> AuthService {
    AuthService(api: api, store: store ?? fixture.store, clock: fixture.clock, configuration: Fixture.serviceConfiguration)
}

/// Part `index` of a compact JWS (0: the header, 1: the payload) as JSON, without any check.
func jwsPartJSON(_ token: String, _ index: Int) throws -> JSONValue {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    try #require(parts.count == 3, "not a compact JWS")
    let bytes = try #require(Base64URL.decode(parts[index]), "not base64url")
    return try JSONValue.parse(bytes)
}

/// The `cnf.jkt` of an access token (RFC 9449 §6.1): the thumbprint of the key it is bound to.
func confirmationThumbprint(of accessToken: String?) throws -> String? {
    guard let accessToken else { return nil }
    return try jwsPartJSON(accessToken, 1)["cnf"]?["jkt"]?.stringValue
}

/// Checks that `credentials` are bound to their proof key: token type `DPoP`, and the access token's
/// `cnf.jkt` is the key's thumbprint.
func expectDPoPBound(_ credentials: Credentials, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let thumbprint = try #require(credentials.proofKeyThumbprint, "no proof key", sourceLocation: sourceLocation)
    #expect(credentials.proofKey?.thumbprint == thumbprint, sourceLocation: sourceLocation)
    #expect(credentials.tokenType == "DPoP", sourceLocation: sourceLocation)
    #expect(try confirmationThumbprint(of: credentials.accessToken) == thumbprint, "cnf.jkt", sourceLocation: sourceLocation)
}

/// The JSON the dev server's `/api/resource` answers.
func resourceAnswer(_ body: Data) throws -> JSONValue {
    try JSONValue.parse(Array(body))
}

extension Fixture {
    /// `method` on the dev server's protected resource, `/api/resource`, with `query` (`?…`) appended.
    func resourceRequest(_ method: HTTPRequest.Method = .get, query: String = "") throws -> HTTPRequest {
        try #require(HTTPRequest(method: method, url: server.url("/api/resource") + query))
    }

    /// Requests that reached `/api/resource`.
    var resourceRequestCount: Int { server.monitor.requestCount(path: "/api/resource") }
    /// Requests that reached the PAR endpoint.
    var parRequestCount: Int { server.monitor.requestCount(path: "/oauth/par") }
    /// `use_dpop_nonce` challenges the dev server has sent (token endpoint, PAR and resource).
    var nonceChallengeCount: Int { server.monitor.dpopNonceChallenges }
}

/// Forwards every request to `base` and records it with its response head, in the order the
/// responses arrive. Requests `base` must never resend go through its `sendNeverResent`, as they
/// would without the recorder.
final class DPoPExchangeRecorder: HTTPTransport, NeverResendingTransport, PrefersTaskExecutor {
    struct Exchange: Sendable {
        let request: HTTPRequest
        let body: Data?
        /// `nil` when no response arrived.
        let response: HTTPResponse?
    }

    let base: CurlHTTPClient
    private let recorded = LockedState<[Exchange]>([])

    init(base: CurlHTTPClient) { self.base = base }

    /// Everything sent so far.
    var exchanges: [Exchange] { recorded.withLock { $0 } }
    var preferredTaskExecutor: (any TaskExecutor)? { base.preferredTaskExecutor }

    func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        try await record(request, body) { try await base.send(request, body: body) }
    }

    func sendNeverResent(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        try await record(request, body) { try await base.sendNeverResent(request, body: body) }
    }

    private func record(
        _ request: HTTPRequest, _ body: Data?, _ send: () async throws -> (HTTPResponse, Data)
    ) async throws -> (HTTPResponse, Data) {
        do {
            let (response, data) = try await send()
            recorded.withLock { $0.append(Exchange(request: request, body: body, response: response)) }
            return (response, data)
        } catch {
            recorded.withLock { $0.append(Exchange(request: request, body: body, response: nil)) }
            throw error
        }
    }
}

extension DPoPExchangeRecorder.Exchange {
    /// Whether the response asked for a (new) nonce: 400 or 401 with a `DPoP-Nonce` header
    /// (RFC 9449 §8, §9).
    var isNonceChallenge: Bool {
        guard let response, response.status.code == 400 || response.status.code == 401 else { return false }
        return response.headerFields[.dpopNonce] != nil
    }
}
