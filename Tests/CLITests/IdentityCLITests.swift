import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// "Logged in as demo (demo@example.test)": the login names the user from the ID token's claims,
/// else from the provider's userinfo endpoint (only when it is about the ID token's `sub`), keeps
/// the name in the profile, and `status` shows it beside the `sub`.
@Suite(.timeLimit(.minutes(3)))
struct IdentityCLITests {
    /// The dev server's ID tokens carry `preferred_username` and `email`: no userinfo request.
    @Test func theLoginGreetsTheUserFromTheIDToken() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let store = directory + "/tokens.json"
                let login = try await logInDemo(at: server, ["--store", store])
                #expect(login.stderr.contains(#"Logged in as demo (demo@example.test), profile "default"."#), "\(login.stderr)")
                #expect(server.monitor.requestCount(path: "/userinfo") == 0)

                let status = try await loginkit(["status", "--store", store])
                #expect(status.stdout.contains("user:           demo (demo@example.test), sub 248289761001"), "\(status.stdout)")
                let json = try stdoutJSONObject(try await loginkit(["status", "--json", "--store", store]))
                #expect(json["user"] as? String == "demo")
                #expect(json["email"] as? String == "demo@example.test")
                #expect(json["subject"] as? String == "248289761001")

                let profile = try #require(try await IDTokenStore(path: store, sealing: .none).profile(named: "default"))
                #expect(profile.attributes["display_name"] == "demo")
                #expect(profile.attributes["email"] == "demo@example.test")
                #expect(profile.userID == "248289761001", "the sub stays the profile's identity")
            }
        }
    }

    /// ID tokens without the profile claims: one userinfo request with the new access token —
    /// Bearer, or DPoP with a proof for a DPoP-bound login — names the user; a login whose scope
    /// has no `openid` (no ID token) is named the same way.
    @Test func theUserinfoEndpointNamesTheUserWhenTheIDTokenDoesNot() async throws {
        try await withTemporaryDirectory { directory in
            var configuration = DevServer.Configuration.quiet
            configuration.identityProvider.idTokenCarriesProfileClaims = false
            try await DevServer.withServer(configuration: configuration) { server in
                let store = directory + "/tokens.json"
                let bearer = try await logInDemo(at: server, ["--store", store])
                #expect(bearer.stderr.contains(#"Logged in as demo (demo@example.test), profile "default"."#), "\(bearer.stderr)")
                #expect(server.monitor.requestCount(path: "/userinfo") == 1)
                let idToken = try #require(try await IDTokenStore(path: store, sealing: .none).profile(named: "default")?.credentials.idToken)
                #expect(try idToken.unverifiedClaims()["preferred_username"] == nil, "the name came from userinfo")

                let bound = try await logInDemo(at: server, ["--store", store, "--dpop", "--profile", "bound", "--json"])
                let result = try stdoutJSONObject(bound)
                #expect(result["display_name"] as? String == "demo", "\(bound.all)")
                #expect(result["email"] as? String == "demo@example.test")
                #expect(server.monitor.requestCount(path: "/userinfo") == 2)
                let binding = try stdoutJSONObject(try await loginkit(["status", "--json", "--store", store, "--profile", "bound"]))
                #expect(binding["binding"] as? String == "dpop")

                let withoutIDToken = try await logInDemo(at: server, ["--store", store, "--scope", "profile", "--profile", "opaque"])
                #expect(withoutIDToken.stderr.contains("Logged in as demo (demo@example.test)"), "\(withoutIDToken.stderr)")
                #expect(server.monitor.requestCount(path: "/userinfo") == 3)
            }
        }
    }

    /// A userinfo answer about another subject than the ID token is ignored (OpenID Connect Core
    /// §5.3.4): the user is named by the `sub`, nothing is recorded; and a userinfo endpoint that
    /// fails does not fail the login.
    @Test func aUserinfoAnswerAboutSomeoneElseIsIgnored() async throws {
        try await withTemporaryDirectory { directory in
            var configuration = DevServer.Configuration.quiet
            configuration.identityProvider.idTokenCarriesProfileClaims = false
            configuration.identityProvider.userinfoSubjectOverride = "someone-else"
            try await DevServer.withServer(configuration: configuration) { server in
                let store = directory + "/tokens.json"
                let login = try await logInDemo(at: server, ["--store", store])
                #expect(login.stderr.contains(#"Logged in as 248289761001, profile "default"."#), "\(login.stderr)")
                #expect(server.monitor.requestCount(path: "/userinfo") == 1)
                let profile = try #require(try await IDTokenStore(path: store, sealing: .none).profile(named: "default"))
                #expect(profile.attributes["display_name"] == nil && profile.attributes["email"] == nil)

                server.monitor.injectFaults([.status(500)], path: "/userinfo")
                let failing = try await logInDemo(at: server, ["--store", store, "--profile", "other"])
                #expect(failing.stderr.contains("Logged in as 248289761001"), "\(failing.stderr)")
            }
        }
    }
}
