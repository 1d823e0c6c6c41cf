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

/// `loginkit exchange`: RFC 8693 token exchange; the new token and a newline on stdout.
struct ExchangeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exchange",
        abstract: "Exchange a token for one for another audience, resource or scope (RFC 8693).",
        discussion: """
            The subject token comes from standard input (--subject-token -), never a flag value, or from \
            an identity source (--subject-token-source SOURCE: a workload's token, of type jwt unless \
            --subject-token-type says otherwise); an actor token (delegation) from a file of the user's \
            own (--actor-token-file) or a source (--actor-token-source). A token type is jwt, id_token, \
            access_token, refresh_token or a type URI. The client authenticates as for `login`: \
            $LOGINKIT_CLIENT_SECRET, or --private-key. Prints the issued token and a newline, or with \
            --json its type and expiry too. A subject token, target or scope the provider refuses \
            (invalid_grant, invalid_target, invalid_scope) is exit 4. A source's token goes only to a \
            token endpoint on the issuer's origin, or to the one --token-endpoint gives: a discovered \
            one elsewhere is refused before any source is asked (exit 5).
            """ + "\n\n" + SourceOptions.discussion
    )

    @Option(help: "The OpenID Connect issuer (default: $LOGINKIT_ISSUER).") var issuer: String?
    @Option(name: .customLong("client-id"), help: "The client ID (default: $LOGINKIT_CLIENT_ID).") var clientID: String?
    @Option(name: .customLong("token-endpoint"), help: "The token endpoint; wins over discovery.") var tokenEndpoint: String?
    @Option(name: .customLong("subject-token"), help: "- to read the subject token from standard input.") var subjectToken: String?
    @Option(
        name: .customLong("subject-token-source"),
        help: ArgumentHelp(
            "Take the subject token from this identity source instead: file:PATH, exec:PROGRAM, url:URL, github-actions[:AUDIENCE] or env:VAR.",
            valueName: "source"))
    var subjectTokenSource: String?
    @Option(
        name: .customLong("subject-token-type"),
        help: "Its type: jwt, id_token, access_token, refresh_token or a URI (default: jwt with --subject-token-source, else access_token).")
    var subjectTokenType: String?
    @Option(name: .customLong("actor-token-file"), help: "A file holding the actor's token (delegation); mode 0600.") var actorTokenFile: String?
    @Option(
        name: .customLong("actor-token-source"),
        help: ArgumentHelp("Take the actor's token (delegation) from this identity source, as --subject-token-source.", valueName: "source"))
    var actorTokenSource: String?
    @Option(
        name: .customLong("actor-token-type"),
        help: "The actor token's type, as --subject-token-type (default: jwt with --actor-token-source, else access_token).")
    var actorTokenType: String?
    @Option(name: .customLong("requested-token-type"), help: "The type of token wanted: jwt, id_token, access_token, refresh_token or a URI.")
    var requestedTokenType: String?
    @Option(name: .customLong("resource"), help: "A resource the new token is for (RFC 8707); repeatable.") var resources: [String] = []
    @Option(help: "The audience the new token is for.") var audience: String?
    @Option(help: "The scope of the new token.") var scope: String?
    @Flag(help: "Print JSON (token, issued_token_type, expires_at) instead of the bare token.") var json = false
    @OptionGroup(title: "Client authentication") var clientAuthOptions: ClientAuthOptions
    @OptionGroup(title: "Identity sources (--subject-token-source, --actor-token-source)") var sourceOptions: SourceOptions
    @OptionGroup var networkOptions: NetworkOptions

    func validate() throws {
        switch (subjectToken, subjectTokenSource) {
        case (nil, nil):
            throw ValidationError("give the subject token: --subject-token - (standard input) or --subject-token-source SOURCE")
        case (.some, .some):
            throw ValidationError("--subject-token and --subject-token-source exclude each other: the subject token comes from one of them")
        case (let token?, nil) where token != "-":
            throw ValidationError("--subject-token takes - (standard input): a token on the command line is readable by other local users")
        default:
            break
        }
        if actorTokenFile != nil && actorTokenSource != nil {
            throw ValidationError("--actor-token-file and --actor-token-source exclude each other: the actor token comes from one of them")
        }
        if actorTokenType != nil && actorTokenFile == nil && actorTokenSource == nil {
            throw ValidationError("--actor-token-type needs --actor-token-file or --actor-token-source")
        }
        for (flag, value) in [("--subject-token-type", subjectTokenType), ("--actor-token-type", actorTokenType), ("--requested-token-type", requestedTokenType)] {
            if let value, Self.tokenType(value) == nil {
                throw ValidationError("\(flag) takes jwt, id_token, access_token, refresh_token or a type URI, not \"\(Terminal.printable(value, limit: 100))\"")
            }
        }
        try sourceOptions.check([("--subject-token-source", subjectTokenSource), ("--actor-token-source", actorTokenSource)])
    }

    /// The type URI `value` names: `jwt`, `id_token`, `access_token`, `refresh_token` (RFC 8693
    /// §3), or a URI as given (anything with a colon); `nil` for another word.
    static func tokenType(_ value: String) -> String? {
        switch value {
        case "jwt": TokenExchangeRequest.jwtType
        case "id_token": TokenExchangeRequest.idTokenType
        case "access_token": TokenExchangeRequest.accessTokenType
        case "refresh_token": TokenExchangeRequest.refreshTokenType
        default: value.contains(":") ? value : nil
        }
    }

    /// The type of a token taken from `source` (`jwt` for a source, `access_token` otherwise) unless
    /// `given` names one.
    private static func tokenType(given: String?, fromSource: Bool) -> String {
        given.flatMap { tokenType($0) } ?? (fromSource ? TokenExchangeRequest.jwtType : TokenExchangeRequest.accessTokenType)
    }

    func run() async throws {
        try await reportingFailures {
            let environment = ProcessInfo.processInfo.environment
            guard let issuer = issuer ?? environment["LOGINKIT_ISSUER"].flatMap({ $0.isEmpty ? nil : $0 }) else {
                throw CLIFailure.usage("name the issuer with --issuer (or $LOGINKIT_ISSUER)")
            }
            guard let clientID = clientID ?? environment["LOGINKIT_CLIENT_ID"].flatMap({ $0.isEmpty ? nil : $0 }) else {
                throw CLIFailure.usage("name the client with --client-id (or $LOGINKIT_CLIENT_ID)")
            }
            let given = try subjectToken.map { _ in try Terminal.readSecretLine("subject token") }
            let actorFromFile = try actorTokenFile.map { try Self.readPrivateFile($0) }
            let subjectSource = try subjectTokenSource.map { try sourceOptions.source($0, flag: "--subject-token-source") }
            let actorSource = try actorTokenSource.map { try sourceOptions.source($0, flag: "--actor-token-source") }
            var configuration = OAuth2API.Configuration(issuer: issuer, clientID: clientID, clientSecret: APIFactory.environmentSecret)
            configuration.scope = ""
            if let tokenEndpoint { configuration.endpoints.token = tokenEndpoint }
            try clientAuthOptions.apply(to: &configuration)
            let clientConfiguration = try networkOptions.clientConfiguration()
            let exchanged: ExchangedToken = try await CurlHTTPClient.withClient(configuration: clientConfiguration) { client in
                let api = OAuth2API(configuration: configuration, transport: client)
                // A source's token is a bearer credential at the provider: it goes only to a token
                // endpoint on the issuer's origin or to --token-endpoint's, checked once discovery
                // is loaded and before any source is asked (no program run, no request sent).
                let sent = [("the subject token", subjectSource), ("the actor token", actorSource)].compactMap { name, source in
                    source.map { "\(name) from \($0.displayName)" }
                }
                if !sent.isEmpty { try await api.requireSourceTokenDestination(sending: sent.joined(separator: " and ")) }
                // The sources' own failures (a missing file, a program's exit status, an HTTP status)
                // are theirs, not a refusal of the client: fetched before the exchange.
                let subject = try await Self.token(given: given, source: subjectSource, transport: client)
                let actor = try await Self.token(given: actorFromFile, source: actorSource, transport: client)
                let request = TokenExchangeRequest(
                    subjectToken: subject ?? "", subjectTokenType: Self.tokenType(given: subjectTokenType, fromSource: subjectSource != nil),
                    actorToken: actor, actorTokenType: actor == nil ? nil : Self.tokenType(given: actorTokenType, fromSource: actorSource != nil),
                    requestedTokenType: requestedTokenType.flatMap { Self.tokenType($0) },
                    target: TokenTarget(resources: resources, audience: audience, scope: scope))
                return try await Self.exchange(request, with: api)
            }
            if json {
                JSONOutput.print([
                    "token": .text(exchanged.token), "issued_token_type": .text(exchanged.issuedTokenType),
                    "expires_at": JSONOutput.timestamp(exchanged.credentials.expiresAt),
                ])
            } else {
                Terminal.writeAll(exchanged.token + "\n", to: STDOUT_FILENO)
            }
        }
    }

    /// `given`, else the token `source` gives (fetched through `transport`); `nil` with neither.
    private static func token(given: String?, source: IdentitySource?, transport: any HTTPTransport) async throws -> String? {
        if let given { return given }
        return try await source?.token(transport: transport)
    }

    /// Exchanges `request` as `api`'s client.
    ///
    /// - Throws: `CLIFailure` exit 4 when the provider refuses the scope asked for; what
    ///   `exchangeToken` throws, a refused client naming the credential it lacks.
    private static func exchange(_ request: TokenExchangeRequest, with api: OAuth2API) async throws -> ExchangedToken {
        do {
            return try await ClientAuthOptions.namingMissingCredential(of: api.configuration) {
                try await api.exchangeToken(request)
            }
        } catch let error as LoginError where error.code == .invalidScope {
            // The subject token's grant does not cover the scope asked for: a refusal of what
            // was presented (exit 4), not a configuration to fix with --scope (exit 2). The
            // message names the scope asked for and the provider's code.
            let named = error.message.contains("invalid_scope") ? error.message : error.message + " (invalid_scope)"
            throw CLIFailure(exitCode: 4, "the exchange was refused: \(named)", detail: "\(error)")
        }
    }

    /// A token file of the user's own, mode 0600: its first word.
    static func readPrivateFile(_ path: String) throws -> String {
        let bytes = try ClientAuthOptions.readPrivateFile(path, what: "the actor token file")
        guard let token = String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isWhitespace).first.map(String.init) else {
            throw CLIFailure(exitCode: 2, "the actor token file \(Terminal.printable(path, limit: 300)) is empty")
        }
        return token
    }
}
#endif
