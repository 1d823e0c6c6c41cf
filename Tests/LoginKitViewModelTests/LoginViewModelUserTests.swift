import LoginKit
import LoginKitMocks
import LoginKitViewModel
import Observation
import Testing

/// `user`: the logged-in user as observable state, beside the `dismissals` stream.
@MainActor
@Suite(.timeLimit(.minutes(3)))
struct LoginViewModelUserTests {
    let user = User(id: User.ID(rawValue: "user-1"), nickname: "Koshi")

    @Test func theUserIsSetByASuccessfulLoginAndClearedByLogout() async {
        await MockAuthService.withMock { service in
            let viewModel = LoginViewModel(service: service)
            #expect(viewModel.user == nil)

            async let failed: Void = viewModel.loginButtonPressed()
            await service.nextLogIn().resume(throwing: LoginError(.invalidCredentials, "no"))
            await failed
            #expect(viewModel.user == nil)

            async let succeeded: Void = viewModel.loginButtonPressed()
            await service.nextLogIn().resume(returning: user)
            await succeeded
            #expect(viewModel.user == user)

            // A failed attempt after a login leaves the user as it was.
            async let failedAgain: Void = viewModel.loginButtonPressed()
            await service.nextLogIn().resume(throwing: ServerError(.unavailable, "down"))
            await failedAgain
            #expect(viewModel.user == user)

            async let loggedOut = viewModel.logOutButtonPressed()
            let call = await service.nextLogOut()
            #expect(viewModel.user == user, "cleared once the service has logged out, not before")
            call.resume(returning: LogoutResult(revocation: .revoked, profileRemoved: true))
            #expect(await loggedOut.revocation == .revoked)
            #expect(viewModel.user == nil)
        }
    }

    /// A view observing `user` is told when a login sets it.
    @Test func aLoginNotifiesObserversOfTheUser() async {
        await MockAuthService.withMock { service in
            let viewModel = LoginViewModel(service: service)
            let (changes, changed) = AsyncStream<Void>.makeStream()
            withObservationTracking {
                _ = viewModel.user
            } onChange: {
                changed.yield()
            }
            async let succeeded: Void = viewModel.loginButtonPressed()
            await service.nextLogIn().resume(returning: user)
            await succeeded
            changed.finish()
            var count = 0
            for await _ in changes { count += 1 }
            #expect(count == 1)
        }
    }
}
