#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
package import HTTPTypes
import LoginKitJOSE

/// The header fields that authorize a request to a resource server with an access token: RFC 6750
/// `Authorization: Bearer <token>`, or for DPoP-bound credentials (RFC 9449 §7.1)
/// `Authorization: DPoP <token>` and a `DPoP` proof made for this request (`htm`, `htu`, `iat`,
/// `jti`, the origin's nonce, and `ath`, the token's hash).
package enum ResourceAuthorization {
    /// The header fields to add for `credentials` on `method` `url`: `Authorization` (Bearer or
    /// DPoP) and, for DPoP-bound credentials, `DPoP` with the nonce `nonces` holds for the origin.
    ///
    /// - Throws: `LoginRequiredError` `.noAccessToken` when the credentials hold no access token;
    ///   `TokenVerificationError` when the proof cannot be signed or `url` is not absolute http(s).
    package static func headers(for credentials: Credentials, method: String, url: String, nonces: DPoPNonces, now: Date) throws -> HTTPFields {
        try headers(for: credentials, method: method, url: url, nonce: credentials.isDPoPBound ? nonces.nonce(for: url) : nil, now: now, profile: nil)
    }

    /// ``headers(for:method:url:nonces:now:)`` with the proof's `nonce` given (what the caller
    /// compares a `use_dpop_nonce` answer's new nonce with), and the `profile` errors name.
    static func headers(for credentials: Credentials, method: String, url: String, nonce: String?, now: Date, profile: String?) throws -> HTTPFields {
        guard let accessToken = credentials.accessToken else {
            throw LoginRequiredError(.noAccessToken, profile: profile, "the provider issued no access token for this profile, so no request can be authorized with it")
        }
        var fields = HTTPFields()
        if credentials.isDPoPBound, let key = credentials.proofKey {
            fields[.authorization] = "DPoP " + accessToken
            fields[.dpop] = try key.proof(method: method, url: url, nonce: nonce, accessToken: accessToken, now: now)
        } else {
            fields[.authorization] = "Bearer " + accessToken
        }
        return fields
    }
}
