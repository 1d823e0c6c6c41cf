#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import LoginKitHTTP
import LoginKitJOSE

/// Where a workload's identity token comes from: the short-lived signed token its platform hands a
/// service or a CI job in place of a secret — a Kubernetes projected service-account token, a
/// GitHub Actions OIDC token, a cloud metadata endpoint's token, or a helper program's. Set it as
/// `OAuth2API.Configuration.clientAssertionSource` to authenticate the client with it, as
/// `assertionGrantSource` to trade it for tokens (the JWT-bearer grant), or pass its
/// `token(transport:)` as the subject token of a token exchange.
///
/// ```swift
/// var configuration = OAuth2API.Configuration(issuer: "https://login.example.com", clientID: "app")
/// configuration.clientAssertionSource = .file("/var/run/secrets/tokens/app")
/// ```
///
/// A program prints either a bare JWT or the JSON document of Google's executable-sourced
/// credentials (see `program(_:arguments:timeout:)`). A token is kept in this process for each
/// source value — and, for a variable or GitHub Actions, for the values the variables had — while
/// it is valid for more than 60 s (its JWT `exp`, or the program's `expiration_time`); one with no
/// readable expiry is kept for 5 minutes, and a file is read again as soon as it changes.
/// Concurrent callers share one fetch. When a program, a URL or GitHub Actions fails, the failure
/// is remembered for 10 s: calls within that time get the same error without running the program
/// or sending the request again. A file that its group or other users can write is refused, and so
/// is a variable that holds one of LoginKit's own secrets. LoginKit does not verify the token: the
/// provider it is sent to does. Errors name the source and what was wrong, never the token nor a
/// configured header value, and neither does its `description` or `dump`.
public enum IdentitySource: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// A file its platform writes, such as a Kubernetes projected service-account token: read again
    /// when it changes (rewritten in place or replaced by a rename, even while it is being read) or
    /// when its token is near expiry. Whitespace around the token is ignored. Only its owner may
    /// write it: a file (after symbolic links are followed) that its group or other users can
    /// write is refused — run `chmod go-w` on it; a root-owned file that everyone may read, as
    /// Kubernetes writes, is fine.
    case file(String)
    /// A program, run without a shell: its path (a bare name is looked up on `PATH`) and arguments,
    /// standard input `/dev/null`, standard error this process's, and stopped when it runs longer
    /// than `timeout`. It prints (at most 64 KiB) a bare JWT, or the JSON document of Google's
    /// executable-sourced credentials:
    /// `{"version":1,"success":true,"token_type":"urn:ietf:params:oauth:token-type:jwt","id_token":"…","expiration_time":1750000000}`
    /// (`token_type` may also be `urn:ietf:params:oauth:token-type:id_token`; `expiration_time`, in
    /// seconds since 1970, is optional), and on failure
    /// `{"version":1,"success":false,"code":"…","message":"…"}`. It has finished when it exits,
    /// even while a child it left in the background keeps its output open; one that a signal ends
    /// has failed, and so has one whose exit status cannot be read (in a process that ignores
    /// `SIGCHLD` or reaps every child itself, as `waitpid(-1, …)` does, the status is lost). It
    /// gets this process's environment without LoginKit's own secrets
    /// (`LOGINKIT_CLIENT_SECRET`, `LOGINKIT_STORE_KEY`, …), and is killed, with what it started in
    /// its process group, at its timeout.
    case program(String, arguments: [String] = [], timeout: Duration = .seconds(30))
    /// A `GET` of `url` with `headers`: the token is the string member at `field` of the JSON answer
    /// (a dot-separated path such as `access_token` or `data.token`), or the whole body, trimmed,
    /// when `field` is `nil`. Cloud metadata services answer this way — Azure's instance metadata
    /// service with the header `Metadata: true` and the field `access_token`.
    case url(String, headers: [String: String] = [:], field: String? = nil)
    /// The OIDC token of a GitHub Actions job, which needs `permissions: id-token: write`: a `GET`
    /// of `$ACTIONS_ID_TOKEN_REQUEST_URL` (with `audience`, when given, added to its query)
    /// authorized with `$ACTIONS_ID_TOKEN_REQUEST_TOKEN`.
    case gitHubActions(audience: String? = nil)
    /// An environment variable that holds the token, read whenever the token is needed again. Never
    /// one of LoginKit's own secrets (`LOGINKIT_CLIENT_SECRET`, `LOGINKIT_STORE_KEY`, `PGPASSWORD`,
    /// `LOGINKIT_STORE`) nor GitHub's `ACTIONS_ID_TOKEN_REQUEST_TOKEN`: those are refused.
    case environment(String)

    /// The kind and where it reads from — `file:/var/run/secrets/tokens/app`,
    /// `url:https://host/path?...` (a query hidden) — never a header value.
    public var description: String { displayName }

    /// No children: `dump` and debuggers show the ``description``, never the headers.
    public var customMirror: Mirror { Mirror(self, children: [:]) }

    /// The source's token, valid for at least 60 s beyond now when its expiry can be read: kept in
    /// this process for each source value and the values of the variables it reads, and fetched
    /// again when it nears expiry, when a file changes, or after 5 minutes for a token with no
    /// readable expiry. A program, a URL or GitHub Actions that failed is not asked again for 10 s:
    /// calls within that time get the same error at once. Safe to call from any task: concurrent
    /// callers for the same source share one fetch, and a caller that is cancelled stops waiting
    /// while the fetch goes on for the others (it is made over the first caller's `transport`).
    /// `transport` sends the requests of `url(_:headers:field:)` and `gitHubActions(audience:)`
    /// only.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` for a missing or unreadable file, a file that
    ///   other users can write, an unset variable or one that holds LoginKit's own secret, a
    ///   program that cannot be started or prints something else than a token, and a token that
    ///   has already expired; `ServerError` `.unavailable` for a program that exits with a failure
    ///   status, is ended by a signal or whose exit status cannot be read, runs past its timeout or
    ///   reports `"success": false` (with its `code` and `message`), and for a file that kept
    ///   changing while it was read;
    ///   `ServerError` `.unexpectedStatus` for an HTTP status other than 2xx, and
    ///   `.malformedResponse` for an answer without a token; `NetworkError` from `transport`. Each
    ///   message starts with the source's name; none holds the token.
    public func token(transport: any HTTPTransport) async throws -> String {
        let environment = ProcessInfo.processInfo.environment
        return try await token(transport: transport, environment: environment, key: fetchKey(in: environment, isProcessEnvironment: true))
    }

    /// `token(transport:)` with `environment` in place of this process's: what
    /// `environment(_:)` and `gitHubActions(audience:)` read, and what a program is started with
    /// (without `ChildProcess.secretVariables`). A token, a fetch or a failure is shared only with
    /// callers whose environments agree on what the source reads (`FetchKey`).
    package func token(transport: any HTTPTransport, environment: [String: String]) async throws -> String {
        try await token(transport: transport, environment: environment, key: fetchKey(in: environment, isProcessEnvironment: false))
    }

    /// The token kept under `key`, the failure remembered there, or a fetch shared by every caller
    /// of that key.
    private func token(transport: any HTTPTransport, environment: [String: String], key: FetchKey) async throws -> String {
        try refuseSecretVariable()
        if let token = try keptToken(for: key) { return token }
        return try await Self.fetches.run(key) {
            // A fetch that ended after this caller looked has kept its token or its failure: take that.
            if let token = try self.keptToken(for: key) { return token }
            return try await self.fetchAndKeep(transport: transport, environment: environment, key: key)
        }
    }

    /// The key a fetch with `environment` is kept under: the source and what it reads there. A
    /// program started with this process's environment (`isProcessEnvironment`) is keyed by that
    /// fact, one started with another by a digest of the environment it gets.
    func fetchKey(in environment: [String: String], isProcessEnvironment: Bool) -> FetchKey {
        let inputs: FetchKey.Inputs
        switch self {
        case .file, .url:
            inputs = FetchKey.Inputs()
        case .environment(let name):
            inputs = FetchKey.Inputs(values: [environment[name]])
        case .gitHubActions:
            inputs = FetchKey.Inputs(values: [environment[Self.gitHubRequestURLVariable], environment[Self.gitHubRequestTokenVariable]])
        case .program:
            inputs = FetchKey.Inputs(environmentDigest: isProcessEnvironment ? nil : Self.digest(ofChildEnvironment: environment))
        }
        return FetchKey(source: self, inputs: inputs)
    }

    /// The SHA-256 of the environment a program started with `environment` gets (its entries
    /// sorted); the entries themselves should the digest fail.
    static func digest(ofChildEnvironment environment: [String: String]) -> [UInt8] {
        #if canImport(Glibc)
            let entries = ChildProcess.childEnvironment(environment)
        #else
            let entries = environment.map { $0.key + "=" + $0.value }
        #endif
        let bytes = Array(entries.sorted().joined(separator: "\0").utf8)
        return (try? MessageDigest.sha256(bytes)) ?? bytes
    }

    /// The time tokens are judged by: the system's, or a test's within `$clock.withValue(…)` (a
    /// task-local, so tests running at once each keep their own).
    @TaskLocal static var clock: @Sendable () -> Date = { Date() }

    /// The kept token for `key` when it is still good now; throws the remembered failure of a
    /// recent fetch; `nil`: fetch.
    private func keptToken(for key: FetchKey) throws -> String? {
        let validator = currentValidator()
        let now = Self.clock()
        let kept = Self.cache.withLock { $0.kept(for: key, validator: validator, now: now) }
        return try kept?.get()
    }

    /// Fetches the token, refuses it when it has expired, and keeps it under `key`; a failure of a
    /// source that is slow or costly to ask (`remembersFailures`) is remembered there.
    private func fetchAndKeep(transport: any HTTPTransport, environment: [String: String], key: FetchKey) async throws -> String {
        Self.cache.withLock { $0.countFetch(of: self) }
        do {
            let fetched = try await fetch(transport: transport, environment: environment)
            let now = Self.clock()
            let expiresAt = [Self.jwtExpiry(of: fetched.token), fetched.statedExpiry].compactMap { $0 }.min()
            if let expiresAt, expiresAt <= now {
                let ago = Int(min(now.timeIntervalSince(expiresAt), 1e9).rounded(.up))
                throw LoginError(
                    .invalidConfiguration,
                    "\(displayName): its token expired \(ago) s ago; the platform that provides it should hand out a fresh one")
            }
            let entry = Cache.Entry(token: fetched.token, expiresAt: expiresAt, fetchedAt: now, validator: fetched.validator)
            Self.cache.withLock { $0.store(entry, for: key) }
            return fetched.token
        } catch {
            if remembersFailures, Self.isFailureOfTheSource(error) {
                let now = Self.clock()
                Self.cache.withLock { $0.remember(error, for: key, at: now) }
            }
            throw error
        }
    }

    /// Whether a failed fetch is remembered for `Cache.failureLifetime`: a program run (which may
    /// have hung until its timeout), a URL's or GitHub Actions' request. Not a file or a variable,
    /// which cost nothing to read again and may be put in place at any moment.
    var remembersFailures: Bool {
        switch self {
        case .program, .url, .gitHubActions: true
        case .file, .environment: false
        }
    }

    /// Whether `error` tells of the source rather than of the one caller whose fetch it was: not a
    /// cancellation, nor a transport its owner shut down.
    static func isFailureOfTheSource(_ error: any Error) -> Bool {
        if error is CancellationError { return false }
        if let networkError = error as? NetworkError, networkError.code == .shutdown { return false }
        return true
    }

    /// One fetch: a file or variable read, a program run or an HTTP request.
    private func fetch(transport: any HTTPTransport, environment: [String: String]) async throws -> FetchedToken {
        switch self {
        case .file(let path):
            return try readTokenFile(path)
        case .program(let path, let arguments, let timeout):
            return try await runTokenProgram(path, arguments: arguments, timeout: timeout, environment: environment)
        case .url(let url, let headers, let field):
            return try await fetchFromURL(url, headers: headers, field: field, transport: transport)
        case .gitHubActions(let audience):
            return try await fetchFromGitHubActions(audience: audience, transport: transport, environment: environment)
        case .environment(let name):
            return try readVariable(name, in: environment)
        }
    }

    /// What a kept token must still match to be handed out: a file's identity now; nothing for the
    /// other kinds (what they read in the environment is part of the `FetchKey`).
    func currentValidator() -> Validator {
        guard case .file(let path) = self else { return .unchanging }
        return .file(Self.identityOfFile(at: path))
    }

    // MARK: Tokens

    /// The longest token accepted, and the most a file or a program may hold: 64 KiB.
    static let maximumTokenLength = 64 * 1024

    /// `token`'s JWT `exp`, read without verification; `nil` for a token that is no JWT or has none.
    static func jwtExpiry(of token: String) -> Date? {
        guard let jws = try? CompactJWS(parsing: token), let claims = try? JWTClaims(payload: jws.payload),
            let exp = claims.expiresAt
        else { return nil }
        return Date(timeIntervalSince1970: exp)
    }

    /// Whether `token` reads as a compact JWS (a JWT).
    static func isJWT(_ token: String) -> Bool {
        (try? CompactJWS(parsing: token)) != nil
    }

    /// What is wrong with `token` as a token (empty, too long, spaces or control characters), or
    /// `nil`. Never the token itself.
    static func problem(with token: String) -> String? {
        if token.isEmpty { return "the token is empty" }
        if token.utf8.count > maximumTokenLength { return "the token is longer than 64 KiB" }
        if token.utf8.contains(where: { $0 < 0x21 || $0 > 0x7E }) {
            return "the token holds spaces, control characters or non-ASCII characters"
        }
        return nil
    }

    /// `text` without leading and trailing whitespace (newlines included).
    static func trimmed(_ text: String) -> String {
        guard let first = text.firstIndex(where: { !$0.isWhitespace }), let last = text.lastIndex(where: { !$0.isWhitespace }) else {
            return ""
        }
        return String(text[first...last])
    }

    // MARK: Environment variables

    /// The variables an `environment(_:)` source refuses to read: LoginKit's own secrets
    /// (`ChildProcess.secretVariables`) and GitHub's request token, which a profile someone else
    /// planted could otherwise send to a token endpoint of its choosing.
    static var refusedVariables: Set<String> {
        #if canImport(Glibc)
            return ChildProcess.secretVariables.union([gitHubRequestTokenVariable])
        #else
            return [gitHubRequestTokenVariable]
        #endif
    }

    /// Refuses an `environment(_:)` source that names one of `refusedVariables`, before anything
    /// is read.
    private func refuseSecretVariable() throws {
        guard case .environment(let name) = self, Self.refusedVariables.contains(name) else { return }
        if name == Self.gitHubRequestTokenVariable {
            throw LoginError(
                .invalidConfiguration,
                "\(displayName): holds GitHub's request token, not an identity token; use the github-actions source instead")
        }
        throw LoginError(
            .invalidConfiguration,
            "\(displayName): holds a secret of LoginKit's own, never an identity token; name the variable that holds the workload's token")
    }

    /// The token in the variable `name` of `environment`.
    private func readVariable(_ name: String, in environment: [String: String]) throws -> FetchedToken {
        guard let value = environment[name] else {
            throw LoginError(.invalidConfiguration, "\(displayName): the variable is not set; set it to the workload's token")
        }
        let token = Self.trimmed(value)
        if let problem = Self.problem(with: token) {
            throw LoginError(.invalidConfiguration, "\(displayName): \(problem)")
        }
        return FetchedToken(token: token, statedExpiry: nil, validator: .unchanging)
    }
}
