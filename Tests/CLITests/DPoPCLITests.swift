import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// `loginkit login --dpop`, `status`'s binding, `loginkit request` and `token --header-for`
/// against the dev server's DPoP-protected resource, with the real `loginkit`.
@Suite(.timeLimit(.minutes(3)))
struct DPoPCLITests {
    static func passwordLogin(_ server: DevServer, store: String, _ extra: [String] = []) async throws -> Run {
        try await loginkit(
            ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin", "--store", store] + extra,
            input: "demo\n")
    }

    /// The stored credentials of `profile`.
    static func stored(_ path: String, profile: String = "default") async throws -> Credentials {
        try #require(try await IDTokenStore(path: path, sealing: .none).profile(named: profile)).credentials
    }

    /// The `cnf.jkt` of a JWT access token, read without checks.
    static func confirmationThumbprint(of accessToken: String?) throws -> String? {
        guard let accessToken else { return nil }
        let parts = accessToken.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(parts[1]) else { return nil }
        return try JSONValue.parse(payload)["cnf"]?["jkt"]?.stringValue
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not a JSON object: \(text.prefix(300))")
    }

    /// The value of `status`'s line `label:`, without the padding.
    static func statusLine(_ label: String, in output: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix(label + ":") }.map {
            $0.dropFirst(label.count + 1).trimmingCharacters(in: .whitespaces)
        }
    }

    /// The names of the query parameters of `url`, in order.
    static func queryNames(_ url: some StringProtocol) -> [String] {
        guard let query = url.split(separator: "?", maxSplits: 1).dropFirst().first else { return [] }
        return FormURLEncoding.decode(query).map { $0.0 }
    }

    static func setIdentityProvider(_ server: DevServer, _ change: (inout IdentityProviderConfiguration) -> Void) {
        var provider = server.identityProvider
        change(&provider)
        server.identityProvider = provider
    }

    /// Runs `body` with a dev server, a fresh temporary directory and the path of a store in it.
    static func withServerAndStore(_ body: (DevServer, _ directory: String, _ store: String) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in try await body(server, directory, directory + "/tokens.json") }
        }
    }

    /// Expects none of `secrets` in anything `runs` printed, on stdout or stderr.
    static func expectNoneOf(_ secrets: [String], printedBy runs: [Run], sourceLocation: SourceLocation = #_sourceLocation) {
        for run in runs {
            for secret in secrets {
                #expect(!run.all.contains(secret), "a secret leaked: \(run.all.prefix(300))", sourceLocation: sourceLocation)
            }
        }
    }

    @Test func aDPoPLoginShowsItsBindingInStatus() async throws {
        try await Self.withServerAndStore { server, _, store in
            var runs: [Run] = []
            let login = try await Self.passwordLogin(server, store: store, ["--dpop"])
            runs.append(login)
            #expect(login.status == 0, "\(login.stderr)")
            let credentials = try await Self.stored(store)
            let thumbprint = try #require(credentials.proofKeyThumbprint)
            #expect(credentials.tokenType == "DPoP")
            #expect(credentials.proofKey?.algorithm == .es256)
            #expect(try Self.confirmationThumbprint(of: credentials.accessToken) == thumbprint)

            let status = try await loginkit(["status", "--store", store])
            runs.append(status)
            #expect(status.status == 0, "\(status.stderr)")
            #expect(Self.statusLine("binding", in: status.stdout) == "DPoP (ES256), jkt \(thumbprint)", "\(status.stdout)")
            #expect(Self.statusLine("cnf.jkt", in: status.stdout)?.hasPrefix(thumbprint) == true, "\(status.stdout)")

            let statusJSON = try await loginkit(["status", "--json", "--store", store])
            runs.append(statusJSON)
            let json = try Self.json(statusJSON.stdout)
            #expect((json["binding"] as? String)?.lowercased() == "dpop")
            #expect(json["dpop_jkt"] as? String == thumbprint)
            #expect(json["cnf_jkt"] as? String == thumbprint)

            // Another algorithm on request; a login without --dpop stays bearer.
            let edDSA = try await Self.passwordLogin(server, store: store, ["--dpop-alg", "EdDSA", "--profile", "ed"])
            runs.append(edDSA)
            #expect(edDSA.status == 0, "\(edDSA.stderr)")
            let edCredentials = try await Self.stored(store, profile: "ed")
            #expect(edCredentials.proofKey?.algorithm == .edDSA)
            let edStatus = try await loginkit(["status", "--store", store, "--profile", "ed"])
            runs.append(edStatus)
            #expect(Self.statusLine("binding", in: edStatus.stdout) == "DPoP (EdDSA), jkt \(edCredentials.proofKeyThumbprint ?? "-")")

            let bearer = try await Self.passwordLogin(server, store: store, ["--profile", "plain"])
            runs.append(bearer)
            #expect(bearer.status == 0, "\(bearer.stderr)")
            let bearerStatus = try await loginkit(["status", "--store", store, "--profile", "plain"])
            runs.append(bearerStatus)
            #expect(Self.statusLine("binding", in: bearerStatus.stdout) == "bearer", "\(bearerStatus.stdout)")
            let bearerStatusJSON = try await loginkit(["status", "--json", "--store", store, "--profile", "plain"])
            let bearerJSON = try Self.json(bearerStatusJSON.stdout)
            #expect(bearerJSON["binding"] as? String == "bearer")
            #expect(bearerJSON["dpop_jkt"] == nil || bearerJSON["dpop_jkt"] is NSNull)

            // Neither a token nor the private key is ever printed.
            let privateMember = try #require(try credentials.proofKey?.privateJWK()["d"]?.stringValue)
            let secrets = [credentials.accessToken, credentials.refreshToken, credentials.idToken?.rawValue, privateMember].compactMap { $0 }
            Self.expectNoneOf(secrets, printedBy: runs)
        }
    }

    @Test func requestReachesTheDPoPResourceAndHandlesANonceAndAnExpiredToken() async throws {
        try await Self.withServerAndStore { server, directory, store in
            let resource = server.url("/api/resource")
            var runs: [Run] = []
            var secrets: Set<String> = []
            func noteSecrets() async throws {
                let credentials = try await Self.stored(store)
                secrets.formUnion([credentials.accessToken, credentials.refreshToken].compactMap { $0 })
                if let d = try credentials.proofKey?.privateJWK()["d"]?.stringValue { secrets.insert(d) }
            }
            let login = try await Self.passwordLogin(server, store: store, ["--dpop"])
            runs.append(login)
            #expect(login.status == 0, "\(login.stderr)")
            try await noteSecrets()
            let thumbprint = try #require(try await Self.stored(store).proofKeyThumbprint)
            server.monitor.reset()

            let get = try await loginkit(["request", resource, "--store", store])
            runs.append(get)
            #expect(get.status == 0, "\(get.stderr)")
            let answer = try Self.json(get.stdout)
            #expect(answer["token_type"] as? String == "DPoP")
            #expect(answer["jkt"] as? String == thumbprint)
            #expect(answer["method"] as? String == "GET")
            #expect(server.monitor.requestCount(path: "/api/resource") == 1)

            // A body from standard input, a file and the argument.
            let piped = try await loginkit(["request", "-X", "POST", "-d", "-", resource, "--store", store], input: "hello, resource")
            runs.append(piped)
            #expect(piped.status == 0, "\(piped.stderr)")
            #expect(try Self.json(piped.stdout)["body_bytes"] as? Int == 15)
            #expect(try Self.json(piped.stdout)["method"] as? String == "POST")
            let file = directory + "/body.bin"
            try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: file))
            let fromFile = try await loginkit(["request", "-X", "POST", "-d", "@" + file, resource, "--store", store])
            runs.append(fromFile)
            #expect(try Self.json(fromFile.stdout)["body_bytes"] as? Int == 4096, "\(fromFile.stderr)")
            let inline = try await loginkit(["request", "-d", "abc", resource, "--store", store])
            runs.append(inline)
            #expect(try Self.json(inline.stdout)["body_bytes"] as? Int == 3, "\(inline.stderr)")
            #expect(try Self.json(inline.stdout)["method"] as? String == "POST")

            let included = try await loginkit(["request", "--include", resource, "--store", store])
            runs.append(included)
            #expect(included.status == 0, "\(included.stderr)")
            #expect(included.stdout.hasPrefix("HTTP 200"), "\(included.stdout.prefix(200))")

            // An expired token: one refresh, one retry, exit 0, the same key.
            let tokenRequests = server.monitor.requestCount(path: "/oauth/token")
            let resourceRequests = server.monitor.requestCount(path: "/api/resource")
            #expect(server.expireAccessTokens() >= 1)
            let expired = try await loginkit(["request", resource, "--store", store])
            runs.append(expired)
            #expect(expired.status == 0, "\(expired.stderr)")
            #expect(server.monitor.requestCount(path: "/oauth/token") == tokenRequests + 1)
            #expect(server.monitor.requestCount(path: "/api/resource") == resourceRequests + 2)
            #expect(try Self.json(expired.stdout)["jkt"] as? String == thumbprint)
            try await noteSecrets()

            // A resource that wants a nonce: one challenge, one retry, exit 0.
            Self.setIdentityProvider(server) { $0.dpopNonceAtResource = true }
            let beforeNonce = server.monitor.requestCount(path: "/api/resource")
            let challenges = server.monitor.dpopNonceChallenges
            let nonced = try await loginkit(["request", resource, "--store", store])
            runs.append(nonced)
            #expect(nonced.status == 0, "\(nonced.stderr)")
            #expect(server.monitor.requestCount(path: "/api/resource") == beforeNonce + 2)
            #expect(server.monitor.dpopNonceChallenges == challenges + 1)
            #expect(try Self.json(nonced.stdout)["token_type"] as? String == "DPoP")

            for run in runs {
                for secret in secrets {
                    #expect(!run.stderr.contains(secret), "a secret on stderr: \(run.stderr.prefix(300))")
                    #expect(!run.stdout.contains(secret), "a secret on stdout: \(run.stdout.prefix(300))")
                }
            }
        }
    }

    /// The request as the server saw it: the caller's header, the method, and a proof that passes
    /// the checks RFC 9449 §4.3 has a server make for exactly that request.
    @Test func requestSendsTheCallersHeadersAndAProofForThatRequest() async throws {
        try await Self.withServerAndStore { server, _, store in
            #expect(try await Self.passwordLogin(server, store: store, ["--dpop"]).status == 0)
            let credentials = try await Self.stored(store)
            let echo = server.url("/test/echo?x=1")
            let run = try await loginkit(["request", "-X", "PUT", "-H", "X-Probe: yes", "-d", "body", echo, "--store", store])
            #expect(run.status == 0, "\(run.stderr)")
            let seen = try Self.json(run.stdout)
            #expect(seen["method"] as? String == "PUT")
            let headers = try #require(seen["headers"] as? [String: String])
            #expect(headers["x-probe"] == "yes")
            #expect(headers["authorization"] == "DPoP \(credentials.accessToken ?? "-")")
            let proof = try #require(headers["dpop"])
            let verified = try DPoPProofVerifier().verify(
                proof, method: "PUT", url: echo, accessToken: credentials.accessToken, boundThumbprint: credentials.proofKeyThumbprint, now: Date())
            #expect(verified.thumbprint == credentials.proofKeyThumbprint)
            #expect(!run.stderr.contains(proof))
        }
    }

    @Test func everyOutcomeHasItsExitStatus() async throws {
        try await Self.withServerAndStore { server, directory, store in
            let resource = server.url("/api/resource")
            #expect(try await Self.passwordLogin(server, store: store, ["--dpop"]).status == 0)
            var runs: [Run] = []

            let missing = try await loginkit(["request", server.url("/test/status/404"), "--store", store])
            runs.append(missing)
            #expect(missing.status == 22, "\(missing.stderr)")
            #expect(missing.stderr.contains("404"))

            // Authorization and DPoP are the command's own: a usage error, nothing sent.
            let resourceRequests = server.monitor.requestCount(path: "/api/resource")
            for header in ["Authorization: x", "DPoP: x"] {
                let refused = try await loginkit(["request", "-H", header, resource, "--store", store])
                runs.append(refused)
                #expect(refused.status == 2, "\(header): \(refused.stderr)")
            }
            #expect(server.monitor.requestCount(path: "/api/resource") == resourceRequests)
            #expect(try await loginkit(["request", "--store", store]).status == 2, "no URL")
            #expect(try await loginkit(["request", "not a url", "--store", store]).status == 2)

            let elsewhere = directory + "/other.json"
            #expect(try await loginkit(["request", resource, "--store", elsewhere]).status == 3, "not logged in")

            let stopped = try await DevServer.withServer { $0.url("/api/resource") }
            let unreachable = try await loginkit(["request", stopped, "--store", store])
            runs.append(unreachable)
            #expect(unreachable.status == 5, "\(unreachable.stderr)")

            // A step-up: exit 10, naming what the server asked for and how to log in for it.
            Self.setIdentityProvider(server) { $0.resourceRequiresACR = "urn:loginkit:acr:mfa" }
            let stepUp = try await loginkit(["request", resource, "--store", store])
            runs.append(stepUp)
            #expect(stepUp.status == 10, "\(stepUp.stderr)")
            #expect(stepUp.stderr.contains("urn:loginkit:acr:mfa"))
            #expect(stepUp.stderr.contains("--acr-values"))
            #expect(stepUp.stdout.isEmpty)

            let credentials = try await Self.stored(store)
            Self.expectNoneOf([credentials.accessToken, credentials.refreshToken].compactMap { $0 }, printedBy: runs)
        }
    }

    @Test func headerForPrintsWhatAnotherClientSends() async throws {
        try await Self.withServerAndStore { server, _, store in
            let resource = server.url("/api/resource")
            #expect(try await Self.passwordLogin(server, store: store, ["--dpop"]).status == 0)
            #expect(try await Self.passwordLogin(server, store: store, ["--profile", "plain"]).status == 0)

            let printed = try await loginkit(["token", "--header-for", "GET", resource, "--store", store])
            #expect(printed.status == 0, "\(printed.stderr)")
            #expect(printed.stderr.isEmpty, "\(printed.stderr)")
            let lines = printed.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 2)
            let credentials = try await Self.stored(store)
            let accessToken = try #require(credentials.accessToken)
            #expect(lines.contains("Authorization: DPoP \(accessToken)"))
            let proofLine = try #require(lines.first { $0.hasPrefix("DPoP: ") })

            // Sent by another HTTP client as printed: the resource accepts them.
            let dpopName = try #require(HTTPField.Name("DPoP"))
            var fields = HTTPFields()
            fields[.authorization] = "DPoP \(accessToken)"
            fields[dpopName] = String(proofLine.dropFirst("DPoP: ".count))
            let request = try #require(HTTPRequest(method: .get, url: resource, headerFields: fields))
            let (response, body) = try await CurlHTTPClient.withClient { client in try await client.send(request, body: nil) }
            #expect(response.status.code == 200)
            let answer = try Self.json(String(decoding: body, as: UTF8.self))
            #expect(answer["token_type"] as? String == "DPoP")
            #expect(answer["jkt"] as? String == credentials.proofKeyThumbprint)

            let bearer = try await loginkit(["token", "--header-for", "GET", resource, "--store", store, "--profile", "plain"])
            #expect(bearer.status == 0, "\(bearer.stderr)")
            let plainToken = try #require(try await Self.stored(store, profile: "plain").accessToken)
            #expect(bearer.stdout == "Authorization: Bearer \(plainToken)\n")
        }
    }

    /// A browser login with `--dpop`: with `--par always` the browser gets only the client and the
    /// request URI; with `--par never` the URL names the key's thumbprint (`dpop_jkt`).
    @Test(arguments: ["always", "never"])
    func aBrowserLoginWithDPoPPushesItsRequestOrNamesTheKey(par: String) async throws {
        try await Self.withServerAndStore { server, _, store in
            let login = try await loginkit(
                ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--store", store, "--dpop", "--par", par],
                environment: ["BROWSER": try BrowserCLITests.browser()])
            #expect(login.status == 0, "\(login.stderr)")
            let prefix = "If the browser does not open, visit: "
            let shown = try #require(login.stderr.split(separator: "\n").first { $0.hasPrefix(prefix) }).dropFirst(prefix.count)
            let credentials = try await Self.stored(store)
            let thumbprint = try #require(credentials.proofKeyThumbprint)
            #expect(credentials.tokenType == "DPoP")
            #expect(try Self.confirmationThumbprint(of: credentials.accessToken) == thumbprint)
            if par == "always" {
                #expect(Self.queryNames(shown).sorted() == ["client_id", "request_uri"], "\(shown)")
                #expect(server.monitor.parRequests == 1)
            } else {
                #expect(Self.queryNames(shown).contains("dpop_jkt"), "\(shown)")
                #expect(shown.contains("dpop_jkt=\(thumbprint)"))
                #expect(server.monitor.parRequests == 0)
            }
        }
    }
}
