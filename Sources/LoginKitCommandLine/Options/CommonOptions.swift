// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
package import LoginKit
import LoginKitHTTP

/// `--profile`, `--store`, `--verbose`: shared by every command that touches the store.
struct StoreOptions: ParsableArguments {
    @Option(
        help: """
            The profile to use (default: $LOGINKIT_PROFILE, else the nearest .loginkit file's from the working directory \
            upwards, else the store's default profile, else "default").
            """)
    var profile: String?

    @Option(
        help: """
            The token store: a file (default: $LOGINKIT_STORE, else $XDG_STATE_HOME/loginkit/tokens.json), \
            or a postgres:// URL (run by loginkit-fleet; the password goes in PGPASSWORD or $LOGINKIT_STORE).
            """)
    var store: String?

    @Option(
        help: """
            Where the store's sealing key lives: auto (default: LOGINKIT_STORE_KEY or LOGINKIT_STORE_KEY_FILE \
            when set, else the Secret Service, else the kernel keyring, else plaintext with a warning), \
            secret-service, kernel-keyring, or plaintext (default: $LOGINKIT_STORAGE, else auto).
            """)
    var storage: String?

    @Flag(help: "Print more detail about failures.")
    var verbose = false

    var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// The profile this run uses: chosen by ``ProfileContext`` when ``openStore(choosingProfile:)``
    /// opened the store (`--profile`, `LOGINKIT_PROFILE`, the nearest `.loginkit`, the store's
    /// default, `default`); before that, only `--profile` or `LOGINKIT_PROFILE`, else `default`.
    var profileName: String { profileChoice.name }

    /// ``profileName`` and where it came from.
    var profileChoice: ProfileChoice {
        ProfileContext.current ?? ProfileContext.explicitChoice(flag: profile, environment: environment)
            ?? ProfileChoice(name: ProfileContext.fallbackName, origin: .fallback)
    }

    /// What opens `postgres://` stores in this executable (`loginkit-fleet`); `nil` in `loginkit`.
    private static let fleetOpener = LockedState<(any FleetStoreOpener)?>(nil)
    static var fleet: (any FleetStoreOpener)? {
        get { fleetOpener.withLock { $0 } }
        set { fleetOpener.withLock { $0 = newValue } }
    }

    /// Opens the store — `--store`, else `LOGINKIT_STORE`, else the default file — and, unless a
    /// command names its profiles itself (`choosingProfile: false`), chooses the run's profile
    /// (``profileName``).
    ///
    /// - Throws: `CLIFailure`: what opening the store throws; exit 2 for a `.loginkit` file that is
    ///   unsafe or malformed.
    func openStore(choosingProfile: Bool = true) async throws -> CommandLineStore {
        let opened = try await openStoreOnly()
        if choosingProfile {
            ProfileContext.current = try await ProfileContext.choose(flag: profile, environment: environment, store: opened.store)
        }
        return opened
    }

    /// The store named by `--store`, else `LOGINKIT_STORE`; `nil`: the default file.
    private var givenStore: String? {
        store ?? environment["LOGINKIT_STORE"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether the store this run opens is a `postgres://` fleet store (named by `--store` or
    /// `LOGINKIT_STORE`) rather than the user's own file store.
    var namesFleetStore: Bool {
        givenStore.map(Self.isRemote) ?? false
    }

    private func openStoreOnly() async throws -> CommandLineStore {
        Terminal.verbose = verbose
        let given = givenStore
        if let given, Self.isRemote(given) {
            guard let fleet = Self.fleet else {
                throw CLIFailure(exitCode: 1, "a postgres:// store is opened by loginkit-fleet, which this loginkit did not hand over to; run loginkit-fleet")
            }
            do {
                return try await fleet.open(url: given, fromFlag: store != nil, environment: environment)
            } catch let failure as CLIFailure {
                throw failure
            } catch {
                throw CLIFailure(error)
            }
        }
        let sealing = try Self.sealing(storage ?? environment["LOGINKIT_STORAGE"], origin: storage != nil ? "--storage" : "LOGINKIT_STORAGE")
        do {
            let file = try IDTokenStore(path: store, sealing: sealing, environment: environment)
            return CommandLineStore(store: file, location: file.path, isSealed: file.isSealed)
        } catch {
            throw CLIFailure(error)
        }
    }

    /// The `--storage` / `LOGINKIT_STORAGE` choices.
    static let storageChoices = ["auto", "secret-service", "kernel-keyring", "plaintext"]

    /// The file store's sealing for a `--storage` value (`nil` or empty: `auto`).
    ///
    /// - Throws: a usage failure (exit 2) for another value.
    static func sealing(_ value: String?, origin: String) throws -> StoreSealing {
        switch value.flatMap({ $0.isEmpty ? nil : $0 }) ?? "auto" {
        case "auto":
            // One warning line per process (the CLI opens one store): the tokens are about to be
            // written in plain JSON although nobody chose that.
            return .automatic(AutomaticSealing(onPlaintextFallback: { protection in
                Terminal.warning(
                    "tokens are saved unencrypted (a 0600 file): \(protection.detail); "
                        + "set LOGINKIT_STORE_KEY, or choose --storage plaintext to silence this")
            }))
        case "secret-service": return .provider(SecretServiceKeyProvider())
        case "kernel-keyring": return .provider(KernelKeyringKeyProvider())
        case "plaintext": return .none
        case let other:
            throw CLIFailure.usage("\(origin) \"\(Terminal.printable(other))\" is not one of \(storageChoices.joined(separator: ", "))")
        }
    }

    /// The commands that take `StoreOptions`.
    static let storeCommands: Set<String> = ["login", "token", "request", "status", "logout", "store", "profiles", "git-credential", "docker-credential", "exec"]

    /// Whether `location` names a database rather than a file.
    static func isRemote(_ location: String) -> Bool {
        let lowered = location.lowercased()
        return lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://")
    }

    /// The `postgres://` store that `arguments` (`--store X`, `--store=X`: `fromFlag`) or
    /// `LOGINKIT_STORE` name, read before parsing so that `loginkit` can hand the whole run to
    /// `loginkit-fleet`. Scanning stops at `--`. A match the parser would not make (`--store` as
    /// another option's value) only means the run happens in `loginkit-fleet`, which runs every
    /// command the same way.
    static func remoteStore(arguments: [String], environment: [String: String]) -> (location: String, fromFlag: Bool)? {
        // Only the commands that open a store are handed over (`--help`, `dev-server`, `exchange`
        // run here, whatever LOGINKIT_STORE says).
        guard let command = arguments.first(where: { !$0.hasPrefix("-") }), storeCommands.contains(command) else { return nil }
        var flagged: String?
        var index = arguments.startIndex
        while index < arguments.endIndex, arguments[index] != "--" {
            let argument = arguments[index]
            if argument == "--store", index + 1 < arguments.endIndex {
                flagged = arguments[index + 1]
                index += 1
            } else if argument.hasPrefix("--store=") {
                flagged = String(argument.dropFirst("--store=".count))
            }
            index += 1
        }
        let location = flagged ?? environment["LOGINKIT_STORE"].flatMap { $0.isEmpty ? nil : $0 }
        guard let location, isRemote(location) else { return nil }
        return (location, flagged != nil)
    }

    /// Whether the URL `location` carries a password (`scheme://user:password@host…`): read as
    /// text, so that a URL no parser accepts is judged too.
    static func holdsPassword(_ location: String) -> Bool {
        guard let schemeEnd = location.firstRange(of: "://") else { return false }
        let authority = location[schemeEnd.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard let at = authority.lastIndex(of: "@") else { return false }
        return authority[..<at].contains(":")
    }

    /// A `--store` URL holding a password is refused before anything runs with it on its argv
    /// (`loginkit-fleet`), which every local user can read (`ps`, `/proc/PID/cmdline`).
    static let passwordInFlag = CLIFailure.usage(
        "the --store URL holds a password, which any local user can read on the command line; "
            + "put the URL in LOGINKIT_STORE or the password in PGPASSWORD")
}

/// A store the CLI opened, with what `status` says of it.
package struct CommandLineStore: Sendable {
    /// One more line of `status`: its JSON key, its label in the text output, its value.
    package struct Detail: Sendable {
        package var key: String
        package var label: String
        package var value: String

        package init(key: String, label: String, value: String) {
            self.key = key
            self.label = label
            self.value = value
        }
    }

    package var store: any TokenStore
    /// Where: the file's path, or the URL without its password.
    package var location: String
    package var isSealed: Bool
    /// The rows set aside as unreadable (`store quarantine`): a fleet store's; `nil` for a file.
    package var quarantine: QuarantineAccess?
    /// Lines `status` adds (a fleet store's table, namespace and quarantined rows).
    package var details: @Sendable () async throws -> [Detail]

    package init(
        store: any TokenStore, location: String, isSealed: Bool, quarantine: QuarantineAccess? = nil,
        details: @escaping @Sendable () async throws -> [Detail] = { [] }
    ) {
        self.store = store
        self.location = location
        self.isSealed = isSealed
        self.quarantine = quarantine
        self.details = details
    }
}

/// A `postgres://` store's quarantine table, as `store quarantine` reads and empties it: the rows
/// of the store's table and namespace that did not decode. Payloads never pass through here.
package struct QuarantineAccess: Sendable {
    /// One row set aside.
    package struct Row: Sendable {
        /// The row's number in the quarantine table (what `purge --id` takes).
        package var id: Int64
        /// The profile it was stored as.
        package var name: String
        /// When it was set aside.
        package var quarantinedAt: Date
        /// What did not decode.
        package var reason: String

        package init(id: Int64, name: String, quarantinedAt: Date, reason: String) {
            self.id = id
            self.name = name
            self.quarantinedAt = quarantinedAt
            self.reason = reason
        }
    }

    /// The rows, oldest first.
    package var list: @Sendable () async throws -> [Row]
    /// Deletes the rows numbered `ids`, or every one (`nil`); how many were deleted.
    package var purge: @Sendable (_ ids: [Int64]?) async throws -> Int

    package init(
        list: @escaping @Sendable () async throws -> [Row], purge: @escaping @Sendable (_ ids: [Int64]?) async throws -> Int
    ) {
        self.list = list
        self.purge = purge
    }
}

/// Opens `postgres://` stores: `loginkit-fleet` has one, `loginkit` none.
package protocol FleetStoreOpener: Sendable {
    /// Opens the store at `url`, given by `--store` (`fromFlag`) or `LOGINKIT_STORE`.
    func open(url: String, fromFlag: Bool, environment: [String: String]) async throws -> CommandLineStore
    /// Closes what `open` opened; called once the command is done, before the process exits.
    func shutdown() async
}

/// `--ca-file`, `--client-cert`, `--client-key`: shared by every command that sends requests.
struct NetworkOptions: ParsableArguments {
    @Option(
        name: .customLong("ca-file"),
        help: "A PEM file of CA certificates to trust instead of the system's (default: $LOGINKIT_CA_FILE, else $CURL_CA_BUNDLE, else $SSL_CERT_FILE)."
    )
    var caFile: String?

    @OptionGroup(title: "TLS client certificate (mutual TLS, RFC 8705)") var clientCertificateOptions: ClientCertificateOptions

    /// The HTTP client's configuration. The CA file comes from `--ca-file`, else the first of
    /// `LOGINKIT_CA_FILE`, `CURL_CA_BUNDLE` and `SSL_CERT_FILE` that is set (curl reads the last two
    /// the same way); else `SSL_CERT_DIR` names a CA directory. TLS verification stays on. The
    /// client certificate is `--client-cert`'s, when given.
    ///
    /// - Throws: a usage failure (exit 2) when the CA file named does not exist or cannot be read.
    func clientConfiguration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> CurlHTTPClient.Configuration {
        var configuration = CurlHTTPClient.Configuration()
        clientCertificateOptions.apply(to: &configuration)
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
    /// `attributes` are the profile's: explicit endpoints recorded at login (``EndpointAttributes``),
    /// and identity sources, taken only from the user's own file store (`store`, the one the
    /// profile was read from: ``SourceAttributes/apply(_:to:from:)``).
    static func api(
        for source: CredentialSource, attributes: [String: String] = [:], from store: any TokenStore, transport: any HTTPTransport,
        clientSecret: String?
    ) throws -> any AuthAPI {
        switch source.kind {
        case .oauth2:
            let configuration = try oauth2Configuration(for: source, attributes: attributes, from: store, clientSecret: clientSecret)
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

    /// The OAuth2API configuration an `oauth2` profile (read from `store`) was logged in with:
    /// issuer, client, scope, and what its `attributes` recorded — explicit endpoints, client
    /// authentication, and the identity sources (``SourceAttributes``) asked again when its token
    /// is renewed, which only the user's own file store may name.
    ///
    /// - Throws: `CLIFailure` exit 1 for a profile without a client ID, and what
    ///   ``SourceAttributes/apply(_:to:from:)`` throws.
    static func oauth2Configuration(
        for source: CredentialSource, attributes: [String: String], from store: any TokenStore, clientSecret: String?,
        secretClientID: String? = nil, secretIssuer: String? = nil
    ) throws -> OAuth2API.Configuration {
        guard let clientID = source.clientID else { throw CLIFailure(exitCode: 1, "the profile has no client ID; log in again") }
        let environment = ProcessInfo.processInfo.environment
        // LOGINKIT_CLIENT_SECRET goes only to the client and issuer it was given for, and only to a
        // profile whose login recorded a secret method (a public client's takes none).
        let owner = OAuth2API.ClientSecretOwner(
            clientID: secretClientID ?? environment["LOGINKIT_CLIENT_ID"].flatMap { $0.isEmpty ? nil : $0 },
            issuer: secretIssuer ?? environment["LOGINKIT_ISSUER"].flatMap { $0.isEmpty ? nil : $0 })
        let accepted = StoredProfile.acceptsClientSecret(source: source, attributes: attributes, from: owner)
        var configuration = OAuth2API.Configuration(issuer: source.endpoint, clientID: clientID, clientSecret: accepted ? clientSecret : nil)
        configuration.clientSecretOwner = owner
        if let scope = source.scope { configuration.scope = scope }
        EndpointAttributes.apply(attributes, to: &configuration)
        try ClientAuthOptions.apply(attributes, to: &configuration)
        try SourceAttributes.apply(attributes, to: &configuration, from: store)
        return configuration
    }

    /// The client secret from `LOGINKIT_CLIENT_SECRET` (never a flag value).
    static var environmentSecret: String? {
        ProcessInfo.processInfo.environment["LOGINKIT_CLIENT_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// JSON output helpers.
enum JSONOutput {
    /// A value of the CLI's JSON output: text, a flag, a whole number, null, or an object of them.
    enum Value: Encodable {
        case text(String)
        case flag(Bool)
        case number(Int64)
        case null
        case object([String: Value])

        /// `text`, or `null` when absent.
        static func textOrNull(_ text: String?) -> Value { text.map(Value.text) ?? .null }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .text(let text): try container.encode(text)
            case .flag(let flag): try container.encode(flag)
            case .number(let number): try container.encode(number)
            case .null: try container.encodeNil()
            case .object(let members): try container.encode(members)
            }
        }
    }

    /// Prints `object` pretty-printed, keys sorted.
    static func print(_ object: [String: Value]) {
        printEncoded(object)
    }

    /// Prints `objects` as one JSON array, pretty-printed, keys sorted; `[]` when there are none.
    static func printArray(_ objects: [[String: Value]]) {
        guard !objects.isEmpty else {
            Swift.print("[]")
            return
        }
        printEncoded(objects)
    }

    private static func printEncoded(_ value: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else { return }
        Swift.print(String(decoding: data, as: UTF8.self))
    }

    /// An ISO 8601 timestamp (UTC), or `null`.
    static func timestamp(_ date: Date?) -> Value {
        .textOrNull(date?.formatted(.iso8601))
    }
}
#endif
