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
    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        guard minValidity >= 0 else { throw ValidationError("--min-validity must be zero or more seconds") }
    }

    func run() async throws {
        try await reportingFailures {
            let token = try await CurlHTTPClient.withClient { client in
                let (service, _) = try await APIFactory.service(options: storeOptions, transport: client)
                let credentials = try await service.validCredentials(minimumValidity: .seconds(minValidity))
                if access {
                    guard let accessToken = credentials.accessToken else {
                        throw CLIFailure(exitCode: 1, "the provider issued no access token for this profile")
                    }
                    return accessToken
                }
                guard credentials.idToken != nil else {
                    throw CLIFailure(exitCode: 1, "the provider issued no ID token for this profile; use `loginkit token --access`")
                }
                return try await service.validIDToken().rawValue
            }
            FileHandle.standardOutput.write(Data((token + "\n").utf8))
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
                print("user:           \(user.preferredUsername ?? user.id.rawValue)")
                print("issuer:         \(profile.credentials.issuer ?? profile.source.endpoint)")
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
    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        try await reportingFailures {
            try await CurlHTTPClient.withClient { client in
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

/// `loginkit verify TOKEN --issuer URL [--audience A]`: verify a JWT against the issuer's keys.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Verify a JWT against the issuer's JWKS and print its claims as JSON."
    )

    @Argument(help: "The JWT (use - to read it from standard input).") var token: String
    @Option(help: "The issuer (default: $LOGINKIT_ISSUER).") var issuer: String?
    @Option(help: "The expected audience; without it the audience is not checked.") var audience: String?
    @Flag(help: "Print more detail about failures.") var verbose = false

    func run() async throws {
        Terminal.verbose = verbose
        try await reportingFailures {
            guard let issuer = issuer ?? ProcessInfo.processInfo.environment["LOGINKIT_ISSUER"] else {
                throw CLIFailure.usage("name the issuer with --issuer")
            }
            let jwt = token == "-" ? try Terminal.readSecretLine("token") : token
            let claims = try await CurlHTTPClient.withClient { client in
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
