// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit

/// `--source-header`, `--source-field`, `--source-timeout`: how the identity sources a command
/// names (`login --client-assertion-source`/`--assertion-source`, `exchange
/// --subject-token-source`/`--actor-token-source`) fetch their token. The headers and field apply
/// to a `url:` source, the timeout to an `exec:` source; a header value is never printed.
struct SourceOptions: ParsableArguments {
    /// The SOURCE forms, for help texts and messages.
    static let forms = "file:PATH, exec:PROGRAM, url:URL, github-actions[:AUDIENCE] or env:VAR"

    /// Where each SOURCE form takes its token from: part of the discussion of the commands that take one.
    static let discussion = """
        SOURCE names where a workload's identity token comes from. file:PATH: a file its platform \
        writes (a Kubernetes projected service-account token), read again when it changes or when its \
        token nears expiry. exec:PROGRAM: a program run without a shell or arguments, stdin empty, \
        killed after --source-timeout seconds (1 to \(SourceOptions.timeoutRange.upperBound), default \
        30); its stdout is a bare JWT, or the JSON of \
        Google's executable-sourced credentials ({"version":1,"success":true,"token_type":...,\
        "id_token":...,"expiration_time":...}). url:URL: a GET with the --source-header headers; the \
        token is the body, or the JSON member --source-field names (a cloud metadata endpoint: \
        --source-header 'Metadata: true' --source-field access_token). github-actions[:AUDIENCE]: \
        GitHub Actions' OIDC token, from $ACTIONS_ID_TOKEN_REQUEST_URL with \
        $ACTIONS_ID_TOKEN_REQUEST_TOKEN (the job needs the permission id-token: write). env:VAR: the \
        environment variable VAR. A token is checked for expiry and fetched again when needed; it is \
        never printed.
        """

    /// The default of `--source-timeout`, in seconds.
    static let defaultTimeout = 30
    /// What `--source-timeout` (and a profile's recorded `source_timeout`) may be, in seconds: an
    /// `exec:` source's program runs while the profile's lock is held, which a refresh gives up
    /// after the CLI's refresh timeout (`AuthService.Configuration.refreshTimeout`): no program's
    /// timeout is longer.
    static let timeoutRange = 1...max(1, Int(ProfileCall.configuration.refreshTimeout.components.seconds))

    @Option(
        name: .customLong("source-header"),
        help: ArgumentHelp(
            "A header for a url: source's request, 'Name: value'; repeatable. Kept in the profile, sealed like its tokens, for the requests of later refreshes.",
            valueName: "name: value"))
    var headers: [String] = []
    @Option(
        name: .customLong("source-field"),
        help: ArgumentHelp(
            "For a url: source: the JSON member holding the token, a dot path such as access_token or data.token (default: the whole body).",
            valueName: "path"))
    var field: String?
    @Option(
        name: .customLong("source-timeout"),
        help: ArgumentHelp(
            "For an exec: source: seconds the program may run before it is killed, 1 to \(SourceOptions.timeoutRange.upperBound) (default: 30).",
            valueName: "seconds"))
    var timeout: Int?

    func validate() throws {
        _ = try headerFields()
        if let field, field.isEmpty || field.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
            throw ValidationError("--source-field takes a dot path of member names, such as access_token or data.token")
        }
        if let timeout, !Self.timeoutRange.contains(timeout) {
            throw ValidationError(
                "--source-timeout must be 1 to \(Self.timeoutRange.upperBound) seconds (the program runs while the profile's lock is held)")
        }
    }

    /// The flags given, for "apply … only" messages.
    var given: [String] {
        [("--source-header", !headers.isEmpty), ("--source-field", field != nil), ("--source-timeout", timeout != nil)].filter(\.1).map(\.0)
    }

    /// `--source-header`'s values, by name.
    ///
    /// - Throws: `ValidationError` for a value that is not `Name: value` (a token of RFC 9110
    ///   characters, a value without control characters) or a name given twice (in any case). The
    ///   message names the header, never its value.
    func headerFields() throws -> [String: String] {
        var fields: [String: String] = [:]
        var seen: Set<String> = []
        for text in headers {
            guard let colon = text.firstIndex(of: ":") else {
                throw ValidationError("--source-header takes 'Name: value', such as 'Metadata: true'")
            }
            let name = String(text[..<colon])
            guard !name.isEmpty, name.utf8.allSatisfy(Self.isTokenByte) else {
                throw ValidationError("--source-header: \"\(Terminal.printable(name, limit: 100))\" is not a header name")
            }
            let value = Self.trimmingBlanks(text[text.index(after: colon)...])
            guard value.unicodeScalars.allSatisfy({ ($0.value >= 0x20 && $0.value != 0x7F) || $0 == "\t" }) else {
                throw ValidationError("--source-header \(name): the value holds control characters")
            }
            guard seen.insert(name.lowercased()).inserted else { throw ValidationError("--source-header \(name) is given twice") }
            fields[name] = value
        }
        return fields
    }

    /// Checks the `sources` a command was given (each flag and its SOURCE, `nil` when not given):
    /// each SOURCE parses, and the flags of this group apply to one of them — the headers and the
    /// field to a `url:` source, the timeout to an `exec:` source.
    ///
    /// - Throws: `ValidationError` naming the flag.
    func check(_ sources: [(flag: String, specification: String?)]) throws {
        var kinds: Set<String> = []
        for case let (flag, specification?) in sources {
            do {
                kinds.insert(try IdentitySource(specification: specification).kindName)
            } catch {
                throw ValidationError("\(flag): \(CLIFailure(error).message)")
            }
        }
        let flags = given
        guard !flags.isEmpty else { return }
        if kinds.isEmpty {
            let named = sources.map { $0.flag }.joined(separator: " or ")
            throw ValidationError("\(flags.joined(separator: ", ")) \(flags.count == 1 ? "applies" : "apply") with \(named) only")
        }
        if !kinds.contains("url"), !headers.isEmpty || field != nil {
            throw ValidationError("--source-header and --source-field apply to a url: source only")
        }
        if !kinds.contains("exec"), timeout != nil {
            throw ValidationError("--source-timeout applies to an exec: source only")
        }
    }

    /// The source `specification` names, with this group's headers and field (a `url:` source) or
    /// timeout (an `exec:` source); a relative path made absolute (``anchored(_:)``).
    ///
    /// - Throws: `CLIFailure` exit 2 naming `flag` for a SOURCE that is none.
    func source(_ specification: String, flag: String) throws -> IdentitySource {
        let headers: [String: String]
        do {
            headers = try headerFields()
        } catch let error as ValidationError {
            throw CLIFailure.usage(error.message)
        }
        do {
            return try Self.source(Self.anchored(specification), headers: headers, field: field, timeout: timeout)
        } catch {
            throw CLIFailure.usage("\(flag): \(CLIFailure(error).message)")
        }
    }

    /// The source `specification` names; `headers` and `field` are taken by a `url:` source only,
    /// `timeout` (seconds; `nil`: the default) by an `exec:` source only.
    ///
    /// - Throws: what `IdentitySource(specification:)` throws.
    static func source(_ specification: String, headers: [String: String], field: String?, timeout: Int?) throws -> IdentitySource {
        let kind = try IdentitySource(specification: specification).kindName
        return try IdentitySource(
            specification: specification, headers: kind == "url" ? headers : [:], field: kind == "url" ? field : nil,
            timeout: .seconds(kind == "exec" ? timeout ?? defaultTimeout : defaultTimeout))
    }

    /// `specification` with a relative `file:` path, or an `exec:` path with a slash, made absolute
    /// from the working directory: the profile records it for commands run anywhere. A program
    /// named without a slash stays a name, looked up on `PATH` when it runs.
    static func anchored(_ specification: String) -> String {
        for kind in ["file:", "exec:"] where specification.hasPrefix(kind) {
            let path = String(specification.dropFirst(kind.count))
            guard !path.isEmpty, !path.hasPrefix("/"), kind == "file:" || path.contains("/") else { return specification }
            return kind + ClientAuthOptions.absolute(path)
        }
        return specification
    }

    /// Whether `byte` may be in a header name (RFC 9110 §5.6.2 `tchar`).
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    /// `text` without the spaces and tabs around it.
    private static func trimmingBlanks(_ text: Substring) -> String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !isBlank($0) }), let last = text.lastIndex(where: { !isBlank($0) }) else { return "" }
        return String(text[first...last])
    }
}

/// The identity sources a profile's login used, kept in its `attributes` so that every later
/// command asks them again when the profile's token must be renewed (there is no refresh token):
/// `client_assertion_source` (the client's assertion, `login --client-assertion-source`) and
/// `assertion_source` (the JWT-bearer grant's, `login --jwt-bearer --assertion-source`), each the
/// source's specification (`file:/path`, `exec:/path`, `url:https://…`, `github-actions:AUD`,
/// `env:VAR`); with a `url:` source `source_headers` (the headers as a JSON object: their values
/// may be secrets, kept where the tokens are — a `0600` file, sealed like them) and `source_field`;
/// with an `exec:` source `source_timeout` (seconds). Never a token.
///
/// A profile's sources are made again only from the user's own file store, only with absolute
/// paths, and only with a timeout in ``SourceOptions/timeoutRange`` (``apply(_:to:from:)``):
/// whoever can write the profile chooses what is read or run and where its token goes. Every
/// refusal names `loginkit logout --no-revoke`, which removes such a profile without making its
/// source again (a revocation would send the source's token).
enum SourceAttributes {
    static let clientAssertionSource = "client_assertion_source"
    static let assertionSource = "assertion_source"
    static let headers = "source_headers"
    static let field = "source_field"
    static let timeout = "source_timeout"

    /// What a source is used for.
    enum Use {
        /// The client's assertion (federated client authentication).
        case clientAssertion
        /// The assertion of the JWT-bearer grant (RFC 7523 §2.1).
        case jwtBearerGrant

        /// As `status` writes it.
        var text: String {
            switch self {
            case .clientAssertion: "client assertion"
            case .jwtBearerGrant: "JWT bearer grant"
            }
        }

        /// As `status --json` writes it.
        var json: String {
            switch self {
            case .clientAssertion: "client_assertion"
            case .jwtBearerGrant: "jwt_bearer"
            }
        }
    }

    /// The attributes recording `configuration`'s sources: its client assertion source, and its
    /// JWT-bearer grant's unless `includingGrant` is false; empty when it has none.
    static func attributes(of configuration: OAuth2API.Configuration, includingGrant: Bool = true) -> [String: String] {
        let sources = [
            (clientAssertionSource, configuration.clientAssertionSource),
            (assertionSource, includingGrant ? configuration.assertionGrantSource : nil),
        ]
        var attributes: [String: String] = [:]
        for case let (key, source?) in sources {
            attributes[key] = source.specification
            switch source {
            case .url(_, let headers, let field):
                if !headers.isEmpty { attributes[Self.headers] = encode(headers) }
                attributes[Self.field] = field
            case .program(_, _, let timeout):
                attributes[Self.timeout] = String(timeout.components.seconds)
            default:
                break
            }
        }
        return attributes
    }

    /// Sets the sources `attributes` record, made again from their specifications, headers, field
    /// and timeout, for a profile read from `store` — the user's own file store only
    /// (``isUsersOwn(_:)``).
    ///
    /// - Throws: `CLIFailure` exit 1, nothing read, run or sent, when `attributes` name a source and
    ///   `store` is no store of the user's own (a fleet store), and when a recorded source cannot
    ///   be made again: it does not parse, names a relative path (``relativePath(in:)``), or comes
    ///   with a `source_timeout` that is no whole number in ``SourceOptions/timeoutRange``.
    static func apply(_ attributes: [String: String], to configuration: inout OAuth2API.Configuration, from store: any TokenStore) throws {
        let recorded = [clientAssertionSource, assertionSource].filter { attributes[$0] != nil }
        guard !recorded.isEmpty else { return }
        guard isUsersOwn(store) else {
            throw CLIFailure(
                exitCode: 1,
                "the profile names an identity source (\(recorded.joined(separator: ", "))), which is used only from your own file store, not from a postgres:// fleet store: "
                    + fleetReason + "; nothing was read or sent. Log the workload in with a file store (--store FILE); " + removal)
        }
        if let specification = attributes[clientAssertionSource] {
            configuration.clientAssertionSource = try source(specification, in: attributes)
        }
        if let specification = attributes[assertionSource] {
            configuration.assertionGrantSource = try source(specification, in: attributes)
        }
    }

    /// The sources `attributes` record, the grant's first: their kind (`file`, `exec`, `url`,
    /// `github-actions`, `env`; `unknown` for one that does not parse) and use. Never a header
    /// value or a token.
    static func uses(in attributes: [String: String]) -> [(kind: String, use: Use)] {
        var uses: [(kind: String, use: Use)] = []
        for (key, use) in [(assertionSource, Use.jwtBearerGrant), (clientAssertionSource, Use.clientAssertion)] {
            guard let specification = attributes[key] else { continue }
            uses.append((kind: (try? IdentitySource(specification: specification))?.kindName ?? "unknown", use: use))
        }
        return uses
    }

    /// How to remove a profile whose source is refused, for messages: a logout that does not
    /// revoke, which is the one that does not make the source again.
    static let removal = "`loginkit logout --no-revoke` removes this profile without revoking its tokens (revoking would use the source)"

    /// Why a fleet store's rows may name no source, for messages.
    static let fleetReason =
        "a fleet store's rows can be written by other hosts (and, unsealed, by any role that can write its table), and a source planted in one could read this host's files, variables or metadata service and send them to the row's token endpoint"

    /// Whether profiles read from `store` may name identity sources: only the user's own file store
    /// (`IDTokenStore`: a `0600` file in a `0700` directory, which only its owner and root can
    /// write). A profile's source chooses what is read or run on this host and where its token
    /// goes: a row of a fleet store may have been written by another host.
    static func isUsersOwn(_ store: any TokenStore) -> Bool {
        store is IDTokenStore
    }

    /// The path of a `file:` source that is not absolute, or of an `exec:` source with a slash that
    /// is not absolute: either would be found from the working directory, where a cloned
    /// repository (whose `.loginkit` may choose the profile) puts what it likes. A program named
    /// without a slash is looked up on `PATH`. `nil`: no such path.
    static func relativePath(in specification: String) -> String? {
        for kind in ["file:", "exec:"] where specification.hasPrefix(kind) {
            let path = String(specification.dropFirst(kind.count))
            guard !path.isEmpty, !path.hasPrefix("/"), kind == "file:" || path.contains("/") else { return nil }
            return path
        }
        return nil
    }

    /// The `source_timeout` a profile recorded, in seconds; `nil` when it recorded none.
    ///
    /// - Throws: `CLIFailure` exit 1 for a value that is no whole number in ``SourceOptions/timeoutRange``.
    static func recordedTimeout(_ value: String?) throws -> Int? {
        guard let value else { return nil }
        guard let seconds = Int(value), SourceOptions.timeoutRange.contains(seconds) else {
            throw CLIFailure(
                exitCode: 1,
                "the profile's recorded source_timeout \"\(Terminal.printable(value, limit: 20))\" is not 1 to \(SourceOptions.timeoutRange.upperBound) seconds (the program runs while the profile's lock is held); log in again, with --source-timeout SECONDS; "
                    + removal
            )
        }
        return seconds
    }

    private static func source(_ specification: String, in attributes: [String: String]) throws -> IdentitySource {
        if let path = relativePath(in: specification) {
            throw CLIFailure(
                exitCode: 1,
                "the profile's identity source names the relative path \"\(Terminal.printable(path, limit: 200))\", which would be found from the working directory (a cloned repository's file or program); nothing was read or run. Log in again with an absolute path; "
                    + removal
            )
        }
        let timeout = try recordedTimeout(attributes[Self.timeout])
        do {
            let recordedHeaders = try attributes[Self.headers].map { try JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
            return try SourceOptions.source(specification, headers: recordedHeaders, field: attributes[Self.field], timeout: timeout)
        } catch {
            throw CLIFailure(
                exitCode: 1, "the profile's identity source cannot be used (\(CLIFailure(error).message)); log in again; " + removal, detail: "\(error)")
        }
    }

    private static func encode(_ headers: [String: String]) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(headers)).map { String(decoding: $0, as: UTF8.self) }
    }
}
#endif
