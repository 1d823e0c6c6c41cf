#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import LoginKitJOSE

/// What a login or a refresh returned: tokens, their expiry, scope and issuer, and for
/// sender-constrained tokens (DPoP, RFC 9449) the key they are bound to.
///
/// `description` (and so `String(reflecting:)`, `debugPrint` and `dump`) says which tokens are
/// present, when they expire and whether they are DPoP-bound, never their values or the key.
public struct Credentials: Sendable, Hashable, Codable, CustomStringConvertible, CustomReflectable {
    /// The ID token; `nil` when the provider issued none (some password grants don't).
    public var idToken: IDToken?
    /// The access token, when there is one.
    public var accessToken: String?
    /// The refresh token, when there is one.
    public var refreshToken: String?
    /// The access token's type: `Bearer`, or `DPoP` for a token bound to the credentials' DPoP key.
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
    /// The DPoP key (RFC 9449) the tokens were requested with: every request with them, and every
    /// refresh, carries a proof signed by it. Stored with the tokens (sealed with them in a sealed
    /// store); `nil` for bearer credentials.
    package var proofKey: DPoPKey?

    /// The JWK SHA-256 thumbprint (RFC 7638) of the DPoP key the tokens are bound to: what a bound
    /// access token's `cnf.jkt` holds. `nil` when the credentials have no DPoP key.
    public var proofKeyThumbprint: String? { proofKey?.thumbprint }

    /// Whether the access token is DPoP-bound: the credentials have a key and the provider issued a
    /// `DPoP` token (a provider that ignores the proof issues `Bearer`).
    package var isDPoPBound: Bool { proofKey != nil && tokenType?.lowercased() == "dpop" }

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
        case idTokenExpiresAt = "id_token_expires_at", issuedAt = "issued_at", proofKey = "dpop_key"
    }

    public var description: String {
        var parts: [String] = []
        parts.append("id token: \(idToken == nil ? "none" : "present")")
        parts.append("access token: \(accessToken == nil ? "none" : "present")")
        parts.append("refresh token: \(refreshToken == nil ? "none" : "present")")
        if let expiresAt { parts.append("expires at \(expiresAt.timeIntervalSince1970)") }
        if proofKey != nil { parts.append("DPoP-bound") }
        return "Credentials(\(parts.joined(separator: ", ")))"
    }

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
