import Foundation
import LoginKit
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// Whose fault an error is decides its type: the caller's own configuration is a `LoginError`
/// `.invalidConfiguration` (and nothing is sent), the provider's metadata a `ServerError`
/// `.misconfigured`. Either way the message names the setting as the library spells it, never a
/// CLI flag. Every error carries where it was thrown.
@Suite(.timeLimit(.minutes(3)))
struct ErrorAttributionTests {
    static let alice = User.ID(rawValue: "alice")

    /// What `api.logIn` throws, as a configuration `LoginError`; the test fails when it is anything else.
    func configurationError(_ operation: () async throws -> Void) async throws -> LoginError {
        let error = await thrown(operation)
        let loginError = try #require(error as? LoginError, "\(String(describing: error))")
        try #require([.invalidConfiguration, .verifierRequired].contains(loginError.code), "\(loginError)")
        return loginError
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
        #expect(error.code == .invalidConfiguration)
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
        #expect(error.code == .invalidConfiguration)
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
        #expect(error.code == .invalidConfiguration)
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
        let errors: [any LoginKitError] = [
            LoginError(.invalidCredentials, "x", underlying: cause),
            LoginError(.invalidConfiguration, "x", underlying: cause),
            LoginError(.loginInProgress, "x", underlying: cause),
            LoginError(upgradeRequiredBy: policy, currentVersion: SemanticVersion(major: 1), underlying: cause),
            ServerError(.unavailable, "x", underlying: cause),
            TokenStoreError(.io, path: "/x", "x", underlying: cause),
            NetworkError(.other, "x", underlying: cause),
            LoginRequiredError(.notLoggedIn, profile: nil, "x", underlying: cause),
            TokenVerificationError(.cryptoFailure, "x", underlying: cause),
        ]
        for error in errors {
            #expect(error.underlying is CancellationError, "\(error)")
            #expect(error.file.hasSuffix("ErrorAttributionTests.swift"), "\(error)")
        }
    }

    /// Whatever was interpolated, every error's message is one line without terminal escapes, and
    /// its description is `TypeName(code): message`.
    @Test func everyMessageIsOneLineAndEveryDescriptionNamesTheTypeAndCode() {
        let hostile = "a\nb\u{1B}[2J"
        let errors: [any LoginKitError] = [
            LoginError(.invalidCredentials, hostile), ServerError(.unavailable, hostile),
            TokenStoreError(.io, path: "/x", hostile), NetworkError(.other, hostile),
            LoginRequiredError(.notLoggedIn, profile: nil, hostile), TokenVerificationError(.malformed, hostile),
        ]
        for error in errors {
            #expect(!error.message.contains("\n") && !error.message.contains("\u{1B}"), "\(type(of: error))")
        }
        #expect(LoginError(.invalidScope, "x").description == "LoginError(invalidScope): x")
        #expect(LoginRequiredError(.notLoggedIn, profile: nil, "x").description == "LoginRequiredError(notLoggedIn): x")
        #expect(TokenStoreError(.corrupt, path: "/x", "x").description == "TokenStoreError(corrupt): x")
    }

    /// The version gate's refusal is a `LoginError` that carries the policy to show.
    @Test func anUpgradeRequiredCarriesThePolicy() {
        let policy = VersionPolicy(title: "t", message: "m", version: SemanticVersion(major: 2), url: "https://example.com/get")
        let error = LoginError(upgradeRequiredBy: policy, currentVersion: SemanticVersion(major: 1))
        #expect(error.code == .upgradeRequired)
        #expect(error.upgradePolicy == policy)
        #expect(error.currentVersion == SemanticVersion(major: 1))
        #expect(error.message == "version 1.0.0 is below the minimum 2.0.0; get it at https://example.com/get")
        #expect(!error.isProviderRejection && !error.isForgedResponse)
        #expect(LoginError(.invalidCredentials, "x").isProviderRejection)
        #expect(LoginError(.stateMismatch, "x").isForgedResponse && !LoginError(.stateMismatch, "x").isProviderRejection)
    }
}
