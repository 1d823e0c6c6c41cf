import Foundation
@testable import LoginKit
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// A target's cache key names its stored profile: two different targets never share one, the keys
/// of ordinary targets stay those their profiles were saved under, and targets with control
/// characters are refused before anything is read or sent.
@Suite(.timeLimit(.minutes(1)))
struct TokenTargetKeyTests {
    /// An OAuth2API over `transport`, discovery off, for a confidential client.
    func serviceAPI(_ transport: MockHTTPTransport) -> OAuth2API {
        var configuration = OAuth2API.Configuration(issuer: "https://id.example", clientID: "svc", clientSecret: "s")
        configuration.usesDiscovery = false
        configuration.endpoints.token = "https://id.example/token"
        configuration.scope = ""
        return OAuth2API(configuration: configuration, transport: transport)
    }

    func tokenBody(_ token: String) -> Data {
        Data(#"{"access_token":"\#(token)","token_type":"Bearer","expires_in":3600}"#.utf8)
    }

    @Test func targetsThatSharedAKeyNoLongerDo() {
        let pairs: [(TokenTarget, TokenTarget)] = [
            (TokenTarget(audience: "a\nscope=b", scope: "c"), TokenTarget(audience: "a", scope: "b\nscope=c")),
            (TokenTarget(scope: "(default)"), TokenTarget()),
            (TokenTarget(resources: [""]), TokenTarget()),
            (TokenTarget(audience: ""), TokenTarget()),
            (TokenTarget(resources: ["https://a.example/ https://b.example/"]), TokenTarget(resources: ["https://a.example/", "https://b.example/"])),
            (TokenTarget(scope: "\u{0}%00"), TokenTarget(scope: "%00\u{0}")),  // escaped parts keep their `%`s apart
        ]
        for (one, two) in pairs {
            #expect(!one.cacheKey.utf8.elementsEqual(two.cacheKey.utf8), "\(one) and \(two)")
            #expect(ClientCredentialsTokens.profileName(base: "svc", target: one) != ClientCredentialsTokens.profileName(base: "svc", target: two))
        }
    }

    @Test func ordinaryTargetsKeepTheirKeys() {
        #expect(TokenTarget().cacheKey == "resource=\naudience=\nscope=(default)")
        #expect(TokenTarget(scope: "").cacheKey == "resource=\naudience=\nscope=")
        let target = TokenTarget(
            resources: ["https://b.example/", "https://a.example/x%20y", "https://b.example/"], audience: "https://api.example", scope: "write read write")
        #expect(target.cacheKey == "resource=https://a.example/x%20y https://b.example/\naudience=https://api.example\nscope=read write")
    }

    @Test func controlCharactersAreRefused() {
        let targets = [
            TokenTarget(audience: "a\nb"), TokenTarget(audience: "x\u{7F}"), TokenTarget(scope: "read\u{0}"), TokenTarget(scope: "read\twrite"),
            TokenTarget(resources: ["https://a.example/\u{9B}"]),
        ]
        for target in targets {
            #expect((#expect(throws: LoginError.self) { try target.validate() })?.code == .invalidConfiguration, "\(target)")
        }
        #expect(throws: Never.self) { try TokenTarget(resources: ["https://a.example/"], audience: "https://api.example", scope: "read write").validate() }
    }

    @Test func aTargetWithControlCharactersIsRefusedBeforeAnythingIsSent() async throws {
        let transport = MockHTTPTransport()
        let tokens = ClientCredentialsTokens(api: serviceAPI(transport), store: InMemoryTokenStore())
        transport.enqueue(status: .ok, headers: [.contentType: "application/json"], body: tokenBody("never-asked-for"))
        let error = await thrown { try await tokens.accessToken(for: TokenTarget(audience: "a\nscope=b", scope: "c")) }
        #expect((error as? LoginError)?.code == .invalidConfiguration)
        #expect(transport.requestCount == 0)
    }

    @Test func aScopeSpelledLikeTheDefaultMarkerGetsItsOwnToken() async throws {
        let transport = MockHTTPTransport()
        let tokens = ClientCredentialsTokens(api: serviceAPI(transport), store: InMemoryTokenStore())
        transport.enqueue(status: .ok, headers: [.contentType: "application/json"], body: tokenBody("default-token"))
        #expect(try await tokens.accessToken() == "default-token")
        transport.enqueue(status: .ok, headers: [.contentType: "application/json"], body: tokenBody("literal-token"))
        #expect(try await tokens.accessToken(for: TokenTarget(scope: "(default)")) == "literal-token")
        #expect(transport.requestCount == 2)
    }

    @Test func exchangeRequestsThatSharedAKeyNoLongerDo() throws {
        let plain = TokenExchangeRequest(subjectToken: "subject")
        #expect(try plain.cacheKey() != TokenExchangeRequest(subjectToken: "subject", requestedTokenType: "-").cacheKey())
        #expect(try plain.cacheKey() != TokenExchangeRequest(subjectToken: "subject", actorTokenType: "-").cacheKey())
        #expect(try plain.cacheKey() == TokenExchangeRequest(subjectToken: "subject").cacheKey())
        #expect(try !plain.cacheKey().contains("subject"))
    }
}
