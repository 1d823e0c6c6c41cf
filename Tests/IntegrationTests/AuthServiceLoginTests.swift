import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

@Suite(.timeLimit(.minutes(2)))
struct AuthServiceLoginTests {
    @Test func aLoginIsSavedThenReportedThenReturned() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            let events = service.events
            let user = try await service.logIn(for: demo, with: "demo")
            #expect(user.id.rawValue == "248289761001")
            #expect(user.preferredUsername == "demo")
            #expect(user.nickname == "Demo")
            var iterator = events.makeAsyncIterator()
            guard case .loggedIn(let reported)? = await iterator.next() else {
                Issue.record("expected a loggedIn event")
                return
            }
            #expect(reported == user)
            let profile = try #require(try await fixture.store.profile(named: "default"))
            #expect(profile.source.kind == .oauth2)
            #expect(profile.source.clientID == "loginkit-cli")
            #expect(profile.userID == "248289761001")
            #expect(try await service.currentUser() == user)
        }
    }

    @Test func aSecondLoginWhileOneIsInFlightFailsAtOnceAndSendsNothing() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            _ = try await fixture.api.metadata()
            fixture.server.monitor.injectFaults([.delay(milliseconds: 60_000)], path: "/oauth/token")
            let arrivals = fixture.server.monitor.arrivals()
            let first = Task { try await service.logIn(for: demo, with: "demo") }
            for await path in arrivals where path == "/oauth/token" { break }
            let error = await thrown { try await service.logIn(for: demo, with: "demo") }
            #expect((error as? LoginError)?.code == .loginInProgress)
            #expect(fixture.tokenRequests == 1)
            first.cancel()
            #expect(await thrown { try await first.value } is CancellationError)
            #expect(fixture.tokenRequests == 1)
        }
    }

    @Test func aRejectedPasswordIsNotRetried() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            #expect((await thrown { try await service.logIn(for: demo, with: "wrong") } as? LoginError)?.code == .invalidCredentials)
            #expect(fixture.tokenRequests == 1)
            let stored = try await fixture.store.profile(named: "default")
            #expect(stored == nil)
        }
    }

    @Test func aFailingServerDuringLoginIsNotRetriedEither() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            _ = try await fixture.api.metadata()
            fixture.server.monitor.injectFaults([.status(503)], path: "/oauth/token")
            #expect((await thrown { try await service.logIn(for: demo, with: "demo") } as? ServerError)?.code == .unavailable)
            #expect(fixture.tokenRequests == 1)
        }
    }

    @Test func logOutRevokesDeletesAndReports() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            _ = try await service.logIn(for: demo, with: "demo")
            let credentials = try #require(try await fixture.store.profile(named: "default")).credentials
            let events = service.events
            await service.logOut()
            let stored = try await fixture.store.profile(named: "default")
            #expect(stored == nil)
            #expect(fixture.server.monitor.requestCount(path: "/oauth/revoke") == 2)
            #expect((await thrown { try await fixture.api.refresh(credentials) } as? LoginError)?.code == .refreshTokenRejected)
            var iterator = events.makeAsyncIterator()
            guard case .loggedOut? = await iterator.next() else {
                Issue.record("expected a loggedOut event")
                return
            }
            #expect((await thrown { try await service.validIDToken() } as? LoginRequiredError)?.code == .notLoggedIn)
        }
    }

    @Test func logOutIsBoundedWhenRevocationHangs() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            _ = try await service.logIn(for: demo, with: "demo")
            fixture.server.monitor.injectFaults([.delay(milliseconds: 60_000)], path: "/oauth/revoke")
            let arrivals = fixture.server.monitor.arrivals()
            let logout = Task { await service.logOut() }
            for await path in arrivals where path == "/oauth/revoke" { break }
            await fixture.clock.waitForSleepers(1)  // the revocation timeout
            fixture.clock.advance(by: .seconds(5))
            _ = await logout.value
            let stored = try await fixture.store.profile(named: "default")
            #expect(stored == nil)
        }
    }

    @Test func theDeviceFlowPollsAtTheIntervalAndSlowsDown() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            let (codes, codeContinuation) = AsyncStream<DeviceAuthorization>.makeStream()
            let login = Task {
                try await service.logInWithDevice { authorization in codeContinuation.yield(authorization) }
            }
            var codeIterator = codes.makeAsyncIterator()
            let authorization = try #require(await codeIterator.next())
            #expect(authorization.verificationURI == fixture.server.issuer + "/device")
            #expect(authorization.interval == .seconds(5))
            fixture.server.monitor.injectFaults(
                [.oauthError("authorization_pending"), .oauthError("authorization_pending"), .oauthError("authorization_pending"), .oauthError("slow_down")],
                path: "/oauth/token"
            )
            for step in 0..<5 {
                await fixture.clock.waitForSleepers(1)
                if step == 4 { #expect(fixture.server.approveDevice(userCode: authorization.userCode, username: "demo")) }
                fixture.clock.advance(by: step == 4 ? .seconds(10) : .seconds(5))
            }
            let user = try await login.value
            #expect(user.preferredUsername == "demo")
            #expect(fixture.clock.sleptDurations == [.seconds(5), .seconds(5), .seconds(5), .seconds(5), .seconds(10)])
            let stored = try await fixture.store.profile(named: "default")
            #expect(stored?.credentials.scope == "openid profile offline_access")  // the scope the device asked for
            #expect(fixture.tokenRequests == 5)
        }
    }

    @Test func aDeniedDeviceRequestIsAccessDenied() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            let (codes, codeContinuation) = AsyncStream<DeviceAuthorization>.makeStream()
            let login = Task { try await service.logInWithDevice { codeContinuation.yield($0) } }
            var codeIterator = codes.makeAsyncIterator()
            let authorization = try #require(await codeIterator.next())
            #expect(fixture.server.denyDevice(userCode: authorization.userCode))
            await fixture.clock.waitForSleepers(1)
            fixture.clock.advance(by: .seconds(5))
            #expect((await thrown { try await login.value } as? LoginError)?.code == .accessDenied)
        }
    }

    @Test func queuedDeviceLoginsPromptOneAtATimeAndSkipWhenLoggedIn() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            let (codes, codeContinuation) = AsyncStream<DeviceAuthorization>.makeStream()
            let first = Task { try await service.logInWithDevice { codeContinuation.yield($0) } }
            var codeIterator = codes.makeAsyncIterator()
            let authorization = try #require(await codeIterator.next())
            let second = Task { try await service.logInWithDevice { codeContinuation.yield($0) } }
            #expect(fixture.server.approveDevice(userCode: authorization.userCode, username: "demo"))
            await fixture.clock.waitForSleepers(1)
            fixture.clock.advance(by: .seconds(5))
            let user = try await first.value
            #expect(try await second.value == user)  // re-checked state: no second prompt
            codeContinuation.finish()
            #expect(await codeIterator.next() == nil)
            #expect(fixture.server.monitor.requestCount(path: "/oauth/device_authorization") == 1)
        }
    }
}
