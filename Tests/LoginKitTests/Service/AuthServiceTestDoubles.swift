import Foundation
import LoginKit
import LoginKitHTTP
import LoginKitJOSE

/// Shared values for the `AuthService` tests driven by `MockAuthAPI` and `ManualClock`.
enum Race {
    static let t0 = Date(timeIntervalSince1970: 1_900_000_000)
    static let source = CredentialSource(kind: .oauth2, endpoint: "https://issuer.test", clientID: "mock")

    /// Credentials number `n`, issued at `issuedAt`, living `lifetime` seconds.
    static func credentials(_ n: Int, issuedAt: Date, lifetime: TimeInterval = 3600, idToken: IDToken? = nil) -> Credentials {
        Credentials(
            idToken: idToken, accessToken: "access-\(n)", refreshToken: "refresh-\(n)", tokenType: "Bearer",
            expiresAt: issuedAt.addingTimeInterval(lifetime), issuedAt: issuedAt)
    }

    static func profile(_ credentials: Credentials, source: CredentialSource = source, userID: String = "alice") -> StoredProfile {
        StoredProfile(credentials: credentials, source: source, userID: userID, updatedAt: credentials.issuedAt ?? t0)
    }

    /// An unsigned JWT with these claims (the service decodes refreshed ID tokens' claims; the
    /// API verified their signature before).
    static func idToken(sub: String, iss: String = "https://issuer.test", aud: String = "mock") -> IDToken {
        let header = Base64URL.encode(Array(#"{"alg":"RS256"}"#.utf8))
        let payload = Base64URL.encode(Array(#"{"iss":"\#(iss)","sub":"\#(sub)","aud":"\#(aud)","exp":4102444800}"#.utf8))
        return IDToken(rawValue: "\(header).\(payload).c2ln")
    }
}

/// A store around an `InMemoryTokenStore` whose reads and transactions can be made to fail, or
/// held until the test releases them.
final class ScriptedStore: TokenStore {
    let inner: InMemoryTokenStore
    private struct State {
        var failingReads: [Bool] = []
        var failingTransactions: [Bool] = []
        var holdNextRead = false
        var heldRead: CheckedContinuation<Void, Never>?
        var readArrived = false
        var arrivalWaiter: CheckedContinuation<Void, Never>?
    }
    private let state = LockedState(State())

    init(_ profiles: [String: StoredProfile] = [:]) {
        inner = InMemoryTokenStore(profiles: profiles)
    }

    /// The next reads fail (`true`) or pass (`false`), in order; then they pass.
    func scriptReads(_ failures: [Bool]) { state.withLock { $0.failingReads = failures } }
    /// The next transactions fail or pass, in order; then they pass.
    func scriptTransactions(_ failures: [Bool]) { state.withLock { $0.failingTransactions = failures } }

    /// Holds the next read until ``releaseRead()``.
    func holdNextRead() {
        state.withLock {
            $0.holdNextRead = true
            $0.readArrived = false
        }
    }

    /// Returns once the held read has arrived.
    func heldReadArrived() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let arrived = state.withLock { state -> Bool in
                if state.readArrived { return true }
                state.arrivalWaiter = waiter
                return false
            }
            if arrived { waiter.resume() }
        }
    }

    func releaseRead() {
        state.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state.heldRead = nil }
            return state.heldRead
        }?.resume()
    }

    static let unavailable = TokenStoreError(.unavailable, path: "scripted", "the scripted store is unavailable")

    func profile(named name: String) async throws -> StoredProfile? {
        let (fail, hold) = state.withLock { state -> (Bool, Bool) in
            let fail = state.failingReads.isEmpty ? false : state.failingReads.removeFirst()
            defer { state.holdNextRead = false }
            return (fail, state.holdNextRead)
        }
        if hold {
            await withCheckedContinuation { (held: CheckedContinuation<Void, Never>) in
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    state.heldRead = held
                    state.readArrived = true
                    defer { state.arrivalWaiter = nil }
                    return state.arrivalWaiter
                }
                waiter?.resume()
            }
        }
        if fail { throw Self.unavailable }
        return try await inner.profile(named: name)
    }

    func profileNames() async throws -> [String] {
        try await inner.profileNames()
    }

    nonisolated(nonsending) func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        let fail = state.withLock { $0.failingTransactions.isEmpty ? false : $0.failingTransactions.removeFirst() }
        if fail { throw Self.unavailable }
        return try await inner.withExclusiveAccess(body)
    }
}

/// A client-credentials API that answers at once, and an API that cannot revoke.
struct ImmediateClientAPI: ClientCredentialsAPI {
    let source = Race.source
    let issued: Credentials
    func logIn(for id: User.ID, with password: String) async throws -> Credentials { issued }
    func refresh(_ credentials: Credentials) async throws -> Credentials { issued }
    func revoke(_ credentials: Credentials) async throws -> Bool { false }
    func clientCredentials(scope: String?) async throws -> Credentials { issued }
}
