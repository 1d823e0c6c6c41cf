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
            The subject token comes from standard input (--subject-token -), never a flag value; an \
            actor token (delegation) from a file of the user's own. The client authenticates as for \
            `login`: $LOGINKIT_CLIENT_SECRET, or --private-key. Prints the issued token and a newline, \
            or with --json its type and expiry too. A subject token, target or scope the provider \
            refuses (invalid_grant, invalid_target, invalid_scope) is exit 4.
            """
    )

    @Option(help: "The OpenID Connect issuer (default: $LOGINKIT_ISSUER).") var issuer: String?
    @Option(name: .customLong("client-id"), help: "The client ID (default: $LOGINKIT_CLIENT_ID).") var clientID: String?
    @Option(name: .customLong("subject-token"), help: "- to read the subject token from standard input.") var subjectToken: String
    @Option(name: .customLong("subject-token-type"), help: "Its type URI (default: urn:ietf:params:oauth:token-type:access_token).")
    var subjectTokenType = TokenExchangeRequest.accessTokenType
    @Option(name: .customLong("actor-token-file"), help: "A file holding the actor's token (delegation); mode 0600.") var actorTokenFile: String?
    @Option(name: .customLong("actor-token-type"), help: "The actor token's type URI (default: …:access_token).") var actorTokenType: String?
    @Option(name: .customLong("requested-token-type"), help: "The type of token wanted.") var requestedTokenType: String?
    @Option(name: .customLong("resource"), help: "A resource the new token is for (RFC 8707); repeatable.") var resources: [String] = []
    @Option(help: "The audience the new token is for.") var audience: String?
    @Option(help: "The scope of the new token.") var scope: String?
    @Flag(help: "Print JSON (token, issued_token_type, expires_at) instead of the bare token.") var json = false
    @OptionGroup(title: "Client authentication") var clientAuthOptions: ClientAuthOptions
    @OptionGroup var networkOptions: NetworkOptions

    func validate() throws {
        guard subjectToken == "-" else {
            throw ValidationError("--subject-token takes - (standard input): a token on the command line is readable by other local users")
        }
        if actorTokenType != nil && actorTokenFile == nil { throw ValidationError("--actor-token-type needs --actor-token-file") }
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
            let subject = try Terminal.readSecretLine("subject token")
            let actor = try actorTokenFile.map { try Self.readPrivateFile($0) }
            var configuration = OAuth2API.Configuration(issuer: issuer, clientID: clientID, clientSecret: APIFactory.environmentSecret)
            configuration.scope = ""
            try clientAuthOptions.apply(to: &configuration)
            let request = TokenExchangeRequest(
                subjectToken: subject, subjectTokenType: subjectTokenType, actorToken: actor, actorTokenType: actorTokenType,
                requestedTokenType: requestedTokenType, target: TokenTarget(resources: resources, audience: audience, scope: scope))
            let clientConfiguration = try networkOptions.clientConfiguration()
            let exchanged: ExchangedToken
            do {
                exchanged = try await ClientAuthOptions.namingMissingCredential(of: configuration) {
                    try await CurlHTTPClient.withClient(configuration: clientConfiguration) { client in
                        try await OAuth2API(configuration: configuration, transport: client).exchangeToken(request)
                    }
                }
            } catch let error as LoginError where error.code == .invalidScope {
                // The subject token's grant does not cover the scope asked for: a refusal of what
                // was presented (exit 4), not a configuration to fix with --scope (exit 2). The
                // message names the scope asked for and the provider's code.
                let named = error.message.contains("invalid_scope") ? error.message : error.message + " (invalid_scope)"
                throw CLIFailure(exitCode: 4, "the exchange was refused: \(named)", detail: "\(error)")
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
