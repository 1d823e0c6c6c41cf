// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import LoginKitHTTP

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The authorization endpoint's state: authorization requests whose sign-in form is showing, and the
/// codes issued for them. A code is redeemed once; presenting it again finds nothing.
final class AuthorizationCodes: Sendable {
    /// A validated authorization request waiting for the user to sign in or deny.
    struct PendingRequest: Sendable {
        let clientID: String
        let redirectURI: String
        let state: String?
        let nonce: String?
        let codeChallenge: String
        let scope: String
        let expiresAt: Date
    }

    /// An authorization code and what it was issued for.
    struct IssuedCode: Sendable {
        let clientID: String
        let redirectURI: String
        let codeChallenge: String
        let nonce: String?
        let scope: String
        let username: String
        let expiresAt: Date
    }

    private struct State {
        var pending: [String: PendingRequest] = [:]
        var codes: [String: IssuedCode] = [:]
    }
    private let state = LockedState(State())

    /// Keeps `request` under a new random ID (the sign-in form's hidden field).
    func addPending(_ request: PendingRequest) -> String {
        let id = IdentityProvider.randomToken(bytes: 18)
        state.withLock { $0.pending[id] = request }
        return id
    }

    /// The pending request `id`, unless unknown or expired at `now`.
    func pending(_ id: String, now: Date) -> PendingRequest? {
        state.withLock { state in
            guard let request = state.pending[id] else { return nil }
            guard request.expiresAt > now else {
                state.pending[id] = nil
                return nil
            }
            return request
        }
    }

    /// Forgets the pending request `id` (signed in or denied).
    func removePending(_ id: String) {
        state.withLock { $0.pending[id] = nil }
    }

    /// Issues a new code for `code`'s request.
    func issue(_ code: IssuedCode) -> String {
        let value = IdentityProvider.randomToken()
        state.withLock { $0.codes[value] = code }
        return value
    }

    /// Takes `code` out: the first presentation gets it, every later one `nil`, whatever the outcome
    /// of the exchange (a code is single use, RFC 6749 §4.1.2).
    func redeem(_ code: String) -> IssuedCode? {
        state.withLock { $0.codes.removeValue(forKey: code) }
    }
}
#endif
