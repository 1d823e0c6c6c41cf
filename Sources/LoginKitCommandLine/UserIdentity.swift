// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import LoginKit

/// Who a profile's user is, as the CLI names them: a display name — the first of
/// `preferred_username`, `name` and `email` — and the email. They come from the ID token's claims
/// or, when those name nobody, from the provider's userinfo endpoint; the `sub` stays the
/// profile's identity. A login keeps them in the profile's attributes `display_name` and `email`,
/// so that `status` and `profiles` show them without a request. They are the provider's text:
/// printed only through `Terminal.printable`.
struct UserIdentity: Equatable {
    var displayName: String?
    var email: String?

    static let displayNameAttribute = "display_name"
    static let emailAttribute = "email"
    /// The longest name or email kept, in characters.
    static let maximumLength = 256

    init(displayName: String? = nil, email: String? = nil) {
        self.displayName = displayName
        self.email = email
    }

    /// From OpenID Connect claims (an ID token's, or a userinfo answer).
    init(claims: [String: JSONValue]) {
        func text(_ name: String) -> String? {
            guard let value = claims[name]?.stringValue, value.contains(where: { !$0.isWhitespace }) else { return nil }
            return String(value.prefix(Self.maximumLength))
        }
        email = text("email")
        displayName = text("preferred_username") ?? text("name") ?? email
    }

    /// What `profile` says: its attributes, recorded at login; else its ID token's claims.
    init(profile: StoredProfile) {
        if profile.attributes[Self.displayNameAttribute] != nil || profile.attributes[Self.emailAttribute] != nil {
            self.init(displayName: profile.attributes[Self.displayNameAttribute], email: profile.attributes[Self.emailAttribute])
        } else {
            self.init(claims: (try? profile.credentials.idToken?.unverifiedClaims())?.all ?? [:])
        }
    }

    /// `alice (alice@example.test)`, `alice`, escaped for the terminal; `nil` without a display name.
    var shown: String? {
        guard let displayName else { return nil }
        let name = Terminal.printable(displayName, limit: 100)
        guard let email, email != displayName else { return name }
        return "\(name) (\(Terminal.printable(email, limit: 100)))"
    }

    /// After a login into profile `name` through `api`: who logged in, recorded in the profile's
    /// attributes (a name or email no longer known is removed). The ID token's claims first; when
    /// they name nobody (or there is no ID token) and `api` is an OpenID Connect provider with a
    /// userinfo endpoint, one userinfo request with the new access token, whose answer is taken
    /// only when its `sub` is the ID token's (OpenID Connect Core §5.3.4; without an ID token, when
    /// it has a `sub`). A userinfo request that fails fails nothing: the user is then named by the
    /// `sub` (`--verbose` says why). A client-credentials login has no user: nothing is recorded.
    /// A JWT-bearer login names the workload: the access token's `sub` (``workload(of:)``).
    ///
    /// - Throws: what the store throws.
    static func recordAfterLogin(api: any AuthAPI, store: any TokenStore, profile name: String) async throws -> UserIdentity {
        guard let stored = try await store.profile(named: name), stored.attributes["grant"] != "client_credentials" else { return UserIdentity() }
        let identity: UserIdentity
        if stored.attributes["grant"] == "jwt_bearer" {
            identity = workload(of: stored.credentials)
        } else {
            identity = await user(of: stored, api: api)
        }
        try await store.withExclusiveAccess(to: name) { transaction in
            // Only the login's own profile: the same user of the same provider (a refresh since is fine).
            guard var profile = transaction[name], profile.userID == stored.userID, profile.source == stored.source else { return }
            profile.attributes[displayNameAttribute] = identity.displayName
            profile.attributes[emailAttribute] = identity.email
            transaction[name] = profile
        }
        return identity
    }

    /// The workload a JWT-bearer login's `credentials` are for: named by the access token's `sub`
    /// when it is a JWT — read without verification, only to name it (the token is the resource
    /// server's to verify) —, else by nobody.
    static func workload(of credentials: Credentials) -> UserIdentity {
        guard let token = credentials.accessToken, let jws = try? CompactJWS(parsing: token), let payload = try? JSONValue.parse(jws.payload),
            let subject = payload["sub"]?.stringValue, subject.contains(where: { !$0.isWhitespace })
        else { return UserIdentity() }
        return UserIdentity(displayName: String(subject.prefix(maximumLength)))
    }

    /// The user `stored` was logged in as, through `api`: the ID token's claims, else the userinfo
    /// answer (see ``recordAfterLogin(api:store:profile:)``).
    private static func user(of stored: StoredProfile, api: any AuthAPI) async -> UserIdentity {
        let claims = try? stored.credentials.idToken?.unverifiedClaims()
        var identity = UserIdentity(claims: claims?.all ?? [:])
        if identity.displayName == nil, let oauth2 = api as? OAuth2API, stored.credentials.accessToken != nil {
            do {
                let answer = try await oauth2.userInfo(for: stored.credentials)
                let subject = answer["sub"]?.stringValue
                if let subject, claims?.subject.map({ $0 == subject }) ?? true {
                    identity = UserIdentity(claims: answer)
                } else if Terminal.verbose {
                    Terminal.standardError("loginkit: the userinfo answer is about another subject than the ID token; it was ignored")
                }
            } catch {
                if Terminal.verbose {
                    Terminal.standardError("loginkit: no name from the userinfo endpoint: \(Terminal.printable(CLIFailure(error).message, limit: 500))")
                }
            }
        }
        return identity
    }
}
#endif
