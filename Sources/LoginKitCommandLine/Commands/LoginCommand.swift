// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit
import LoginKitViewModel

/// `loginkit login`: a browser, password, device-code, client-credentials or JWT-bearer login into
/// a profile.
struct LoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Log in and save the credentials to a profile.",
        discussion: """
            Choose the provider with --issuer (OpenID Connect), --login-url (JSON login API) or \
            --cognito-pool-id with --cognito-region. With --issuer and none of --username, --device, \
            --client-credentials and --jwt-bearer, the login runs in the browser (authorization code with \
            PKCE over a loopback redirect); the URL is always printed on stderr, and with --no-browser, or \
            when no browser opens, the address the browser ends on can be pasted on stdin. The password \
            comes from a no-echo prompt, or from --password-stdin. Secrets are never taken from flag values.

            With --dpop (or --dpop-alg), every login makes a key pair of the profile's own and the \
            provider binds the tokens to it (DPoP, RFC 9449): a copied token is useless without the \
            key, which is kept in the store with the tokens, sealed like them. The profile records the \
            algorithm, so that `token --login` logs in with a key alike. --par chooses whether the \
            browser login pushes its authorization request (RFC 9126).

            Without --scope, an OpenID Connect login asks for openid, plus profile, email and \
            offline_access where the provider's discovery lists them in scopes_supported.

            A JSON login API's ID tokens are verified against the keys of the issuer named by --issuer \
            (its jwks_uri, from OpenID Connect discovery), for the audience named by --client-id. \
            --insecure-skip-id-token-verification stores them unverified instead: only for an API whose \
            tokens this client never trusts, since anyone able to answer the login request could then \
            log the profile in as anybody.

            Workload identity (with --issuer): --client-credentials --client-assertion-source SOURCE \
            authenticates the client with the source's token as its client assertion instead of a secret \
            or key (the provider trusts the platform that issued it: workload identity federation). \
            --jwt-bearer --assertion-source SOURCE logs in with the JWT-bearer grant (RFC 7523), the \
            source's token as the grant: the token names the workload, not a user. Neither login has a \
            refresh token: the profile records the source (and the --source-header headers, sealed with \
            the tokens), and every later command asks it again when the token must be renewed, once \
            across concurrent invocations.
            """ + "\n\n" + SourceOptions.discussion
    )

    @Option(help: "OpenID Connect issuer URL (default: $LOGINKIT_ISSUER).") var issuer: String?
    @Option(name: .customLong("login-url"), help: "JSON login API URL (needs --issuer and --client-id to verify its ID tokens).") var loginURL: String?
    @Option(name: .customLong("cognito-pool-id"), help: "Amazon Cognito user pool ID.") var cognitoPoolID: String?
    @Option(name: .customLong("cognito-region"), help: "Amazon Cognito region (an AWS region name such as eu-west-1).") var cognitoRegion: String?
    @Option(name: .customLong("cognito-endpoint"), help: "Cognito endpoint override (e.g. a local emulator).") var cognitoEndpoint: String?
    @Option(name: .customLong("client-id"), help: "Client ID, the audience of the ID tokens (default: $LOGINKIT_CLIENT_ID).") var clientID: String?
    @Option(help: "The user to log in.") var username: String?
    @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input.") var passwordStdin = false
    @Flag(help: "Log in in the browser (the default with --issuer and none of --username, --device, --client-credentials).")
    var browser = false
    @Flag(help: "Use the device authorization flow (prints a code to enter elsewhere).") var device = false
    @Flag(
        name: .customLong("client-credentials"),
        help: "Log the client itself in (secret from $LOGINKIT_CLIENT_SECRET or --client-secret-stdin, or a key with --private-key).")
    var clientCredentials = false
    @Flag(name: .customLong("client-secret-stdin"), help: "Read the client secret from standard input.") var clientSecretStdin = false
    @Option(
        name: .customLong("client-assertion-source"),
        help: ArgumentHelp(
            "With --client-credentials or --jwt-bearer: authenticate the client with this source's token as its client assertion, instead of a secret or key.",
            valueName: "source"))
    var clientAssertionSource: String?
    @Flag(
        name: .customLong("jwt-bearer"),
        help: "Log in with the JWT-bearer grant (RFC 7523): the token of --assertion-source is the grant (needs --issuer and --client-id).")
    var jwtBearer = false
    @Option(
        name: .customLong("assertion-source"),
        help: ArgumentHelp(
            "With --jwt-bearer: where the grant's assertion comes from: file:PATH, exec:PROGRAM, url:URL, github-actions[:AUDIENCE] or env:VAR.",
            valueName: "source"))
    var assertionSource: String?
    @Flag(
        name: .customLong("insecure-skip-id-token-verification"),
        help: "With --login-url: store the ID token without verifying it. Only for an API whose tokens this client never trusts."
    )
    var insecureSkipIDTokenVerification = false
    @Option(help: "The scope to ask for.") var scope: String?
    @Option(name: .customLong("version-policy"), help: "A minimum-version policy URL to check first.") var versionPolicy: String?
    @Flag(help: "Print the result as JSON on stdout.") var json = false
    @OptionGroup(title: "Browser login") var browserOptions: BrowserOptions
    @OptionGroup(title: "Endpoints (for providers without full discovery)") var endpointOptions: EndpointOptions
    @OptionGroup(title: "Client authentication (confidential clients)") var clientAuthOptions: ClientAuthOptions
    @OptionGroup(title: "Identity sources (--client-assertion-source, --assertion-source)") var sourceOptions: SourceOptions
    @OptionGroup(title: "Sender-constrained tokens and pushed authorization requests (OpenID Connect)") var dpopOptions: DPoPOptions
    @OptionGroup var networkOptions: NetworkOptions
    @OptionGroup var storeOptions: StoreOptions

    /// Whether the JSON login API's ID token is stored unverified (`--insecure-skip-id-token-verification`).
    private var isUnverified: Bool { loginURL != nil && insecureSkipIDTokenVerification }

    /// Whether the provider is an OpenID Connect issuer (not a JSON login API or Cognito).
    private var isOpenIDConnect: Bool { loginURL == nil && cognitoPoolID == nil }

    /// Whether this is a browser login: `--browser`, or an OpenID Connect provider and none of
    /// `--username`, `--device`, `--client-credentials`, `--jwt-bearer`.
    private var usesBrowser: Bool {
        browser || (isOpenIDConnect && username == nil && !device && !clientCredentials && !jwtBearer)
    }

    func validate() throws {
        let environment = ProcessInfo.processInfo.environment
        let issuer = self.issuer ?? environment["LOGINKIT_ISSUER"].flatMap { $0.isEmpty ? nil : $0 }
        let clientID = self.clientID ?? environment["LOGINKIT_CLIENT_ID"].flatMap { $0.isEmpty ? nil : $0 }
        let providers = [issuer, loginURL, cognitoPoolID].compactMap { $0 }
        guard providers.count >= 1 else { throw ValidationError("name the provider: --issuer, --login-url or --cognito-pool-id") }
        if cognitoPoolID != nil && cognitoRegion == nil { throw ValidationError("--cognito-pool-id needs --cognito-region") }
        if cognitoPoolID != nil && clientID == nil { throw ValidationError("--cognito-pool-id needs --client-id (or $LOGINKIT_CLIENT_ID)") }
        if device && clientCredentials { throw ValidationError("--device and --client-credentials exclude each other") }
        if passwordStdin && clientSecretStdin { throw ValidationError("only one of --password-stdin and --client-secret-stdin can read stdin") }
        if cognitoPoolID == nil, loginURL != nil {
            if insecureSkipIDTokenVerification {
                if self.issuer != nil {
                    throw ValidationError("--insecure-skip-id-token-verification and --issuer exclude each other: with an issuer the ID tokens are verified")
                }
            } else if issuer == nil {
                throw ValidationError(
                    "--login-url needs --issuer and --client-id to verify the ID tokens it returns; for an API whose tokens this client never trusts, "
                        + "--insecure-skip-id-token-verification stores them unverified"
                )
            }
        } else if insecureSkipIDTokenVerification {
            throw ValidationError("--insecure-skip-id-token-verification applies to --login-url only")
        }
        if cognitoPoolID == nil, !(loginURL != nil && insecureSkipIDTokenVerification), issuer != nil, clientID == nil {
            throw ValidationError("--issuer needs --client-id (or $LOGINKIT_CLIENT_ID): the audience its ID tokens must be meant for")
        }
        try validateWorkload()
        try validateModes()
    }

    /// The JWT-bearer grant's and the identity sources' flags: `--jwt-bearer` needs
    /// `--assertion-source` and excludes the other logins; `--client-assertion-source` is the
    /// client's authentication, so no secret or key goes with it; a source is recorded in the
    /// user's own file store only, never in a fleet store (``SourceAttributes/isUsersOwn(_:)``).
    private func validateWorkload() throws {
        if jwtBearer {
            let others = [("--device", device), ("--username", username != nil), ("--browser", browser), ("--client-credentials", clientCredentials)]
                .filter(\.1).map(\.0)
            if !others.isEmpty { throw ValidationError("--jwt-bearer excludes \(others.joined(separator: ", "))") }
            if !isOpenIDConnect { throw ValidationError("--jwt-bearer needs an OpenID Connect provider (--issuer), not --login-url or --cognito-pool-id") }
            if assertionSource == nil {
                throw ValidationError("--jwt-bearer needs --assertion-source SOURCE, where the grant's assertion comes from: \(SourceOptions.forms)")
            }
        } else if assertionSource != nil {
            throw ValidationError("--assertion-source applies with --jwt-bearer only")
        }
        if clientAssertionSource != nil {
            if !clientCredentials && !jwtBearer {
                throw ValidationError("--client-assertion-source applies with --client-credentials or --jwt-bearer only")
            }
            let keyFlags = clientAuthOptions.given
            if !keyFlags.isEmpty {
                throw ValidationError("--client-assertion-source excludes \(keyFlags.joined(separator: ", ")): the source's token is the client's assertion")
            }
            if clientSecretStdin {
                throw ValidationError("--client-assertion-source and --client-secret-stdin exclude each other: the client authenticates with the source's token")
            }
            if APIFactory.environmentSecret != nil {
                throw ValidationError(
                    "--client-assertion-source and $LOGINKIT_CLIENT_SECRET exclude each other: the client authenticates with the source's token, "
                        + "not a secret; unset LOGINKIT_CLIENT_SECRET for this login")
            }
        }
        try sourceOptions.check([("--client-assertion-source", clientAssertionSource), ("--assertion-source", assertionSource)])
        if clientAssertionSource != nil || assertionSource != nil, storeOptions.namesFleetStore {
            let flags = [("--client-assertion-source", clientAssertionSource), ("--assertion-source", assertionSource)].filter { $0.1 != nil }.map(\.0)
            throw ValidationError(
                "\(flags.joined(separator: " and ")) \(flags.count == 1 ? "works" : "work") with your own file store only, not a postgres:// fleet store: "
                    + SourceAttributes.fleetReason + "; log the workload in with --store FILE")
        }
    }

    /// The browser login's and explicit endpoints' flags against the login chosen.
    private func validateModes() throws {
        if browser && (username != nil || device || clientCredentials || jwtBearer) {
            throw ValidationError("--browser excludes --username, --device, --client-credentials and --jwt-bearer")
        }
        if browser && !isOpenIDConnect {
            throw ValidationError("--browser needs an OpenID Connect provider (--issuer), not --login-url or --cognito-pool-id")
        }
        let browserFlags = browserOptions.given
        if !browserFlags.isEmpty && !(isOpenIDConnect && usesBrowser) {
            throw ValidationError("\(browserFlags.joined(separator: ", ")) apply to the browser login only")
        }
        let endpointFlags = endpointOptions.given + clientAuthOptions.given + dpopOptions.given
        if !endpointFlags.isEmpty && !isOpenIDConnect {
            throw ValidationError("\(endpointFlags.joined(separator: ", ")) apply to an OpenID Connect provider (--issuer) only")
        }
        if passwordStdin && username == nil {
            throw ValidationError("--password-stdin needs --username")
        }
    }

    func run() async throws {
        try await reportingFailures {
            let store = try await storeOptions.openStore().store
            let environment = ProcessInfo.processInfo.environment
            let clientConfiguration = try networkOptions.clientConfiguration()
            try await CurlHTTPClient.withClient(configuration: clientConfiguration) { client in
                let clientSecret = clientSecretStdin ? try Terminal.readSecretLine("client secret") : APIFactory.environmentSecret
                let api = try await makeAPI(transport: client, clientSecret: clientSecret, environment: environment)
                let gate = try versionPolicy.map { url in
                    VersionGate(
                        configuration: .init(url: url, currentVersion: try SemanticVersion(parsing: LoginKitCLI.version.description)),
                        transport: client
                    )
                }
                // The login replaces the profile's attributes, but for those its save keeps (the
                // default's mark, the registries and git hosts served), in the same transaction.
                let service = AuthService(
                    api: api, store: store, profile: storeOptions.profileName, configuration: ProfileCall.configuration, gate: gate)
                let oauth2 = api as? OAuth2API
                // A refused scope (invalid_scope) names the scope asked and those discovery lists: exit 2.
                let user: User? = try await ClientAuthOptions.namingMissingCredential(of: oauth2?.configuration) {
                    () async throws -> User? in
                    if clientCredentials || jwtBearer {
                        // The JWT-bearer grant is the client's grant with the source's assertion (assertionGrantSource).
                        return try await Terminal.withSpinner("Logging in…") { try await service.logInAsClient(scope: scope) }
                    }
                    if device { return try await InteractiveLogin.device(service: service, scope: scope) }
                    if usesBrowser { return try await InteractiveLogin.browser(service: service, options: browserOptions, scope: nil) }
                    return try await passwordLogin(service: service)
                }
                if let oauth2 {
                    // The profile remembers the issuer, not explicit endpoints: refresh and logout need them too,
                    // and the identity sources, asked again when the token must be renewed.
                    let recorded = clientAuthOptions.attributes.merging(try await oauth2.clientAuthenticationAttributes()) { given, _ in given }
                        .merging(SourceAttributes.attributes(of: oauth2.configuration)) { _, source in source }
                    try await EndpointAttributes.record(
                        oauth2.configuration, extra: recorded.merging(ClientCertificateOptions.attributes(presentedBy: client)) { _, presented in presented },
                        source: oauth2.source, in: store, profile: storeOptions.profileName)
                }
                // Unverified, the token's claims are whatever the server wrote: nobody is named after them.
                var identity = UserIdentity()
                if !isUnverified { identity = try await UserIdentity.recordAfterLogin(api: api, store: store, profile: storeOptions.profileName) }
                try await report(user: user, identity: identity, store: store, issuer: api.source.endpoint)
            }
        }
    }

    private func makeAPI(transport: CurlHTTPClient, clientSecret: String?, environment: [String: String]) async throws -> any AuthAPI {
        let issuer = issuer ?? environment["LOGINKIT_ISSUER"].flatMap { $0.isEmpty ? nil : $0 }
        let clientID = clientID ?? environment["LOGINKIT_CLIENT_ID"].flatMap { $0.isEmpty ? nil : $0 }
        if let poolID = cognitoPoolID, let region = cognitoRegion {
            guard let clientID else { throw CLIFailure.usage("--cognito-pool-id needs --client-id") }
            let configuration = CognitoAPI.Configuration(poolID: poolID, clientID: clientID, region: region, endpoint: cognitoEndpoint)
            try configuration.validate()  // a region that is no AWS region never becomes a host name (exit 2)
            return CognitoAPI(configuration: configuration, transport: transport)
        }
        if let loginURL {
            var configuration = JSONLoginAPI.Configuration(loginURL: loginURL)
            if insecureSkipIDTokenVerification {
                configuration.idTokenVerification = .unverifiedOpaqueTokens
                Terminal.warning(
                    "the ID token will be stored without verification (--insecure-skip-id-token-verification): "
                        + "anyone able to answer \(loginURL) can log this profile in as anybody"
                )
            } else {
                guard let issuer, let clientID else { throw CLIFailure.usage("--login-url needs --issuer and --client-id to verify its ID tokens") }
                configuration.verifier = try await Self.verifier(issuer: issuer, audience: clientID, transport: transport)
            }
            return JSONLoginAPI(configuration: configuration, transport: transport)
        }
        guard let issuer else { throw CLIFailure.usage("name the provider with --issuer") }
        guard let clientID else { throw CLIFailure.usage("--issuer needs --client-id (or $LOGINKIT_CLIENT_ID)") }
        var configuration = OAuth2API.Configuration(issuer: issuer, clientID: clientID, clientSecret: clientSecret)
        endpointOptions.apply(to: &configuration)
        try clientAuthOptions.apply(to: &configuration)
        if let clientAssertionSource {
            configuration.clientAssertionSource = try sourceOptions.source(clientAssertionSource, flag: "--client-assertion-source")
        }
        if jwtBearer, let assertionSource {
            configuration.assertionGrantSource = try sourceOptions.source(assertionSource, flag: "--assertion-source")
        }
        dpopOptions.apply(to: &configuration)
        // Without --scope: openid plus what discovery's scopes_supported offers of profile, email, offline_access.
        return try await InteractiveLogin.api(configuration, scope: scope, transport: transport)
    }

    /// A verifier for `issuer`'s ID tokens meant for `audience`, with the keys at the `jwks_uri` that
    /// the issuer's OpenID Connect discovery document names (a document naming another issuer is
    /// refused).
    static func verifier(issuer: String, audience: String, transport: any HTTPTransport) async throws -> IDTokenVerifier {
        let discovery = OAuth2API(configuration: .init(issuer: issuer, clientID: audience), transport: transport)
        guard let jwksURI = try await discovery.metadata().jwksURI else {
            throw CLIFailure(exitCode: 5, "the issuer publishes no jwks_uri, so its ID tokens cannot be verified")
        }
        return IDTokenVerifier(configuration: .init(issuer: issuer, audience: audience), keys: JWKSSource(url: jwksURI, transport: transport))
    }

    /// The password login, driven through the same view-model an app would use.
    @MainActor
    private func passwordLogin(service: AuthService) async throws -> User {
        guard let username else { throw CLIFailure.usage("--username is required for a password login") }
        let password: String
        if passwordStdin {
            password = try Terminal.readSecretLine("password")
        } else if Terminal.stdinIsTTY {
            password = try Terminal.readPasswordWithoutEcho(prompt: "Password for \(username): ")
        } else {
            throw CLIFailure.usage("standard input is not a terminal; pass the password with --password-stdin")
        }
        let viewModel = LoginViewModel(service: service)
        viewModel.id = username
        viewModel.password = password
        var dismissals = viewModel.dismissals.makeAsyncIterator()
        await Terminal.withSpinner("Logging in…") { await viewModel.loginButtonPressed() }
        if let error = viewModel.lastError { throw error }  // reportingFailures maps it
        guard let user = await dismissals.next() else { throw CLIFailure(exitCode: 1, "the login ended without a result") }
        return user
    }

    /// "Logged in as alice (alice@example.test), profile "work"." on stderr, or the JSON on stdout:
    /// the user by `identity` (else the `sub`), or, unverified, by `--username`.
    private func report(user: User?, identity: UserIdentity, store: any TokenStore, issuer: String) async throws {
        let profile = try await store.profile(named: storeOptions.profileName)
        // Unverified, the token's claims are whatever the server wrote: name the user as given instead.
        let unverified = isUnverified
        let name = unverified ? username : user.map { identity.displayName ?? $0.id.rawValue }
        let subject = unverified ? nil : user?.id.rawValue
        if json {
            JSONOutput.print([
                "profile": .text(storeOptions.profileName), "user": .textOrNull(name),
                "display_name": .textOrNull(identity.displayName), "email": .textOrNull(identity.email),
                "subject": .textOrNull(subject), "issuer": .text(issuer),
                "expires_at": JSONOutput.timestamp(profile?.credentials.expiresAt),
                "has_refresh_token": .flag(profile?.credentials.refreshToken != nil),
                "has_id_token": .flag(profile?.credentials.idToken != nil),
                "id_token_verified": .flag(!unverified),
            ])
        } else {
            let shown = (unverified ? nil : identity.shown) ?? name.map { Terminal.printable($0, limit: 100) } ?? "the client"
            let note = unverified ? "; the ID token was not verified" : ""
            Terminal.standardError("Logged in as \(shown), profile \"\(Terminal.printable(storeOptions.profileName, limit: 100))\"\(note).")
        }
    }
}
#endif
