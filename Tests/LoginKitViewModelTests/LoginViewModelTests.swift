import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitMocks
import LoginKitTestSupport
import LoginKitViewModel
import Testing

/// The view-model with the mock holding `logIn` suspended while the test looks. The three basic
/// tests (rejected login → `.login`, server error → `.server`, button disabled while the login
/// runs) are docs/testing.md's example, compiled in LoginKitMocksTests.
@MainActor
@Suite(.timeLimit(.minutes(3)))
struct LoginViewModelTests {
    let user = User(id: User.ID(rawValue: "user-1"), nickname: "Koshi")

    @Test func otherFailuresMapToTheirMessages() async {
        let cases: [(any Error, LoginErrorMessage)] = [
            (NetworkError(.connectFailed, "refused"), .network),
            (LoginError(.loginInProgress, "a login is already in progress"), .loginInProgress),
            (TokenVerificationError(.badSignature, "bad"), .tokenVerification),
            (TokenStoreError(.io, path: "/x", "disk full"), .other),
            (LoginError(.invalidConfiguration, "bad issuer"), .other),
            (LoginError(.interactionTimedOut, "no sign-in"), .other),
            (TokenVerificationError(.invalidKey, "not a key"), .other),
        ]
        for (error, expected) in cases {
            await MockAuthService.withMock { service in
                let viewModel = LoginViewModel(service: service)
                async let pressed: Void = viewModel.loginButtonPressed()
                await service.nextLogIn().resume(throwing: error)
                await pressed
                #expect(viewModel.loginErrorMessage == expected)
            }
        }
    }

    @Test func dismissalIsSignalledOnlyOnSuccess() async {
        await MockAuthService.withMock { service in
            let viewModel = LoginViewModel(service: service)
            var dismissals = viewModel.dismissals.makeAsyncIterator()

            async let failed: Void = viewModel.loginButtonPressed()
            await service.nextLogIn().resume(throwing: LoginError(.invalidCredentials, "no"))
            await failed

            async let succeeded: Void = viewModel.loginButtonPressed()
            await service.nextLogIn().resume(returning: user)
            await succeeded
            #expect(await dismissals.next() == user)  // the first dismissal is the success's
            #expect(viewModel.loginErrorMessage == nil)
        }
    }

    @Test func aSecondPressWhileInFlightMakesOneServiceCall() async {
        await MockAuthService.withMock { service in
            let viewModel = LoginViewModel(service: service)
            async let first: Void = viewModel.loginButtonPressed()
            let call = await service.nextLogIn()
            await viewModel.loginButtonPressed()  // disabled: returns at once
            #expect(service.logInCallCount == 1)
            call.resume(returning: user)
            await first
            #expect(service.logInCallCount == 1)
        }
    }

    @Test func aForcedUpgradeStaysAfterADismiss() async throws {
        let policy = VersionPolicy(title: "Update", message: "Get 2.0", version: try SemanticVersion(parsing: "2.0.0"), url: "https://example.com")
        await MockAuthService.withMock { service in
            let viewModel = LoginViewModel(service: service)
            async let pressed: Void = viewModel.loginButtonPressed()
            await service.nextLogIn().resume(throwing: LoginError(upgradeRequiredBy: policy, currentVersion: SemanticVersion(major: 1)))
            await pressed
            #expect(viewModel.forcedUpgrade == policy)
            viewModel.dismissError()
            #expect(viewModel.forcedUpgrade == policy)
            await viewModel.loginButtonPressed()  // refused without a call
            #expect(service.logInCallCount == 1)
        }
    }

    @Test func thePasswordIsClearedAfterAnAttempt() async {
        await MockAuthService.withMock { service in
            let viewModel = LoginViewModel(service: service)
            viewModel.password = "secret"
            async let pressed: Void = viewModel.loginButtonPressed()
            let call = await service.nextLogIn()
            #expect(viewModel.password.isEmpty)
            call.resume(throwing: LoginError(.invalidCredentials, "no"))
            await pressed
        }
    }
}

/// The view-model against the real `AuthService` and the dev identity provider.
@MainActor
@Suite(.timeLimit(.minutes(3)))
struct LoginViewModelIntegrationTests {
    @Test func logsInAndIsRejectedForReal() async throws {
        try await DevServer.withServer { server in
            try await CurlHTTPClient.withClient { client in
                let api = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-cli"), transport: client)
                let service = AuthService(api: api, store: InMemoryTokenStore())
                let viewModel = LoginViewModel(service: service)
                var dismissals = viewModel.dismissals.makeAsyncIterator()

                viewModel.id = "demo"
                viewModel.password = "not-it"
                await viewModel.loginButtonPressed()
                #expect(viewModel.loginErrorMessage == .login)

                viewModel.password = "demo"
                await viewModel.loginButtonPressed()
                #expect(viewModel.loginErrorMessage == nil)
                #expect(await dismissals.next()?.preferredUsername == "demo")
                #expect(viewModel.isLoginButtonEnabled)
            }
        }
    }
}
