// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import LoginKitHTTP

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The authorization endpoint's state: pushed authorization requests (RFC 9126), authorization
/// requests whose sign-in form is showing, and the codes issued for them. A pushed request and a
/// code are each taken once; presenting one again finds nothing. Expired entries are swept as new
/// ones arrive, and pushed requests are capped.
final class AuthorizationCodes: Sendable {
    /// A validated authorization request waiting for the user to sign in or deny.
    struct PendingRequest: Sendable, DevExpiring {
        let clientID: String
        let redirectURI: String
        let state: String?
        let nonce: String?
        let codeChallenge: String
        let scope: String
        /// The thumbprint of the DPoP key the code is bound to (RFC 9449 §10).
        let dpopJKT: String?
        /// The `acr` the tokens will carry.
        let acr: String
        /// The `max_age` asked for (OIDC Core §3.1.2.1).
        let maxAge: Int?
        let expiresAt: Date
    }

    /// An authorization code and what it was issued for.
    struct IssuedCode: Sendable, DevExpiring {
        let clientID: String
        let redirectURI: String
        let codeChallenge: String
        let nonce: String?
        let scope: String
        let username: String
        /// The thumbprint of the DPoP key the exchange's proof must use, when bound.
        let dpopJKT: String?
        let acr: String
        let maxAge: Int?
        /// When the user signed in.
        let authTime: Date
        let expiresAt: Date
    }

    /// An authorization request pushed to `/oauth/par`: its parameters, for the client that pushed it.
    struct PushedRequest: Sendable, DevExpiring {
        let clientID: String
        let fields: [String: String]
        let expiresAt: Date
    }

    /// The most pushed requests pending at once.
    static let maximumPushed = 10_000

    private struct State {
        var pushed = ExpiringRecords<PushedRequest>()
        var pending = ExpiringRecords<PendingRequest>()
        var codes = ExpiringRecords<IssuedCode>()
    }
    private let state = LockedState(State())

    /// Keeps `request` under `requestURI`; `false` when `maximumPushed` unexpired requests are pending.
    func push(_ request: PushedRequest, as requestURI: String, now: Date) -> Bool {
        state.withLock { state in
            let full = state.pushed.count >= Self.maximumPushed
            state.pushed.sweep(now: now, force: full)
            guard state.pushed.count < Self.maximumPushed else { return false }
            state.pushed.insert(request, for: requestURI, now: now)
            return true
        }
    }

    /// Takes the pushed request `requestURI` out, unless unknown or expired at `now`: each is used once.
    func takePushed(_ requestURI: String, now: Date) -> PushedRequest? {
        state.withLock { state in
            guard let request = state.pushed.removeValue(forKey: requestURI), request.expiresAt > now else { return nil }
            return request
        }
    }

    /// Keeps `request` under a new random ID (the sign-in form's hidden field).
    func addPending(_ request: PendingRequest, now: Date) -> String {
        let id = IdentityProvider.randomToken(bytes: 18)
        state.withLock { $0.pending.insert(request, for: id, now: now) }
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
    func issue(_ code: IssuedCode, now: Date) -> String {
        let value = IdentityProvider.randomToken()
        state.withLock { $0.codes.insert(code, for: value, now: now) }
        return value
    }

    /// Takes `code` out: the first presentation gets it, every later one `nil`, whatever the outcome
    /// of the exchange (a code is single use, RFC 6749 §4.1.2).
    func redeem(_ code: String) -> IssuedCode? {
        state.withLock { $0.codes.removeValue(forKey: code) }
    }
}
#endif
