#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
public import LoginKitHTTP
import HTTPTypes
import LoginKitJOSE

/// Amazon Cognito user pools: `InitiateAuth` with `USER_PASSWORD_AUTH` and `REFRESH_TOKEN_AUTH`,
/// `RevokeToken`; ID tokens verified against `<pool>/.well-known/jwks.json`.
///
/// `NotAuthorizedException` and `UserNotFoundException` are rejected credentials; throttling is a
/// rate limit; a challenge (`NEW_PASSWORD_REQUIRED`, MFA) is `LoginError` `.challengeRequired`.
/// App clients with a secret (`SECRET_HASH`) are not supported yet. The region and pool ID become
/// part of host names and URLs, so every call first checks them.
public struct CognitoAPI: AuthAPI, PrefersTaskExecutor {
    /// The pool and the app client.
    public struct Configuration: Sendable {
        /// The user pool ID, e.g. `eu-west-1_AbCdEf123`.
        public var poolID: String
        /// The app client ID.
        public var clientID: String
        /// The region, e.g. `eu-west-1`: an AWS region name, checked before it becomes a host name.
        public var region: String
        /// The service endpoint; default `https://cognito-idp.<region>.amazonaws.com`. Tests point it
        /// at moto.
        public var endpoint: String?
        /// Whether ID tokens are verified against the pool's keys. Default `true`.
        public var verifiesIDTokens = true

        /// The pool `poolID` and app client `clientID` in `region`, at `endpoint` when given (moto in
        /// tests). Nothing is checked here; every call of the API checks them first.
        public init(poolID: String, clientID: String, region: String, endpoint: String? = nil) {
            self.poolID = poolID
            self.clientID = clientID
            self.region = region
            self.endpoint = endpoint
        }

        /// Checks the values that become part of host names and URLs: `region` must be an AWS region
        /// name (`eu-west-1`, `us-gov-west-1`, `us-isob-east-1`, …) and `poolID` a pool ID
        /// (letters, digits, `-` and `_`). Every call of the API runs this first.
        ///
        /// - Throws: `LoginError` `.invalidConfiguration` naming the setting.
        package func validate() throws(LoginError) {
            guard Self.isAWSRegion(region) else {
                throw LoginError(
                    .invalidConfiguration,
                    "the Cognito region \"\(printableExcerpt(region))\" is not an AWS region name such as eu-west-1"
                )
            }
            guard !poolID.isEmpty, poolID.utf8.count <= 64,
                poolID.utf8.allSatisfy({ Self.isASCIILetterOrDigit($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") })
            else {
                throw LoginError(
                    .invalidConfiguration,
                    "the Cognito pool ID \"\(printableExcerpt(poolID))\" is not a pool ID such as eu-west-1_AbCdEf123"
                )
            }
        }

        /// `^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]+$`, at most 32 bytes.
        static func isAWSRegion(_ region: String) -> Bool {
            guard region.utf8.count <= 32 else { return false }
            let parts = region.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3 || parts.count == 4 else { return false }
            func lowercaseLetters(_ part: Substring) -> Bool {
                !part.isEmpty && part.utf8.allSatisfy { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }
            }
            let last = parts[parts.count - 1]
            guard parts[0].utf8.count == 2, lowercaseLetters(parts[0]), lowercaseLetters(parts[parts.count - 2]),
                !last.isEmpty, last.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            else { return false }
            if parts.count == 4 {
                let partition = parts[1]
                guard partition == "gov" || (partition.hasPrefix("iso") && lowercaseLetters(partition)) else { return false }
            }
            return true
        }

        private static func isASCIILetterOrDigit(_ byte: UInt8) -> Bool {
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
        }

        var serviceURL: String {
            let base = endpoint ?? "https://cognito-idp.\(region).amazonaws.com"
            return base.hasSuffix("/") ? String(base.dropLast()) : base
        }

        /// The `iss` of the pool's tokens (always the AWS form, also under moto).
        var issuer: String { "https://cognito-idp.\(region).amazonaws.com/\(poolID)" }
    }

    /// The configuration.
    package let configuration: Configuration
    private let endpoint: TokenEndpoint

    /// The transport's executor (`PrefersTaskExecutor`), if it has one: `AuthService` runs its
    /// shared refresh there.
    package var preferredTaskExecutor: (any TaskExecutor)? {
        (endpoint.transport as? any PrefersTaskExecutor)?.preferredTaskExecutor
    }
    private let verifier: IDTokenVerifier?
    private let now: @Sendable () -> Date

    /// An API for `configuration`'s pool over `transport`; ID tokens are checked against the pool's
    /// keys (unless `verifiesIDTokens` is off).
    public init(configuration: Configuration, transport: any HTTPTransport) {
        self.init(configuration: configuration, transport: transport, now: { Date() })
    }

    /// An API whose expiries and ID-token checks take the time from `now`.
    package init(configuration: Configuration, transport: any HTTPTransport, now: @escaping @Sendable () -> Date) {
        self.configuration = configuration
        self.endpoint = TokenEndpoint(transport: transport)
        self.now = now
        if configuration.verifiesIDTokens {
            let keys = JWKSSource(url: "\(configuration.serviceURL)/\(configuration.poolID)/.well-known/jwks.json", transport: transport, now: now)
            verifier = IDTokenVerifier(configuration: .init(issuer: configuration.issuer, audience: configuration.clientID), keys: keys, now: now)
        } else {
            verifier = nil
        }
    }

    public var source: CredentialSource {
        CredentialSource(
            kind: .cognito, endpoint: configuration.serviceURL, clientID: configuration.clientID,
            poolID: configuration.poolID, region: configuration.region
        )
    }

    private var host: String { URLParts(configuration.serviceURL)?.host ?? configuration.serviceURL }

    public func logIn(for id: User.ID, with password: String) async throws -> Credentials {
        try configuration.validate()
        let result = try await call("InitiateAuth", [
            "AuthFlow": .string("USER_PASSWORD_AUTH"), "ClientId": .string(configuration.clientID),
            "AuthParameters": .object(["USERNAME": .string(id.rawValue), "PASSWORD": .string(password)]),
        ], refreshing: false)
        return try await credentials(from: result, previous: nil)
    }

    public func refresh(_ credentials: Credentials) async throws -> Credentials {
        try configuration.validate()
        guard let refreshToken = credentials.refreshToken else {
            throw LoginRequiredError(.cannotRefresh, profile: nil, "the credentials have no refresh token; log in again")
        }
        let result = try await call("InitiateAuth", [
            "AuthFlow": .string("REFRESH_TOKEN_AUTH"), "ClientId": .string(configuration.clientID),
            "AuthParameters": .object(["REFRESH_TOKEN": .string(refreshToken)]),
        ], refreshing: true)
        return try await self.credentials(from: result, previous: credentials)
    }

    /// `RevokeToken` on the refresh token. Where the pool does not offer it (token revocation off
    /// for the client, or an emulator without it), falls back to `GlobalSignOut` with the access
    /// token, which also ends the user's other sessions.
    /// Tokens the pool already refuses (`NotAuthorizedException`: revoked, or the user signed out
    /// everywhere) count as revoked.
    @discardableResult
    public func revoke(_ credentials: Credentials) async throws -> Bool {
        try configuration.validate()
        if let refreshToken = credentials.refreshToken {
            do {
                _ = try await call("RevokeToken", ["Token": .string(refreshToken), "ClientId": .string(configuration.clientID)], refreshing: true)
                return true
            } catch let error as ServerError where credentials.accessToken != nil
                && (error.status == 500 || error.providerError == "UnsupportedOperationException" || error.providerError == "UnsupportedTokenTypeException")
            {
                // fall through to GlobalSignOut
            } catch let error as LoginError where error.code == .refreshTokenRejected {
                // NotAuthorizedException: the refresh token is already invalid at the provider
                // (revoked, or the user signed out everywhere) — what revoking it was for (as an
                // invalid token is answered 200 by RFC 7009 §2.2).
                return true
            }
        }
        guard let accessToken = credentials.accessToken else { return false }
        do {
            _ = try await call("GlobalSignOut", ["AccessToken": .string(accessToken)], refreshing: true)
        } catch let error as LoginError where error.code == .refreshTokenRejected {
            // NotAuthorizedException: the user's tokens are already signed out at the provider.
        }
        return true
    }

    private func credentials(from result: JSONValue, previous: Credentials?) async throws -> Credentials {
        if let challenge = result["ChallengeName"]?.stringValue {
            throw LoginError(.challengeRequired, "Cognito asks for the \(printableExcerpt(challenge)) challenge, which LoginKit does not perform")
        }
        guard let authentication = result["AuthenticationResult"] else {
            throw ServerError(.malformedResponse, "\(host)'s InitiateAuth response has no AuthenticationResult")
        }
        var fields: [String: JSONValue] = [:]
        for (from, to) in [("AccessToken", "access_token"), ("IdToken", "id_token"), ("RefreshToken", "refresh_token"), ("TokenType", "token_type"), ("ExpiresIn", "expires_in")] {
            if let value = authentication[from] { fields[to] = value }
        }
        return try await TokenEndpoint.credentials(
            from: .object(fields), host: host, issuer: configuration.issuer, now: now(), verifier: verifier, previous: previous
        )
    }

    /// One AWS JSON 1.1 call; Cognito's `__type` errors become typed errors.
    private func call(_ action: String, _ body: [String: JSONValue], refreshing: Bool) async throws -> JSONValue {
        let target = HTTPField.Name("X-Amz-Target") ?? .accept
        let origin = configuration.endpoint == nil ? "CognitoAPI.Configuration.region" : "CognitoAPI.Configuration.endpoint"
        let (response, json, _) = try await endpoint.send(
            configuration.serviceURL + "/", origin: .configuration(origin), method: .post,
            headers: [.contentType: "application/x-amz-json-1.1", target: "AWSCognitoIdentityProviderService.\(action)"],
            body: Data(JSONValue.object(body).serialized.utf8),
            carriesOneTimeCredential: refreshing && action == "InitiateAuth"
        )
        let status = response.status.code
        if (200..<300).contains(status) {
            guard let json else { throw ServerError(.malformedResponse, "\(host) sent a response that is not JSON") }
            return json
        }
        let type = json?["__type"]?.stringValue.map { TokenEndpoint.printable(String($0.split(separator: "#").last ?? ""), limit: 64) } ?? ""
        switch type {
        case "NotAuthorizedException", "UserNotFoundException":
            throw refreshing
                ? LoginError(.refreshTokenRejected, "Cognito rejected the refresh token; log in again", providerError: type)
                : LoginError(.invalidCredentials, "Cognito rejected the user name or password", providerError: type)
        case "PasswordResetRequiredException", "UserNotConfirmedException":
            throw LoginError(.challengeRequired, "Cognito requires an account step first (\(type))", providerError: type)
        case "TooManyRequestsException", "LimitExceededException":
            throw ServerError(.rateLimited, "Cognito is throttling requests (\(type))", status: status, providerError: type)
        case "ResourceNotFoundException", "InvalidParameterException":
            throw ServerError(.misconfigured, "Cognito refused the request (\(type)); check the pool and client IDs", status: status, providerError: type)
        default:
            if status >= 500 {
                throw ServerError(.unavailable, "Cognito failed (HTTP \(status)); try again later", status: status, providerError: type.isEmpty ? nil : type)
            }
            throw ServerError(.protocolError, "Cognito answered HTTP \(status)\(type.isEmpty ? "" : " (\(type))")", status: status, providerError: type.isEmpty ? nil : type)
        }
    }
}
