#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitHTTP
package import LoginKitJOSE

extension OAuth2API {
    /// The claims the provider's userinfo endpoint (OpenID Connect Core §5.3) returns for
    /// `credentials`' access token: one `GET`, authorized as every request with these credentials
    /// is (``ResourceAuthorization``: `Bearer`, or `DPoP` with a proof by the credentials' key; a
    /// `use_dpop_nonce` challenge is answered once). No refresh is made: a refused token is an error.
    ///
    /// The answer is the provider's word, read as JSON and not verified: a caller that holds an ID
    /// token takes it only when its `sub` is the ID token's (OpenID Connect Core §5.3.4). A signed
    /// (`application/jwt`) answer is not read.
    ///
    /// - Throws: `ServerError` `.misconfigured` when the provider offers no userinfo endpoint (set
    ///   ``Endpoints/userinfo``) or advertises one that is no absolute http(s) URL,
    ///   `.unexpectedStatus` for a status other than 200, `.malformedResponse` for a body that is
    ///   not a JSON object; `LoginError` `.invalidConfiguration` for a configured endpoint that is
    ///   no absolute http(s) URL; `LoginRequiredError` `.noAccessToken` when the credentials hold no
    ///   access token; `TokenVerificationError` when a proof cannot be signed; `NetworkError`; and
    ///   what discovery throws.
    package func userInfo(for credentials: Credentials) async throws -> [String: JSONValue] {
        let metadata = try await metadata()
        guard let url = metadata.userinfoEndpoint else {
            throw ServerError(.misconfigured, "\(host) offers no userinfo endpoint; set OAuth2API.Configuration.endpoints.userinfo if it has one")
        }
        guard let request = HTTPRequest(method: .get, url: url, headerFields: [.accept: "application/json"]) else {
            if configuration.endpoints.userinfo != nil {
                throw LoginError(
                    .invalidConfiguration, "OAuth2API.Configuration.endpoints.userinfo \(TokenEndpoint.quoted(url: url)) is not an absolute http(s) URL")
            }
            throw ServerError(.misconfigured, "\(host)'s userinfo_endpoint \(TokenEndpoint.quoted(url: url)) is not an absolute http(s) URL")
        }
        let loop = try AuthorizedRequestLoop(api: self, clock: APIClock(read: now), profile: nil)
        let (response, body) = try await loop.send(request, body: nil, credentials: { credentials }, replacing: { _, _ in credentials })
        guard response.status.code == 200 else {
            throw ServerError(.unexpectedStatus, "\(host)'s userinfo endpoint answered HTTP \(response.status.code)", status: response.status.code)
        }
        guard let claims = (try? JSONValue.parse(Array(body)))?.objectValue else {
            throw ServerError(.malformedResponse, "\(host)'s userinfo endpoint did not answer with a JSON object", status: response.status.code)
        }
        return claims
    }
}

/// The API's time (``OAuth2API/now``), for the proofs of its own authorized requests.
private struct APIClock: AuthClock {
    let read: @Sendable () -> Date

    var now: Date { read() }

    func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}
