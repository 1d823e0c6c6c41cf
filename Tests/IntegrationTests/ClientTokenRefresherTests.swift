import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitLifecycle
import LoginKitMocks
import LoginKitTestSupport
import Logging
import ServiceLifecycle
import Testing

@Suite(.timeLimit(.minutes(2)))
struct ClientTokenRefresherTests {
    static let billing = TokenTarget(resources: ["https://billing.example/"])
    static let stock = TokenTarget(audience: "https://stock.example")

    /// The next event that is not `.refreshed` for a target other than `target`… simply the next one.
    func next(_ events: inout AsyncStream<ClientTokenRefresher.Event>.Iterator) async throws -> ClientTokenRefresher.Event {
        try #require(await events.next())
    }

    @Test func tokensAreKeptFreshInTheBackgroundAndTheServiceStopsOnGracefulShutdown() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret", configure: { $0.accessTokenLifetime = .seconds(1200) }) { fixture in
            let tokens = ClientCredentialsTokens(api: fixture.api, store: fixture.store, clock: fixture.clock)
            var configuration = ClientTokenRefresher.Configuration()
            configuration.maximumInterval = .seconds(3600)
            let refresher = ClientTokenRefresher(tokens: tokens, targets: [Self.billing, Self.stock], configuration: configuration, clock: fixture.clock)
            #expect(refresher.accessToken(for: Self.billing) == nil)
            let group = ServiceGroup(services: [refresher], logger: Logger(label: "test"))
            var events = refresher.events.makeAsyncIterator()
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                // Both targets fetched at start, then the refresher sleeps.
                for _ in 0..<2 {
                    guard case .refreshed = try await next(&events) else { Issue.record("expected a refresh"); return }
                }
                await fixture.clock.waitForSleepers()
                #expect(fixture.tokenRequests == 2)
                let first = try #require(refresher.accessToken(for: Self.billing))
                #expect(refresher.accessToken(for: Self.stock) != nil)
                // A caller asking the cache meanwhile waits for nothing: the same token, no request.
                #expect(try await tokens.accessToken(for: Self.billing) == first)

                // Replaced 5 minutes before the on-demand point (expiry − 60 s margin): at 840 s of
                // 1200, before any caller would have needed a new one.
                #expect(fixture.clock.sleptDurations.last == .seconds(840))
                fixture.clock.advance(by: .seconds(839))
                #expect(fixture.tokenRequests == 2)
                fixture.clock.advance(by: .seconds(1))
                for _ in 0..<2 {
                    guard case .refreshed = try await next(&events) else { Issue.record("expected a refresh"); return }
                }
                await fixture.clock.waitForSleepers()
                #expect(fixture.tokenRequests == 4)
                #expect(refresher.accessToken(for: Self.billing) != first)

                await group.triggerGracefulShutdown()
                guard case .stopped = try await next(&events) else { Issue.record("expected the stop"); return }
                try await tasks.waitForAll()
            }
        }
    }

    @Test func failuresAreRetriedWithBackoffWhileTheCurrentTokenIsServed() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret", configure: { $0.accessTokenLifetime = .seconds(1200) }) { fixture in
            let tokens = ClientCredentialsTokens(api: fixture.api, store: fixture.store, clock: fixture.clock)
            var configuration = ClientTokenRefresher.Configuration()
            configuration.maximumBackoff = .seconds(8)
            configuration.maximumInterval = .seconds(3600)
            let refresher = ClientTokenRefresher(tokens: tokens, targets: [Self.billing], configuration: configuration, clock: fixture.clock)
            var events = refresher.events.makeAsyncIterator()
            let run = Task { try await refresher.run() }
            guard case .refreshed = try await next(&events) else { Issue.record("expected a refresh"); return }
            await fixture.clock.waitForSleepers()
            let served = try #require(refresher.accessToken(for: Self.billing))

            fixture.server.monitor.injectFaults([.status(503), .status(503)], path: "/oauth/token")
            fixture.clock.advance(by: .seconds(840))
            for _ in 0..<2 {
                guard case .failed(_, let error, let delay) = try await next(&events) else { Issue.record("expected a failure"); return }
                #expect(error is ServerError)
                #expect(delay >= .milliseconds(500) && delay <= .seconds(8))
                #expect(refresher.accessToken(for: Self.billing) == served)  // still valid: still served
                await fixture.clock.waitForSleepers()
                fixture.clock.advance(by: delay)
            }
            guard case .refreshed = try await next(&events) else { Issue.record("expected the retry to succeed"); return }
            #expect(refresher.accessToken(for: Self.billing) != served)

            // A resource server refused the token: dropped, and another one fetched at once.
            let refused = try #require(refresher.accessToken(for: Self.billing))
            let replacement = try await refresher.invalidate(refused, for: Self.billing)
            #expect(replacement != nil && replacement != refused)
            #expect(refresher.accessToken(for: Self.billing) == replacement)
            #expect(try await tokens.accessToken(for: Self.billing) == replacement)
            guard case .refreshed = try await next(&events) else { Issue.record("expected the replacement"); return }

            run.cancel()  // cancellation stops it as cleanly as a graceful shutdown
            guard case .stopped = try await next(&events) else { Issue.record("expected the stop"); return }
            try await run.value
            #expect(await events.next() == nil)  // the stream ends with the service
            let again = await thrown { try await refresher.run() }
            #expect((again as? LoginError)?.code == .invalidConfiguration)  // a refresher runs once
        }
    }

    @Test func aTargetThatKeepsFailingDoesNotHoldUpTheOthers() async throws {
        let refused = TokenTarget(resources: ["https://unknown.example/"])
        try await withFixture(
            clientID: "loginkit-service", clientSecret: "dev-secret",
            configure: {
                $0.accessTokenLifetime = .seconds(1200)
                $0.resourceServers = ["https://billing.example/"]
            }
        ) { fixture in
            let tokens = ClientCredentialsTokens(api: fixture.api, store: fixture.store, clock: fixture.clock)
            var configuration = ClientTokenRefresher.Configuration()
            configuration.maximumInterval = .seconds(3600)
            configuration.maximumBackoff = .seconds(30)
            let refresher = ClientTokenRefresher(tokens: tokens, targets: [refused, Self.billing], configuration: configuration, clock: fixture.clock)
            let run = Task { try await refresher.run() }
            var refreshes = 0
            var failures = 0
            for await event in refresher.events {
                switch event {
                case .refreshed:
                    refreshes += 1
                    if refreshes == 2 { run.cancel() }  // billing replaced on time: done
                case .failed(_, let error, let delay):
                    failures += 1
                    #expect((error as? LoginError)?.code == .invalidTarget)
                    guard refreshes < 2 else { continue }
                    // The refused target retries on its own backoff (at most 30 s); billing's
                    // replacement point (840 s) comes all the same.
                    await fixture.clock.waitForSleepers()
                    fixture.clock.advance(by: delay)
                case .stopped:
                    break
                }
            }
            try await run.value
            #expect(refreshes == 2)
            #expect(failures >= 2)
        }
    }
}
