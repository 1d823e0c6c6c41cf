/// An API that supports the authorization code grant with PKCE (RFC 6749 §4.1, RFC 7636), the flow
/// behind a browser login. `OAuth2API` conforms; `BrowserLogin` drives it.
///
/// Concurrency contract: `Sendable`; every method may run concurrently.
package protocol AuthorizationCodeAPI: AuthAPI {
    /// A fresh authorization request for `redirectURI`: a new PKCE verifier, `state` and (when the
    /// scope has `openid`) `nonce`, a new DPoP key when the API binds tokens, and the URL to open
    /// (pushed to the provider first when the API uses PAR).
    ///
    /// - Throws: `ServerError` `.misconfigured` when the provider has no authorization endpoint or no
    ///   `S256`; `LoginError` `.invalidConfiguration` for a configured endpoint or options LoginKit refuses;
    ///   `NetworkError` from discovery; the provider's refusal of a pushed request.
    func authorizationRequest(redirectURI: String, options: AuthorizationOptions) async throws -> AuthorizationRequest

    /// Exchanges `code` (from a response already checked against `request`: `state`, `iss`) for
    /// credentials, sending the request's PKCE verifier, and checks the ID token's `nonce`.
    ///
    /// - Throws: `LoginError` when the provider refuses the code; `TokenVerificationError` for an ID
    ///   token that does not verify or carries another `nonce`; `ServerError`, `NetworkError`.
    func exchangeCode(_ code: String, for request: AuthorizationRequest) async throws -> Credentials
}

/// What an authorization request asks for besides what LoginKit always sends.
public struct AuthorizationOptions: Sendable {
    /// The scope; `nil` uses the API's (`OAuth2API.Configuration.scope`, or the one chosen from
    /// discovery when that is `nil`).
    public var scope: String?
    /// `login_hint`: the account to preselect (OIDC Core §3.1.2.1).
    public var loginHint: String?
    /// `prompt`: `login`, `consent`, `select_account`, `none` (space-separated).
    public var prompt: String?
    /// `acr_values`: the authentication context classes asked for.
    public var acrValues: String?
    /// `max_age` (OIDC Core §3.1.2.1): the most seconds since the user last authenticated that the
    /// provider may accept; an older session signs in again. What a resource server's step-up
    /// challenge names (RFC 9470). Negative values are refused when the request is built
    /// (`LoginError` `.invalidConfiguration`).
    public var maxAge: Int?
    /// More parameters, in order (`access_type=offline` for Google, `audience` for Auth0…). The ones
    /// LoginKit sets itself (`response_type`, `client_id`, `redirect_uri`, `scope`, `state`,
    /// `nonce`, `code_challenge`, `code_challenge_method`, `dpop_jkt`, `request_uri`) are refused.
    public var extraParameters: [(name: String, value: String)]

    /// Options for one browser login, all optional; extra parameters LoginKit sets itself are
    /// refused when the request is built.
    public init(
        scope: String? = nil, loginHint: String? = nil, prompt: String? = nil, acrValues: String? = nil, maxAge: Int? = nil,
        extraParameters: [(name: String, value: String)] = []
    ) {
        self.scope = scope
        self.loginHint = loginHint
        self.prompt = prompt
        self.acrValues = acrValues
        self.maxAge = maxAge
        self.extraParameters = extraParameters
    }
}
