import Foundation
import LoginKitJOSE
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

@Suite(.timeLimit(.minutes(3)))
struct CLITests {
    @Test func loginTokenStatusLogoutAgainstTheDevServer() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let store = directory + "/tokens.json"
                let common = ["--store", store]
                let login = try await loginkit(["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"] + common, input: "demo\n")
                #expect(login.status == 0, "\(login.stderr)")
                #expect(login.stderr.contains("Logged in as demo"))

                let token = try await loginkit(["token"] + common)
                #expect(token.status == 0)
                #expect(token.stdout.hasSuffix("\n"))
                #expect(token.stdout.split(separator: "\n").count == 1)
                #expect(token.stdout.split(separator: ".").count == 3)
                #expect(token.stderr.isEmpty)

                let access = try await loginkit(["token", "--access"] + common)
                #expect(access.status == 0)
                #expect(access.stdout.hasPrefix("at."))

                let status = try await loginkit(["status", "--json"] + common)
                #expect(status.status == 0)
                let json = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
                #expect(json["user"] as? String == "demo")
                #expect(json["has_refresh_token"] as? Bool == true)
                #expect(json["store"] as? String == store)
                #expect(json["sealed"] as? Bool == false)
                #expect(!status.stdout.contains(token.stdout.trimmingCharacters(in: .newlines)))

                let logout = try await loginkit(["logout"] + common)
                #expect(logout.status == 0)
                #expect(server.monitor.requestCount(path: "/oauth/revoke") == 2)
                #expect(try await loginkit(["token"] + common).status == 3)
            }
        }
    }

    @Test func everyExitCodeComesFromARealCondition() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let common = ["--store", directory + "/tokens.json"]
                let loginArguments = ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"] + common

                #expect(try await loginkit(["login", "--no-such-flag"]).status == 2)  // usage
                #expect(try await loginkit(["login", "--issuer", server.issuer, "--client-id", "x", "--username", "demo"] + common, input: "").status == 2)  // no TTY, no --password-stdin
                #expect(try await loginkit(["token"] + common).status == 3)  // login required
                let rejected = try await loginkit(loginArguments, input: "Not-The-Password\n")
                #expect(rejected.status == 4)  // credentials rejected
                #expect(rejected.stderr.split(separator: "\n").count == 1)

                let stopped = try await DevServer.withServer { $0.issuer }
                #expect(try await loginkit(["login", "--issuer", stopped, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"] + common, input: "demo\n").status == 5)  // network

                server.monitor.versionPolicy.minimumVersion = "9.0.0"
                let upgrade = try await loginkit(loginArguments + ["--version-policy", server.url("/version-policy")], input: "demo\n")
                #expect(upgrade.status == 6)  // upgrade required
                #expect(upgrade.stderr.contains("Update required"))
                #expect(upgrade.stderr.contains("https://example.com/loginkit/releases"))
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1)  // only the rejected login reached it

                #expect(try await loginkit(loginArguments + ["--scope", "profile"], input: "demo\n").status == 0)
                let noIDToken = try await loginkit(["token"] + common)
                #expect(noIDToken.status == 1)  // no ID token: says so, suggests --access
                #expect(noIDToken.stderr.contains("--access"))
                #expect(noIDToken.stdout.isEmpty)

                #expect(try await loginkit(loginArguments, input: "demo\n").status == 0)
                let idToken = try await loginkit(["token"] + common).stdout.trimmingCharacters(in: .newlines)
                let verified = try await loginkit(["verify", idToken, "--issuer", server.issuer, "--audience", "loginkit-cli"])
                #expect(verified.status == 0)
                #expect(verified.stdout.contains("\"preferred_username\":\"demo\""))
                var parts = idToken.split(separator: ".").map(String.init)
                parts[1] = Base64URL.encode(Array(#"{"iss":"x","sub":"admin"}"#.utf8))
                let tampered = try await loginkit(["verify", parts.joined(separator: "."), "--issuer", server.issuer])
                #expect(tampered.status == 7)  // token verification failed
            }
        }
    }

    @Test func secretsNeverAppearInAnyOutput() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let common = ["--store", directory + "/tokens.json"]
                let password = "Pw-\(UUID().uuidString)"
                var provider = server.identityProvider
                provider.users.append(DevUser(username: "carol", password: password, subject: "carol-1"))
                server.identityProvider = provider
                var outputs: [Run] = []
                outputs.append(try await loginkit(["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "carol", "--password-stdin", "--verbose"] + common, input: password + "\n"))
                outputs.append(try await loginkit(["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "carol", "--password-stdin", "--verbose", "--profile", "bad"] + common, input: "Secret-Wrong-Pw\n"))
                outputs.append(try await loginkit(["status"] + common))
                outputs.append(try await loginkit(["status", "--json"] + common))
                let token = try await loginkit(["token"] + common)
                let profile = try #require(try await IDTokenStore(path: directory + "/tokens.json", sealing: .none).profile(named: "default"))
                let refreshToken = try #require(profile.credentials.refreshToken)
                let accessToken = try #require(profile.credentials.accessToken)
                #expect(token.stdout == (profile.credentials.idToken?.rawValue ?? "") + "\n")  // only the token

                let secret = "Dev-Secret-\(UUID().uuidString)"
                var service = server.identityProvider
                service.clients.append(DevClient(id: "svc", secret: secret))
                server.identityProvider = service
                outputs.append(try await loginkit(["login", "--issuer", server.issuer, "--client-id", "svc", "--client-credentials", "--profile", "svc", "--verbose"] + common, environment: ["LOGINKIT_CLIENT_SECRET": secret]))
                outputs.append(try await loginkit(["login", "--issuer", server.issuer, "--client-id", "svc", "--client-credentials", "--profile", "svc2", "--verbose"] + common, environment: ["LOGINKIT_CLIENT_SECRET": secret + "x"]))
                outputs.append(try await loginkit(["logout", "--verbose"] + common))
                for run in outputs {
                    for forbidden in [password, "Secret-Wrong-Pw", refreshToken, accessToken, secret] {
                        #expect(!run.all.contains(forbidden), "a secret leaked: \(run.all.prefix(200))")
                    }
                }
                #expect(outputs[0].status == 0)
                #expect(outputs[1].status == 4)
                #expect(outputs[4].status == 0)
                #expect(outputs[5].status == 4)
            }
        }
    }

    /// N `loginkit token` processes at once, R rounds, the token expiring between rounds and each
    /// refresh held 300 ms at the provider (so the processes overlap): one refresh per round, every
    /// process served the token the store then holds. 10 × 3 here; `make reliability` runs 16 × 50
    /// (LOGINKIT_TOKEN_PROCESSES, LOGINKIT_TOKEN_ROUNDS).
    @Test func concurrentTokenProcessesRefreshOncePerRound() async throws {
        let environment = ProcessInfo.processInfo.environment
        let processes = Int(environment["LOGINKIT_TOKEN_PROCESSES"] ?? "") ?? 10
        let rounds = Int(environment["LOGINKIT_TOKEN_ROUNDS"] ?? "") ?? 3
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let path = directory + "/tokens.json"
                let common = ["--store", path]
                #expect(try await loginkit(["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"] + common, input: "demo\n").status == 0)
                let store = try IDTokenStore(path: path, sealing: .none)
                var previous: String?
                for round in 1...rounds {
                    try await expireStoredCredentials(in: store)
                    server.monitor.reset()
                    server.monitor.injectFaults([.delay(milliseconds: 300)], path: "/oauth/token")
                    let runs = try await withThrowingTaskGroup(of: Run.self) { group in
                        // The access token: ID tokens issued in the same second can be byte-identical.
                        for _ in 0..<processes { group.addTask { try await loginkit(["token", "--access"] + common) } }
                        return try await group.reduce(into: [Run]()) { $0.append($1) }
                    }
                    let failures = runs.filter { $0.status != 0 }.map(\.stderr)
                    #expect(failures.isEmpty, "round \(round): \(failures.prefix(3))")
                    let tokens = Set(runs.map { $0.stdout.trimmingCharacters(in: .newlines) })
                    let stored = try await IDTokenStore(path: path, sealing: .none).profile(named: "default")?.credentials.accessToken
                    #expect(tokens == [stored], "round \(round): every process gets the one refreshed token")
                    #expect(tokens.first != previous, "round \(round): a new token")
                    #expect(server.monitor.requestCount(path: "/oauth/token") == 1, "round \(round)")
                    previous = tokens.first
                    if !failures.isEmpty { break }
                }
            }
        }
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["LOGINKIT_TEST_COGNITO_ENDPOINT"] != nil || ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_MOTO"] == "1"))
    func loginTokenStatusLogoutAgainstMotosCognito() async throws {
        let environment = ProcessInfo.processInfo.environment
        let endpoint = try #require(environment["LOGINKIT_TEST_COGNITO_ENDPOINT"], "run `make test`")
        try await withTemporaryDirectory { directory in
            let common = ["--store", directory + "/tokens.json"]
            let login = try await loginkit([
                "login", "--cognito-pool-id", try #require(environment["LOGINKIT_TEST_COGNITO_POOL_ID"]),
                "--cognito-region", try #require(environment["LOGINKIT_TEST_COGNITO_REGION"]), "--cognito-endpoint", endpoint,
                "--client-id", try #require(environment["LOGINKIT_TEST_COGNITO_CLIENT_ID"]),
                "--username", try #require(environment["LOGINKIT_TEST_COGNITO_USERNAME"]), "--password-stdin",
            ] + common, input: try #require(environment["LOGINKIT_TEST_COGNITO_PASSWORD"]) + "\n")
            #expect(login.status == 0, "\(login.stderr)")
            #expect(try await loginkit(["token"] + common).stdout.split(separator: ".").count == 3)
            #expect(try await loginkit(["status"] + common).stdout.contains("cognito-idp"))
            let logout = try await loginkit(["logout"] + common)
            #expect(logout.status == 0, "\(logout.stderr)")
            #expect(try await loginkit(["status"] + common).status == 3)
        }
    }
}
