import Foundation
@testable import LoginKit
import LoginKitHTTP
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// A client secret given apart from the configuration (the CLI's `LOGINKIT_CLIENT_SECRET`) is only
/// ever sent as the client, and to the issuer, it was given for; a public client's profile takes none.
@Suite(.timeLimit(.minutes(1)))
struct ClientSecretOwnerTests {
    /// An API for client `client-b` of `https://b.example` holding client A's secret, given for
    /// `owner`; discovery off.
    func makeAPI(_ transport: MockHTTPTransport, owner: OAuth2API.ClientSecretOwner?, method: OAuth2API.ClientAuthenticationMethod = .automatic) -> OAuth2API {
        var configuration = OAuth2API.Configuration(issuer: "https://b.example", clientID: "client-b", clientSecret: "secret-of-client-a")
        configuration.clientSecretOwner = owner
        configuration.clientAuthenticationMethod = method
        configuration.usesDiscovery = false
        configuration.endpoints.token = "https://b.example/token"
        return OAuth2API(configuration: configuration, transport: transport)
    }

    /// The refresh request `api` sends (answered with a new access token): its head and form fields.
    func refreshRequest(_ api: OAuth2API, _ transport: MockHTTPTransport) async throws -> (request: HTTPRequest, form: [(String, String)]) {
        async let refreshed = api.refresh(Credentials(accessToken: "old", refreshToken: "refresh-of-b", issuer: "https://b.example"))
        let call = await transport.nextRequest()
        let answer = Data(#"{"access_token":"new","token_type":"Bearer","expires_in":3600}"#.utf8)
        call.resume(returning: (HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]), answer))
        #expect(try await refreshed.accessToken == "new")
        return (call.arguments.request, FormURLEncoding.decode(String(decoding: call.arguments.body ?? Data(), as: UTF8.self)))
    }

    @Test func aSecretGivenForAnotherClientIsNotSent() async throws {
        let transport = MockHTTPTransport()
        let (request, form) = try await refreshRequest(makeAPI(transport, owner: OAuth2API.ClientSecretOwner(clientID: "client-a", issuer: nil)), transport)
        #expect(request.headerFields[.authorization] == nil)
        #expect(!form.contains { $0.0 == "client_secret" })
        #expect(form.contains { $0.0 == "client_id" && $0.1 == "client-b" })  // as a public client
    }

    @Test func aSecretGivenForAnotherIssuerIsNotSent() async throws {
        let transport = MockHTTPTransport()
        let (request, form) = try await refreshRequest(makeAPI(transport, owner: OAuth2API.ClientSecretOwner(clientID: "client-b", issuer: "https://a.example")), transport)
        #expect(request.headerFields[.authorization] == nil)
        #expect(!form.contains { $0.0 == "client_secret" })
    }

    @Test func aSecretGivenForThisClientAndIssuerIsSent() async throws {
        let transport = MockHTTPTransport()
        let owned = try await refreshRequest(makeAPI(transport, owner: OAuth2API.ClientSecretOwner(clientID: "client-b", issuer: "https://b.example/")), transport)
        #expect(owned.request.headerFields[.authorization]?.hasPrefix("Basic ") == true)
        let own = try await refreshRequest(makeAPI(transport, owner: nil), transport)  // the configuration's own secret
        #expect(own.request.headerFields[.authorization]?.hasPrefix("Basic ") == true)
    }

    @Test func aSecretMethodWithAnotherClientsSecretSendsNothing() async throws {
        let transport = MockHTTPTransport()
        let api = makeAPI(transport, owner: OAuth2API.ClientSecretOwner(clientID: "client-a", issuer: nil), method: .basic)
        let error = await thrown { try await api.refresh(Credentials(refreshToken: "refresh-of-b")) }
        #expect((error as? LoginError)?.code == .invalidConfiguration)
        #expect(!String(describing: error).contains("secret-of-client-a"))
        #expect(transport.requestCount == 0)
    }

    @Test func aProfileTakesASecretOnlyForItsClientIssuerAndASecretMethod() {
        func profile(_ attributes: [String: String], kind: CredentialSource.Kind = .oauth2) -> StoredProfile {
            StoredProfile(
                credentials: Credentials(refreshToken: "r"), source: CredentialSource(kind: kind, endpoint: "https://b.example", clientID: "client-b"),
                attributes: attributes)
        }
        let publicClient = profile(["client_auth": "none"])
        #expect(!publicClient.acceptsClientSecret(clientID: nil, issuer: nil))
        #expect(!publicClient.acceptsClientSecret(clientID: "client-b", issuer: "https://b.example"))
        let basic = profile(["client_auth": "client_secret_basic"])
        #expect(basic.acceptsClientSecret(clientID: nil, issuer: nil))
        #expect(basic.acceptsClientSecret(clientID: "client-b", issuer: "https://b.example/"))
        #expect(!basic.acceptsClientSecret(clientID: "client-a", issuer: nil))
        #expect(!basic.acceptsClientSecret(clientID: nil, issuer: "https://a.example"))
        #expect(profile(["client_auth": "client_secret_post"]).acceptsClientSecret(clientID: nil, issuer: nil))
        #expect(profile(["client_auth": "client_secret_jwt"]).acceptsClientSecret(clientID: nil, issuer: nil))
        #expect(!profile(["client_auth": "private_key_jwt"]).acceptsClientSecret(clientID: nil, issuer: nil))
        // Recorded nothing: a client-credentials login is a confidential client's; any other login
        // takes only a secret that names its client.
        #expect(profile(["grant": "client_credentials"]).acceptsClientSecret(clientID: nil, issuer: nil))
        #expect(!profile([:]).acceptsClientSecret(clientID: nil, issuer: nil))
        #expect(profile([:]).acceptsClientSecret(clientID: "client-b", issuer: nil))
        #expect(!profile(["client_auth": "client_secret_basic"], kind: .jsonLogin).acceptsClientSecret(clientID: nil, issuer: nil))
    }

    @Test func aLoginRecordsHowItsClientAuthenticates() async throws {
        func recorded(secret: String?, key: SigningKey? = nil) async throws -> String? {
            var configuration = OAuth2API.Configuration(issuer: "https://b.example", clientID: "client-b", clientSecret: secret)
            configuration.clientAssertionKey = key
            configuration.usesDiscovery = false
            configuration.endpoints.token = "https://b.example/token"
            let api = OAuth2API(configuration: configuration, transport: MockHTTPTransport())
            return try await api.clientAuthenticationAttributes()[StoredProfile.clientAuthenticationAttribute]
        }
        #expect(try await recorded(secret: nil) == "none")
        #expect(try await recorded(secret: "s") == "client_secret_basic")
        #expect(try await recorded(secret: nil, key: try SigningKey.generate(.es256, keyID: nil)) == "private_key_jwt")
    }
}
