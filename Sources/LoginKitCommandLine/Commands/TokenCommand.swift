// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import LoginKit

/// `loginkit token`: a valid token and a newline on stdout, nothing else (or kubectl's
/// ExecCredential JSON with `--exec-credential`). With `--login`, a credential helper: a missing or
/// unusable session runs that login first (TokenCommand+Login.swift).
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print a valid token (refreshing it if needed) and a newline.",
        discussion: """
            Prints the ID token, or the access token with --access. Concurrent invocations refresh once. \
            With --login browser, device or auto, a missing or unusable session runs that login first and \
            then prints the token: --issuer and --client-id name the provider, else the profile's is used; \
            concurrent invocations open the browser once. --exec-credential prints kubectl's ExecCredential \
            (client.authentication.k8s.io/v1) instead of the bare token.

            For a profile logged in with --client-credentials or --jwt-bearer, --resource (repeatable), \
            --audience and --scope ask for the client's access token for that target (RFC 8707): each \
            target is cached in a profile of its own (<profile>#<hash>), and concurrent invocations make \
            one request per target.

            A profile logged in with an identity source (--client-assertion-source, --assertion-source) \
            has no refresh token: its token is renewed by asking the source again (running the program, \
            reading the file, …) and the provider, once across concurrent invocations.

            --header-for METHOD URL prints, instead of the token, the header lines another HTTP client \
            sends with that request: `Authorization: Bearer <token>`, or for a DPoP-bound profile \
            `Authorization: DPoP <token>` and `DPoP: <proof>` (a proof is good for that method and URL, \
            once, for a few minutes). `loginkit request` sends the request itself.

            --force-refresh refreshes even a valid token. Concurrent forced refreshes share one: each \
            invocation replaces the access token the store held when it started, and one that finds it \
            already replaced takes the new token without a refresh of its own.
            """
    )

    /// What `token` does when there is no usable session.
    enum LoginMode: String, CaseIterable, ExpressibleByArgument {
        /// Fail with exit 3.
        case never
        /// Log in in the browser.
        case browser
        /// Log in with the device flow.
        case device
        /// The browser when one can be opened, else the device flow.
        case auto
    }

    @Flag(help: "Print the access token instead of the ID token.") var access = false
    @Option(name: .customLong("min-validity"), help: "Seconds the token must stay valid (refresh otherwise).") var minValidity: Int = 0
    @Flag(
        name: .customLong("force-refresh"),
        help: "Refresh now, even if the token is still valid (concurrent invocations share one refresh).")
    var forceRefresh = false
    @Option(help: "With no usable session: never (exit 3), or log in with browser, device or auto (browser when one can be opened, else device) first.")
    var login: LoginMode = .never
    @Flag(name: .customLong("exec-credential"), help: "Print kubectl's ExecCredential JSON (client.authentication.k8s.io/v1) instead of the bare token.")
    var execCredential = false
    @Option(help: "OpenID Connect issuer URL to log in with (default: $LOGINKIT_ISSUER with --login, else the profile's).") var issuer: String?
    @Option(name: .customLong("client-id"), help: "Client ID to log in with (default: $LOGINKIT_CLIENT_ID with --login, else the profile's).")
    var clientID: String?
    @Option(
        help:
            "With --login: the scope to log in with (default: the profile's, else openid plus what discovery offers). Without: the scope of a client-credentials token for a target."
    )
    var scope: String?
    @Option(name: .customLong("resource"), help: "A client-credentials token for this resource (RFC 8707); repeatable.") var resources: [String] = []
    @Option(help: "A client-credentials token for this audience.") var audience: String?
    @Option(
        name: .customLong("header-for"), parsing: .upToNextOption,
        help: ArgumentHelp(
            "Print the Authorization (and DPoP) header lines for a request with this method to this absolute http(s) URL instead of the token.",
            valueName: "method url"))
    var headerFor: [String] = []
    @OptionGroup(title: "Browser login (with --login browser or auto)") var browserOptions: BrowserOptions
    @OptionGroup(title: "Sender-constrained tokens and pushed authorization requests (with --login)") var dpopOptions: DPoPOptions
    @OptionGroup(title: "Endpoints (for providers without full discovery)") var endpointOptions: EndpointOptions
    @OptionGroup var networkOptions: NetworkOptions
    @OptionGroup var storeOptions: StoreOptions

    /// Whether a client-credentials token for a target is asked for (`--resource`, `--audience`,
    /// or `--scope` without `--login`).
    var asksForTarget: Bool { !resources.isEmpty || audience != nil || (scope != nil && login == .never) }

    /// `--header-for`'s method, upper-cased, and URL; `nil` without it.
    var headerTarget: (method: String, url: String)? {
        guard headerFor.count == 2 else { return nil }
        return (method: headerFor[0].uppercased(), url: headerFor[1])
    }

    func validate() throws {
        guard minValidity >= 0 else { throw ValidationError("--min-validity must be zero or more seconds") }
        let browserFlags = browserOptions.given
        if login != .never, !resources.isEmpty || audience != nil {
            throw ValidationError("--resource and --audience apply without --login (to a client-credentials profile)")
        }
        try validateHeaderFor()
        if forceRefresh, asksForTarget {
            throw ValidationError("--force-refresh applies to the profile's own tokens, not to a target's (--resource, --audience, --scope)")
        }
        let loginFlags = browserFlags + dpopOptions.given
        if login == .never, !loginFlags.isEmpty {
            throw ValidationError("\(loginFlags.joined(separator: ", ")) apply with --login only")
        }
        if login == .device, !browserFlags.isEmpty {
            throw ValidationError("\(browserFlags.joined(separator: ", ")) apply with --login browser or auto only")
        }
    }

    /// `--header-for METHOD URL`: a method token and an absolute http(s) URL; not with `--exec-credential`.
    private func validateHeaderFor() throws {
        guard !headerFor.isEmpty else { return }
        guard let target = headerTarget else {
            throw ValidationError("--header-for takes two values, a method and a URL: --header-for GET https://api.example.com/items")
        }
        if execCredential { throw ValidationError("--header-for and --exec-credential exclude each other") }
        guard HTTPRequest.Method(target.method) != nil else {
            throw ValidationError("--header-for: \(Terminal.printable(target.method, limit: 100)) is not an HTTP method")
        }
        guard HTTPRequest(method: .get, url: target.url) != nil else {
            throw ValidationError("--header-for: \(Terminal.printable(target.url, limit: 300)) is not an absolute http or https URL")
        }
    }

    func run() async throws {
        try await reportingFailures {
            let networkConfiguration = try networkOptions.clientConfiguration()
            let store = try await storeOptions.openStore().store
            // The certificate the profile's login recorded, unless --client-cert names one or the
            // run logs in with another provider (--issuer).
            let clientConfiguration = await ClientCertificateOptions.presenting(networkConfiguration, profile: storeOptions.profileName, in: store) { stored in
                issuer.map { Self.isSameClient(stored.source, issuer: $0, clientID: clientID ?? "") } ?? true
            }
            var unsaved: TokenStoreError?  // a refresh whose credentials could not be saved: printed anyway, then said loudly
            let output = try await CurlHTTPClient.withClient(configuration: clientConfiguration) { client in
                if asksForTarget { return try await self.targetToken(store: store, transport: client) }
                let stored = try await store.profile(named: storeOptions.profileName)
                let provider = try self.provider(stored: stored, from: store, transport: client)
                let call = await ProfileCall.run(api: provider.api, store: store, profile: storeOptions.profileName) { service in
                    try await ClientAuthOptions.namingMissingCredential(of: provider.configuration) {
                        try await self.issued(from: service, forcingRefresh: self.forceRefresh)
                    }
                }
                unsaved = call.unsaved
                switch call.result {
                case .failure(is LoginRequiredError) where login != .never:
                    return try await self.issuedAfterLogin(provider: provider, store: store, transport: client)
                default:
                    return try call.result.get()
                }
            }
            let text: String
            if let lines = output.headerLines {
                text = lines.joined(separator: "\n")
            } else {
                text = try execCredential ? ExecCredential.json(token: output.token, expiresAt: output.expiresAt) : output.token
            }
            Terminal.writeAll(text + "\n", to: STDOUT_FILENO)
            if let unsaved { throw ProfileCall.unsavedFailure(unsaved) }
        }
    }
}

extension TokenCommand {
    /// The client's access token for `--resource`/`--audience`/`--scope`, from the profile's
    /// client-credentials or JWT-bearer login (its client, issuer, client authentication and
    /// identity sources: a JWT-bearer profile's targets are asked for with its grant).
    func targetToken(store: any TokenStore, transport: CurlHTTPClient) async throws -> Issued {
        let name = storeOptions.profileName
        guard let stored = try await store.profile(named: name) else {
            throw CLIFailure(exitCode: 3, "not logged in (profile \"\(name)\"); run `loginkit login --client-credentials`")
        }
        guard stored.source.kind == .oauth2, StoredProfile.clientGrants.contains(stored.attributes["grant"] ?? "") else {
            throw CLIFailure.usage(
                "--resource, --audience and --scope (without --login) need a profile logged in with `loginkit login --client-credentials` or `--jwt-bearer`")
        }
        let configuration = try APIFactory.oauth2Configuration(
            for: stored.source, attributes: stored.attributes, from: store, clientSecret: APIFactory.environmentSecret)
        let api = OAuth2API(configuration: configuration, transport: transport)
        let tokens = ClientCredentialsTokens(api: api, store: store, baseProfile: name)
        let credentials = try await ClientAuthOptions.namingMissingCredential(of: configuration) {
            try await tokens.credentials(
                for: TokenTarget(resources: resources, audience: audience, scope: scope), minimumValidity: .seconds(minValidity))
        }
        guard let token = credentials.accessToken else { throw CLIFailure(exitCode: 1, "the provider issued no access token") }
        guard let target = headerTarget else { return Issued(token: token, expiresAt: credentials.expiresAt) }
        return Issued(token: token, expiresAt: credentials.expiresAt, headerLines: try Self.headerLines(for: credentials, target: target, api: api))
    }

    /// A token and, when known, when it expires.
    struct Issued: Sendable {
        let token: String
        let expiresAt: Date?
        /// With `--header-for`: the lines printed instead of the token.
        var headerLines: [String]? = nil
    }

    /// The header lines another HTTP client sends with a request `target` for `credentials`:
    /// `Authorization: Bearer <token>`, or `Authorization: DPoP <token>` and `DPoP: <proof>` for
    /// DPoP-bound credentials (with the nonce `api` last heard from the URL's origin, if any).
    ///
    /// - Throws: what `ResourceAuthorization.headers` throws (a key that cannot sign).
    static func headerLines(for credentials: Credentials, target: (method: String, url: String), api: any AuthAPI) throws -> [String] {
        let nonces = (api as? any AuthorizedRequestAPI)?.dpopNonces ?? DPoPNonces()
        let fields = try ResourceAuthorization.headers(for: credentials, method: target.method, url: target.url, nonces: nonces, now: Date())
        return fields.map { "\($0.name.rawName): \($0.value)" }
    }

    /// The token asked for (ID or access) from `service`, refreshing it as needed — first by force
    /// with `forcingRefresh` (``refreshByForce(_:)``); with `--header-for`, the header lines for the
    /// access token.
    ///
    /// - Throws: `CLIFailure` (exit 1) when the provider issued no such token; what
    ///   `validIDToken`/`validAccessToken` throw (`LoginRequiredError` when a login is needed), and
    ///   what ``refreshByForce(_:)`` throws.
    func issued(from service: AuthService, forcingRefresh: Bool = false) async throws -> Issued {
        if forcingRefresh { try await Self.refreshByForce(service) }
        let minimum = Duration.seconds(minValidity)
        if let target = headerTarget {
            let token: String
            do {
                token = try await service.validAccessToken(minimumValidity: minimum)
            } catch let error as LoginRequiredError where error.code == .noAccessToken {
                throw CLIFailure(exitCode: 1, "the provider issued no access token for this profile")
            }
            let credentials = try await service.validCredentials(minimumValidity: minimum)
            return Issued(
                token: token, expiresAt: credentials.expiresAt,
                headerLines: try Self.headerLines(for: credentials, target: target, api: service.api))
        }
        if access {
            do {
                let token = try await service.validAccessToken(minimumValidity: minimum)
                guard execCredential else { return Issued(token: token, expiresAt: nil) }
                let stored = try? await service.store.profile(named: service.profileName)
                return Issued(token: token, expiresAt: stored?.credentials.accessToken == token ? stored?.credentials.expiresAt : nil)
            } catch let error as LoginRequiredError where error.code == .noAccessToken {
                throw CLIFailure(exitCode: 1, "the provider issued no access token for this profile")
            }
        }
        do {
            let idToken = try await service.validIDToken(minimumValidity: minimum)
            let expiry = (try? idToken.unverifiedClaims())?.expiresAt.map { Date(timeIntervalSince1970: $0) }
            return Issued(token: idToken.rawValue, expiresAt: expiry)
        } catch let error as LoginRequiredError where error.code == .noIDToken {
            throw CLIFailure(exitCode: 1, "the provider issued no ID token for this profile; use `loginkit token --access`")
        }
    }
}

extension TokenCommand {
    /// `--force-refresh`: replaces the profile's access token whatever its expiry. The token the
    /// store held when this process started is replaced through the shared refresh
    /// (`refreshByRequest(replacing:heldSince:)`), which is one across processes: an invocation
    /// that started before a replacement was issued takes it without a refresh of its own. A
    /// profile that does not exist is left to the token call that follows (exit 3, or `--login`).
    ///
    /// - Throws: `CLIFailure` exit 1 when the profile holds no access token, exit 5 when the refresh
    ///   did not go through (the provider failed and the old token, still valid, came back); what
    ///   `validCredentials(rejecting:)` throws (`LoginRequiredError` without a refresh token).
    static func refreshByForce(_ service: AuthService) async throws {
        guard let stored = try await service.store.profile(named: service.profileName) else { return }
        guard let current = stored.credentials.accessToken else {
            throw CLIFailure(exitCode: 1, "the profile holds no access token, so --force-refresh has nothing to replace")
        }
        // The token held when this invocation started is the one replaced: an invocation that
        // started before another's replacement was issued takes that one (one refresh for all).
        let started = ProcessStart.wallClock() ?? Date()
        let renewed = try await service.refreshByRequest(replacing: current, heldSince: started)
        let unchanged = renewed.accessToken == current && (renewed.issuedAt ?? .distantPast) <= started
        guard !unchanged else {
            throw CLIFailure(
                exitCode: 5, "the forced refresh did not go through (the provider failed or could not be reached); the token is unchanged, try again")
        }
    }
}

/// `loginkit status`: what a profile holds, never a token.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show a profile's state (never prints a token).",
        discussion: """
            binding: says whether the tokens are bound to the profile's DPoP key (its algorithm and \
            RFC 7638 thumbprint) or bearer tokens; cnf.jkt: the key thumbprint the access token names, \
            read from it without verification, and whether it is the profile's key. identity source: \
            for a profile logged in with one, the source's kind (file, exec, url, github-actions, env) \
            and use (client assertion, JWT bearer grant), never its token or headers.
            """)

    @Flag(help: "Print JSON on stdout.") var json = false
    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        try await reportingFailures {
            let opened = try await storeOptions.openStore()
            guard let profile = try await opened.store.profile(named: storeOptions.profileName) else {
                throw CLIFailure(exitCode: 3, "not logged in (profile \"\(storeOptions.profileName)\"); run `loginkit login`")
            }
            let details = try await opened.details()
            // How the file is protected (a database store: sealed or not, as before).
            let storage = try await (opened.store as? IDTokenStore)?.protection()
            let user = User(credentials: profile.credentials, fallbackID: User.ID(rawValue: profile.userID ?? ""))
            // Who: the name and email the login recorded (else the ID token's), the `sub` beside them.
            let identity = UserIdentity(profile: profile)
            let subject = (try? profile.credentials.idToken?.unverifiedClaims())?.subject
            let choice = storeOptions.profileChoice
            let expiresAt = profile.credentials.expiresAt
            let expired = expiresAt.map { $0 <= Date() } ?? false
            let binding = TokenBinding(profile.credentials)
            // Kind and use only: a source's specification may name a URL whose headers hold secrets.
            let sources = SourceAttributes.uses(in: profile.attributes)
            var sourceJSON = JSONOutput.Value.null
            if let source = sources.first { sourceJSON = .object(["kind": .text(source.kind), "use": .text(source.use.json)]) }
            if json {
                JSONOutput.print([
                    "profile": .text(choice.name), "profile_source": .text(choice.sourceName), "profile_file": .textOrNull(choice.file),
                    "user": .text(identity.displayName ?? user.preferredUsername ?? user.id.rawValue),
                    "display_name": .textOrNull(identity.displayName), "email": .textOrNull(identity.email),
                    "subject": .text(user.id.rawValue), "issuer": .text(profile.credentials.issuer ?? profile.source.endpoint),
                    "api": .text(profile.source.kind.rawValue), "client_id": .textOrNull(profile.source.clientID),
                    "expires_at": JSONOutput.timestamp(expiresAt), "expired": .flag(expired),
                    "has_refresh_token": .flag(profile.credentials.refreshToken != nil),
                    "has_id_token": .flag(profile.credentials.idToken != nil),
                    "store": .text(opened.location), "sealed": .flag(storage?.isSealed ?? opened.isSealed),
                    "storage": .textOrNull(storage?.level), "storage_detail": .textOrNull(storage.map(\.detail)),
                    "binding": .text(binding.isDPoP ? "dpop" : "bearer"), "dpop_alg": .textOrNull(binding.algorithm?.rawValue),
                    "dpop_jkt": .textOrNull(binding.keyThumbprint), "cnf_jkt": .textOrNull(binding.confirmedThumbprint),
                    "identity_source": sourceJSON,
                ].merging(details.map { ($0.key, .text($0.value)) }) { first, _ in first })
            } else {
                print("profile:        \(Terminal.printable(choice.name, limit: 200))\(choice.provenance.map { " (\($0))" } ?? "")")
                // Claims and the issuer come from the provider: escaped before they reach the terminal.
                if let shown = identity.shown {
                    print("user:           \(shown)\(subject.map { ", sub \(Terminal.printable($0))" } ?? "")")
                } else {
                    print("user:           \(Terminal.printable(user.preferredUsername ?? user.id.rawValue))")
                }
                print("issuer:         \(Terminal.printable(profile.credentials.issuer ?? profile.source.endpoint, limit: 500))")
                print("expires:        \(expiresAt.map { $0.formatted(.iso8601) } ?? "never")\(expired ? " (expired)" : "")")
                print("refresh token:  \(profile.credentials.refreshToken != nil ? "yes" : "no")")
                print("id token:       \(profile.credentials.idToken != nil ? "yes" : "no")")
                print("binding:        \(binding.summary)")
                if let confirmation = binding.confirmationSummary { print("cnf.jkt:        \(confirmation)") }
                if !sources.isEmpty {
                    let shown = sources.map { source in source.kind + " (" + source.use.text + ")" }
                    print("identity source: \(shown.joined(separator: ", "))")
                }
                print("store:          \(opened.location)\(storage == nil && opened.isSealed ? " (sealed)" : "")")
                if let storage { print("storage:        \(Terminal.printable(storage.description, limit: 500))") }
                for detail in details {
                    print("\(detail.label + ":")\(String(repeating: " ", count: max(1, 16 - detail.label.count - 1)))\(Terminal.printable(detail.value, limit: 500))")
                }
            }
        }
    }
}

/// `loginkit verify - --issuer URL [--audience A]`: verify a JWT (read from stdin) against the issuer's keys.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Verify a JWT against the issuer's JWKS and print its claims as JSON.",
        discussion: """
            Pass the token on standard input: `loginkit verify - --issuer URL < token.jwt`, or \
            `loginkit token | loginkit verify - --issuer URL`. A token given as an argument is readable \
            by every local user for as long as the command runs (ps, /proc/PID/cmdline) and may land in \
            the shell's history; loginkit warns when it gets one.
            """
    )

    @Argument(help: "- to read the JWT from standard input (a JWT given here is visible to other local users).") var token: String
    @Option(help: "The issuer (default: $LOGINKIT_ISSUER).") var issuer: String?
    @Option(help: "The expected audience; without it the audience is not checked.") var audience: String?
    @Flag(help: "Print more detail about failures.") var verbose = false
    @OptionGroup var networkOptions: NetworkOptions

    func run() async throws {
        Terminal.verbose = verbose
        if token != "-" {
            Terminal.warning(
                "a token on the command line is readable by other local users (ps, /proc) and may be kept in the shell history; "
                    + "pass - and the token on standard input instead"
            )
        }
        try await reportingFailures {
            guard let issuer = issuer ?? ProcessInfo.processInfo.environment["LOGINKIT_ISSUER"] else {
                throw CLIFailure.usage("name the issuer with --issuer")
            }
            let jwt = token == "-" ? try Terminal.readSecretLine("token") : token
            let clientConfiguration = try networkOptions.clientConfiguration()
            let claims = try await CurlHTTPClient.withClient(configuration: clientConfiguration) { client in
                let api = OAuth2API(configuration: .init(issuer: issuer, clientID: audience ?? "-"), transport: client)
                guard let jwksURI = try await api.metadata().jwksURI else {
                    throw CLIFailure(exitCode: 5, "the issuer publishes no jwks_uri")
                }
                var rules = IDTokenVerifier.Configuration(issuer: issuer, audience: audience ?? "")
                rules.checksAudience = audience != nil
                rules.requiresIssuedAt = false
                let verifier = IDTokenVerifier(configuration: rules, keys: JWKSSource(url: jwksURI, transport: client))
                return try await verifier.verify(jwt).claims
            }
            print(JSONValue.object(claims.all).serialized)
        }
    }
}
#endif
