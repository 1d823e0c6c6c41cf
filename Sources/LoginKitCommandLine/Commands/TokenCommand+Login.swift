// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit

/// `loginkit token --login browser|device|auto`: the provider to log in with, and the login run
/// when there is no usable session.
extension TokenCommand {
    /// The API `token` talks to, and what a login through it needs.
    struct Provider {
        /// The API: built from the flags, else from the profile.
        let api: any AuthAPI
        /// The OpenID Connect configuration, for a login with another scope; `nil` for other APIs.
        let configuration: OAuth2API.Configuration?
        /// The scope given (`--scope`) or remembered by the profile; `nil`: the default for what
        /// discovery advertises.
        let scope: String?
    }

    /// The provider named by `--issuer`/`--client-id` (with `--login`, also `$LOGINKIT_ISSUER` and
    /// `$LOGINKIT_CLIENT_ID`), else the one `stored` (read from `store`) was logged in with. What the
    /// profile remembers of the same issuer and client (scope, explicit endpoints, identity
    /// sources) is used unless a flag says otherwise.
    ///
    /// - Throws: `CLIFailure`: exit 3 without a profile and without `--login`; exit 2 when a login
    ///   is asked for and nothing names the provider; exit 1 for recorded identity sources that
    ///   cannot be used (``SourceAttributes/apply(_:to:from:)``).
    func provider(stored: StoredProfile?, from store: any TokenStore, transport: any HTTPTransport) throws -> Provider {
        let environment = ProcessInfo.processInfo.environment
        func variable(_ name: String) -> String? {
            login == .never ? nil : environment[name].flatMap { $0.isEmpty ? nil : $0 }
        }
        let secret = APIFactory.environmentSecret
        if let issuer = issuer ?? variable("LOGINKIT_ISSUER") {
            guard let clientID = clientID ?? variable("LOGINKIT_CLIENT_ID") else {
                throw CLIFailure.usage("--issuer needs --client-id (or $LOGINKIT_CLIENT_ID with --login)")
            }
            var configuration = OAuth2API.Configuration(issuer: issuer, clientID: clientID, clientSecret: secret)
            var remembered: String?
            if let stored, Self.isSameClient(stored.source, issuer: issuer, clientID: clientID) {
                configuration = try APIFactory.oauth2Configuration(
                    for: stored.source, attributes: stored.attributes, from: store, clientSecret: secret, secretClientID: clientID, secretIssuer: issuer)
                remembered = stored.source.scope
            }
            return oauth2Provider(configuration, remembered: remembered, transport: transport)
        }
        if clientID != nil { throw CLIFailure.usage("--client-id needs --issuer") }
        guard let stored else {
            if login == .never {
                throw CLIFailure(exitCode: 3, "not logged in (profile \"\(storeOptions.profileName)\"); run `loginkit login`")
            }
            throw CLIFailure.usage(
                "--login \(login.rawValue) needs --issuer and --client-id (or $LOGINKIT_ISSUER and $LOGINKIT_CLIENT_ID) while profile \"\(storeOptions.profileName)\" does not exist")
        }
        guard stored.source.kind == .oauth2 else {
            let oauth2Flags = endpointOptions.given + dpopOptions.given
            if !oauth2Flags.isEmpty {
                throw CLIFailure.usage("\(oauth2Flags.joined(separator: ", ")) apply to an OpenID Connect profile only")
            }
            let api = try APIFactory.api(for: stored.source, attributes: stored.attributes, from: store, transport: transport, clientSecret: secret)
            return Provider(api: api, configuration: nil, scope: scope)
        }
        let configuration = try APIFactory.oauth2Configuration(for: stored.source, attributes: stored.attributes, from: store, clientSecret: secret)
        return oauth2Provider(configuration, remembered: stored.source.scope, transport: transport)
    }

    /// `configuration` with the endpoint and DPoP flags (winning over what the profile recorded) and
    /// the scope.
    private func oauth2Provider(_ configuration: OAuth2API.Configuration, remembered: String?, transport: any HTTPTransport) -> Provider {
        var configuration = configuration
        endpointOptions.apply(to: &configuration)
        dpopOptions.apply(to: &configuration)
        let scope = self.scope ?? remembered
        if let scope { configuration.scope = scope }
        return Provider(api: OAuth2API(configuration: configuration, transport: transport), configuration: configuration, scope: scope)
    }

    /// Whether `source` is an OpenID Connect login of `clientID` at `issuer`.
    static func isSameClient(_ source: CredentialSource, issuer: String, clientID: String) -> Bool {
        func normalized(_ endpoint: String) -> String { endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint }
        return source.kind == .oauth2 && normalized(source.endpoint) == normalized(issuer) && source.clientID == clientID
    }

    /// Logs in with `--login`'s mode, then returns the token. Unless a scope was given or
    /// remembered, the login asks for the scope `OAuth2API` chooses from what discovery advertises,
    /// which the profile then remembers.
    func issuedAfterLogin(provider: Provider, store: any TokenStore, transport: any HTTPTransport) async throws -> Issued {
        let api = provider.api
        let call = await ProfileCall.run(api: api, store: store, profile: storeOptions.profileName) { service in
            try await logInAndIssue(service: service, api: api as? OAuth2API, store: store)
        }
        return try call.result.get()
    }

    private func logInAndIssue(service: AuthService, api: OAuth2API?, store: any TokenStore) async throws -> Issued {
        // Another `token --login` process may have logged in since this one looked: take its session.
        let seen = try await store.profile(named: storeOptions.profileName)
        do {
            return try await issued(from: service)
        } catch let error as LoginRequiredError where error.code == .cannotRefresh && login != .browser {
            // The device flow asks nobody while a profile exists; these credentials are useless
            // (expired, no way to refresh them): remove them, unless someone replaced them meanwhile.
            try await Self.remove(seen, from: store, profile: storeOptions.profileName)
        } catch is LoginRequiredError {
            // No session: log in below.
        }
        let mode = login
        let options = browserOptions
        // A refused scope (invalid_scope) names the scope asked and those discovery lists: exit 2.
        switch mode {
        case .browser, .never:
            _ = try await InteractiveLogin.browser(service: service, options: options, scope: nil)
        case .device:
            _ = try await InteractiveLogin.device(service: service, scope: nil)
        case .auto:
            _ = try await InteractiveLogin.auto(service: service, api: api, options: options, scope: nil)
        }
        if let api {
            // The profile remembers the issuer, not explicit endpoints: later refreshes need them too,
            // and the client assertion's identity source (a user's login has no JWT-bearer grant).
            let recorded = try await api.clientAuthenticationAttributes()
                .merging(SourceAttributes.attributes(of: api.configuration, includingGrant: false)) { _, source in source }
            try await EndpointAttributes.record(
                api.configuration, extra: recorded.merging(ClientCertificateOptions.attributes(presentedBy: api.httpTransport)) { _, presented in presented },
                source: api.source, in: store, profile: storeOptions.profileName)
        }
        _ = try await UserIdentity.recordAfterLogin(api: service.api, store: store, profile: storeOptions.profileName)
        return try await issued(from: service)
    }

    /// Removes profile `name` if it is still `profile`.
    private static func remove(_ profile: StoredProfile?, from store: any TokenStore, profile name: String) async throws {
        guard let profile else { return }
        try await store.withExclusiveAccess(to: name) { transaction in
            if transaction[name] == profile { transaction[name] = nil }
        }
    }
}
#endif
