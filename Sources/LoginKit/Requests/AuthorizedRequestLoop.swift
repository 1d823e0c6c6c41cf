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
/// - The request goes over the API's transport (its `send(_:body:)`, which may resend: the request
///   carries no one-time credential) with ``ResourceAuthorization``'s header fields.
/// - Every response's `DPoP-Nonce` is remembered for its origin.
/// - A 401 whose `WWW-Authenticate` says (RFC 9470) `insufficient_user_authentication` throws
///   `LoginRequiredError` `.stepUpRequired` with the `acr_values` and `max_age` asked for.
/// - A 401 with a `DPoP` challenge `error="use_dpop_nonce"` and a usable `DPoP-Nonce` other than
///   the one sent: the request is sent again, once, with a proof carrying the new nonce.
/// - A 401 with `error="invalid_token"`: the token is replaced (once) and the request sent again;
///   when the replacement brings the same token, the 401 is returned.
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
    /// `replacing(token)`, which answers credentials whose access token is not `token` (or the same
    /// ones when it could not replace it).
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` when `request` already carries an
    ///   `Authorization` or `DPoP` field, or does not name an absolute http(s) URL (nothing sent);
    ///   `LoginRequiredError` `.stepUpRequired` (and what `credentials` and `replacing` throw);
    ///   `NetworkError` and `CancellationError` from the transport.
    package nonisolated(nonsending) func send(
        _ request: HTTPRequest, body: Data?,
        credentials: @Sendable () async throws -> Credentials,
        replacing: @Sendable (_ rejectedAccessToken: String) async throws -> Credentials
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
        while true {
            let nonce = current.isDPoPBound ? nonces.nonce(for: url) : nil
            let fields = try ResourceAuthorization.headers(
                for: current, method: request.method.rawValue, url: url, nonce: nonce, now: clock.now, profile: profile)
            var authorized = request
            authorized.headerFields.append(contentsOf: fields)
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
                retriedWithNonce = true
                logger?.debug("the resource server asked for a DPoP nonce; sending the request again with it", metadata: metadata)
                continue
            }
            if !replacedToken, let rejected = current.accessToken,
                challenges.contains(where: { $0.parameters["error"] == "invalid_token" })
            {
                replacedToken = true
                let replacement = try await replacing(rejected)
                guard replacement.accessToken != rejected else {
                    logger?.debug("the resource server refused the access token and no new one could be had; returning its answer", metadata: metadata)
                    return (response, data)
                }
                current = replacement
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
