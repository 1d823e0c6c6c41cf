#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

extension ClientCredentialsTokens {
    /// Sends `request` (with `body`) authorized with `target`'s access token, over the API's
    /// transport, and returns the response: `Authorization: Bearer <token>`, or for DPoP-bound
    /// tokens `Authorization: DPoP <token>` and a fresh `DPoP` proof.
    ///
    /// The token is the one ``credentials(for:minimumValidity:)`` hands out. On a 401:
    /// `use_dpop_nonce` with a new `DPoP-Nonce` → sent once more with that nonce; `invalid_token` →
    /// the token is dropped (``invalidate(_:for:)``), a new one is requested (once, whoever asks)
    /// and the request is sent once more — except for a token obtained that way less than 30 s
    /// before, refused again: its 401 is returned; `insufficient_user_authentication` → a
    /// `LoginRequiredError` `.stepUpRequired`. Any other response is returned as it is, and so is
    /// the answer to the last retry: a request is sent at most three times. Nothing is logged.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` when the request carries its own
    ///   `Authorization` or `DPoP` field or names no absolute http(s) URL, or when the API cannot
    ///   send requests (nothing was sent then); what ``credentials(for:minimumValidity:)`` and
    ///   ``invalidate(_:for:)`` throw; `NetworkError` when no response came.
    public func send(_ request: HTTPRequest, body: Data? = nil, for target: TokenTarget = TokenTarget()) async throws -> (HTTPResponse, Data) {
        let loop = try AuthorizedRequestLoop(api: api, clock: clock, profile: Self.profileName(base: baseProfile, target: target))
        return try await loop.send(
            request, body: body,
            credentials: { try await self.credentials(for: target) },
            replacing: { rejected, sentAt in try await self.replacement(for: rejected, sentAt: sentAt, target: target) })
    }
}
