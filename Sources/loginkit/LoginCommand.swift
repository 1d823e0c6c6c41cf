import ArgumentParser
import Foundation
import LoginKit
import LoginKitViewModel

/// `loginkit login`: a password, device-code or client-credentials login into a profile.
struct LoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Log in and save the credentials to a profile.",
        discussion: """
            Choose the provider with --issuer (OpenID Connect), --login-url (JSON login API) or
            --cognito-pool-id with --cognito-region. The password comes from a no-echo prompt, or from
            --password-stdin. Secrets are never taken from flag values.
            """
    )

    @Option(help: "OpenID Connect issuer URL (default: $LOGINKIT_ISSUER).") var issuer: String?
    @Option(name: .customLong("login-url"), help: "JSON login API URL.") var loginURL: String?
    @Option(name: .customLong("cognito-pool-id"), help: "Amazon Cognito user pool ID.") var cognitoPoolID: String?
    @Option(name: .customLong("cognito-region"), help: "Amazon Cognito region.") var cognitoRegion: String?
    @Option(name: .customLong("cognito-endpoint"), help: "Cognito endpoint override (e.g. a local emulator).") var cognitoEndpoint: String?
    @Option(name: .customLong("client-id"), help: "Client ID (default: $LOGINKIT_CLIENT_ID).") var clientID: String?
    @Option(help: "The user to log in.") var username: String?
    @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input.") var passwordStdin = false
    @Flag(help: "Use the device authorization flow (prints a code to enter elsewhere).") var device = false
    @Flag(name: .customLong("client-credentials"), help: "Log the client itself in (secret from $LOGINKIT_CLIENT_SECRET or --client-secret-stdin).")
    var clientCredentials = false
    @Flag(name: .customLong("client-secret-stdin"), help: "Read the client secret from standard input.") var clientSecretStdin = false
    @Option(help: "The scope to ask for.") var scope: String?
    @Option(name: .customLong("version-policy"), help: "A minimum-version policy URL to check first.") var versionPolicy: String?
    @Flag(help: "Print the result as JSON on stdout.") var json = false
    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        let providers = [issuer ?? ProcessInfo.processInfo.environment["LOGINKIT_ISSUER"], loginURL, cognitoPoolID].compactMap { $0 }
        guard providers.count >= 1 else { throw ValidationError("name the provider: --issuer, --login-url or --cognito-pool-id") }
        if cognitoPoolID != nil && cognitoRegion == nil { throw ValidationError("--cognito-pool-id needs --cognito-region") }
        if device && clientCredentials { throw ValidationError("--device and --client-credentials exclude each other") }
        if passwordStdin && clientSecretStdin { throw ValidationError("only one of --password-stdin and --client-secret-stdin can read stdin") }
    }

    func run() async throws {
        try await reportingFailures {
            let store = try storeOptions.openStore()
            let environment = ProcessInfo.processInfo.environment
            try await CurlHTTPClient.withClient { client in
                let clientSecret = clientSecretStdin ? try Terminal.readSecretLine("client secret") : APIFactory.environmentSecret
                let api = try makeAPI(transport: client, clientSecret: clientSecret, environment: environment)
                let gate = try versionPolicy.map { url in
                    VersionGate(
                        configuration: .init(url: url, currentVersion: try SemanticVersion(parsing: LoginKitCLI.version.description)),
                        transport: client
                    )
                }
                let service = AuthService(api: api, store: store, profile: storeOptions.profileName, gate: gate)
                let user: User?
                if clientCredentials {
                    try await Terminal.withSpinner("Logging in…") { try await service.logInAsClient(scope: scope) }
                    user = nil
                } else if device {
                    user = try await service.logInWithDevice(scope: scope) { authorization in
                        Terminal.standardError("To sign in, open \(authorization.verificationURIComplete ?? authorization.verificationURI)")
                        Terminal.standardError("and enter the code: \(authorization.userCode)")
                    }
                } else {
                    user = try await passwordLogin(service: service)
                }
                try await report(user: user, store: store, issuer: api.source.endpoint)
            }
        }
    }

    private func makeAPI(transport: CurlHTTPClient, clientSecret: String?, environment: [String: String]) throws -> any AuthAPI {
        let clientID = clientID ?? environment["LOGINKIT_CLIENT_ID"]
        if let poolID = cognitoPoolID, let region = cognitoRegion {
            guard let clientID else { throw CLIFailure.usage("--cognito-pool-id needs --client-id") }
            return CognitoAPI(configuration: .init(poolID: poolID, clientID: clientID, region: region, endpoint: cognitoEndpoint), transport: transport)
        }
        if let loginURL {
            var verifier: IDTokenVerifier?
            if let issuer = issuer ?? environment["LOGINKIT_ISSUER"], let clientID {
                let keys = JWKSSource(url: issuer + "/.well-known/jwks.json", transport: transport)
                verifier = IDTokenVerifier(configuration: .init(issuer: issuer, audience: clientID), keys: keys)
            }
            return JSONLoginAPI(configuration: .init(loginURL: loginURL, verifier: verifier), transport: transport)
        }
        guard let issuer = issuer ?? environment["LOGINKIT_ISSUER"] else { throw CLIFailure.usage("name the provider with --issuer") }
        guard let clientID else { throw CLIFailure.usage("--issuer needs --client-id (or $LOGINKIT_CLIENT_ID)") }
        var configuration = OAuth2API.Configuration(issuer: issuer, clientID: clientID, clientSecret: clientSecret)
        if let scope { configuration.scope = scope }
        return OAuth2API(configuration: configuration, transport: transport)
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
        if let error = viewModel.lastError { throw CLIFailure(error) }
        guard let user = await dismissals.next() else { throw CLIFailure(exitCode: 1, "the login ended without a result") }
        return user
    }

    private func report(user: User?, store: IDTokenStore, issuer: String) async throws {
        let profile = try await store.profile(named: storeOptions.profileName)
        if json {
            JSONOutput.print([
                "profile": storeOptions.profileName, "user": user?.preferredUsername ?? user?.id.rawValue ?? NSNull(),
                "subject": user?.id.rawValue ?? NSNull(), "issuer": issuer,
                "expires_at": JSONOutput.timestamp(profile?.credentials.expiresAt),
                "has_refresh_token": profile?.credentials.refreshToken != nil,
                "has_id_token": profile?.credentials.idToken != nil,
            ])
        } else {
            let name = user.map { $0.preferredUsername ?? $0.id.rawValue } ?? "the client"
            Terminal.standardError("Logged in as \(name) (profile \"\(storeOptions.profileName)\").")
        }
    }
}
