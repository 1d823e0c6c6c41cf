import Foundation
import LoginKit
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// Whose fault an error is decides its type: the caller's own configuration is a
/// `ConfigurationError` (and nothing is sent), the provider's metadata a `ServerError`
/// `.misconfigured`. Either way the message names the setting as the library spells it, never a
/// CLI flag. Every error carries where it was thrown.
@Suite(.timeLimit(.minutes(3)))
struct ErrorAttributionTests {
    static let alice = User.ID(rawValue: "alice")

    /// What `api.logIn` throws, as a `ConfigurationError`; the test fails when it is anything else.
    func configurationError(_ operation: () async throws -> Void) async throws -> ConfigurationError {
        let error = await thrown(operation)
        return try #require(error as? ConfigurationError, "\(String(describing: error))")
    }

    func serverError(_ operation: () async throws -> Void) async throws -> ServerError {
        let error = await thrown(operation)
        return try #require(error as? ServerError, "\(String(describing: error))")
    }

    func discovery(_ transport: MockHTTPTransport, _ json: String) {
        transport.enqueue(status: .ok, headers: [.contentType: "application/json"], body: Data(json.utf8))
    }

    @Test func anIssuerThatIsNotAnAbsoluteURLIsTheConfigurations() async throws {
        let transport = MockHTTPTransport()
        let api = OAuth2API(configuration: .init(issuer: "issuer.test", clientID: "cli"), transport: transport)
        let error = try await configurationError { _ = try await api.logIn(for: Self.alice, with: "pw") }
        #expect(error.code == .invalidValue)
        #expect(error.message.contains("OAuth2API.Configuration.issuer"))
        #expect(error.file.hasSuffix("TokenEndpoint.swift"))
        #expect(transport.requestCount == 0)
    }

    @Test func discoveryOffWithoutATokenEndpointIsTheConfigurations() async throws {
        let transport = MockHTTPTransport()
        var configuration = OAuth2API.Configuration(issuer: "https://issuer.test", clientID: "cli")
        configuration.usesDiscovery = false
        let api = OAuth2API(configuration: configuration, transport: transport)
        let error = try await configurationError { _ = try await api.logIn(for: Self.alice, with: "pw") }
        #expect(error.code == .invalidValue)
        #expect(error.message.contains("OAuth2API.Configuration.endpoints.token"))
        #expect(transport.requestCount == 0)
    }

    @Test func aConfiguredEndpointThatIsNotAnAbsoluteURLIsTheConfigurations() async throws {
        let transport = MockHTTPTransport()
        var configuration = OAuth2API.Configuration(issuer: "https://issuer.test", clientID: "cli")
        configuration.usesDiscovery = false
        configuration.endpoints = OAuth2API.Endpoints(token: "/oauth/token")
        let api = OAuth2API(configuration: configuration, transport: transport)
        let error = try await configurationError { _ = try await api.logIn(for: Self.alice, with: "pw") }
        #expect(error.code == .invalidValue)
        #expect(error.message.contains("OAuth2API.Configuration.endpoints.token \"/oauth/token\""))
        #expect(transport.requestCount == 0)
    }

    @Test func aJSONLoginURLThatIsNotAnAbsoluteURLIsTheConfigurations() async throws {
        let transport = MockHTTPTransport()
        var configuration = JSONLoginAPI.Configuration(loginURL: "login")
        configuration.idTokenVerification = .unverifiedOpaqueTokens
        let api = JSONLoginAPI(configuration: configuration, transport: transport)
        let error = try await configurationError { _ = try await api.logIn(for: Self.alice, with: "pw") }
        #expect(error.message.contains("JSONLoginAPI.Configuration.loginURL"))
        #expect(transport.requestCount == 0)
    }

    /// A URL that may carry a password before its `@` is refused without being quoted.
    @Test func aRefusedURLWithUserInfoIsNotQuoted() async throws {
        let transport = MockHTTPTransport()
        let api = OAuth2API(configuration: .init(issuer: "https://alice:s3cret@issuer.test", clientID: "cli"), transport: transport)
        let error = try await configurationError { _ = try await api.logIn(for: Self.alice, with: "pw") }
        #expect(!error.message.contains("s3cret"))
        #expect(transport.requestCount == 0)
    }

    @Test func aDiscoveredTokenEndpointThatIsNotAnAbsoluteURLIsTheProviders() async throws {
        let transport = MockHTTPTransport()
        discovery(transport, #"{"issuer":"https://issuer.test","token_endpoint":"/token"}"#)
        let api = OAuth2API(configuration: .init(issuer: "https://issuer.test", clientID: "cli"), transport: transport)
        let error = try await serverError { _ = try await api.logIn(for: Self.alice, with: "pw") }
        #expect(error.code == .misconfigured)
        #expect(error.message.contains("issuer.test's token_endpoint"))
        #expect(transport.requestCount == 1, "discovery only")
    }

    @Test func anIssuerMismatchIsTheProvidersAndNamesTheSettingNotAFlag() async throws {
        let transport = MockHTTPTransport()
        discovery(transport, #"{"issuer":"https://other.test","token_endpoint":"https://issuer.test/token"}"#)
        let api = OAuth2API(configuration: .init(issuer: "https://issuer.test", clientID: "cli"), transport: transport)
        let error = try await serverError { _ = try await api.logIn(for: Self.alice, with: "pw") }
        #expect(error.code == .misconfigured)
        #expect(error.message.contains("OAuth2API.Configuration.issuer"))
        #expect(!error.message.contains("--"))
    }

    @Test func aConfiguredAuthorizationEndpointWithoutTLSIsTheConfigurations() async throws {
        let transport = MockHTTPTransport()
        var configuration = OAuth2API.Configuration(issuer: "https://issuer.test", clientID: "cli")
        configuration.usesDiscovery = false
        configuration.endpoints = OAuth2API.Endpoints(authorization: "http://issuer.test/authorize", token: "https://issuer.test/token")
        let api = OAuth2API(configuration: configuration, transport: transport)
        let error = try await configurationError {
            _ = try await api.authorizationRequest(redirectURI: "http://127.0.0.1:8000/callback", options: AuthorizationOptions())
        }
        #expect(error.message.contains("OAuth2API.Configuration.endpoints.authorization"))
    }

    @Test func aDiscoveredAuthorizationEndpointWithoutTLSIsTheProviders() async throws {
        let transport = MockHTTPTransport()
        discovery(
            transport,
            #"{"issuer":"https://issuer.test","token_endpoint":"https://issuer.test/token","authorization_endpoint":"http://issuer.test/authorize"}"#
        )
        let api = OAuth2API(configuration: .init(issuer: "https://issuer.test", clientID: "cli"), transport: transport)
        let error = try await serverError {
            _ = try await api.authorizationRequest(redirectURI: "http://127.0.0.1:8000/callback", options: AuthorizationOptions())
        }
        #expect(error.code == .misconfigured)
        #expect(error.message.contains("issuer.test's authorization_endpoint"))
    }

    /// Every error type has the same shape: an optional underlying error and where it was thrown.
    @Test func everyErrorCarriesAnUnderlyingErrorAndWhereItWasThrown() {
        let cause = CancellationError()
        let policy = VersionPolicy(title: "t", message: "m", version: SemanticVersion(major: 2))
        let login = LoginError(.invalidCredentials, "x", underlying: cause)
        let server = ServerError(.unavailable, "x", underlying: cause)
        let configuration = ConfigurationError(.invalidValue, "x", underlying: cause)
        let store = TokenStoreError(.io, path: "/x", "x", underlying: cause)
        let network = NetworkError(.other, "x", underlying: cause)
        let inProgress = LoginInProgressError(underlying: cause)
        let required = LoginRequiredError(.notLoggedIn, profile: nil, "x", underlying: cause)
        let upgrade = UpgradeRequiredError(policy: policy, currentVersion: SemanticVersion(major: 1), underlying: cause)
        let shapes: [(name: String, underlying: (any Error)?, file: String)] = [
            ("LoginError", login.underlying, login.file), ("ServerError", server.underlying, server.file),
            ("ConfigurationError", configuration.underlying, configuration.file), ("TokenStoreError", store.underlying, store.file),
            ("NetworkError", network.underlying, network.file), ("LoginInProgressError", inProgress.underlying, inProgress.file),
            ("LoginRequiredError", required.underlying, required.file), ("UpgradeRequiredError", upgrade.underlying, upgrade.file),
        ]
        for shape in shapes {
            #expect(shape.underlying is CancellationError, "\(shape.name)")
            #expect(shape.file.hasSuffix("ErrorAttributionTests.swift"), "\(shape.name)")
        }
    }
}
