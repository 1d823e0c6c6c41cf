#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Credentials handed to many callers at once, by reference: a storm's callers each retain this
/// one object instead of every string in the credentials (a retain and a release apiece, on cache
/// lines both cores write), and take out only the token they asked for.
final class SharedCredentials: Sendable {
    let credentials: Credentials
    /// The credentials' expiries, read without touching their strings.
    private let expiresAt: Date?
    private let idTokenExpiresAt: Date?

    init(_ credentials: Credentials) {
        self.credentials = credentials
        expiresAt = credentials.expiresAt
        idTokenExpiresAt = credentials.idTokenExpiresAt
    }

    /// The expiry a caller asking for `kind` cares about.
    func expiry(of kind: TokenKind) -> Date? {
        kind.expiry(expiresAt: expiresAt, idTokenExpiresAt: idTokenExpiresAt)
    }
}

/// A profile held in memory to be served again: its credentials, shared by every caller they are
/// handed to, and the dates the refresh decision reads. Made once per profile read or saved; the
/// state machine keeps it as the remembered and the last known profile.
struct HeldProfile: Sendable {
    let credentials: SharedCredentials
    let timing: TokenTiming

    init(_ profile: StoredProfile) {
        credentials = SharedCredentials(profile.credentials)
        timing = TokenTiming(profile)
    }
}
