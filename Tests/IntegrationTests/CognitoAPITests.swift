import Foundation
import LoginKit
import LoginKitTestSupport
import Testing

/// `CognitoAPI` against moto's Cognito (started around `make test` by scripts/with-moto.sh).
@Suite(
    .enabled(
        if: ProcessInfo.processInfo.environment["LOGINKIT_TEST_COGNITO_ENDPOINT"] != nil
            || ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_MOTO"] == "1",
        "needs moto: run through make test"
    ),
    .timeLimit(.minutes(2))
)
struct CognitoAPITests {
    struct Pool {
        let api: CognitoAPI
        let username: String
        let password: String
    }

    func withPool(_ body: (Pool) async throws -> Void) async throws {
        let environment = ProcessInfo.processInfo.environment
        let endpoint = try #require(environment["LOGINKIT_TEST_COGNITO_ENDPOINT"], "run `make test`")
        try await CurlHTTPClient.withClient { client in
            let configuration = CognitoAPI.Configuration(
                poolID: try #require(environment["LOGINKIT_TEST_COGNITO_POOL_ID"]),
                clientID: try #require(environment["LOGINKIT_TEST_COGNITO_CLIENT_ID"]),
                region: try #require(environment["LOGINKIT_TEST_COGNITO_REGION"]),
                endpoint: endpoint
            )
            try await body(Pool(
                api: CognitoAPI(configuration: configuration, transport: client),
                username: try #require(environment["LOGINKIT_TEST_COGNITO_USERNAME"]),
                password: try #require(environment["LOGINKIT_TEST_COGNITO_PASSWORD"])
            ))
        }
    }

    @Test func passwordRefreshAndRevoke() async throws {
        try await withPool { pool in
            let service = AuthService(api: pool.api, store: InMemoryTokenStore())
            let user = try await service.logIn(for: User.ID(rawValue: pool.username), with: pool.password)
            #expect(!user.id.rawValue.isEmpty)
            let first = try await service.validCredentials()
            #expect(first.refreshToken != nil)
            #expect(first.idToken != nil)

            let refreshed = try await pool.api.refresh(first)
            #expect(refreshed.refreshToken == first.refreshToken)  // Cognito keeps the refresh token
            #expect(refreshed.idToken != nil)

            try await pool.api.revoke(first)
            let error = await thrown { try await pool.api.refresh(first) }
            #expect((error as? LoginError)?.code == .refreshTokenRejected, "\(String(describing: error))")
        }
    }

    @Test func aWrongPasswordIsRejectedCredentials() async throws {
        try await withPool { pool in
            let error = await thrown { try await pool.api.logIn(for: User.ID(rawValue: pool.username), with: "Not-The-Password-1") }
            #expect((error as? LoginError)?.code == .invalidCredentials)
            #expect((error as? LoginError)?.providerError == "NotAuthorizedException")
        }
    }
}
