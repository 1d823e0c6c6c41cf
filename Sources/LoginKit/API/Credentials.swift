#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// What a login or a refresh returned: tokens, their expiry, scope and issuer.
///
/// `description` says which tokens are present and when they expire, never their values.
public struct Credentials: Sendable, Hashable, Codable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The ID token; `nil` when the provider issued none (some password grants don't).
    public var idToken: IDToken?
    /// The access token, when there is one.
    public var accessToken: String?
    /// The refresh token, when there is one.
    public var refreshToken: String?
    /// The access token's type (`Bearer`).
    public var tokenType: String?
    /// When the access token (or, without one, the ID token) expires.
    public var expiresAt: Date?
    /// The granted scope, space-separated.
    public var scope: String?
    /// The issuer that granted them.
    public var issuer: String?
    /// When the ID token expires (its `exp`).
    public var idTokenExpiresAt: Date?
    /// When this process (or the one that saved them) received them: the start of their lifetime,
    /// which the refresh decision measures windows against (docs/refresh.md).
    package var issuedAt: Date?

    /// Credentials as a provider issued them; every field is optional, since providers differ in
    /// what they send (no ID token on a password grant, no refresh token, no expiry).
    public init(
        idToken: IDToken? = nil, accessToken: String? = nil, refreshToken: String? = nil, tokenType: String? = nil,
        expiresAt: Date? = nil, scope: String? = nil, issuer: String? = nil, idTokenExpiresAt: Date? = nil,
        issuedAt: Date? = nil
    ) {
        self.issuedAt = issuedAt
        self.idTokenExpiresAt = idTokenExpiresAt
        self.idToken = idToken
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scope = scope
        self.issuer = issuer
    }

    enum CodingKeys: String, CodingKey {
        case idToken = "id_token", accessToken = "access_token", refreshToken = "refresh_token"
        case tokenType = "token_type", expiresAt = "expires_at", scope, issuer
        case idTokenExpiresAt = "id_token_expires_at", issuedAt = "issued_at"
    }

    public var description: String {
        var parts: [String] = []
        parts.append("id token: \(idToken == nil ? "none" : "present")")
        parts.append("access token: \(accessToken == nil ? "none" : "present")")
        parts.append("refresh token: \(refreshToken == nil ? "none" : "present")")
        if let expiresAt { parts.append("expires at \(expiresAt.timeIntervalSince1970)") }
        return "Credentials(\(parts.joined(separator: ", ")))"
    }

    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

extension Credentials {
    /// The expiry, or for credentials whose response named none, `lifetimeWithoutExpiry` after
    /// they were received (`nil` when that is unknown too).
    package func expiry(orAfterReceipt lifetimeWithoutExpiry: Duration?) -> Date? {
        expiresAt ?? lifetimeWithoutExpiry.flatMap { lifetime in issuedAt?.addingTimeInterval(lifetime.timeInterval) }
    }

    /// When a cache stops serving these credentials: `margin` plus `minimumValidity` before
    /// ``expiry(orAfterReceipt:)``, the two together capped at half the lifetime (so a freshly
    /// issued token always serves); `nil` when there is no expiry to go by.
    package func replacementTime(margin: Duration, minimumValidity: Duration = .zero, lifetimeWithoutExpiry: Duration? = nil) -> Date? {
        guard let expiry = expiry(orAfterReceipt: lifetimeWithoutExpiry) else { return nil }
        var required = margin.timeInterval + minimumValidity.timeInterval
        if let issuedAt { required = min(required, expiry.timeIntervalSince(issuedAt) / 2) }
        return expiry.addingTimeInterval(-required)
    }
}
