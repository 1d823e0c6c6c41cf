package import LoginKitHTTP

/// An API whose transport also carries the caller's own requests with the tokens it issued
/// (`AuthService.send(_:body:)`, `ClientCredentialsTokens.send(_:body:for:)`): the transport, and
/// the DPoP nonces its origins asked for, shared with its token requests.
package protocol AuthorizedRequestAPI: AuthAPI {
    /// The transport the API sends over. Authorized requests go through its `send(_:body:)`: they
    /// carry no one-time credential, so a transport may send them again.
    var httpTransport: any HTTPTransport { get }
    /// The last `DPoP-Nonce` each origin sent (RFC 9449 §8, §9), for the proofs of the API's token
    /// requests and of the authorized requests alike.
    var dpopNonces: DPoPNonces { get }
}
