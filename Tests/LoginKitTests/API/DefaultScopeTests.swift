import LoginKit
import Testing

@Suite struct DefaultScopeTests {
    @Test func everythingWhenDiscoveryListsNoScopes() {
        #expect(OAuth2API.defaultScope(supported: nil) == "openid profile email offline_access")
        #expect(OAuth2API.defaultScope(supported: []) == "openid profile email offline_access")
    }

    @Test func onlyTheScopesTheProviderOffers() {
        #expect(OAuth2API.defaultScope(supported: ["openid", "profile", "read"]) == "openid profile")
        #expect(OAuth2API.defaultScope(supported: ["openid", "email", "profile"]) == "openid profile email")  // Google
        #expect(OAuth2API.defaultScope(supported: ["offline_access", "openid"]) == "openid offline_access")
        #expect(OAuth2API.defaultScope(supported: ["read"]) == "openid")
    }
}
