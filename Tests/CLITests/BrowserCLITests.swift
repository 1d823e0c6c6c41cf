import Foundation
import LoginKitHTTP
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// `loginkit login` in the browser and `loginkit token --login browser` against the dev server, with
/// the test helper's scripted browser (`TestBrowser`, signing in as demo/demo) as `$BROWSER`.
/// Before the browser login existed, each `login` here was a usage error (no `--username`, exit 2)
/// and `token` knew no `--login` or `--exec-credential`.
@Suite(.timeLimit(.minutes(3)))
struct BrowserCLITests {
    @Test func aBrowserLoginSignsInAndTokenPrintsTheToken() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let path = directory + "/tokens.json"
                let record = directory + "/redirects.log"
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--store", path],
                    environment: ["BROWSER": try Self.browser("--record", "'\(record)'")])
                #expect(login.status == 0, "\(login.stderr)")
                #expect(login.stderr.contains("If the browser does not open, visit: \(server.issuer)/oauth/authorize?"))
                #expect(login.stderr.contains("Logged in as demo"))
                #expect(login.stdout.isEmpty)

                let token = try await loginkit(["token", "--store", path])
                #expect(token.status == 0, "\(token.stderr)")
                #expect(token.stdout.split(separator: ".").count == 3)
                let status = try await loginkit(["status", "--json", "--store", path])
                let json = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
                #expect(json["user"] as? String == "demo")

                let profile = try #require(try await IDTokenStore(path: path, sealing: .none).profile(named: "default"))
                #expect(profile.attributes["grant"] == "authorization_code")
                // No --scope: openid plus what discovery's scopes_supported offers (it lists no email).
                #expect(profile.source.scope == "openid profile offline_access")
                let redirects = try Self.lines(of: record)
                #expect(redirects.count == 1)
                try await Self.expectNoSecrets(in: [login.all, token.stderr, status.all], store: path, redirects: redirects)
            }
        }
    }

    /// `BROWSER=false` (a browser command that fails) and `--no-browser`: the URL is on stderr, and
    /// the address the browser ends on, pasted on stdin, completes the login.
    @Test(arguments: [false, true])
    func withoutABrowserThePrintedURLAndAPastedRedirectSignIn(noBrowserFlag: Bool) async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let path = directory + "/tokens.json"
                let run = try LiveRun(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--store", path, "--timeout", "60"]
                        + (noBrowserFlag ? ["--no-browser"] : []),
                    environment: noBrowserFlag ? [:] : ["BROWSER": "false"])
                let prefix = "If the browser does not open, visit: "
                var lines = run.stderrLines.makeAsyncIterator()
                var url: String?
                while let line = await lines.next() {
                    if line.hasPrefix(prefix) {
                        url = String(line.dropFirst(prefix.count))
                        break
                    }
                }
                // Sign in where the URL was shown, as a user on another machine would, and paste the result.
                var redirect: String?
                if let url {
                    let signIn = try await runCapturing(try testHelperPath(), ["browse", "--print-redirect", url])
                    #expect(signIn.status == 0)
                    if signIn.status == 0 { redirect = signIn.output.trimmingCharacters(in: .whitespacesAndNewlines) }
                }
                let result = await run.finish(input: redirect.map { $0 + "\n" })
                #expect(url != nil, "no URL on stderr: \(result.stderr)")
                #expect(result.status == 0, "\(result.stderr)")
                #expect(result.stderr.contains("No browser was opened"))
                #expect(result.stderr.contains("Logged in as demo"))
                #expect(try await loginkit(["token", "--store", path]).status == 0)
                try await Self.expectNoSecrets(in: [result.all], store: path, redirects: redirect.map { [$0] } ?? [])
            }
        }
    }

    /// Concurrent `token --login browser` processes with no usable session open the browser once and
    /// all print the one token (without `--login`, each would exit 3).
    @Test func concurrentTokenProcessesWithNoSessionOpenTheBrowserOnce() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let path = directory + "/tokens.json"
                let record = directory + "/redirects.log"
                let arguments = ["token", "--login", "browser", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--store", path]
                let environment = ["BROWSER": try Self.browser("--record", "'\(record)'")]
                let runs = try await withThrowingTaskGroup(of: Run.self) { group in
                    for _ in 0..<4 { group.addTask { try await loginkit(arguments, environment: environment) } }
                    return try await group.reduce(into: [Run]()) { $0.append($1) }
                }
                for run in runs { #expect(run.status == 0, "\(run.stderr)") }
                #expect(Set(runs.map(\.stdout)).count == 1, "every process prints the one token")
                #expect(runs.first?.stdout.split(separator: ".").count == 3)
                let redirects = try Self.lines(of: record)
                #expect(redirects.count == 1, "one browser opened")
                #expect(server.monitor.requestCount(path: "/oauth/authorize") == 2, "one authorization: the form's GET and its POST")
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1, "one code exchange")
                try await Self.expectNoSecrets(in: runs.map(\.stderr), store: path, redirects: redirects)
            }
        }
    }

    /// A credential helper for kubectl: no session → the browser login, then the ExecCredential.
    @Test func execCredentialPrintsKubectlsExecCredential() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let path = directory + "/tokens.json"
                let run = try await loginkit(
                    ["token", "--exec-credential", "--login", "browser", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--store", path],
                    environment: ["BROWSER": try Self.browser()])
                #expect(run.status == 0, "\(run.stderr)")
                #expect(run.stdout.hasSuffix("}\n") && run.stdout.split(separator: "\n").count == 1, "one JSON line: \(run.stdout)")
                #expect(run.stdout.contains(#""apiVersion":"client.authentication.k8s.io/v1""#))
                let json = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
                #expect(json["apiVersion"] as? String == "client.authentication.k8s.io/v1")
                #expect(json["kind"] as? String == "ExecCredential")
                let status = try #require(json["status"] as? [String: Any])
                let idToken = try await loginkit(["token", "--store", path]).stdout.trimmingCharacters(in: .newlines)
                #expect(status["token"] as? String == idToken)
                let timestamp = try #require(status["expirationTimestamp"] as? String)
                let rfc3339UTC = try Regex(#"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z"#)
                #expect(timestamp.wholeMatch(of: rfc3339UTC) != nil, "RFC 3339 UTC: \(timestamp)")
                let expiry = try #require(ISO8601DateFormatter().date(from: timestamp))
                let claims = try IDToken(rawValue: idToken).unverifiedClaims()
                #expect(claims.expiresAt == expiry.timeIntervalSince1970, "the ID token's exp")
                #expect(expiry > Date())
                try await Self.expectNoSecrets(in: [run.stderr], store: path, redirects: [])
            }
        }
    }

    /// No browser opens (`BROWSER=false`, or `--no-browser`) and standard input is already at its
    /// end: nothing can be pasted, so the login ends at once (exit 1, saying why) instead of waiting
    /// out its 600 s timeout (the time limit fails the test first).
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func noBrowserAndStandardInputAtItsEndEndTheLoginAtOnce(noBrowserFlag: Bool) async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let path = directory + "/tokens.json"
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--store", path, "--timeout", "600"]
                        + (noBrowserFlag ? ["--no-browser"] : []),
                    environment: noBrowserFlag ? [:] : ["BROWSER": "false"])
                #expect(login.status == 1, "\(login.stderr)")
                #expect(login.stderr.contains("no browser was opened and standard input is at its end"), "\(login.stderr)")
                #expect(!login.stderr.contains("no browser sign-in within"))
                #expect(try await loginkit(["status", "--store", path]).status == 3)
                #expect(server.monitor.requestCount(path: "/oauth/token") == 0)
            }
        }
    }

    /// A response with another `state` reaching the loopback port first — another local process, or
    /// a web page, racing the browser — is refused and said on stderr, and the login goes on to
    /// complete with the real one: it neither ends the login (exit 7 once) nor is exchanged.
    @Test func aForgedStateIsRefusedAndTheRealResponseStillSignsIn() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let path = directory + "/tokens.json"
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--store", path],
                    environment: ["BROWSER": try Self.browser("--forge-state")])
                #expect(login.status == 0, "\(login.stderr)")
                #expect(login.stderr.contains("refused a sign-in response that does not carry this login's state"), "\(login.stderr)")
                #expect(try await loginkit(["status", "--store", path]).status == 0)
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1, "only the real code is exchanged")
            }
        }
    }

    /// A denied sign-in exits 4 (credentials rejected), nothing exchanged and nothing stored.
    @Test(arguments: [("--deny", Int32(4), "denied")])
    func aSignInThatDoesNotCompleteStoresNothing(browserFlag: String, exitCode: Int32, named: String) async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let path = directory + "/tokens.json"
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--store", path],
                    environment: ["BROWSER": try Self.browser(browserFlag)])
                #expect(login.status == exitCode, "\(login.stderr)")
                #expect(login.stderr.contains(named))
                #expect(try await loginkit(["status", "--store", path]).status == 3)
                #expect(server.monitor.requestCount(path: "/oauth/token") == 0, "nothing exchanged")
            }
        }
    }

    /// `invalid_scope` is a usage error (exit 2, not "credentials rejected") naming the scopes the
    /// provider advertises.
    @Test func aRefusedScopeExits2AndNamesTheAdvertisedScopes() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                server.monitor.injectFaults([.oauthError("invalid_scope")], path: "/oauth/token")
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin",
                     "--store", directory + "/tokens.json"],
                    input: "demo\n")
                #expect(login.status == 2, "\(login.stderr)")
                #expect(login.stderr.contains("advertises \"openid profile offline_access\""), "\(login.stderr)")
                #expect(login.stderr.contains("--scope"))
            }
        }
    }

    /// A provider without discovery (GitHub-like): the endpoints given at login are recorded in the
    /// profile, so `token` refreshes and `logout` revokes through them with nothing but the store.
    /// (Fetching discovery instead would be refused here: exit 5.)
    @Test func explicitEndpointsAreRememberedForRefreshAndLogout() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let path = directory + "/tokens.json"
                let discovery = "/.well-known/openid-configuration"
                let endpoints = [
                    "--no-discovery", "--authorization-endpoint", server.url("/oauth/authorize"),
                    "--token-endpoint", server.url("/oauth/token"), "--jwks-uri", server.url("/.well-known/jwks.json"),
                    "--revocation-endpoint", server.url("/oauth/revoke"),
                ]
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--store", path] + endpoints,
                    environment: ["BROWSER": try Self.browser()])
                #expect(login.status == 0, "\(login.stderr)")
                let store = try IDTokenStore(path: path, sealing: .none)
                let profile = try #require(try await store.profile(named: "default"))
                #expect(profile.attributes["endpoint.token"] == server.url("/oauth/token"))
                #expect(profile.attributes["discovery"] == "off")
                // No discovery, so no scopes_supported: all of openid, profile, email, offline_access.
                #expect(profile.source.scope == "openid profile email offline_access")

                try await expireStoredCredentials(in: store)
                server.monitor.injectFaults(Array(repeating: .status(404), count: 5), path: discovery)
                let token = try await loginkit(["token", "--store", path])
                #expect(token.status == 0, "\(token.stderr)")
                #expect(server.monitor.requestCount(path: "/oauth/token") == 2, "the code exchange and one refresh")
                #expect(try await loginkit(["logout", "--store", path]).status == 0)
                #expect(server.monitor.requestCount(path: "/oauth/revoke") == 2)
                #expect(server.monitor.requestCount(path: discovery) == 0)
            }
        }
    }

    // MARK: Helpers

    /// `$BROWSER` for the test helper's scripted browser with `options` (the launcher appends the URL).
    static func browser(_ options: String...) throws -> String {
        (["'\(try testHelperPath())'", "browse"] + options).joined(separator: " ")
    }

    /// The lines of the file at `path`; none when it does not exist.
    static func lines(of path: String) throws -> [String] {
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        return try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
    }

    /// Expects none of the stored tokens, and none of the authorization codes in `redirects`, in `outputs`.
    static func expectNoSecrets(in outputs: [String], store path: String, redirects: [String]) async throws {
        var secrets = redirects.compactMap { URLComponents(string: $0)?.queryItems?.first { $0.name == "code" }?.value }
        #expect(secrets.count == redirects.count, "every redirect carries a code")
        if let credentials = try await IDTokenStore(path: path, sealing: .none).profile(named: "default")?.credentials {
            secrets += [credentials.idToken?.rawValue, credentials.accessToken, credentials.refreshToken].compactMap { $0 }
        }
        for output in outputs {
            for secret in secrets {
                #expect(!output.contains(secret), "a token or code leaked: \(output.prefix(300))")
            }
        }
    }
}

/// A `loginkit` run the test talks to while it runs: stderr lines arrive as they are written, and
/// stdin stays open until ``finish(input:)``.
final class LiveRun: Sendable {
    /// The lines of stderr, as written; finished at EOF. One consumer.
    let stderrLines: AsyncStream<String>
    private let stderrEnded: AsyncStream<Void>
    private let process: SpawnedProcess
    private let input: Int32
    private let output: TestPipe
    private let errors = LockedState<[String]>([])

    init(_ arguments: [String], environment: [String: String] = [:]) throws {
        var base = ProcessInfo.processInfo.environment
        let cleared = [
            "LOGINKIT_STORE", "LOGINKIT_PROFILE", "LOGINKIT_ISSUER", "LOGINKIT_CLIENT_ID", "LOGINKIT_CLIENT_SECRET",
            "LOGINKIT_STORE_KEY", "LOGINKIT_LOG_LEVEL", "LOGINKIT_CA_FILE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR",
        ]
        for name in cleared { base[name] = nil }
        let stdin = try TestPipe(), stdout = try TestPipe(), stderr = try TestPipe()
        process = try SpawnedProcess(
            try loginkitPath(), arguments, environment: base.merging(environment) { $1 },
            stdin: .descriptor(stdin.readEnd), stdout: .descriptor(stdout.writeEnd), stderr: .descriptor(stderr.writeEnd))
        close(stdin.readEnd)
        close(stdout.writeEnd)
        close(stderr.writeEnd)
        input = stdin.writeEnd
        output = stdout
        let (lines, lineContinuation) = AsyncStream<String>.makeStream()
        let (ended, endContinuation) = AsyncStream<Void>.makeStream()
        stderrLines = lines
        stderrEnded = ended
        let errors = self.errors
        readLines(from: stderr.readEnd) { line in
            errors.withLock { $0.append(line) }
            lineContinuation.yield(line)
        } atEnd: {
            lineContinuation.finish()
            endContinuation.finish()
        }
    }

    /// Writes `input` (when given) to stdin and closes it, then waits for the end: what the run
    /// printed and its exit status.
    func finish(input text: String?) async -> Run {
        if let text { writeAll(Data(text.utf8), to: input) }
        close(input)
        let stdout = await output.readToEnd()
        for await _ in stderrEnded {}
        let status = await process.exitStatus()
        let stderr = errors.withLock { $0.map { $0 + "\n" }.joined() }
        return Run(status: status, stdout: String(decoding: stdout, as: UTF8.self), stderr: stderr)
    }
}
