package import LoginKitHTTP

/// An API whose transport also carries the caller's own requests with the tokens it issued
/// (`AuthService.send(_:body:)`, `ClientCredentialsTokens.send(_:body:for:)`): the transport, and
/// the DPoP nonces its origins asked for, shared with its token requests.
package protocol AuthorizedRequestAPI: AuthAPI {
    /// The transport the API sends over. Authorized requests go through its `send(_:body:)`, which
    /// may send a request again on a fresh connection when a reused one turned out dead: the
    /// access token is reusable, but a DPoP proof's `jti` is single-use at a server with a replay
    /// cache, so such a resend of a request the server did process comes back as 401
    /// `invalid_dpop_proof`, returned to the caller as it is (docs/dpop.md).
    var httpTransport: any HTTPTransport { get }
    /// The last `DPoP-Nonce` each origin sent (RFC 9449 §8, §9), for the proofs of the API's token
    /// requests and of the authorized requests alike.
    var dpopNonces: DPoPNonces { get }
}
