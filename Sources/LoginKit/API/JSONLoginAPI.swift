#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
public import LoginKitHTTP
import LoginKitJOSE

/// The simple login shape: `POST {"id": …, "password": …}` → `{"id_token": …}` (field names and the
/// URL configurable). 401/403 (or 400 with an error body) mean the credentials were rejected.
///
/// ID tokens are verified with ``Configuration/verifier`` before they are returned, and a
/// configuration without a verifier is refused (`LoginError` `.verifierRequired`, before the
/// password is sent) unless it opts out with ``IDTokenVerification/unverifiedOpaqueTokens``.
/// There is no refresh: when the ID token expires, `refresh` throws `LoginRequiredError`
/// `.cannotRefresh`.
public struct JSONLoginAPI: AuthAPI, PrefersTaskExecutor {
    /// Whether an ID token may be returned without being verified.
    public enum IDTokenVerification: Sendable, Hashable {
        /// Every ID token is verified with ``Configuration/verifier``; without a verifier, `logIn`
        /// throws `LoginError` `.verifierRequired` and sends nothing. The default.
        case required
        /// Without a verifier, ID tokens are returned unverified. Only for an API whose tokens are
        /// opaque to this client: the client stores and forwards them, the service they are for
        /// verifies them, and nothing on this side trusts what they say. Anyone who can answer the
        /// login request (a spoofed or compromised server) can then return any token, `alg: none`
        /// included. The `Credentials` returned have no `issuer`; the expiry is read, unchecked, from
        /// the token when it is a JWT; a `User` built from the token shows claims nobody checked.
        case unverifiedOpaqueTokens
    }

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
        /// Verifies returned ID tokens: the issuer's keys (its `jwks_uri`, from OIDC discovery), the
        /// issuer and the audience (the client ID). Required unless ``idTokenVerification`` opts out.
        public var verifier: IDTokenVerifier?
        /// Whether ID tokens may be returned unverified when there is no ``verifier``. Default
        /// `.required`.
        public var idTokenVerification: IDTokenVerification = .required

        /// Posts to `loginURL`; returned ID tokens are verified with `verifier`, which is required
        /// unless ``idTokenVerification`` opts out.
        public init(loginURL: String, verifier: IDTokenVerifier? = nil) {
            self.loginURL = loginURL
            self.verifier = verifier
        }
    }

    /// The configuration.
    package let configuration: Configuration
    private let endpoint: TokenEndpoint

    /// The transport's executor (`PrefersTaskExecutor`), if it has one: `AuthService` runs its
    /// shared refresh there.
    package var preferredTaskExecutor: (any TaskExecutor)? {
        (endpoint.transport as? any PrefersTaskExecutor)?.preferredTaskExecutor
    }
    private let now: @Sendable () -> Date

    /// An API that posts to `configuration.loginURL` over `transport`.
    public init(configuration: Configuration, transport: any HTTPTransport) {
        self.init(configuration: configuration, transport: transport, now: { Date() })
    }

    /// An API whose time source is `now`, as for the other APIs (the expiry comes from the verified
    /// token).
    package init(configuration: Configuration, transport: any HTTPTransport, now: @escaping @Sendable () -> Date) {
        self.configuration = configuration
        self.endpoint = TokenEndpoint(transport: transport)
        self.now = now
    }

    public var source: CredentialSource {
        CredentialSource(kind: .jsonLogin, endpoint: configuration.loginURL)
    }

    private var host: String { URLParts(configuration.loginURL)?.host ?? configuration.loginURL }

    /// Posts the ID and password; returns the verified ID token.
    ///
    /// - Throws: `LoginError` `.verifierRequired` (nothing sent) when there is no verifier and
    ///   no opt-out; `LoginError`, `ServerError`, `NetworkError`; `TokenVerificationError` when the ID
    ///   token does not verify.
    public func logIn(for id: User.ID, with password: String) async throws -> Credentials {
        let verifier = configuration.verifier
        if verifier == nil && configuration.idTokenVerification == .required {
            throw LoginError(
                .verifierRequired,
                "JSONLoginAPI has no ID token verifier: set Configuration.verifier (the issuer's keys from OIDC discovery), "
                    + "or Configuration.idTokenVerification = .unverifiedOpaqueTokens for an API whose tokens this client never trusts"
            )
        }
        let body = JSONValue.object([configuration.idField: .string(id.rawValue), configuration.passwordField: .string(password)])
        let (response, json, _) = try await endpoint.send(
            configuration.loginURL, origin: .configuration("JSONLoginAPI.Configuration.loginURL"), method: .post,
            headers: [.contentType: "application/json", .accept: "application/json"],
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
        if let verifier {
            let claims = try await verifier.verify(token).claims
            let expiry = claims.expiresAt.map(Date.init(timeIntervalSince1970:))
            return Credentials(idToken: IDToken(rawValue: token), refreshToken: nil, expiresAt: expiry, issuer: claims.issuer, idTokenExpiresAt: expiry)
        }
        // Opted out: the token is opaque to this client. Keep it; trust nothing it says (no issuer).
        let unverifiedClaims = try? JWTClaims(payload: CompactJWS(parsing: token).payload)
        let expiry = unverifiedClaims?.expiresAt.map(Date.init(timeIntervalSince1970:))
        return Credentials(idToken: IDToken(rawValue: token), refreshToken: nil, expiresAt: expiry, issuer: nil, idTokenExpiresAt: expiry)
    }

    public func refresh(_ credentials: Credentials) async throws -> Credentials {
        throw LoginRequiredError(.cannotRefresh, profile: nil, "the JSON login API has no refresh; log in again")
    }

    /// The JSON login API has no revocation: always `false`.
    public func revoke(_ credentials: Credentials) async throws -> Bool { false }
}
