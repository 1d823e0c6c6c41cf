import Foundation
import InMemoryLogging
import LoginKit
import LoginKitDevServer
import LoginKitMocks
import LoginKitTestSupport
import LoginKitViewModel
import Logging
import Testing

/// The view-model with the mock holding `logIn` suspended while the test looks. The three basic
/// tests (rejected login → `.login`, server error → `.server`, button disabled while the login
/// runs) are docs/testing.md's example, compiled in LoginKitMocksTests.
@MainActor
@Suite(.timeLimit(.minutes(3)))
struct LoginViewModelTests {
    let user = User(id: User.ID(rawValue: "user-1"), nickname: "Koshi")

    /// The message `error` from the service leaves on a fresh view-model, logging to `logger`.
    func message(for error: any Error, logger: Logger? = nil) async -> LoginErrorMessage? {
        await MockAuthService.withMock { service in
            let viewModel: LoginViewModel<MockAuthService>
            if let logger {
                viewModel = LoginViewModel(service: service, logger: logger)
            } else {
                viewModel = LoginViewModel(service: service)
            }
            async let pressed: Void = viewModel.loginButtonPressed()
            await service.nextLogIn().resume(throwing: error)
            await pressed
            return viewModel.loginErrorMessage
        }
    }

    /// A logger keeping every entry, from `trace` up.
    func recordingLogger() -> (Logger, InMemoryLogHandler) {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .trace
        return (logger, handler)
    }

    /// Each kind of failure has its own message; only rejected credentials say the password is wrong.
    @Test func eachKindOfFailureHasItsMessage() async {
        let policy = VersionPolicy(title: "Update", message: "Get 2.0", version: SemanticVersion(major: 2))
        let cases: [(any Error, LoginErrorMessage)] = [
            (LoginError(.invalidCredentials, "wrong"), .login),
            (LoginError(.invalidClient, "client refused"), .configuration),
            (LoginError(.unauthorizedClient, "grant not allowed"), .configuration),
            (LoginError(.invalidScope, "scope refused"), .configuration),
            (LoginError(.invalidTarget, "resource refused"), .configuration),
            (LoginError(.invalidConfiguration, "bad issuer"), .configuration),
            (LoginError(.verifierRequired, "no keys"), .configuration),
            (LoginError(.challengeRequired, "a second factor"), .configuration),
            (LoginError(.accessDenied, "denied"), .denied),
            (LoginError(.deviceCodeExpired, "expired"), .expired),
            (LoginError(.interactionTimedOut, "no sign-in"), .expired),
            (LoginError(.refreshTokenRejected, "revoked"), .expired),
            (LoginError(.loginInProgress, "a login is already in progress"), .loginInProgress),
            (LoginError(upgradeRequiredBy: policy, currentVersion: SemanticVersion(major: 1)), .upgradeRequired(policy)),
            (LoginError(.stateMismatch, "not this login's"), .tokenVerification),
            (LoginError(.issuerMismatch, "mix-up"), .tokenVerification),
            (LoginError(.browserUnavailable, "no display"), .other),
            (LoginError(.cannotListen, "port in use"), .other),
            (LoginError(.subjectTokenRejected, "refused"), .other),
            (ServerError(.unavailable, "503"), .server),
            (NetworkError(.connectFailed, "refused"), .network),
            (TokenVerificationError(.badSignature, "bad"), .tokenVerification),
            (TokenVerificationError(.invalidKey, "not a key"), .other),
            (TokenStoreError(.io, path: "/x", "disk full"), .other),
        ]
        for (error, expected) in cases {
            let shown = await message(for: error)
            #expect(shown == expected, "\(error)")
            if expected != .login {
                #expect(shown?.text != LoginErrorMessage.login.text, "\(error) is not a wrong password")
            }
        }
    }

    /// A client the provider refuses is not the user's fault: the user reads that the app cannot
    /// sign in, and the provider's answer is logged at `error` for whoever runs the app.
    @Test func aRefusedClientIsTheAppsFaultAndLoggedAtError() async {
        let (logger, handler) = recordingLogger()
        let error = LoginError(.invalidScope, #"the provider refused the scope "openid offline_access""#, providerError: "invalid_scope")
        let shown = await message(for: error, logger: logger)
        #expect(shown == .configuration)
        #expect(shown?.text.contains("This app cannot sign in right now") == true)
        let entries = handler.entries
        #expect(entries.count == 1)
        #expect(entries.first?.level == .error)
        #expect(entries.first?.metadata["detail"]?.description.contains("openid offline_access") == true)

        let (plainLogger, plainHandler) = recordingLogger()
        #expect(await message(for: LoginError(.invalidCredentials, "wrong"), logger: plainLogger) == .login)
        #expect(plainHandler.entries.map(\.level) == [.notice])
    }

    /// The user left the screen: the login's task is cancelled, nothing is shown, nothing is
    /// logged above `debug`, and the button is enabled again.
    @Test func aCancelledLoginShowsNothing() async {
        let (logger, handler) = recordingLogger()
        await MockAuthService.withMock { service in
            let viewModel = LoginViewModel(service: service, logger: logger)
            let pressed = Task { await viewModel.loginButtonPressed() }
            let call = await service.nextLogIn()
            pressed.cancel()
            await pressed.value
            #expect(call.isCancelled)
            #expect(viewModel.loginErrorMessage == nil)
            #expect(viewModel.forcedUpgrade == nil)
            #expect(viewModel.isLoginButtonEnabled)
        }
        #expect(handler.entries.allSatisfy { $0.level <= .debug }, "\(handler.entries.map(\.level))")

        // A CancellationError from the service, whatever cancelled it, shows nothing either.
        #expect(await message(for: CancellationError()) == nil)
    }

    /// Without a logger from its host, the view-model logs nothing (as `AuthService` does).
    @Test func theDefaultLoggerDiscardsEverything() async {
        await MockAuthService.withMock { service in
            #expect(LoginViewModel(service: service).logger.handler is SwiftLogNoOpLogHandler)
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
