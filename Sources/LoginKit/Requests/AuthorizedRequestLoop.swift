#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
package import HTTPTypes
package import Logging
package import LoginKitHTTP

/// A caller's request sent with an access token, and what a 401 makes of it: the one loop behind
/// `AuthService.send(_:body:)` and `ClientCredentialsTokens.send(_:body:for:)`, which differ only in
/// where credentials come from and how a refused token is replaced.
///
/// - The request goes over the API's transport with ``ResourceAuthorization``'s header fields. The
///   transport's `send(_:body:)` may resend it on a fresh connection: the access token is reusable,
///   but a server with a DPoP replay cache answers the resend of a request it processed with 401
///   `invalid_dpop_proof`, which is returned as it is (`AuthorizedRequestAPI.httpTransport`).
/// - Every response's `DPoP-Nonce` is remembered for its origin.
/// - A 401 whose `WWW-Authenticate` says (RFC 9470) `insufficient_user_authentication` throws
///   `LoginRequiredError` `.stepUpRequired` with the `acr_values` and `max_age` asked for.
/// - A 401 with a `DPoP` challenge `error="use_dpop_nonce"` and a usable `DPoP-Nonce` other than
///   the one sent: the request is sent again, once, with a proof carrying the new nonce.
/// - A 401 with `error="invalid_token"`: the token is replaced (once) and the request sent again.
///   The replacement is asked with the time the refused request was sent: credentials issued
///   after it are not what was refused, even with the same token (a provider may issue it again).
///   When the replacement is what was refused (the same token, issued no later than that: nothing
///   could replace it, or it was itself obtained for a refusal less than 30 s ago), the 401 is
///   returned.
/// - Any other response, and the answer to the last allowed retry, is returned as it is. So a
///   request is sent at most three times.
///
/// Never logs a token, a proof or a header value: the retries are logged at debug, without values.
package struct AuthorizedRequestLoop: Sendable {
    /// The transport the API sends over.
    package let transport: any HTTPTransport
    /// The API's DPoP nonces, per origin.
    package let nonces: DPoPNonces
    /// The time proofs are stamped with.
    package let clock: any AuthClock
    /// The profile the credentials are kept under, named in errors.
    package let profile: String?
    /// Where retries are logged (debug, no values), when somewhere.
    package let logger: Logger?
    /// What each log line carries.
    package let metadata: Logger.Metadata

    /// A loop over `api`'s transport and nonces.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` when `api` cannot send authorized requests
    ///   (it does not say which transport it uses).
    package init(api: any AuthAPI, clock: any AuthClock, profile: String?, logger: Logger? = nil, metadata: Logger.Metadata = [:]) throws {
        guard let authorized = api as? any AuthorizedRequestAPI else {
            throw LoginError(
                .invalidConfiguration,
                "\(type(of: api)) cannot send requests with the tokens it issues: use an API that sends over a transport of its own (OAuth2API); nothing was sent")
        }
        self.transport = authorized.httpTransport
        self.nonces = authorized.dpopNonces
        self.clock = clock
        self.profile = profile
        self.logger = logger
        self.metadata = metadata
    }

    /// Sends `request` (with `body`) authorized with `credentials()`; on `invalid_token`, with
    /// `replacing(token, sentAt)` — `sentAt`: when the refused request was sent — which answers
    /// credentials that are not what was refused (or the same ones when it could not, or would not,
    /// replace them).
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` when `request` already carries an
    ///   `Authorization` or `DPoP` field, or does not name an absolute http(s) URL (nothing sent);
    ///   `LoginRequiredError` `.stepUpRequired` (and what `credentials` and `replacing` throw);
    ///   `NetworkError` and `CancellationError` from the transport.
    package nonisolated(nonsending) func send(
        _ request: HTTPRequest, body: Data?,
        credentials: @Sendable () async throws -> Credentials,
        replacing: @Sendable (_ rejectedAccessToken: String, _ sentAt: Date) async throws -> Credentials
    ) async throws -> (HTTPResponse, Data) {
        guard request.headerFields[.authorization] == nil, request.headerFields[.dpop] == nil else {
            throw LoginError(
                .invalidConfiguration,
                "the request already carries an Authorization or DPoP header field, which LoginKit would replace with the profile's: remove it, or send the request without LoginKit; nothing was sent")
        }
        guard let url = request.urlString, URLParts(url) != nil else {
            throw LoginError(.invalidConfiguration, "the request does not name an absolute http or https URL (a scheme and an authority); nothing was sent")
        }
        var current = try await credentials()
        var retriedWithNonce = false
        var replacedToken = false
        // The nonce a challenge just offered: the retry proves with it, whatever another response
        // to the same origin stored meanwhile.
        var offeredNonce: String?
        while true {
            let nonce = current.isDPoPBound ? (offeredNonce ?? nonces.nonce(for: url)) : nil
            offeredNonce = nil
            let fields = try ResourceAuthorization.headers(
                for: current, method: request.method.rawValue, url: url, nonce: nonce, now: clock.now, profile: profile)
            var authorized = request
            authorized.headerFields.append(contentsOf: fields)
            // Credentials issued after this are not what a refusal of this request refused.
            let sentAt = clock.now
            let (response, data) = try await transport.send(authorized, body: body)
            nonces.remember(response, for: url)
            guard response.status.code == 401 else { return (response, data) }

            let challenges = AuthorizationChallenge.parse(response.headerFields[values: .wwwAuthenticate])
            if let stepUp = challenges.first(where: { $0.parameters["error"] == "insufficient_user_authentication" }) {
                throw LoginRequiredError.stepUpRequired(
                    profile: profile, acrValues: stepUp.parameters["acr_values"].flatMap { $0.isEmpty ? nil : $0 },
                    maxAge: Self.maxAge(stepUp.parameters["max_age"]))
            }
            if !retriedWithNonce, current.isDPoPBound,
                challenges.contains(where: { $0.hasScheme("DPoP") && $0.parameters["error"] == "use_dpop_nonce" }),
                let offered = DPoPNonces.nonce(in: response), offered != nonce
            {
                // A cancelled caller starts no further attempt.
                try Task.checkCancellation()
                retriedWithNonce = true
                offeredNonce = offered
                logger?.debug("the resource server asked for a DPoP nonce; sending the request again with it", metadata: metadata)
                continue
            }
            if !replacedToken, let rejected = current.accessToken,
                challenges.contains(where: { $0.parameters["error"] == "invalid_token" })
            {
                // A cancelled caller starts no refresh (which would rotate the refresh token for nothing).
                try Task.checkCancellation()
                replacedToken = true
                let replacement = try await replacing(rejected, sentAt)
                guard !TokenRejection(accessToken: rejected, sentAt: sentAt).holds(replacement) else {
                    logger?.debug("the resource server refused the access token and no other one is to be had now; returning its answer", metadata: metadata)
                    return (response, data)
                }
                current = replacement
                try Task.checkCancellation()
                logger?.debug("the resource server refused the access token; sending the request again with a new one", metadata: metadata)
                continue
            }
            return (response, data)
        }
    }

    /// RFC 9470 `max_age`: a non-negative integer of seconds, else `nil`.
    static func maxAge(_ value: String?) -> Int? {
        guard let value, !value.isEmpty, value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(value)
    }
}
