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

/// `loginkit demo`: the dev identity provider (`loginkit-dev-server`, a child process) on a free
/// port and a tour in a temporary store.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Start the dev identity provider on a free loopback port and walk through LoginKit."
    )

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("loginkit-demo-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await reportingFailures {
            try await DevServerProcess.withServer { server in
                try await CurlHTTPClient.withClient { client in
                    try await tour(server: server, client: client, storePath: directory + "/tokens.json")
                }
            }
        }
    }

    @MainActor
    private func tour(server: DevServerProcess, client: CurlHTTPClient, storePath: String) async throws {
        let started = ContinuousClock.now
        print("LoginKit demo — dev identity provider at \(server.issuer) (\(DevServerProcess.executableName), process \(server.pid))")
        print("store: \(storePath) (temporary)\n")
        let store = try IDTokenStore(path: storePath, sealing: .none)
        let api = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-cli"), transport: client)
        let service = AuthService(api: api, store: store)

        step(1, "Log in as demo/demo through LoginViewModel (the CLI's `login` drives the same view-model)")
        let viewModel = LoginViewModel(service: service)
        viewModel.id = "demo"
        viewModel.password = "wrong password"
        await viewModel.loginButtonPressed()
        print("   wrong password → \(viewModel.loginErrorMessage?.text ?? "?")")
        viewModel.password = "demo"
        var dismissals = viewModel.dismissals.makeAsyncIterator()
        await viewModel.loginButtonPressed()
        guard await dismissals.next() != nil else { throw CLIFailure(exitCode: 1, "the demo login failed") }
        print("   right password → logged in; button enabled again: \(viewModel.isLoginButtonEnabled)\n")

        step(2, "Sign in through the browser (authorization code + PKCE), with a scripted browser doing the clicking")
        let browser = ScriptedBrowserLauncher(executable: server.executable)
        var browserLogin = BrowserLogin.Configuration()
        browserLogin.timeout = .seconds(30)
        let user = try await service.logInWithBrowser(browserLogin, launcher: browser)
        print("   $BROWSER=\(browser.command): no person clicked; a scripted browser loaded the sign-in page,")
        print("   entered demo/demo and followed the redirect to this process's loopback listener (its own line is on stderr)")
        print("   → signed in as \(user.id): code exchanged with the PKCE verifier, state and nonce checked\n")

        step(3, "The user and the verified ID token's claims")
        print("   user: id \(user.id), preferred_username \(user.preferredUsername ?? "-"), nickname \(user.nickname ?? "-"), birthdate \(user.birthdate ?? "-")")
        let idToken = try await service.validIDToken()
        let claims = try idToken.unverifiedClaims()
        print("   claims (signature checked against \(server.issuer)/.well-known/jwks.json at login):")
        for name in ["iss", "sub", "aud", "preferred_username", "iat", "exp"] {
            print("     \(name): \(claims[name]?.serialized ?? "-")")
        }
        print("")

        step(4, "100 concurrent requests for a token that has expired → one refresh")
        guard var profile = try await store.profile(named: "default") else { throw CLIFailure(exitCode: 1, "no profile") }
        profile.credentials.expiresAt = Date().addingTimeInterval(-1)
        profile.credentials.idTokenExpiresAt = Date().addingTimeInterval(-1)
        profile.updatedAt = Date().addingTimeInterval(-3601)
        try await store.save(profile, as: "default")  // as if an hour had passed
        let before = try await server.requestCount(path: "/oauth/token", client: client)
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<100 { group.addTask { try await service.validIDToken().rawValue } }
            var distinct = Set<String>()
            for try await token in group { distinct.insert(token) }
            return distinct
        }
        let refreshes = try await server.requestCount(path: "/oauth/token", client: client) - before
        print("   100 callers got \(tokens.count) distinct token; the server counted \(refreshes) token request(s)\n")

        step(5, "An outdated version is refused by the version gate")
        try await server.setMinimumVersion("9.0.0", client: client)
        let gate = VersionGate(
            configuration: .init(url: server.issuer + "/version-policy", currentVersion: try SemanticVersion(parsing: LoginKitCLI.version.description)),
            transport: client
        )
        let gated = AuthService(api: api, store: InMemoryTokenStore(), gate: gate)
        do {
            _ = try await gated.logIn(for: User.ID(rawValue: "demo"), with: "demo")
            print("   unexpectedly allowed")
        } catch let error as LoginError where error.code == .upgradeRequired {
            guard let policy = error.upgradePolicy, let current = error.currentVersion else { throw error }
            print("   loginkit \(current) < minimum \(policy.version): \"\(policy.title): \(policy.message)\" (\(policy.url ?? "-"))")
            print("   the CLI exits with code 6 in this case\n")
        }

        step(6, "Log out: revoke at the provider, delete the profile")
        await service.logOut()
        let revocations = try await server.requestCount(path: "/oauth/revoke", client: client)
        print("   revocation requests: \(revocations); profile left: \(try await store.profile(named: "default") == nil ? "none" : "still there")")
        do {
            _ = try await service.validIDToken()
        } catch let error as LoginRequiredError {
            print("   a token request now says: \(error.message) (CLI exit code 3)\n")
        }

        try await dpopStep(server: server, client: client, store: store)
        let elapsed = (ContinuousClock.now - started).components
        let milliseconds = elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
        print("Done in \(milliseconds) ms. Next: `make test` runs every test.")
    }

    /// A DPoP-bound login (RFC 9449): the access token names the key's thumbprint in `cnf.jkt`, a
    /// request with a proof from the key is served, the same token as a bearer token is refused.
    @MainActor
    private func dpopStep(server: DevServerProcess, client: CurlHTTPClient, store: IDTokenStore) async throws {
        step(7, "A DPoP-bound token (RFC 9449): useless without this profile's key")
        var configuration = OAuth2API.Configuration(issuer: server.issuer, clientID: "loginkit-cli")
        configuration.dpopAlgorithm = .es256
        let service = AuthService(api: OAuth2API(configuration: configuration, transport: client), store: store, profile: "dpop")
        _ = try await service.logIn(for: User.ID(rawValue: "demo"), with: "demo")
        let credentials = try await service.validCredentials()
        let binding = TokenBinding(credentials)
        guard let thumbprint = binding.keyThumbprint, let accessToken = credentials.accessToken else {
            throw CLIFailure(exitCode: 1, "the DPoP login brought no key or no access token")
        }
        print("   logged in as demo/demo with a DPoP proof from a new ES256 key: token_type \(Terminal.printable(credentials.tokenType ?? "-"))")
        print("   key thumbprint (RFC 7638):  \(thumbprint)")
        let confirmed = binding.confirmedThumbprint.map { Terminal.printable($0, limit: 100) } ?? "none"
        print("   access token's cnf.jkt:     \(confirmed) — \(binding.matches == true ? "equals" : "does not equal") the key's thumbprint")
        guard let resource = HTTPRequest(method: .get, url: server.issuer + "/api/resource") else {
            throw CLIFailure(exitCode: 1, "the dev server's address \(server.issuer) is not a URL")
        }
        let (response, body) = try await service.send(resource)
        let tokenType = (try? JSONValue.parse(body))?["token_type"]?.serialized ?? "-"
        print("   GET /api/resource through AuthService.send (Authorization: DPoP and a fresh proof)")
        print("   → HTTP \(response.status.code), \"token_type\": \(Terminal.printable(tokenType, limit: 100))")
        var bearer = resource
        bearer.headerFields[.authorization] = "Bearer " + accessToken
        let (refused, _) = try await client.send(bearer, body: nil)
        let challenge = refused.headerFields[.wwwAuthenticate].map { Terminal.printable($0, limit: 200) } ?? "-"
        print("   the same token sent as Bearer, without a proof → HTTP \(refused.status.code) (WWW-Authenticate: \(challenge))")
        print("   the CLI: `loginkit login --dpop`, `loginkit request URL`, `loginkit status` shows the binding\n")
    }

    private func step(_ number: Int, _ title: String) {
        print("\(number). \(title)")
    }
}

/// `$BROWSER` set to `loginkit-dev-server browse`, opened by `SystemBrowserLauncher` as any
/// `$BROWSER` is. A scripted browser that could not sign in ends the login at once, instead of
/// leaving it waiting for a redirect that will not come.
struct ScriptedBrowserLauncher: BrowserLauncher {
    /// The `$BROWSER` value: the executable (quoted when it has to be) and `browse`.
    let command: String
    private let system: SystemBrowserLauncher

    init(executable: String) {
        command = Self.quotedWord(executable) + " browse"
        var environment = ProcessInfo.processInfo.environment
        environment["BROWSER"] = command
        system = SystemBrowserLauncher(environment: environment)
    }

    func open(_ url: String) async throws {
        do {
            try await system.open(url)
        } catch let error as LoginError where error.code == .browserUnavailable {
            throw CLIFailure(exitCode: 1, "the scripted browser could not sign in: \(error.message)")
        }
    }

    /// `word` as `$BROWSER` splits it back into one word: single-quoted unless it is plain.
    static func quotedWord(_ word: String) -> String {
        let plain = !word.isEmpty && word.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "/._-+,=@".contains($0)) }
        return plain ? word : "'" + word.replacing("'", with: "'\\''") + "'"
    }
}
#endif
