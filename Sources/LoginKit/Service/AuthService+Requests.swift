#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes
import Logging

extension AuthService {
    /// Sends `request` (with `body`) authorized with the profile's access token, over the API's
    /// transport, and returns the response: `Authorization: Bearer <token>`, or for DPoP-bound
    /// credentials `Authorization: DPoP <token>` and a fresh `DPoP` proof (RFC 9449: the method,
    /// the URL, the token's hash and the nonce the server last asked for).
    ///
    /// The token is the one ``validCredentials(minimumValidity:)`` hands out. On a 401:
    /// - `WWW-Authenticate: DPoP error="use_dpop_nonce"` with a new `DPoP-Nonce`: sent once more,
    ///   with that nonce.
    /// - `error="invalid_token"`: the token is refreshed — once, shared with every other caller and
    ///   process, like every refresh; a caller whose token was already replaced takes the new one —
    ///   and the request is sent once more. A token a refresh for such a refusal brought is not
    ///   refreshed again for 30 s: refused within them, the `401` is returned as it is.
    /// - `error="insufficient_user_authentication"` (RFC 9470): a `LoginRequiredError`
    ///   `.stepUpRequired` whose `acrValues` and `maxAge` say what the server asked for.
    ///
    /// Any other response, whatever its status, is returned as it is, and so is the answer to the
    /// last retry: a request is sent at most three times. The server's `DPoP-Nonce` is remembered
    /// from every response. Nothing is logged with a value: no token, proof or header.
    ///
    /// - Parameters:
    ///   - request: an absolute `http` or `https` request (scheme and authority set) without an
    ///     `Authorization` or `DPoP` field: the service adds those.
    ///   - body: the request's body, sent again as it is on a retry.
    /// - Throws: `LoginError` `.invalidConfiguration` when the request carries its own
    ///   `Authorization` or `DPoP` field or names no absolute http(s) URL, or when the API cannot
    ///   send requests (only `OAuth2API` can); nothing was sent then. `LoginRequiredError`
    ///   `.stepUpRequired`, and what ``validCredentials(minimumValidity:)`` throws;
    ///   `NetworkError` when no response came. Cancelling the caller cancels its request.
    public nonisolated(nonsending) func send(_ request: HTTPRequest, body: Data? = nil) async throws -> (HTTPResponse, Data) {
        let loop = try AuthorizedRequestLoop(api: api, clock: clock, profile: profileName, logger: logger, metadata: ["profile": "\(profileName)"])
        return try await loop.send(
            request, body: body,
            credentials: { try await self.validCredentials(minimumValidity: .zero) },
            replacing: { try await self.validCredentials(rejecting: $0, sentAt: $1) })
    }
}
