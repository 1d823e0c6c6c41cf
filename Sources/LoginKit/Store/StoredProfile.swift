#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// One named entry of a token store: the credentials and what is needed to refresh them later.
/// Never a password.
public struct StoredProfile: Sendable, Hashable, Codable {
    /// The current credentials.
    public var credentials: Credentials
    /// Which API issued them and how to reach it again.
    public var source: CredentialSource
    /// The user the credentials belong to, when known (`sub`, or the login ID).
    public var userID: String?
    /// Free-form values a host keeps beside the credentials (never secrets).
    public var attributes: [String: String]
    /// When this profile was last written.
    public var updatedAt: Date

    /// A profile holding `credentials` obtained from `source`, last written at `updatedAt`
    /// (default: now).
    public init(
        credentials: Credentials, source: CredentialSource, userID: String? = nil,
        attributes: [String: String] = [:], updatedAt: Date = Date()
    ) {
        self.credentials = credentials
        self.source = source
        self.userID = userID
        self.attributes = attributes
        self.updatedAt = updatedAt
    }

    enum CodingKeys: String, CodingKey {
        case credentials, source, attributes
        case userID = "user_id", updatedAt = "updated_at"
    }
}

/// Where credentials came from, with what a refresh needs: the API kind, its issuer or endpoint,
/// the client ID. Client secrets and passwords are never stored here.
public struct CredentialSource: Sendable, Hashable, Codable {
    /// The kind of API.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// OAuth 2.0 / OpenID Connect (`OAuth2API`).
        case oauth2
        /// The simple JSON login API (`JSONLoginAPI`).
        case jsonLogin = "json-login"
        /// Amazon Cognito user pools (`CognitoAPI`).
        case cognito
    }

    /// The kind of API.
    package var kind: Kind
    /// The issuer URL (OIDC), the login endpoint URL (JSON login) or the Cognito endpoint.
    package var endpoint: String
    /// The client ID, when the API has one.
    package var clientID: String?
    /// The Cognito user pool ID or other API-specific identifier.
    package var poolID: String?
    /// The AWS region, for Cognito.
    package var region: String?
    /// The scope asked for at login, reused on refresh.
    package var scope: String?

    /// The source of credentials; `AuthService` refreshes a stored profile only against the source
    /// it is configured with, so make these the values the API reports as its `source`.
    public init(kind: Kind, endpoint: String, clientID: String? = nil, poolID: String? = nil, region: String? = nil, scope: String? = nil) {
        self.kind = kind
        self.endpoint = endpoint
        self.clientID = clientID
        self.poolID = poolID
        self.region = region
        self.scope = scope
    }

    enum CodingKeys: String, CodingKey {
        case kind, endpoint, region, scope
        case clientID = "client_id", poolID = "pool_id"
    }
}

extension CredentialSource {
    /// Whether `other` names the same kind of API, endpoint (a trailing `/` aside) and client:
    /// only then may credentials from one be sent to the other (refresh, revocation, reuse).
    func isSameProvider(as other: CredentialSource) -> Bool {
        func normalized(_ endpoint: String) -> String { endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint }
        return kind == other.kind && normalized(endpoint) == normalized(other.endpoint) && clientID == other.clientID
    }
}
