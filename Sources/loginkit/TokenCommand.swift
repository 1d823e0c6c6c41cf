import ArgumentParser
import Foundation
import LoginKit

/// `loginkit token`: a valid token and a newline on stdout, nothing else.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print a valid token (refreshing it if needed) and a newline.",
        discussion: "Prints the ID token, or the access token with --access. Concurrent invocations refresh once."
    )

    @Flag(help: "Print the access token instead of the ID token.") var access = false
    @Option(name: .customLong("min-validity"), help: "Seconds the token must stay valid (refresh otherwise).") var minValidity: Int = 0
    @OptionGroup var networkOptions: NetworkOptions
    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        guard minValidity >= 0 else { throw ValidationError("--min-validity must be zero or more seconds") }
    }

    func run() async throws {
        try await reportingFailures {
            let clientConfiguration = try networkOptions.clientConfiguration()
            let token = try await CurlHTTPClient.withClient(configuration: clientConfiguration) { client in
                let (service, _) = try await APIFactory.service(options: storeOptions, transport: client)
                let token: Result<String, any Error>
                do { token = .success(try await self.token(from: service)) } catch { token = .failure(error) }
                // A background refresh whose request has left (the advisory window) is awaited, so
                // that the rotated refresh token is saved before this short-lived process exits.
                await service.shutdown()
                return try token.get()
            }
            FileHandle.standardOutput.write(Data((token + "\n").utf8))
        }
    }
}

extension TokenCommand {
    func token(from service: AuthService) async throws -> String {
        let minimum = Duration.seconds(minValidity)
        if access {
            do {
                return try await service.validAccessToken(minimumValidity: minimum)
            } catch let error as LoginRequiredError where error.code == .noAccessToken {
                throw CLIFailure(exitCode: 1, "the provider issued no access token for this profile")
            }
        }
        do {
            return try await service.validIDToken(minimumValidity: minimum).rawValue
        } catch let error as LoginRequiredError where error.code == .noIDToken {
            throw CLIFailure(exitCode: 1, "the provider issued no ID token for this profile; use `loginkit token --access`")
        }
    }
}

/// `loginkit status`: what a profile holds, never a token.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Show a profile's state (never prints a token).")

    @Flag(help: "Print JSON on stdout.") var json = false
    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        try await reportingFailures {
            let store = try storeOptions.openStore()
            guard let profile = try await store.profile(named: storeOptions.profileName) else {
                throw CLIFailure(exitCode: 3, "not logged in (profile \"\(storeOptions.profileName)\"); run `loginkit login`")
            }
            let user = User(credentials: profile.credentials, fallbackID: User.ID(rawValue: profile.userID ?? ""))
            let expiresAt = profile.credentials.expiresAt
            let expired = expiresAt.map { $0 <= Date() } ?? false
            if json {
                JSONOutput.print([
                    "profile": storeOptions.profileName, "user": user.preferredUsername ?? user.id.rawValue,
                    "subject": user.id.rawValue, "issuer": profile.credentials.issuer ?? profile.source.endpoint,
                    "api": profile.source.kind.rawValue, "client_id": profile.source.clientID ?? NSNull(),
                    "expires_at": JSONOutput.timestamp(expiresAt), "expired": expired,
                    "has_refresh_token": profile.credentials.refreshToken != nil,
                    "has_id_token": profile.credentials.idToken != nil,
                    "store": store.path, "sealed": store.isSealed,
                ])
            } else {
                print("profile:        \(storeOptions.profileName)")
                // Claims and the issuer come from the provider: escaped before they reach the terminal.
                print("user:           \(Terminal.printable(user.preferredUsername ?? user.id.rawValue))")
                print("issuer:         \(Terminal.printable(profile.credentials.issuer ?? profile.source.endpoint, limit: 500))")
                print("expires:        \(expiresAt.map { ISO8601DateFormatter().string(from: $0) } ?? "never")\(expired ? " (expired)" : "")")
                print("refresh token:  \(profile.credentials.refreshToken != nil ? "yes" : "no")")
                print("id token:       \(profile.credentials.idToken != nil ? "yes" : "no")")
                print("store:          \(store.path)\(store.isSealed ? " (sealed)" : "")")
            }
        }
    }
}

/// `loginkit logout`: revoke (unless `--no-revoke`) and delete the profile.
struct LogoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "logout", abstract: "Revoke the tokens and delete the profile.")

    @Flag(name: .customLong("no-revoke"), help: "Delete the profile without revoking at the provider.") var noRevoke = false
    @OptionGroup var networkOptions: NetworkOptions
    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        try await reportingFailures {
            let clientConfiguration = try networkOptions.clientConfiguration()
            try await CurlHTTPClient.withClient(configuration: clientConfiguration) { client in
                let (service, store) = try await APIFactory.service(options: storeOptions, transport: client)
                if noRevoke {
                    try await store.removeProfile(named: storeOptions.profileName)
                } else {
                    await service.logOut()
                }
            }
            Terminal.standardError("Logged out (profile \"\(storeOptions.profileName)\").")
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
