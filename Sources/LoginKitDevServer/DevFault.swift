// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
/// A failure the dev server injects into the next request for a path, for tests of error handling.
public enum DevFault: Sendable, Hashable {
    /// Answer with this status and a JSON error body (`{"error":"server_error"}` style).
    case status(Int)
    /// Answer 400 with the OAuth error `code` (`authorization_pending`, `slow_down`, `invalid_grant`…).
    case oauthError(String)
    /// Answer 429 with `Retry-After: seconds`.
    case tooManyRequests(retryAfter: Int)
    /// Wait this long, then handle the request normally.
    case delay(milliseconds: Int)
    /// Answer 200 with a body that is not JSON.
    case malformedBody
    /// Answer 200 with a JSON body cut short.
    case truncatedBody
    /// Answer with this status and an HTML error page.
    case htmlErrorPage(Int)
    /// Answer 200 with JSON labelled `text/plain`.
    case wrongContentType
    /// Answer 200 with a body of this many bytes.
    case hugeBody(bytes: Int)
    /// Close the connection without answering.
    case dropConnection
    /// Answer normally, but with this flaw in the ID token issued (token endpoint, JSON login).
    case forgedIDToken(IDTokenForgery)

    /// What is wrong with a forged ID token.
    public enum IDTokenForgery: String, Sendable, Hashable, CaseIterable {
        /// Signed by a key the issuer's JWKS does not have (its own `kid`).
        case unknownKey
        /// `alg: none` and no signature.
        case algNone
        /// Correctly signed, expired an hour ago.
        case expired
        /// Correctly signed, another issuer.
        case wrongIssuer
        /// Correctly signed, for another client.
        case wrongAudience
    }
}
#endif
