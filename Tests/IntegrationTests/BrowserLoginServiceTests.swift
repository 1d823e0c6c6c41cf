import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// `AuthService.logInWithBrowser`: saved and reported like any login, and one browser sign-in
/// however many services (processes: separate stores on one file) need it at once.
@Suite(.timeLimit(.minutes(2)))
struct BrowserLoginServiceTests {
    @Test func aBrowserLoginIsSavedAndReported() async throws {
        try await withTemporaryDirectory { directory in
            try await withFixture { fixture in
                let store = try IDTokenStore(path: directory + "/tokens.json")
                let service = AuthService(api: fixture.api, store: store, clock: fixture.clock, configuration: Fixture.serviceConfiguration)
                var events = service.events.makeAsyncIterator()
                let user = try await service.logInWithBrowser(launcher: TestBrowser(transport: fixture.client))
                #expect(user.id.rawValue == "248289761001")
                guard case .waitingForBrowser(let url)? = await events.next() else {
                    Issue.record("no waitingForBrowser event")
                    return
                }
                #expect(url.contains("request_uri="), "pushed (RFC 9126): the provider advertises PAR")
                guard case .loggedIn(let reported)? = await events.next() else {
                    Issue.record("no loggedIn event")
                    return
                }
                #expect(reported == user)
                let stored = try #require(try await store.profile(named: "default"))
                #expect(stored.attributes["grant"] == "authorization_code")
                #expect(try await service.validAccessToken() == stored.credentials.accessToken)
            }
        }
    }

    @Test func servicesNeedingABrowserLoginAtOnceOpenTheBrowserOnce() async throws {
        try await withTemporaryDirectory { directory in
            try await withFixture { fixture in
                let browser = TestBrowser(transport: fixture.client)
                let services = try (0..<4).map { _ in
                    AuthService(api: fixture.api, store: try IDTokenStore(path: directory + "/tokens.json"), clock: fixture.clock)
                }
                let users = try await withThrowingTaskGroup(of: User.self) { group in
                    for service in services { group.addTask { try await service.logInWithBrowser(launcher: browser) } }
                    return try await group.reduce(into: [User]()) { $0.append($1) }
                }
                #expect(Set(users.map(\.id)).count == 1)
                #expect(browser.openedURLs.count == 1)
                #expect(fixture.tokenRequests == 1)
            }
        }
    }

    @Test func anAPIWithoutTheCodeFlowIsAConfigurationError() async throws {
        let service = AuthService(api: MockAuthAPI(), store: InMemoryTokenStore())
        let error = await thrown { try await service.logInWithBrowser(launcher: NoBrowserLauncher()) }
        #expect((error as? LoginError)?.code == .invalidConfiguration)
    }
}
