import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit

/// `--profile`, `--store`, `--verbose`: shared by every command that touches the store.
struct StoreOptions: ParsableArguments {
    @Option(help: "The profile to use (default: $LOGINKIT_PROFILE, else \"default\").")
    var profile: String?

    @Option(help: "The token store file (default: $LOGINKIT_STORE, else $XDG_STATE_HOME/loginkit/tokens.json).")
    var store: String?

    @Flag(help: "Print more detail about failures.")
    var verbose = false

    var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// Flags beat variables.
    var profileName: String { profile ?? environment["LOGINKIT_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default" }

    func openStore() throws -> IDTokenStore {
        Terminal.verbose = verbose
        do {
            return try IDTokenStore(path: store, sealing: .environment, environment: environment)
        } catch {
            throw CLIFailure(error)
        }
    }
}

/// `--ca-file`: shared by every command that sends requests.
struct NetworkOptions: ParsableArguments {
    @Option(
        name: .customLong("ca-file"),
        help: "A PEM file of CA certificates to trust instead of the system's (default: $LOGINKIT_CA_FILE, else $CURL_CA_BUNDLE, else $SSL_CERT_FILE)."
    )
    var caFile: String?

    /// The HTTP client's configuration. The CA file comes from `--ca-file`, else the first of
    /// `LOGINKIT_CA_FILE`, `CURL_CA_BUNDLE` and `SSL_CERT_FILE` that is set (curl reads the last two
    /// the same way); else `SSL_CERT_DIR` names a CA directory. TLS verification stays on.
    ///
    /// - Throws: a usage failure (exit 2) when the CA file named does not exist or cannot be read.
    func clientConfiguration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> CurlHTTPClient.Configuration {
        var configuration = CurlHTTPClient.Configuration()
        var candidates: [(String, String?)] = [("--ca-file", caFile)]
        for name in ["LOGINKIT_CA_FILE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"] { candidates.append(("$" + name, environment[name])) }
        for case let (origin, path?) in candidates where !path.isEmpty {
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw CLIFailure.usage("the CA file \"\(path)\" (\(origin)) does not exist or cannot be read")
            }
            configuration.tls.caFile = path
            return configuration
        }
        if let directory = environment["SSL_CERT_DIR"], !directory.isEmpty {
            configuration.tls.caDirectory = directory
        }
        return configuration
    }
}

/// Builds the API a stored profile came from, so that `token` works with nothing but `--profile`.
enum APIFactory {
    /// `attributes` are the profile's: explicit endpoints recorded at login (``EndpointAttributes``).
    static func api(
        for source: CredentialSource, attributes: [String: String] = [:], transport: any HTTPTransport, clientSecret: String?
    ) throws -> any AuthAPI {
        switch source.kind {
        case .oauth2:
            let configuration = try oauth2Configuration(for: source, attributes: attributes, clientSecret: clientSecret)
            return OAuth2API(configuration: configuration, transport: transport)
        case .cognito:
            guard let clientID = source.clientID, let poolID = source.poolID, let region = source.region else {
                throw CLIFailure(exitCode: 1, "the profile lacks its Cognito pool, client or region; log in again")
            }
            return CognitoAPI(configuration: .init(poolID: poolID, clientID: clientID, region: region, endpoint: source.endpoint), transport: transport)
        case .jsonLogin:
            return JSONLoginAPI(configuration: .init(loginURL: source.endpoint), transport: transport)
        }
    }

    /// The OAuth2API configuration an `oauth2` profile was logged in with: issuer, client, scope,
    /// and the explicit endpoints its `attributes` recorded.
    static func oauth2Configuration(
        for source: CredentialSource, attributes: [String: String], clientSecret: String?
    ) throws -> OAuth2API.Configuration {
        guard let clientID = source.clientID else { throw CLIFailure(exitCode: 1, "the profile has no client ID; log in again") }
        var configuration = OAuth2API.Configuration(issuer: source.endpoint, clientID: clientID, clientSecret: clientSecret)
        if let scope = source.scope { configuration.scope = scope }
        EndpointAttributes.apply(attributes, to: &configuration)
        try ClientAuthOptions.apply(attributes, to: &configuration)
        return configuration
    }

    /// The client secret from `LOGINKIT_CLIENT_SECRET` (never a flag value).
    static var environmentSecret: String? {
        ProcessInfo.processInfo.environment["LOGINKIT_CLIENT_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// An `AuthService` for the stored profile, or exit 3 when there is none.
    static func service(options: StoreOptions, transport: any HTTPTransport) async throws -> (AuthService, IDTokenStore) {
        let store = try options.openStore()
        let profile: StoredProfile?
        do {
            profile = try await store.profile(named: options.profileName)
        } catch {
            throw CLIFailure(error)
        }
        guard let profile else {
            throw CLIFailure(exitCode: 3, "not logged in (profile \"\(options.profileName)\"); run `loginkit login`")
        }
        let api = try api(for: profile.source, attributes: profile.attributes, transport: transport, clientSecret: environmentSecret)
        return (AuthService(api: api, store: store, profile: options.profileName), store)
    }
}

/// JSON output helpers.
enum JSONOutput {
    /// A value of the CLI's JSON output: text, a flag, or null.
    enum Value: Encodable {
        case text(String)
        case flag(Bool)
        case null

        /// `text`, or `null` when absent.
        static func textOrNull(_ text: String?) -> Value { text.map(Value.text) ?? .null }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .text(let text): try container.encode(text)
            case .flag(let flag): try container.encode(flag)
            case .null: try container.encodeNil()
            }
        }
    }

    /// Prints `object` pretty-printed, keys sorted.
    static func print(_ object: [String: Value]) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(object) else { return }
        Swift.print(String(decoding: data, as: UTF8.self))
    }

    /// An ISO 8601 timestamp (UTC), or `null`.
    static func timestamp(_ date: Date?) -> Value {
        .textOrNull(date?.formatted(.iso8601))
    }
}
