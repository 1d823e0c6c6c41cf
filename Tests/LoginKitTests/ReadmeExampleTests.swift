import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// The README's usage example, line for line, against the dev identity provider: if the README
/// stops compiling or working, this fails.
@Suite struct ReadmeExampleTests {
    @Test func theReadmeExampleWorks() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                var dev = server.identityProvider
                dev.users.append(DevUser(username: "alice", password: "alice-pw", subject: "alice-1"))
                dev.clients.append(DevClient(id: "my-cli"))
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

                #expect(user.id.rawValue == "alice-1")
                #expect(!token.isEmpty)
                #expect(try await service.validAccessToken() == token, "served from the store, not fetched again")
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1)
                #expect(FileManager.default.fileExists(atPath: directory + "/tokens.json"))
            }
        }
    }
}
