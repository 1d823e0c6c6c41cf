import Foundation
@testable import LoginKit
import LoginKitHTTP
import Testing

/// Token requests that carry a one-time credential (a refresh token, an authorization code, a
/// device code) go through the transport's never-resending path (`NeverResendingTransport`, which
/// `CurlHTTPClient` implements with a connection of their own); every other request is an ordinary
/// send. LoginKitCurlTests' `ResendAndTimeoutTests` shows what each path does on the wire.
@Suite struct TokenEndpointTests {
    /// A transport that answers every request with a token response and notes which path it took.
    final class RecordingTransport: NeverResendingTransport {
        enum Path: Sendable, Equatable { case ordinary, neverResent }
        private let sent = LockedState<[Path]>([])

        var paths: [Path] { sent.withLock { $0 } }

        func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
            sent.withLock { $0.append(.ordinary) }
            return Self.answer
        }

        func sendNeverResent(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
            sent.withLock { $0.append(.neverResent) }
            return Self.answer
        }

        static var answer: (HTTPResponse, Data) {
            (HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]),
             Data(#"{"access_token":"a","token_type":"Bearer","expires_in":3600}"#.utf8))
        }
    }

    @Test(arguments: [
        ("refresh_token", true), ("authorization_code", true), ("urn:ietf:params:oauth:grant-type:device_code", true),
        ("password", false), ("client_credentials", false), ("urn:ietf:params:oauth:grant-type:token-exchange", false),
    ])
    func onlyGrantsWithAOneTimeCredentialAreNeverResent(grant: String, oneTime: Bool) async throws {
        let transport = RecordingTransport()
        _ = try await TokenEndpoint(transport: transport).postForm(
            "https://id.example/token", origin: .provider("id.example's token_endpoint"), fields: [("grant_type", grant), ("x", "y")],
            authentication: ClientAuthentication.none(id: "cli"))
        #expect(transport.paths == [oneTime ? .neverResent : .ordinary])
    }

    /// A revocation carries no grant and may be sent again: an ordinary send.
    @Test func aFormWithoutAGrantIsAnOrdinarySend() async throws {
        let transport = RecordingTransport()
        _ = try await TokenEndpoint(transport: transport).postForm(
            "https://id.example/revoke", origin: .provider("id.example's revocation_endpoint"),
            fields: [("token", "rt"), ("token_type_hint", "refresh_token")], authentication: ClientAuthentication.none(id: "cli"))
        #expect(transport.paths == [.ordinary])
    }

    /// Through the public API: `OAuth2API.refresh` sends the refresh token never resent, a password
    /// login does not need it.
    @Test func oauth2RefreshIsNeverResentAndAPasswordLoginIsOrdinary() async throws {
        let transport = RecordingTransport()
        var configuration = OAuth2API.Configuration(issuer: "https://id.example", clientID: "cli")
        configuration.usesDiscovery = false
        configuration.endpoints.token = "https://id.example/token"
        let api = OAuth2API(configuration: configuration, transport: transport)
        _ = try await api.refresh(Credentials(accessToken: "old", refreshToken: "rt-1"))
        _ = try await api.logIn(for: User.ID(rawValue: "demo"), with: "demo")
        #expect(transport.paths == [.neverResent, .ordinary])
    }
}
