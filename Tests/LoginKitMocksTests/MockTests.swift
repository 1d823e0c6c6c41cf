import Foundation
import LoginKit
import LoginKitMocks
import LoginKitTestSupport
import Testing

@Suite(.timeLimit(.minutes(3)))
struct MockMisuseTests {
    @Test func resumingTwiceIsReported() async throws {
        let service = MockAuthService()
        let login = Task { try await service.logIn(for: User.ID(rawValue: "a"), with: "p") }
        let call = await service.nextLogIn()
        call.resume(returning: User(id: User.ID(rawValue: "a")))
        withKnownIssue("a second resume is a test failure naming the call") {
            call.resume(returning: User(id: User.ID(rawValue: "b")))
        } matching: { issue in
            issue.comments.contains { $0.rawValue.contains("logIn(for: a) was resumed twice") }
        }
        #expect(try await login.value == User(id: User.ID(rawValue: "a")))
    }

    @Test func aCallNeverResumedIsReportedAndReleased() async {
        let service = MockAuthService()
        let login = Task { try await service.logIn(for: User.ID(rawValue: "forgotten"), with: "p") }
        _ = await service.nextLogIn()
        withKnownIssue("a suspended call at verification is a test failure naming the call") {
            service.verify()
        } matching: { issue in
            issue.comments.contains { $0.rawValue.contains("logIn(for: forgotten) was still suspended") }
        }
        let error = await thrown { try await login.value }
        #expect((error as? MockCallNeverResumed)?.call == "logIn(for: forgotten)")
    }

    @Test func aResumeBeforeTheCallerSuspendsIsDelivered() async throws {
        let api = MockAuthAPI()
        let refresh = Task { try await api.refresh(Credentials(refreshToken: "r")) }
        let call = await api.nextRefresh()
        call.resume(returning: Credentials(accessToken: "new"))
        #expect(try await refresh.value.accessToken == "new")
        api.verify()
    }

    @Test func theTransportAnswersFromItsScriptThenSuspends() async throws {
        let transport = MockHTTPTransport()
        transport.enqueue(status: .ok, body: Data("scripted".utf8))
        let request = try #require(HTTPRequest(method: .get, url: "https://issuer.test/a"))
        let (_, scripted) = try await transport.send(request, body: nil)
        #expect(scripted == Data("scripted".utf8))

        let pending = Task { try await transport.send(request, body: Data("x".utf8)) }
        _ = await transport.nextRequest()  // the scripted one
        let call = await transport.nextRequest()
        #expect(call.arguments.body == Data("x".utf8))
        call.resume(returning: (HTTPResponse(status: .accepted), Data()))
        #expect(try await pending.value.0.status == .accepted)
        transport.verify()
    }

    @Test func theManualClockWakesSleepersWhenMoved() async throws {
        let clock = ManualClock(start: Date(timeIntervalSince1970: 0))
        let sleeper = Task { try await clock.sleep(for: .seconds(10)) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(9))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(1))
        try await sleeper.value
        #expect(clock.now == Date(timeIntervalSince1970: 10))

        let cancelled = Task { try await clock.sleep(for: .seconds(5)) }
        await clock.waitForSleepers(1)
        cancelled.cancel()
        #expect(await thrown { try await cancelled.value } is CancellationError)
    }

    @Test func aMockServiceDrivesAuthServiceStyleCode() async throws {
        // MockAuthAPI behind the real AuthService: a refresh can be held in flight.
        let api = MockAuthAPI()
        let clock = ManualClock()
        let store = InMemoryTokenStore()
        let service = AuthService(api: api, store: store, clock: clock)
        let login = Task { try await service.logIn(for: User.ID(rawValue: "u"), with: "p") }
        await api.nextLogIn().resume(returning: Credentials(accessToken: "a1", refreshToken: "r1", expiresAt: clock.now.addingTimeInterval(3600)))
        _ = try await login.value
        clock.advance(by: .seconds(3600))
        let session = await service.session()
        let waiting = Task { try await service.validAccessToken() }
        let refresh = await api.nextRefresh()
        var diagnostics = session.diagnostics.makeAsyncIterator()
        while let snapshot = await diagnostics.next(), !snapshot.refreshInProgress {}
        refresh.resume(returning: Credentials(accessToken: "a2", refreshToken: "r2", expiresAt: clock.now.addingTimeInterval(3600)))
        #expect(try await waiting.value == "a2")
        await session.invalidate()
        api.verify()
    }
}
