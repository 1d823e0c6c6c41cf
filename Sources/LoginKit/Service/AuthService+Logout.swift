/// What ``AuthService/logOut()`` did.
public struct LogoutResult: Sendable, CustomStringConvertible {
    /// What happened at the provider.
    public enum Revocation: Sendable, Hashable {
        /// The provider revoked the tokens (RFC 7009 or the API's own call).
        case revoked
        /// No profile was stored: nothing to revoke.
        case nothingToRevoke
        /// The API has no way to revoke (no revocation endpoint known: configure one); the old
        /// refresh token may still work at the provider until it expires.
        case unsupported
        /// Revocation failed; the reason holds no secret. The tokens may still work at the provider.
        case failed(reason: String)
        /// The provider did not answer within `revocationTimeout`.
        case timedOut
    }

    /// What happened at the provider.
    public let revocation: Revocation
    /// Whether the profile is gone from the store (false when the store could not be written:
    /// see `storeError`).
    public let profileRemoved: Bool
    /// Why the profile could not be read or removed, when that happened.
    public let storeError: TokenStoreError?

    /// A result: what happened at the provider and in the store.
    public init(revocation: Revocation, profileRemoved: Bool, storeError: TokenStoreError? = nil) {
        self.revocation = revocation
        self.profileRemoved = profileRemoved
        self.storeError = storeError
    }

    public var description: String {
        "LogoutResult(revocation: \(revocation), profileRemoved: \(profileRemoved)\(storeError.map { ", store: \($0)" } ?? ""))"
    }
}

extension AuthService {
    /// Logs out: cancels and awaits a running refresh, then — under the store's lock — revokes what
    /// is stored (bounded by `revocationTimeout`) and deletes the profile. From the moment it is
    /// called, no caller gets credentials from before it; a login that was under way is revoked.
    @discardableResult
    public func logOut() async -> LogoutResult {
        // From here on nothing from before the logout is served, not even from memory: the machine
        // has dropped the profiles it held.
        let action = machine.withLock { $0.logoutRequested() }
        defer { machine.withLock { $0.logoutFinished() } }
        proactiveRefresh?.cancel()
        proactiveRefresh = nil
        if case .start(cancelRefresh: let running?) = action {
            running.cancel()
            await running.value
        }
        let result: LogoutResult
        do {
            let revocation = try await store.withExclusiveAccess(to: profileName) { transaction -> LogoutResult.Revocation in
                guard let stored = transaction[profileName] else { return .nothingToRevoke }
                transaction[profileName] = nil
                guard isIssuedHere(stored.source) else {
                    // Never send one provider's tokens to another's revocation endpoint.
                    return .failed(reason: "the profile was issued by \(Self.describe(stored.source)); not revoked there by this service")
                }
                return await revokeBounded(stored.credentials)
            }
            result = LogoutResult(revocation: revocation, profileRemoved: true, storeError: nil)
            logger.debug("logged out", metadata: logMetadata.merging(["revocation": "\(revocation)"]) { $1 })
        } catch {
            let storeError = error as? TokenStoreError
            result = LogoutResult(revocation: .failed(reason: "the store could not be read: \(error)"), profileRemoved: false, storeError: storeError)
            logger.warning("logout could not remove the profile", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
        }
        updateDiagnostics { $0 = AuthDiagnostics(); $0.loginRequired = true }
        eventBroadcaster.emit(.loggedOut)
        return result
    }

    /// Revokes `credentials` at the provider, waiting at most `revocationTimeout`.
    func revokeBounded(_ credentials: Credentials) async -> LogoutResult.Revocation {
        let api = self.api
        let clock = self.clock
        let timeout = configuration.revocationTimeout
        return await withTaskGroup(of: LogoutResult.Revocation?.self) { group in
            group.addTask {
                do {
                    return try await api.revoke(credentials) ? .revoked : .unsupported
                } catch is CancellationError {
                    return nil
                } catch {
                    return .failed(reason: "\(error)")
                }
            }
            group.addTask {
                do { try await clock.sleep(for: timeout) } catch { return nil }
                return .timedOut
            }
            defer { group.cancelAll() }
            while let next = await group.next() {
                if let next { return next }
            }
            return .failed(reason: "cancelled")
        }
    }
}
