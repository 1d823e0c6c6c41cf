#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import LoginKitHTTP
public import LoginKitJOSE

/// The simple login shape: `POST {"id": …, "password": …}` → `{"id_token": …}` (field names and the
/// URL configurable). 401/403 (or 400 with an error body) mean the credentials were rejected.
///
/// With ``Configuration/verifier`` set, the ID token is verified before it is returned; without one
/// it is only decoded (the API has no keys to check it with). There is no refresh: when the ID token
/// expires, `refresh` throws `LoginRequiredError` `.cannotRefresh`.
public struct JSONLoginAPI: AuthAPI {
    /// Where to post and what the fields are called.
    public struct Configuration: Sendable {
        /// The login URL.
        public var loginURL: String
        /// The request field holding the user ID. Default `id`.
        public var idField = "id"
        /// The request field holding the password. Default `password`.
        public var passwordField = "password"
        /// The response field holding the ID token. Default `id_token`.
        public var idTokenField = "id_token"
        /// Verifies returned ID tokens when set.
        public var verifier: IDTokenVerifier?

        /// A `Configuration` from its parts; see each property for what it means.
        public init(loginURL: String, verifier: IDTokenVerifier? = nil) {
            self.loginURL = loginURL
            self.verifier = verifier
        }
    }

    /// The configuration.
    public let configuration: Configuration
    private let endpoint: TokenEndpoint
    private let now: @Sendable () -> Date

    /// A `JSONLoginAPI` from its parts; see each property for what it means.
    public init(configuration: Configuration, transport: any HTTPTransport, now: @escaping @Sendable () -> Date = { Date() }) {
        self.configuration = configuration
        self.endpoint = TokenEndpoint(transport: transport)
        self.now = now
    }

    public var source: CredentialSource {
        CredentialSource(kind: .jsonLogin, endpoint: configuration.loginURL)
    }

    private var host: String { URLParts(configuration.loginURL)?.host ?? configuration.loginURL }

    public func logIn(for id: User.ID, with password: String) async throws -> Credentials {
        let body = JSONValue.object([configuration.idField: .string(id.rawValue), configuration.passwordField: .string(password)])
        let (response, json, _) = try await endpoint.send(
            configuration.loginURL, method: .post, headers: [.contentType: "application/json", .accept: "application/json"],
            body: Data(body.serialized.utf8)
        )
        let status = response.status.code
        if status == 401 || status == 403 {
            throw LoginError(.invalidCredentials, "the user ID or password was rejected", providerError: TokenEndpoint.oauthError(json)?.error)
        }
        if let error = TokenEndpoint.error(for: response, json: json, grant: .password, host: host) { throw error }
        try TokenEndpoint.requireJSON(response, host: host)
        guard let token = json?[configuration.idTokenField]?.stringValue, !token.isEmpty else {
            throw ServerError(.malformedResponse, "\(host)'s login response has no \"\(configuration.idTokenField)\"")
        }
        let claims = try await configuration.verifier?.verify(token).claims ?? JWTClaims(payload: CompactJWS(parsing: token).payload)
        let expiry = claims.expiresAt.map(Date.init(timeIntervalSince1970:))
        return Credentials(
            idToken: IDToken(rawValue: token), refreshToken: nil, expiresAt: expiry,
            issuer: claims.issuer, idTokenExpiresAt: expiry
        )
    }

    public func refresh(_ credentials: Credentials) async throws -> Credentials {
        throw LoginRequiredError(.cannotRefresh, profile: "", "the JSON login API has no refresh; log in again")
    }

    public func revoke(_ credentials: Credentials) async throws {}
}
