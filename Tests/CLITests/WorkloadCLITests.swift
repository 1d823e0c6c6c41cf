import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitJOSE
import LoginKitPostgres
import LoginKitTestSupport
import PostgresNIO
import Testing

/// Workload identity through the CLI, against the dev provider's workload issuer: a client
/// authenticated by each identity source kind (`login --client-credentials
/// --client-assertion-source`), the JWT-bearer grant (`login --jwt-bearer --assertion-source`),
/// `exchange --subject-token-source`, what `status` says of the source, and one source fetch and
/// one token request for eight processes renewing an expired profile.
@Suite(.timeLimit(.minutes(3)))
struct WorkloadCLITests {
    /// The subject `DevClient.workloadClient` trusts for tokens a test mints (a Kubernetes service account's).
    static let subject = DevServer.kubernetesSubject

    @Test func aClientLogsInWithAnAssertionFromEachSourceKindAndRenewsFromIt() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer(configuration: .quiet) { server in
                let store = directory + "/tokens.json"
                let minted = server.mintWorkloadToken(subject: Self.subject, audience: server.issuer)
                let tokenFile = directory + "/projected-token"
                try Self.write(minted, to: tokenFile)
                let program = directory + "/print-token"
                try writeExecutable("#!/bin/sh\nprintf '%s\\n' '\(minted)'\n", to: program)
                let probe = "probe-header-value-\(UUID().uuidString)"
                let resource = server.issuer.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
                let gitHub = ["ACTIONS_ID_TOKEN_REQUEST_URL": server.gitHubTokenURL, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": server.gitHubRequestToken]
                let kinds: [(kind: String, arguments: [String], environment: [String: String])] = [
                    ("file", ["--client-assertion-source", "file:" + tokenFile], [:]),
                    ("exec", ["--client-assertion-source", "exec:" + program, "--source-timeout", "10"], [:]),
                    (
                        "url",
                        [
                            "--client-assertion-source", "url:\(server.metadataTokenURL)?resource=\(resource)", "--source-header", "Metadata: true",
                            "--source-header", "X-Probe: \(probe)", "--source-field", "access_token",
                        ],
                        [:]
                    ),
                    ("github-actions", ["--client-assertion-source", "github-actions:" + server.issuer], gitHub),
                    ("env", ["--client-assertion-source", "env:WORKLOAD_IDENTITY_TOKEN"], ["WORKLOAD_IDENTITY_TOKEN": minted]),
                ]
                for (kind, arguments, environment) in kinds {
                    let common = ["--store", store, "--profile", kind]
                    let login = try await loginkit(
                        ["login", "--issuer", server.issuer, "--client-id", DevClient.workloadClient.id, "--client-credentials"] + arguments + common,
                        environment: environment)
                    #expect(login.status == 0, "\(kind): \(login.stderr)")
                    let first = try await loginkit(["token", "--access"] + common, environment: environment)
                    #expect(first.status == 0, "\(kind): \(first.stderr)")
                    // No refresh token: the renewal asks the source again, as the profile recorded it
                    // (the url: source's headers included).
                    let renewed = try await loginkit(["token", "--access", "--force-refresh"] + common, environment: environment)
                    #expect(renewed.status == 0, "\(kind): \(renewed.stderr)")
                    #expect(renewed.stdout != first.stdout, "\(kind)")

                    let status = try await loginkit(["status"] + common)
                    #expect(status.status == 0, "\(kind): \(status.stderr)")
                    #expect(status.stdout.contains("identity source: \(kind) (client assertion)"), "\(status.stdout)")
                    let json = try await loginkit(["status", "--json"] + common)
                    let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.all)")
                    let source = try #require(object["identity_source"] as? [String: Any], "\(json.stdout)")
                    #expect(source["kind"] as? String == kind)
                    #expect(source["use"] as? String == "client_assertion")
                    // Never a token (every JWT starts with eyJ) nor a header value.
                    for run in [status, json] { #expect(!run.all.contains("eyJ"), "\(kind): \(run.all)") }
                    for run in [login, first, renewed, status, json] {
                        #expect(!run.all.contains(minted), "\(kind)")
                        #expect(!run.all.contains(probe), "\(kind)")
                    }
                }

                // What the profiles record to ask their sources again: the specification, a url:
                // source's headers and field, an exec: source's timeout; the grant stays the client's.
                let file = try IDTokenStore(path: store, sealing: .none)
                let url = try #require(try await file.profile(named: "url")).attributes
                #expect(url["client_assertion_source"] == "url:\(server.metadataTokenURL)?resource=\(resource)")
                let headers = try JSONDecoder().decode([String: String].self, from: Data((url["source_headers"] ?? "").utf8))
                #expect(headers == ["Metadata": "true", "X-Probe": probe])
                #expect(url["source_field"] == "access_token")
                #expect(url["grant"] == "client_credentials")
                let exec = try #require(try await file.profile(named: "exec")).attributes
                #expect(exec["client_assertion_source"] == "exec:" + program)
                #expect(exec["source_timeout"] == "10")
                #expect(exec["source_headers"] == nil)
            }
        }
    }

    @Test func aJWTBearerLoginIsTheWorkloadsAndRenewsFromTheRotatedFile() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer(configuration: .quiet) { server in
                let store = ["--store", directory + "/tokens.json"]
                let tokenFile = directory + "/projected-token"
                let minted = server.mintWorkloadToken(subject: Self.subject, audience: server.issuer)
                try Self.write(minted, to: tokenFile)
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--jwt-bearer", "--assertion-source", "file:" + tokenFile] + store)
                #expect(login.status == 0, "\(login.stderr)")
                #expect(login.stderr.contains("Logged in as \(Self.subject)"), "\(login.stderr)")
                let first = try await loginkit(["token", "--access"] + store)
                #expect(first.status == 0, "\(first.stderr)")
                #expect(try Self.claims(first.stdout).subject == Self.subject)

                // The platform replaces the file (by rename, as the kubelet does): the renewal presents the new token.
                let rotated = server.mintWorkloadToken(subject: Self.subject, audience: server.issuer)
                try Self.write(rotated, to: tokenFile)
                let renewed = try await loginkit(["token", "--access", "--force-refresh"] + store)
                #expect(renewed.status == 0, "\(renewed.stderr)")
                #expect(renewed.stdout != first.stdout)
                #expect(try Self.claims(renewed.stdout).subject == Self.subject)

                let status = try await loginkit(["status"] + store)
                #expect(status.stdout.contains("identity source: file (JWT bearer grant)"), "\(status.stdout)")
                #expect(status.stdout.contains("user:           \(Self.subject)"), "\(status.stdout)")
                #expect(status.stdout.contains("refresh token:  no"), "\(status.stdout)")
                let json = try await loginkit(["status", "--json"] + store)
                let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.all)")
                #expect((object["identity_source"] as? [String: Any])?["use"] as? String == "jwt_bearer")
                let profiles = try await loginkit(["profiles"] + store)
                #expect(profiles.stdout.contains(Self.subject), "\(profiles.stdout)")

                // An assertion for another audience is refused by the provider (exit 4), and not echoed.
                let foreign = server.mintWorkloadToken(subject: Self.subject, audience: "https://elsewhere.example")
                let refused = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--jwt-bearer", "--assertion-source", "env:FOREIGN_TOKEN",
                     "--profile", "refused"] + store,
                    environment: ["FOREIGN_TOKEN": foreign])
                #expect(refused.status == 4, "\(refused.stderr)")
                for run in [login, first, renewed, status, json, profiles, refused] {
                    for token in [minted, rotated, foreign] { #expect(!run.all.contains(token)) }
                }
            }
        }
    }

    @Test func anExchangeTakesItsSubjectTokenFromASource() async throws {
        try await DevServer.withServer(configuration: .quiet) { server in
            let minted = server.mintWorkloadToken(subject: Self.subject, audience: server.issuer)
            let exchange = [
                "exchange", "--issuer", server.issuer, "--client-id", "loginkit-service", "--subject-token-source", "env:WORKLOAD_IDENTITY_TOKEN",
                "--audience", "https://orders.example",
            ]
            let exchanged = try await loginkit(exchange, environment: ["LOGINKIT_CLIENT_SECRET": "dev-secret", "WORKLOAD_IDENTITY_TOKEN": minted])
            #expect(exchanged.status == 0, "\(exchanged.stderr)")
            let issued = try Self.claims(exchanged.stdout)
            #expect(issued.subject == Self.subject)
            #expect(issued.audience == ["https://orders.example"])
            #expect(!exchanged.all.contains(minted))

            // A source with nothing to give: a configuration error naming the source (exit 2).
            let unset = try await loginkit(exchange, environment: ["LOGINKIT_CLIENT_SECRET": "dev-secret"])
            #expect(unset.status == 2, "\(unset.stderr)")
            #expect(unset.stderr.contains("env:WORKLOAD_IDENTITY_TOKEN"), "\(unset.stderr)")
        }
    }

    /// A provider whose discovery names a token endpoint on another origin (its host, another port)
    /// gets no source's token from `exchange`: refused once discovery is loaded and before the
    /// source is asked — the exec: program never runs, nothing reaches that endpoint — with exit 5
    /// naming the endpoint and --token-endpoint. Given with --token-endpoint, it is the user's choice.
    @Test func anExchangeSendsASourcesTokenOnlyToTheIssuersOriginOrTheTokenEndpointGiven() async throws {
        try await withTemporaryDirectory { directory in
            let elsewhere = try LoopbackListener()
            Self.serveJSON(on: elsewhere) { _ in (400, #"{"error":"invalid_grant"}"#) }
            defer { elsewhere.stop() }
            let provider = try LoopbackListener()
            let issuer = provider.url("")
            let discovery = JSONValue.object(["issuer": .string(issuer), "token_endpoint": .string(elsewhere.url("/token"))]).serialized
            Self.serveJSON(on: provider) { request in
                request.target == "/.well-known/openid-configuration" ? (200, discovery) : (404, #"{"error":"not_found"}"#)
            }
            defer { provider.stop() }
            let runs = directory + "/runs"
            let program = directory + "/print-token"
            let header = Base64URL.encode(Array(#"{"alg":"ES256","typ":"JWT"}"#.utf8))
            let token = header + "." + Base64URL.encode(Array(#"{"sub":"workload"}"#.utf8)) + ".c2lnbmF0dXJl"
            try writeExecutable("#!/bin/sh\necho run >> '\(runs)'\nprintf '%s\\n' '\(token)'\n", to: program)
            let exchange = ["exchange", "--issuer", issuer, "--client-id", "gateway", "--subject-token-source", "exec:" + program, "--audience", "https://orders.example"]
            let environment = ["LOGINKIT_CLIENT_SECRET": "client-secret"]

            let refused = try await loginkit(exchange, environment: environment)
            #expect(refused.status == 5, "\(refused.all)")
            #expect(refused.stderr.contains("token_endpoint"), "\(refused.stderr)")
            #expect(refused.stderr.contains("--token-endpoint"), "\(refused.stderr)")
            #expect(refused.stderr.contains("exec:" + program), "\(refused.stderr)")
            #expect(Self.lineCount(runs) == 0, "the program ran")
            #expect(elsewhere.acceptedCount == 0)

            let explicit = try await loginkit(exchange + ["--token-endpoint", elsewhere.url("/token")], environment: environment)
            #expect(!explicit.stderr.contains("another origin"), "\(explicit.stderr)")
            #expect(Self.lineCount(runs) == 1)
            #expect(elsewhere.acceptedCount >= 1)
            #expect(!refused.all.contains(token) && !explicit.all.contains(token))
        }
    }

    /// Serves each request on `listener` with the status and JSON body `answer` gives, until it stops.
    private static func serveJSON(on listener: LoopbackListener, _ answer: @escaping @Sendable (LoopbackHTTPRequest) -> (Int, String)) {
        listener.start { connection in
            var connection = connection
            while let request = connection.readRequest() {
                let (status, body) = answer(request)
                let head = "HTTP/1.1 \(status) \(status == 200 ? "OK" : "Error")\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
                guard connection.transmit(Array((head + body).utf8)) else { return }
            }
        }
    }

    /// Eight `token` processes started while the profile's token is expired, the provider slow:
    /// the exec: source's program runs once (it counts its runs in a file) and the provider gets
    /// one token request — the one process that renews, under the store's lock; the others take
    /// its token.
    @Test func eightProcessesRenewingAnExpiredProfileRunItsProgramOnceAndAskOnce() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer(configuration: .quiet) { server in
                let path = directory + "/tokens.json"
                let common = ["--store", path]
                let runs = directory + "/runs"
                let program = directory + "/print-token"
                // Each run appends a line to `runs`, then prints the token minted when the script was written.
                func writeProgram() throws {
                    let token = server.mintWorkloadToken(subject: Self.subject, audience: server.issuer)
                    try writeExecutable("#!/bin/sh\necho run >> '\(runs)'\nprintf '%s\\n' '\(token)'\n", to: program)
                }
                try writeProgram()
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", DevClient.workloadClient.id, "--client-credentials",
                     "--client-assertion-source", "exec:" + program] + common)
                try #require(login.status == 0, "\(login.stderr)")
                #expect(Self.lineCount(runs) == 1)

                try writeProgram()
                try FileManager.default.removeItem(atPath: runs)
                let store = try IDTokenStore(path: path, sealing: .none)
                try await expireStoredCredentials(in: store)
                server.monitor.reset()
                server.monitor.injectFaults([.delay(milliseconds: 700)], path: "/oauth/token")

                // All eight are started while the test holds the store's lock: none can have renewed
                // the profile before the last one started.
                let children = try await loginkitChildrenStartedUnderLock(of: store, count: 8, ["token", "--access"] + common)
                var statuses: [Int32] = []
                var tokens: Set<String> = []
                for child in children {
                    var output = ""
                    for await line in child.lines { output += line + "\n" }
                    statuses.append(await child.waitForExit())
                    tokens.insert(output.trimmingCharacters(in: .newlines))
                }
                #expect(statuses.allSatisfy { $0 == 0 }, "\(statuses)")
                let stored = try #require(try await store.profile(named: "default")?.credentials.accessToken)
                #expect(tokens == [stored], "all eight print the one renewed token")
                #expect(Self.lineCount(runs) == 1, "the program ran once")
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1)
            }
        }
    }

    @Test func flagsThatCannotWorkAreRefusedBeforeAnythingIsSent() async throws {
        let issuer = "http://127.0.0.1:9"
        let login = ["login", "--issuer", issuer, "--client-id", "c"]
        let clientLogin = login + ["--client-credentials"]
        let exchange = ["exchange", "--issuer", issuer, "--client-id", "c"]
        let refusals: [(arguments: [String], environment: [String: String], named: String)] = [
            (login + ["--jwt-bearer"], [:], "--assertion-source"),
            (login + ["--jwt-bearer", "--device", "--assertion-source", "env:T"], [:], "--device"),
            (login + ["--jwt-bearer", "--client-credentials", "--assertion-source", "env:T"], [:], "--client-credentials"),
            (login + ["--jwt-bearer", "--username", "u", "--assertion-source", "env:T"], [:], "--username"),
            (login + ["--assertion-source", "env:T"], [:], "--jwt-bearer"),
            (login + ["--client-assertion-source", "env:T"], [:], "--client-credentials"),
            (clientLogin + ["--client-assertion-source", "env:T", "--private-key", "/nonexistent/client-key.pem"], [:], "--private-key"),
            (clientLogin + ["--client-assertion-source", "env:T"], ["LOGINKIT_CLIENT_SECRET": "secret-value-not-shown"], "LOGINKIT_CLIENT_SECRET"),
            (clientLogin + ["--client-assertion-source", "env:T", "--client-secret-stdin"], [:], "--client-secret-stdin"),
            (clientLogin + ["--client-assertion-source", "nowhere:T"], [:], "--client-assertion-source"),
            (clientLogin + ["--client-assertion-source", "file:/run/token", "--source-header", "Metadata: true"], [:], "url:"),
            (clientLogin + ["--client-assertion-source", "env:T", "--source-timeout", "5"], [:], "exec:"),
            // The program runs while the profile's lock is held, which a refresh holds at most 60 s.
            (clientLogin + ["--client-assertion-source", "exec:/bin/true", "--source-timeout", "61"], [:], "--source-timeout must be 1 to 60"),
            (clientLogin + ["--client-assertion-source", "url:https://metadata.example/token", "--source-header", "no colon"], [:], "--source-header"),
            (
                clientLogin + [
                    "--client-assertion-source", "url:https://metadata.example/token", "--source-header", "X-Key: header-value-not-shown",
                    "--source-header", "x-key: header-value-not-shown-either",
                ],
                [:], "twice"
            ),
            (clientLogin + ["--source-field", "access_token"], [:], "--client-assertion-source"),
            (exchange, [:], "--subject-token"),
            (exchange + ["--subject-token", "-", "--subject-token-source", "env:T"], [:], "exclude each other"),
            (exchange + ["--subject-token-source", "env:T", "--actor-token-file", "/run/actor", "--actor-token-source", "env:A"], [:], "exclude each other"),
            (exchange + ["--subject-token-source", "env:T", "--subject-token-type", "opaque"], [:], "--subject-token-type"),
            // A fleet store's rows can be written by other hosts: a source is never recorded there
            // (the run is handed to loginkit-fleet, which refuses it before connecting).
            (clientLogin + ["--client-assertion-source", "env:T", "--store", "postgres://fleet@127.0.0.1:9/db"], [:], "fleet store"),
            (login + ["--jwt-bearer", "--assertion-source", "env:T"], ["LOGINKIT_STORE": "postgres://fleet@127.0.0.1:9/db"], "fleet store"),
        ]
        for refusal in refusals {
            let run = try await loginkit(refusal.arguments, environment: refusal.environment)
            #expect(run.status == 2, "\(refusal.arguments): \(run.all)")
            #expect(run.stderr.contains(refusal.named), "\(refusal.arguments): \(run.stderr)")
            #expect(!run.all.contains("value-not-shown"), "\(refusal.arguments): \(run.all)")
        }
    }

    /// A profile whose recorded source would be found from the working directory (a relative
    /// `file:` path, an `exec:` path with a slash), or whose `source_timeout` is out of range, is
    /// refused when a command rebuilds it (exit 1): nothing is read, run or sent. Run in a cloned
    /// repository that ships `bin/helper` and `token`, the repository's program never runs. A
    /// program named without a slash is looked up on `PATH`, and runs.
    @Test func aStoredSourceWithARelativePathOrAnOutOfRangeTimeoutIsRefused() async throws {
        try await withTemporaryDirectory { root in
            try await DevServer.withServer(configuration: .quiet) { server in
                let store = root + "/tokens.json"
                let common = ["--store", store]
                let minted = server.mintWorkloadToken(subject: Self.subject, audience: server.issuer)
                let tokenFile = root + "/projected-token"
                try Self.write(minted, to: tokenFile)
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", DevClient.workloadClient.id, "--client-credentials",
                     "--client-assertion-source", "file:" + tokenFile] + common)
                try #require(login.status == 0, "\(login.stderr)")
                let file = try IDTokenStore(path: store, sealing: .none)
                let recorded = try #require(try await file.profile(named: "default")).attributes

                // The repository: a program that leaves a mark, and a token file.
                let repository = try makePrivateTestDirectory(root + "/repository")
                let marker = root + "/helper-ran"
                try FileManager.default.createDirectory(atPath: repository + "/bin", withIntermediateDirectories: true)
                try writeExecutable("#!/bin/sh\ntouch '\(marker)'\nprintf '%s\\n' '\(minted)'\n", to: repository + "/bin/helper")
                try Self.write(minted, to: repository + "/token")
                let refusals: [(attributes: [String: String], says: String)] = [
                    (["client_assertion_source": "exec:bin/helper"], "relative path \"bin/helper\""),
                    (["client_assertion_source": "exec:./bin/helper"], "relative path"),
                    (["client_assertion_source": "file:token"], "relative path \"token\""),
                    (["client_assertion_source": "exec:" + repository + "/bin/helper", "source_timeout": "86400"], "the profile's recorded source_timeout"),
                    (["client_assertion_source": "exec:" + repository + "/bin/helper", "source_timeout": "61"], "is not 1 to 60 seconds"),
                    (["client_assertion_source": "exec:" + repository + "/bin/helper", "source_timeout": "0"], "the profile's recorded source_timeout"),
                    (["client_assertion_source": "exec:" + repository + "/bin/helper", "source_timeout": "ten"], "the profile's recorded source_timeout"),
                ]
                let requests = server.monitor.requestCount(path: "/oauth/token")
                for refusal in refusals {
                    try await Self.replaceAttributes(of: file, with: recorded.merging(refusal.attributes) { $1 })
                    let run = try await loginkitInDirectory(repository, ["token", "--access"] + common)
                    #expect(run.status == 1, "\(refusal.attributes): \(run.all)")
                    #expect(run.stderr.contains(refusal.says), "\(refusal.attributes): \(run.stderr)")
                    #expect(!FileManager.default.fileExists(atPath: marker), "\(refusal.attributes): the program ran")
                    #expect(!run.all.contains(minted))
                }
                #expect(server.monitor.requestCount(path: "/oauth/token") == requests, "nothing was sent")

                // A bare name is looked up on PATH: it runs, wherever the command is run.
                let bin = try makePrivateTestDirectory(root + "/path-bin")
                let name = "print-workload-token-\(UUID().uuidString.prefix(8))"
                try writeExecutable("#!/bin/sh\nprintf '%s\\n' '\(minted)'\n", to: bin + "/" + name)
                try await Self.replaceAttributes(of: file, with: recorded.merging(["client_assertion_source": "exec:" + name, "source_timeout": "60"]) { $1 })
                let path = bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
                let bare = try await loginkitInDirectory(repository, ["token", "--access", "--force-refresh"] + common, environment: ["PATH": path])
                #expect(bare.status == 0, "\(bare.all)")
                #expect(!FileManager.default.fileExists(atPath: marker))
            }
        }
    }

    /// A profile whose recorded source is refused cannot be revoked (the revocation would make the
    /// source again and send its token): `logout` fails (exit 1) naming `logout --no-revoke`, which
    /// removes the profile without revoking.
    @Test func aProfileWhoseSourceIsRefusedIsRemovedByLogoutWithoutRevoking() async throws {
        try await withTemporaryDirectory { root in
            try await DevServer.withServer(configuration: .quiet) { server in
                let store = root + "/tokens.json"
                let common = ["--store", store]
                let tokenFile = root + "/projected-token"
                try Self.write(server.mintWorkloadToken(subject: Self.subject, audience: server.issuer), to: tokenFile)
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", DevClient.workloadClient.id, "--client-credentials",
                     "--client-assertion-source", "file:" + tokenFile] + common)
                try #require(login.status == 0, "\(login.stderr)")
                let file = try IDTokenStore(path: store, sealing: .none)
                let recorded = try #require(try await file.profile(named: "default")).attributes
                try await Self.replaceAttributes(of: file, with: recorded.merging(["client_assertion_source": "file:token"]) { $1 })

                let logout = try await loginkit(["logout"] + common)
                #expect(logout.status == 1, "\(logout.all)")
                #expect(logout.stderr.contains("relative path"), "\(logout.stderr)")
                #expect(logout.stderr.contains("loginkit logout --no-revoke"), "\(logout.stderr)")
                #expect(try await IDTokenStore(path: store, sealing: .none).profile(named: "default") != nil, "the profile is still there")

                let removed = try await loginkit(["logout", "--no-revoke"] + common)
                #expect(removed.status == 0, "\(removed.all)")
                #expect(try await IDTokenStore(path: store, sealing: .none).profile(named: "default") == nil, "the profile is gone")
                #expect(server.monitor.requestCount(path: "/oauth/revoke") == 0)
            }
        }
    }

    /// Replaces the attributes of profile `default` in `store`.
    private static func replaceAttributes(of store: IDTokenStore, with attributes: [String: String]) async throws {
        try await store.withExclusiveAccess { transaction in
            guard var profile = transaction["default"] else { return }
            profile.attributes = attributes
            transaction["default"] = profile
        }
    }

    /// Writes `token` and a newline to `path` as a platform replaces a projected token: a new file
    /// renamed over the old one.
    private static func write(_ token: String, to path: String) throws {
        let temporary = path + ".new"
        try Data((token + "\n").utf8).write(to: URL(fileURLWithPath: temporary))
        // Whatever the umask: a source refuses a file that group or others can write.
        try #require(chmod(temporary, 0o600) == 0, "chmod: errno \(errno)")
        try #require(rename(temporary, path) == 0, "rename: errno \(errno)")
    }

    /// The claims of the JWT `output` holds (a line), read without verification.
    private static func claims(_ output: String) throws -> JWTClaims {
        try JWTClaims(payload: CompactJWS(parsing: output.trimmingCharacters(in: .newlines)).payload)
    }

    /// How many lines the file at `path` holds; 0 when there is none.
    private static func lineCount(_ path: String) -> Int {
        (try? String(contentsOfFile: path, encoding: .utf8))?.split(separator: "\n").count ?? 0
    }
}

/// A profile row of a `postgres://` fleet store that names an identity source is never used: the
/// table can be written by other hosts (and, unsealed, by any role that can write it), and the
/// source would send what it reads to the row's token endpoint.
@Suite(
    .enabled(
        if: ProcessInfo.processInfo.environment["LOGINKIT_TEST_POSTGRES_URL"] != nil || ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_POSTGRES"] == "1",
        "needs PostgreSQL: make test starts one"),
    .timeLimit(.minutes(3)))
struct FleetWorkloadCLITests {
    @Test func aSourcePlantedInAFleetRowIsNotUsed() async throws {
        let database = try #require(ProcessInfo.processInfo.environment["LOGINKIT_TEST_POSTGRES_URL"], "run through scripts/with-postgres.sh (make test does)")
        let namespace = "workload-\(UUID().uuidString)"
        let key = try SymmetricKey.random()
        let environment = ["LOGINKIT_STORE": database + "?namespace=\(namespace)", "LOGINKIT_STORE_KEY": Data(key.bytes).base64EncodedString()]
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer(configuration: .quiet) { server in
                // A local secret that a planted file: source would read and send to the row's token endpoint.
                let secretFile = directory + "/secret"
                let secret = "local-secret-\(UUID().uuidString)"
                try Data(secret.utf8).write(to: URL(fileURLWithPath: secretFile))
                var configuration = PostgresTokenStore.Configuration()
                configuration.namespace = namespace
                configuration.sealing = .key(key)
                configuration.readsFromMemory = false
                try await PostgresTokenStore.withStore(try PostgresTokenStore.connection(url: database), configuration: configuration) { store in
                    let planted = StoredProfile(
                        credentials: Credentials(accessToken: "expired-access-token", expiresAt: Date().addingTimeInterval(-60)),
                        source: CredentialSource(kind: .oauth2, endpoint: server.issuer, clientID: DevClient.workloadClient.id),
                        attributes: ["grant": "client_credentials", "client_auth": "private_key_jwt", "client_assertion_source": "file:" + secretFile])
                    try await store.save(planted, as: "default")
                }
                for arguments in [["token", "--access"], ["token", "--access", "--resource", "https://api.example/"], ["request", server.url("/api/resource")]] {
                    let run = try await loginkit(arguments, environment: environment)
                    #expect(run.status == 1, "\(arguments): \(run.all)")
                    #expect(run.stderr.contains("fleet store"), "\(arguments): \(run.stderr)")
                    #expect(!run.all.contains(secret))
                }
                #expect(server.monitor.requestCount(path: "/oauth/token") == 0)
            }
        }
    }
}
