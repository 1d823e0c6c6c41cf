import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitMocks
import LoginKitTestSupport
import LoginKitViewModel
import Testing

@Suite(.timeLimit(.minutes(2)))
struct VersionGateTests {
    func gate(_ fixture: Fixture, current: String = "1.2.0", interval: Duration = .seconds(600), failsClosed: Bool = false, defaultPolicy: VersionPolicy? = nil) throws -> VersionGate {
        var configuration = VersionGate.Configuration(url: fixture.server.url("/version-policy"), currentVersion: try SemanticVersion(parsing: current), defaultPolicy: defaultPolicy)
        configuration.minimumFetchInterval = interval
        configuration.failsClosed = failsClosed
        return VersionGate(configuration: configuration, transport: fixture.client, clock: fixture.clock)
    }

    @Test func twoChecksInsideTheIntervalMakeOneRequest() async throws {
        try await withFixture { fixture in
            let gate = try gate(fixture)
            try await gate.check()
            try await gate.check()
            #expect(fixture.server.monitor.requestCount(path: "/version-policy") == 1)
            fixture.clock.advance(by: .seconds(601))
            try await gate.check()
            #expect(fixture.server.monitor.requestCount(path: "/version-policy") == 2)
        }
    }

    @Test func aNotModifiedAnswerKeepsThePolicy() async throws {
        try await withFixture { fixture in
            fixture.server.monitor.versionPolicy.minimumVersion = "1.0.0"
            let gate = try gate(fixture, interval: .zero)
            #expect(await gate.currentPolicy()?.version == SemanticVersion(major: 1))
            #expect(await gate.currentPolicy()?.version == SemanticVersion(major: 1))  // sent If-None-Match, got 304
            #expect(fixture.server.monitor.requestCount(path: "/version-policy") == 2)
        }
    }

    @Test func serverDownKeepsTheLastGoodThenDefaults() async throws {
        let fallback = VersionPolicy(title: "Default", message: "m", version: SemanticVersion(major: 0, minor: 5))
        try await withFixture { fixture in
            fixture.server.monitor.versionPolicy.minimumVersion = "1.1.0"
            let gate = try gate(fixture, interval: .zero, defaultPolicy: fallback)
            #expect(await gate.currentPolicy()?.version == SemanticVersion(major: 1, minor: 1))
            fixture.server.monitor.injectFaults([.status(503), .malformedBody], path: "/version-policy")
            #expect(await gate.currentPolicy()?.version == SemanticVersion(major: 1, minor: 1))  // 503: last good
            #expect(await gate.currentPolicy()?.version == SemanticVersion(major: 1, minor: 1))  // malformed: last good
        }
        try await withFixture { fixture in
            fixture.server.monitor.injectFaults([.status(503)], path: "/version-policy")
            let gate = try gate(fixture, interval: .zero, defaultPolicy: fallback)
            #expect(await gate.currentPolicy() == fallback)  // never fetched: the default
        }
    }

    @Test func failsOpenByDefaultAndClosedWhenConfigured() async throws {
        try await withFixture { fixture in
            fixture.server.monitor.injectFaults([.status(503), .status(503)], path: "/version-policy")
            try await gate(fixture, interval: .zero).check()
            #expect(await thrown { try await gate(fixture, interval: .zero, failsClosed: true).check() } is ServerError)
        }
    }

    @Test func aLoginBelowTheMinimumIsRefusedWithoutATokenRequest() async throws {
        try await withFixture { fixture in
            fixture.server.monitor.versionPolicy.minimumVersion = "1.4.0"
            let service = AuthService(api: fixture.api, store: fixture.store, clock: fixture.clock, gate: try gate(fixture, current: "1.2.0"))
            let error = await thrown { try await service.logIn(for: demo, with: "demo") }
            let upgrade = try #require(error as? LoginError)
            #expect(upgrade.code == .upgradeRequired)
            #expect(upgrade.upgradePolicy?.version == SemanticVersion(major: 1, minor: 4))
            #expect(upgrade.upgradePolicy?.url == "https://example.com/loginkit/releases")
            #expect(fixture.tokenRequests == 0)

            let viewModel = await LoginViewModel(service: service)
            await viewModel.loginButtonPressed()
            #expect(await viewModel.forcedUpgrade?.version == SemanticVersion(major: 1, minor: 4))
            #expect(fixture.tokenRequests == 0)
        }
    }

    @Test func aRefreshBelowTheMinimumIsRefusedToo() async throws {
        try await withFixture { fixture in
            let gate = try gate(fixture, current: "1.2.0", interval: .zero)
            let service = AuthService(api: fixture.api, store: fixture.store, clock: fixture.clock, configuration: Fixture.serviceConfiguration, gate: gate)
            _ = try await service.logIn(for: demo, with: "demo")
            fixture.server.monitor.versionPolicy.minimumVersion = "2.0.0"  // changed at run time
            fixture.clock.advance(by: .seconds(3601))
            fixture.server.monitor.reset()
            #expect((await thrown { try await service.validIDToken() } as? LoginError)?.code == .upgradeRequired)
            #expect(fixture.tokenRequests == 0)
        }
    }
}
