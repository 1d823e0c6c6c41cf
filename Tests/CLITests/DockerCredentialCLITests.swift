import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// `docker-credential-loginkit` driven as docker drives a credential helper: a link of that name to
/// `loginkit`, one action as its only argument, the server URL (or JSON) on stdin, the answer or
/// the failure on stdout.
@Suite(.timeLimit(.minutes(2)))
struct DockerCredentialCLITests {
    @Test func theHelperServesTheRegistriesAProfileNames() async throws {
        try await withDemoLoggedIn { server, directory, storePath in
            try FileManager.default.createDirectory(atPath: directory + "/bin", withIntermediateDirectories: true)
            let helper = directory + "/bin/docker-credential-loginkit"
            try FileManager.default.createSymbolicLink(atPath: helper, withDestinationPath: try loginkitPath())
            let environment = ["LOGINKIT_STORE": storePath]
            func docker(_ action: String, _ input: String) async throws -> Run {
                try await loginkit([action], input: input, environment: environment, executable: helper)
            }

            // No registry named yet: docker's not-found answer, and an empty list.
            let unknown = try await docker("get", "https://registry.example")
            #expect(unknown.status == 1)
            #expect(unknown.stdout == "credentials not found in native keychain\n")
            #expect(try await docker("list", "").stdout == "{}\n")

            let configured = try await loginkit(["docker-credential", "configure", "--registry", "registry.example", "--store", storePath])
            #expect(configured.status == 0, "\(configured.stderr)")

            // `echo -n https://registry.example | docker-credential-loginkit get`
            let token = try await storedAccessToken(storePath)
            let answer = try await docker("get", "https://registry.example")
            #expect(answer.status == 0, "\(answer.stdout) \(answer.stderr)")
            let fields = try JSONDecoder().decode([String: String].self, from: Data(answer.stdout.utf8))
            #expect(fields == ["ServerURL": "https://registry.example", "Username": "oauth2accesstoken", "Secret": token])
            #expect(server.isValidAccessToken(token))
            #expect(!answer.stderr.contains(token))
            // The host is what counts: a bare host, another case, a path.
            let bare = try await docker("get", "Registry.Example/v2/\n")
            #expect(bare.status == 0 && bare.stdout.contains(token))
            let other = try await docker("get", "https://other.example")
            #expect(other.status == 1 && other.stdout == "credentials not found in native keychain\n")
            #expect(try await docker("list", "").stdout == #"{"registry.example":"oauth2accesstoken"}"# + "\n")

            // store: accepted, nothing kept (never the secret).
            let offered = #"{"ServerURL":"https://registry.example","Username":"someone","Secret":"typed-at-docker-login"}"#
            let stored = try await docker("store", offered)
            #expect(stored.status == 0 && stored.stdout.isEmpty, "\(stored.stdout)")
            #expect(!(try storeText(at: storePath)).contains("typed-at-docker-login"))
            #expect(try await docker("store", "not json").status == 1)

            // erase (`docker logout`): the next get serves a new token, after one refresh.
            let before = server.monitor.requestCount(path: "/oauth/token")
            let erased = try await docker("erase", "https://registry.example")
            #expect(erased.status == 0, "\(erased.stdout)")
            #expect(server.monitor.requestCount(path: "/oauth/token") == before + 1)
            let renewed = try await storedAccessToken(storePath)
            #expect(renewed != token)
            #expect(try await docker("get", "https://registry.example").stdout.contains(renewed))

            // An identity token, then no registry at all.
            _ = try await loginkit(["docker-credential", "configure", "--registry", "registry.example", "--username", "<token>", "--store", storePath])
            let identityAnswer = try await docker("get", "registry.example")
            let identity = try JSONDecoder().decode([String: String].self, from: Data(identityAnswer.stdout.utf8))
            #expect(identity["Username"] == "<token>")
            _ = try await loginkit(["docker-credential", "configure", "--registry", "registry.example", "--remove", "--store", storePath])
            #expect(try await docker("get", "registry.example").status == 1)
            #expect(try await docker("version", "").stdout.hasPrefix("docker-credential-loginkit (loginkit) "))
        }
    }

    @Test func aRegistryWhoseProfileHasNoSessionIsNotFound() async throws {
        try await withDemoLoggedIn { _, _, storePath in
            #expect(try await loginkit(["docker-credential", "configure", "--registry", "registry.example", "--store", storePath]).status == 0)
            // The refresh token is refused: the session is gone.
            try await expireStoredCredentials(in: IDTokenStore(path: storePath))
            try await IDTokenStore(path: storePath).withExclusiveAccess { transaction in
                transaction["default"]?.credentials.refreshToken = "revoked-refresh-token"
            }
            let answer = try await loginkit(["docker-credential", "get"], input: "registry.example", environment: ["LOGINKIT_STORE": storePath])
            #expect(answer.status == 1)
            #expect(answer.stdout == "credentials not found in native keychain\n")
            #expect(answer.stderr.contains("loginkit: "), "\(answer.stderr)")

            let unconfigured = try await loginkit(["docker-credential", "configure", "--registry", "registry.example", "--profile", "nobody", "--store", storePath])
            #expect(unconfigured.status == 3)
            #expect(try await loginkit(["docker-credential", "configure", "--store", storePath]).status == 2)
        }
    }
}
