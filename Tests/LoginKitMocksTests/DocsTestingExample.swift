// docs/testing.md's worked example, verbatim: `make test` fails if the guide stops compiling or passing.
// Keep the two in step (scripts/check-doc-snippets.sh compares them).
import LoginKit
import LoginKitMocks
import LoginKitViewModel
import Testing

@MainActor
struct LoginViewModelTests {
    // 1. A rejected login shows the login message.
    @Test func aRejectedLoginShowsTheLoginMessage() async {
        await MockAuthService.withMock { service in
            let viewModel = LoginViewModel(service: service)
            viewModel.id = "koshi"
            viewModel.password = "wrong"
            async let pressed: Void = viewModel.loginButtonPressed()
            let call = await service.nextLogIn()                  // the login reached the service
            #expect(call.arguments.id == User.ID(rawValue: "koshi"))
            call.resume(throwing: LoginError(.invalidCredentials, "rejected"))
            await pressed
            #expect(viewModel.loginErrorMessage == .login)
        }
    }

    // 2. A server failure shows the server message.
    @Test func aServerErrorShowsTheServerMessage() async {
        await MockAuthService.withMock { service in
            let viewModel = LoginViewModel(service: service)
            async let pressed: Void = viewModel.loginButtonPressed()
            await service.nextLogIn().resume(throwing: ServerError(.unavailable, "503"))
            await pressed
            #expect(viewModel.loginErrorMessage == .server)
        }
    }

    // 3. The button is disabled exactly while the login runs.
    @Test func theButtonIsDisabledWhileTheLoginRuns() async {
        await MockAuthService.withMock { service in
            let viewModel = LoginViewModel(service: service)
            #expect(viewModel.isLoginButtonEnabled)
            async let pressed: Void = viewModel.loginButtonPressed()
            let call = await service.nextLogIn()                  // suspended inside logIn
            #expect(viewModel.isLoginButtonEnabled == false)      // the in-between state
            call.resume(returning: User(id: User.ID(rawValue: "koshi")))
            await pressed
            #expect(viewModel.isLoginButtonEnabled)
        }
    }
}
