import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// The README's usage example, line for line, against the dev identity provider: if the README
/// stops compiling or working, this fails. Serialized: the example finds its store through
/// `LOGINKIT_STORE`, which is the whole process's.
@Suite(.serialized) struct ReadmeExampleTests {
    /// The README's lines against `server` with user `alice` and client `my-cli` added (and
    /// `configure` applied), the store in `directory`.
    func runReadmeExample(
        server: DevServer, directory: String, configure: (inout IdentityProviderConfiguration) -> Void = { _ in }
    ) async throws -> (user: User, token: String, service: AuthService) {
        var dev = server.identityProvider
        dev.users.append(DevUser(username: "alice", password: "alice-pw", subject: "alice-1"))
        dev.clients.append(DevClient(id: "my-cli"))
        configure(&dev)
        server.identityProvider = dev
        let issuer = server.issuer
        let password = "alice-pw"
        setenv("LOGINKIT_STORE", directory + "/tokens.json", 1)
        defer { unsetenv("LOGINKIT_STORE") }

        // --- README begins
        let api = OAuth2API(configuration: .init(issuer: issuer, clientID: "my-cli"), transport: try CurlHTTPClient())
        let service = AuthService(api: api, store: try IDTokenStore())
        let user = try await service.logIn(for: User.ID(rawValue: "alice"), with: password)
        let token = try await service.validAccessToken()  // refreshed once, however many callers ask at once
        // --- README ends

        return (user, token, service)
    }

    @Test func theReadmeExampleWorks() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let (user, token, service) = try await runReadmeExample(server: server, directory: directory)
                #expect(user.id.rawValue == "alice-1")
                #expect(!token.isEmpty)
                #expect(try await service.validAccessToken() == token, "served from the store, not fetched again")
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1)
                #expect(FileManager.default.fileExists(atPath: directory + "/tokens.json"))
            }
        }
    }

    /// A provider whose `scopes_supported` is `openid profile read` and which refuses
    /// `offline_access` (`invalid_scope`): the example works unchanged, asking for what it offers.
    @Test func theReadmeExampleWorksAtAProviderWithoutOfflineAccess() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let (user, token, service) = try await runReadmeExample(server: server, directory: directory) {
                    $0.supportedScopes = ["openid", "profile", "read"]
                }
                #expect(user.id.rawValue == "alice-1")
                #expect(!token.isEmpty)
                let stored = try #require(try await service.store.profile(named: "default"))
                #expect(stored.credentials.scope == "openid profile")
                #expect(stored.source.scope == "openid profile", "the profile remembers the scope asked for")
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1)
            }
        }
    }
}
