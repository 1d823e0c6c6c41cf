#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension AuthService {
    public func logIn(for id: User.ID, with password: String) async throws -> User {
        let epoch = try beginLogin()
        defer { machine.withLock { $0.loginFinished(startedIn: epoch) } }
        logger.debug("login started", metadata: logMetadata.merging(["user": "\(id.rawValue)"]) { $1 })
        try await checkGate()
        try await checkStoreIsUsable()
        try checkNotOvertaken(startedIn: epoch)
        let credentials: Credentials
        do {
            credentials = try await api.logIn(for: id, with: password)
        } catch let error as LoginError where error.isProviderRejection {
            updateDiagnostics { $0.credentialsRejected = true }
            logger.notice("login rejected", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
            throw error
        } catch {
            logger.warning("login failed", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
            throw error
        }
        return try await saveLogin(credentials, loginID: id, startedIn: epoch)
    }

    /// Logs in with the device authorization grant (RFC 8628): `prompt` shows the user code and
    /// URI; the service then polls at the provider's interval (+5 s on `slow_down`) until approval,
    /// denial or expiry. Runs through ``workflows``, so prompts never interleave; when the step's
    /// turn comes and valid credentials already exist, it returns that user without prompting.
    ///
    /// - Throws: `LoginError` (`.loginInProgress`; `.accessDenied`, `.deviceCodeExpired`;
    ///   `.invalidConfiguration` when the API has no device flow), `ServerError` `.misconfigured` when the
    ///   provider offers no device endpoint, and what ``logIn(for:with:)`` throws.
    public func logInWithDevice(scope: String? = nil, prompt: @escaping @Sendable (DeviceAuthorization) async -> Void) async throws -> User {
        guard let api = api as? any DeviceAuthorizationAPI else {
            throw LoginError(.invalidConfiguration, "the configured API does not support the device authorization grant")
        }
        let result = try await workflows.run(
            isNeeded: { ((try? await self.currentUser()) ?? nil) == nil },
            perform: { try await self.runDeviceLogin(api: api, scope: scope, prompt: prompt) }
        )
        if let result { return result }
        guard let user = try await currentUser() else { throw notLoggedIn() }
        return user
    }

    private func runDeviceLogin(api: any DeviceAuthorizationAPI, scope: String?, prompt: @Sendable (DeviceAuthorization) async -> Void) async throws -> User {
        let epoch = try beginLogin()
        defer { machine.withLock { $0.loginFinished(startedIn: epoch) } }
        try await checkGate()
        try await checkStoreIsUsable()
        try checkNotOvertaken(startedIn: epoch)
        let authorization = try await api.startDeviceAuthorization(scope: scope)
        await prompt(authorization)
        var interval = authorization.interval
        while true {
            // The provider chooses the interval: never sleep past the code's expiry.
            try await clock.sleep(for: min(interval, max(.zero, Duration(timeInterval: authorization.expiresAt.timeIntervalSince(clock.now)))))
            guard clock.now < authorization.expiresAt else {
                throw LoginError(.deviceCodeExpired, "the device code expired before it was approved; start again")
            }
            switch try await api.pollDeviceAuthorization(authorization) {
            case .pending: continue
            case .slowDown: interval += .seconds(5)
            case .authorized(let credentials):
                return try await saveLogin(credentials, loginID: User.ID(rawValue: authorization.userCode), startedIn: epoch)
            }
        }
    }

    /// Logs the client itself in (client credentials grant), for services. The profile's user is
    /// the client ID. With an `OAuth2API` whose configuration sets `assertionGrantSource`, the
    /// JWT-bearer grant with the source's token instead; either way, the profile is renewed by the
    /// same grant when its token expires (the source is asked again).
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` when the API has no client-credentials grant, and
    ///   what ``logIn(for:with:)`` throws.
    @discardableResult
    public func logInAsClient(scope: String? = nil) async throws -> User {
        guard let api = api as? any ClientCredentialsAPI else {
            throw LoginError(.invalidConfiguration, "the configured API does not support the client credentials grant")
        }
        let epoch = try beginLogin()
        defer { machine.withLock { $0.loginFinished(startedIn: epoch) } }
        try await checkGate()
        try await checkStoreIsUsable()
        try checkNotOvertaken(startedIn: epoch)
        let credentials = try await api.clientCredentials(scope: scope)
        var attributes = ["grant": "client_credentials"]
        if let oauth2 = api as? OAuth2API {
            if let source = oauth2.configuration.assertionGrantSource {
                attributes["grant"] = "jwt_bearer"
                attributes["assertion_source"] = source.specification
            }
            if let source = oauth2.configuration.clientAssertionSource { attributes["client_assertion_source"] = source.specification }
        }
        if let scope { attributes["scope"] = scope }
        let clientID = User.ID(rawValue: api.source.clientID ?? "client")
        return try await saveLogin(credentials, loginID: clientID, attributes: attributes, usesIDTokenSubject: false, startedIn: epoch)
    }

    /// A logout that began while the login prepared means: send nothing.
    func checkNotOvertaken(startedIn epoch: UInt64) throws {
        guard machine.withLock({ $0.loginSucceeded(startedIn: epoch) }) == .save else {
            throw LoginRequiredError(.loggedOut, profile: profileName, "a logout began before the login was sent; nothing was sent")
        }
    }

    /// Asks the machine whether a login may start.
    func beginLogin() throws -> UInt64 {
        switch machine.withLock({ $0.loginRequested() }) {
        case .start(let epoch):
            return epoch
        case .refuse(let reason):
            logger.debug("login refused: \(reason)", metadata: logMetadata)
            throw LoginError(.loginInProgress, "a login or a logout is already under way; wait for its outcome")
        }
    }

    /// Fails before any credentials are sent when the store could not keep what the provider
    /// would issue (unsafe permissions, a sealed file without its key, a directory it cannot use).
    func checkStoreIsUsable() async throws {
        // A login exchanges a one-time credential (a password, a code): its result must be savable.
        try await store.withExclusiveAccess(to: profileName) { try $0.checkCanSave() }
    }

    /// Saves a login's credentials — with the attributes ``Configuration/attributesKeptAcrossLogins``
    /// names taken from the profile it replaces, in the same transaction — reports it and returns its
    /// user. When a logout began meanwhile or the save fails, the credentials are revoked (best
    /// effort) rather than left valid and unknown.
    func saveLogin(
        _ credentials: Credentials, loginID: User.ID, attributes: [String: String] = [:], usesIDTokenSubject: Bool = true,
        startedIn epoch: UInt64
    ) async throws -> User {
        var credentials = credentials
        credentials.issuedAt = clock.now  // received now
        guard machine.withLock({ $0.loginSucceeded(startedIn: epoch) }) == .save else {
            _ = await revokeBounded(credentials)
            throw LoginRequiredError(.loggedOut, profile: profileName, "a logout began during the login; the new credentials were revoked")
        }
        let userID = usesIDTokenSubject ? User(credentials: credentials, fallbackID: loginID).id : loginID
        let fresh = StoredProfile(credentials: credentials, source: api.source, userID: userID.rawValue, attributes: attributes, updatedAt: clock.now)
        let kept = configuration.attributesKeptAcrossLogins
        let written: StoredProfile?
        do {
            // Written under the store's lock only while no logout has begun: a logout deletes and
            // revokes under that same lock, so either it finds this profile or this save finds the
            // logout begun. The attributes a login keeps come from the profile as it is replaced.
            written = try await store.withExclusiveAccess(to: profileName) { transaction -> StoredProfile? in
                guard machine.withLock({ $0.mayHandOut(startedIn: epoch) }) else { return nil }
                var saved = fresh
                if let replaced = transaction[profileName] {
                    for name in kept where saved.attributes[name] == nil {
                        saved.attributes[name] = replaced.attributes[name]
                    }
                }
                transaction[profileName] = saved
                return saved
            }
        } catch {
            logger.error("the login's credentials could not be saved; revoking them", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
            _ = await revokeBounded(credentials)
            throw error
        }
        guard let profile = written else {
            _ = await revokeBounded(credentials)
            throw LoginRequiredError(.loggedOut, profile: profileName, "a logout began during the login; the new credentials were revoked")
        }
        let known = HeldProfile(profile)
        guard machine.withLock({ $0.loginSaved(known, startedIn: epoch) }) == .save else {
            // The logout that began after the save revokes and deletes what was saved: it takes
            // the store's lock after this save released it.
            throw LoginRequiredError(.loggedOut, profile: profileName, "a logout began during the login")
        }
        updateDiagnostics { $0 = AuthDiagnostics() }
        let user = User(profile: profile)
        logger.debug("logged in", metadata: logMetadata.merging(["user": "\(user.id.rawValue)", "idToken": "\(credentials.idToken != nil)"]) { $1 })
        eventBroadcaster.emit(.loggedIn(user))
        restartProactiveRefresh()
        return user
    }
}
