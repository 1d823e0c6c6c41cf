import Foundation
import LoginKit
import LoginKitHTTP
import LoginKitTestSupport
import Testing

/// `loginkit login` against an OpenID provider LoginKit has no code for — oidc-provider-mock
/// (Flask and Authlib), which scripts/with-oidc-provider.sh starts around `make test` — with
/// `loginkit-dev-server browse` as `$BROWSER`, signing in through the provider's own page (an
/// identity picker: one text field, `sub`, whose value becomes the subject). Skipped without
/// LOGINKIT_TEST_OIDC_ISSUER, unless LOGINKIT_REQUIRE_OIDC_PROVIDER=1 (make test) makes that a failure.
@Suite(
    .enabled(
        if: ProcessInfo.processInfo.environment["LOGINKIT_TEST_OIDC_ISSUER"] != nil
            || ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_OIDC_PROVIDER"] == "1",
        "needs oidc-provider-mock: run through make test (scripts/with-oidc-provider.sh)"
    ),
    .timeLimit(.minutes(3))
)
struct ThirdPartyProviderTests {
    /// A client the provider has never heard of (it takes any client ID and redirect URI): LoginKit's
    /// defaults — discovery, PKCE `S256`, `state`, `nonce`, a redirect URI on an ephemeral loopback
    /// port, no client secret — end with a verified ID token and stored tokens; `token` refreshes
    /// them once they expire, and `logout` ends the session.
    @Test func aBrowserLoginThroughTheProvidersOwnPageStoresVerifiedTokens() async throws {
        let issuer = try Self.issuer()
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let login = try await loginkit(
                ["login", "--issuer", issuer, "--client-id", "loginkit-cli", "--json", "--store", path, "--timeout", "60"],
                environment: ["BROWSER": try Self.browser(signingInAs: "alice")])
            #expect(login.status == 0, "\(login.stderr)")
            #expect(login.stderr.contains("If the browser does not open, visit: \(issuer)/oauth2/authorize?"), "\(login.stderr)")
            let result = try #require(
                try JSONSerialization.jsonObject(with: Data(login.stdout.utf8)) as? [String: Any], "\(login.stdout)")
            #expect(result["subject"] as? String == "alice")
            #expect(result["issuer"] as? String == issuer)
            #expect(result["id_token_verified"] as? Bool == true, "verified against the JWKS that discovery names")
            #expect(result["has_refresh_token"] as? Bool == true)

            try await Self.expectLoggedIn(as: "alice", clientID: "loginkit-cli", issuer: issuer, store: path)
            try await BrowserCLITests.expectNoSecrets(in: [login.all], store: path, redirects: [])
            try await Self.expectRefresh(store: path)

            // Discovery names no revocation endpoint: logout deletes the profile, revoking nothing.
            let logout = try await loginkit(["logout", "--store", path])
            #expect(logout.status == 0, "\(logout.stderr)")
            #expect(try await loginkit(["status", "--store", path]).status == 3)
        }
    }

    /// A client registered as docs/browser-login.md says, at the provider's RFC 7591
    /// `registration_endpoint`: public (no secret; PKCE instead) or confidential (the secret on
    /// stdin, sent as `client_secret_basic`). This provider matches a registered redirect URI
    /// exactly, port included — it does not apply RFC 8252 §7.3 — so the redirect URI is registered
    /// with a fixed port, where the receiver then listens (`--listen-address`).
    @Test(arguments: ["none", "client_secret_basic"])
    func aRegisteredClientSignsInOnItsRegisteredRedirectURI(authentication: String) async throws {
        let issuer = try Self.issuer()
        let port = try freeLoopbackPort()
        let client = try await Self.register(
            redirectURI: "http://127.0.0.1:\(port)/callback", authentication: authentication, at: issuer)
        #expect((client.secret == nil) == (authentication == "none"), "a secret for confidential clients only")
        let subject = "registered-" + authentication
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let login = try await loginkit(
                ["login", "--issuer", issuer, "--client-id", client.id, "--listen-address", "127.0.0.1:\(port)",
                 "--store", path, "--timeout", "60"] + (client.secret == nil ? [] : ["--client-secret-stdin"]),
                input: client.secret.map { $0 + "\n" },
                environment: ["BROWSER": try Self.browser(signingInAs: subject)])
            #expect(login.status == 0, "\(login.stderr)")
            #expect(login.stderr.contains("Logged in as \(subject)"), "\(login.stderr)")
            if let secret = client.secret { #expect(!login.all.contains(secret), "the client secret leaked") }

            try await Self.expectLoggedIn(as: subject, clientID: client.id, issuer: issuer, store: path)
            try await BrowserCLITests.expectNoSecrets(in: [login.all], store: path, redirects: [])
            try await Self.expectRefresh(store: path, environment: client.secret.map { ["LOGINKIT_CLIENT_SECRET": $0] } ?? [:])
        }
    }

    // MARK: Helpers

    /// The provider's issuer; a failure when `make test` should have started it.
    static func issuer() throws -> String {
        try #require(
            ProcessInfo.processInfo.environment["LOGINKIT_TEST_OIDC_ISSUER"],
            "run `make test`, which starts oidc-provider-mock (scripts/with-oidc-provider.sh)")
    }

    /// `$BROWSER` for `loginkit-dev-server browse`, signing in as `username` (the launcher appends the URL).
    static func browser(signingInAs username: String) throws -> String {
        "'\(try devServerPath())' browse --username \(username)"
    }

    /// A client registered at the provider.
    struct RegisteredClient {
        let id: String
        let secret: String?
    }

    /// Registers a client with one redirect URI and the token endpoint authentication method
    /// `authentication` at the `registration_endpoint` discovery names (RFC 7591).
    static func register(redirectURI: String, authentication: String, at issuer: String) async throws -> RegisteredClient {
        try await CurlHTTPClient.withClient { (client: CurlHTTPClient) async throws -> RegisteredClient in
            let discoveryRequest = try #require(HTTPRequest(method: .get, url: issuer + "/.well-known/openid-configuration"))
            let (_, discoveryBody) = try await client.send(discoveryRequest, body: nil)
            let discovery = try #require(try JSONSerialization.jsonObject(with: discoveryBody) as? [String: Any])
            let endpoint = try #require(discovery["registration_endpoint"] as? String, "discovery names no registration_endpoint")
            let request = try #require(
                HTTPRequest(method: .post, url: endpoint, headerFields: [.contentType: "application/json"]))
            let metadata: [String: Any] = ["redirect_uris": [redirectURI], "token_endpoint_auth_method": authentication]
            let metadataJSON = try JSONSerialization.data(withJSONObject: metadata)
            let (response, body) = try await client.send(request, body: metadataJSON)
            try #require(
                response.status.code == 201,
                "registration answered HTTP \(response.status.code): \(String(decoding: body, as: UTF8.self))")
            let registered = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
            return RegisteredClient(
                id: try #require(registered["client_id"] as? String), secret: registered["client_secret"] as? String)
        }
    }

    /// Expects the profile at `path` to be `subject`'s at `issuer` for `clientID`, with an ID token
    /// issued there for that client, which `token` prints (and the access token with `--access`).
    static func expectLoggedIn(as subject: String, clientID: String, issuer: String, store path: String) async throws {
        let status = try await loginkit(["status", "--json", "--store", path])
        #expect(status.status == 0, "\(status.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        #expect(json["subject"] as? String == subject)
        #expect(json["user"] as? String == subject, "no preferred_username: the subject")
        #expect(json["issuer"] as? String == issuer)
        #expect(json["client_id"] as? String == clientID)
        #expect(json["has_id_token"] as? Bool == true)
        #expect(json["has_refresh_token"] as? Bool == true, "the provider issues refresh tokens")

        let profile = try #require(try await IDTokenStore(path: path, sealing: .none).profile(named: "default"))
        #expect(profile.attributes["grant"] == "authorization_code")
        // No --scope: openid plus what discovery's scopes_supported offers (no offline_access there).
        #expect(profile.source.scope == "openid profile email")
        let idToken = try #require(profile.credentials.idToken)
        let claims = try idToken.unverifiedClaims()
        #expect(claims.issuer == issuer)
        #expect(claims.audience == [clientID])
        #expect(claims.subject == subject)
        #expect(claims.nonce != nil, "the nonce LoginKit sent, checked at login")

        let token = try await loginkit(["token", "--store", path])
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout.trimmingCharacters(in: .newlines) == idToken.rawValue)
        let access = try await loginkit(["token", "--access", "--store", path])
        #expect(access.status == 0, "\(access.stderr)")
        let accessToken = try #require(profile.credentials.accessToken)
        #expect(access.stdout.trimmingCharacters(in: .newlines) == accessToken)
    }

    /// Expires the stored credentials and expects `token` to refresh them at the provider: a new
    /// access token and a new verified ID token for the same subject, issuer and audience, the
    /// refresh token kept (this provider sends no new one).
    static func expectRefresh(store path: String, environment: [String: String] = [:]) async throws {
        let store = try IDTokenStore(path: path, sealing: .none)
        let before = try #require(try await store.profile(named: "default"))
        try await expireStoredCredentials(in: store)
        let token = try await loginkit(["token", "--store", path], environment: environment)
        #expect(token.status == 0, "\(token.stderr)")
        let after = try #require(try await IDTokenStore(path: path, sealing: .none).profile(named: "default"))
        let (old, new) = (before.credentials, after.credentials)
        #expect(new.accessToken != nil && new.accessToken != old.accessToken, "a new access token")
        #expect(new.refreshToken != nil && new.refreshToken == old.refreshToken)
        #expect(new.expiresAt.map { $0 > Date() } == true, "no longer expired")
        let oldIDToken = try #require(old.idToken)
        let newIDToken = try #require(new.idToken)
        #expect(newIDToken.rawValue != oldIDToken.rawValue, "a new ID token")
        #expect(token.stdout.trimmingCharacters(in: .newlines) == newIDToken.rawValue)
        let oldClaims = try oldIDToken.unverifiedClaims()
        let newClaims = try newIDToken.unverifiedClaims()
        #expect(newClaims.subject == oldClaims.subject)
        #expect(newClaims.issuer == oldClaims.issuer)
        #expect(newClaims.audience == oldClaims.audience)
    }
}
