import Foundation
import LoginKit
import LoginKitHTTP
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// `OAuth2API.Configuration.scope` left `nil`: the scope comes from discovery's `scopes_supported`
/// at the first request; a refusal (`invalid_scope`) names the scope asked and the ones advertised.
@Suite struct ScopeChoiceTests {
    static let jsonHeaders: HTTPFields = [.contentType: "application/json"]
    /// Made per use, not kept in a `static let`: LeakSanitizer (`make reliability`'s AddressSanitizer
    /// run) reports the storage of a `Data` held by a lazily initialised static as a direct leak.
    static var tokenResponse: Data { Data(#"{"access_token": "at", "token_type": "Bearer", "expires_in": 3600}"#.utf8) }

    /// A public client of `https://id.example`; ID tokens are not verified (the responses carry none).
    func makeAPI(_ transport: MockHTTPTransport, scope: String? = nil) -> OAuth2API {
        var configuration = OAuth2API.Configuration(issuer: "https://id.example", clientID: "app")
        configuration.scope = scope
        configuration.verifiesIDTokens = false
        return OAuth2API(configuration: configuration, transport: transport)
    }

    /// A discovery document whose `scopes_supported` is `scopes` (`nil`: no such member).
    func discovery(scopes: [String]?) -> Data {
        var document = #"{"issuer": "https://id.example", "token_endpoint": "https://id.example/token""#
        if let scopes {
            let quoted: [String] = scopes.map { "\"\($0)\"" }
            document += #", "scopes_supported": ["# + quoted.joined(separator: ", ") + "]"
        }
        return Data((document + "}").utf8)
    }

    /// The `scope` field of a request's form body, if it has one.
    func sentScope(_ call: MockHTTPTransport.RequestCall) -> String? {
        FormURLEncoding.decodeFields(String(decoding: call.arguments.body ?? Data(), as: UTF8.self)).fields["scope"]
    }

    @Test func anUnsetScopeIsChosenFromDiscoveryAndRemembered() async throws {
        let transport = MockHTTPTransport()
        let api = makeAPI(transport)
        #expect(api.source.scope == nil, "nothing is chosen before discovery")
        transport.enqueue(status: .ok, headers: Self.jsonHeaders, body: discovery(scopes: ["openid", "profile", "read"]))
        transport.enqueue(status: .ok, headers: Self.jsonHeaders, body: Self.tokenResponse)
        _ = try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw")
        _ = await transport.nextRequest()  // discovery
        let token = await transport.nextRequest()
        #expect(sentScope(token) == "openid profile")
        #expect(api.source.scope == "openid profile", "a profile remembers the scope its login asked for")
        #expect(try await api.requestedScope() == "openid profile")
        transport.verify()
    }

    @Test func aConfiguredScopeIsSentAsItIsAndAnEmptyOneNotAtAll() async throws {
        let cases: [(configured: String, sent: String?)] = [("openid read", "openid read"), ("", nil)]
        for (configured, sent) in cases {
            let transport = MockHTTPTransport()
            let api = makeAPI(transport, scope: configured)
            #expect(api.source.scope == configured)
            transport.enqueue(status: .ok, headers: Self.jsonHeaders, body: discovery(scopes: ["openid", "profile"]))
            transport.enqueue(status: .ok, headers: Self.jsonHeaders, body: Self.tokenResponse)
            _ = try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw")
            _ = await transport.nextRequest()  // discovery
            let token = await transport.nextRequest()
            #expect(sentScope(token) == sent)
            transport.verify()
        }
    }

    @Test func aRefusedScopeNamesTheScopeAskedAndTheOnesAdvertised() async throws {
        let transport = MockHTTPTransport()
        let api = makeAPI(transport, scope: "openid profile offline_access")
        transport.enqueue(status: .ok, headers: Self.jsonHeaders, body: discovery(scopes: ["openid", "profile", "read"]))
        // A description with a newline: it must not reach the message as one.
        transport.enqueue(
            status: .badRequest, headers: Self.jsonHeaders,
            body: Data(#"{"error": "invalid_scope", "error_description": "offline_access\nis not offered"}"#.utf8))
        let error = try #require(await thrown { try await api.logIn(for: User.ID(rawValue: "alice"), with: "s3cret-pw") } as? LoginError)
        #expect(error.code == .invalidScope)
        #expect(error.providerError == "invalid_scope")
        #expect(error.message.contains(#"refused the scope "openid profile offline_access""#), "\(error.message)")
        #expect(error.message.contains(#"it advertises "openid profile read" (scopes_supported)"#), "\(error.message)")
        #expect(error.message.contains("is not offered"), "the provider's description is kept")
        #expect(!error.message.contains("\n"))
        #expect(!"\(error)".contains("s3cret-pw"))
        transport.verify()
    }

    @Test func aRefusalWithoutScopesSupportedSaysDiscoveryListsNone() async throws {
        let transport = MockHTTPTransport()
        let api = makeAPI(transport)
        transport.enqueue(status: .ok, headers: Self.jsonHeaders, body: discovery(scopes: nil))
        transport.enqueue(status: .badRequest, headers: Self.jsonHeaders, body: Data(#"{"error": "invalid_scope"}"#.utf8))
        let error = try #require(await thrown { try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw") } as? LoginError)
        #expect(error.code == .invalidScope)
        // Nothing listed: all of openid, profile, email, offline_access were asked for.
        #expect(error.message.contains(#"refused the scope "openid profile email offline_access""#), "\(error.message)")
        #expect(error.message.contains("the provider's discovery lists no scopes_supported"), "\(error.message)")
        transport.verify()
    }

    @Test func aBrowserSignInRefusingTheScopeNamesItToo() {
        let state = String(repeating: "S", count: 43)
        let request = AuthorizationRequest(
            url: "https://id.example/authorize?…", redirectURI: "http://127.0.0.1:8000/callback", state: state, nonce: "n",
            codeVerifier: String(repeating: "v", count: 43), scope: "openid offline_access", issuer: "https://id.example",
            requiresIssuerInResponse: false, advertisedScopes: ["openid", "profile"])
        let outcome = request.outcome(ofCallbackQuery: FormURLEncoding.encode([("error", "invalid_scope"), ("state", state)]))
        guard case .failed(let failure) = outcome, let error = failure as? LoginError else {
            Issue.record("\(outcome)")
            return
        }
        #expect(error.code == .invalidScope)
        #expect(error.message.contains(#"refused the scope "openid offline_access""#), "\(error.message)")
        #expect(error.message.contains(#"it advertises "openid profile""#), "\(error.message)")
    }
}
