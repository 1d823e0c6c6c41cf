#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Which expiry a caller cares about.
enum TokenKind: Sendable, Hashable {
    case any, idToken, accessToken

    func expiry(of credentials: Credentials) -> Date? {
        expiry(expiresAt: credentials.expiresAt, idTokenExpiresAt: credentials.idTokenExpiresAt)
    }

    func expiry(expiresAt: Date?, idTokenExpiresAt: Date?) -> Date? {
        switch self {
        case .any, .accessToken: expiresAt
        case .idToken: idTokenExpiresAt ?? expiresAt
        }
    }
}

/// The dates the refresh decision reads from a profile, without its strings: what the cached path
/// keeps beside the profile it serves, so that a storm's callers decide without copying the
/// profile (a retain and a release of every string in it, on cache lines both cores write).
struct TokenTiming: Sendable, Hashable {
    var expiresAt: Date?
    var idTokenExpiresAt: Date?
    /// When the credentials were issued: their own stamp, else the profile's last write.
    var issuedAt: Date
    /// When a forced refresh (a resource server refused the token before) brought them: the
    /// profile's ``AuthService/forcedRefreshAttribute``; `nil` for any other refresh or a login.
    var forcedRefreshAt: Date?

    init(_ profile: StoredProfile) {
        expiresAt = profile.credentials.expiresAt
        idTokenExpiresAt = profile.credentials.idTokenExpiresAt
        issuedAt = profile.credentials.issuedAt ?? profile.updatedAt
        forcedRefreshAt = profile.attributes[AuthService.forcedRefreshAttribute].flatMap { Int64($0) }.map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }

    /// The expiry a caller asking for `kind` cares about.
    func expiry(of kind: TokenKind) -> Date? {
        kind.expiry(expiresAt: expiresAt, idTokenExpiresAt: idTokenExpiresAt)
    }
}
