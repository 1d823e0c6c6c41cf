import CoreMetrics
import Foundation
import InMemoryTracing
import Instrumentation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import MetricsTestKit
import Testing
import Tracing

@Suite(.timeLimit(.minutes(2)))
struct TelemetryTests {
    @Test func tokenRequestsRefreshesWaitsAndStoreOperationsAreRecorded() async throws {
        let (metrics, tracer) = TestTelemetry.systems
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json", sealing: .none)
            try await withFixture(store: store, clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
                let issuer = fixture.server.issuer
                func requests(_ grant: String, _ outcome: String) -> Int64 {
                    metrics.counters(label: "loginkit_token_requests_total", dimensions: [("grant", grant), ("outcome", outcome), ("issuer", issuer)])
                        .reduce(0) { $0 + $1.totalValue }
                }
                let writes = { (try? metrics.expectTimer("loginkit_store_operation_duration_seconds", [("operation", "write"), ("store", "file")]))?.values.count ?? 0 }
                let writesBefore = writes()

                let service = fixture.service(profile: "telemetry-\(UUID().uuidString)")
                _ = try await service.logIn(for: demo, with: "demo")
                #expect(requests("password", "success") == 1)
                #expect(writes() > writesBefore)
                _ = await thrown { try await service.logIn(for: demo, with: "wrong") }
                #expect(requests("password", "rejected") == 1)

                // Expired: ten callers share one refresh.
                fixture.clock.advance(by: .seconds(3600))
                try await withThrowingTaskGroup(of: String.self) { group in
                    for _ in 0..<10 { group.addTask { try await service.validAccessToken() } }
                    try await group.waitForAll()
                }
                #expect(requests("refresh_token", "success") == 1)
                let refreshes = metrics.counters(label: "loginkit_refreshes_total", dimensions: [("outcome", "success"), ("profile", service.profileName)])
                #expect(refreshes.reduce(0) { $0 + $1.totalValue } == 1)
                let waits = metrics.counters(label: "loginkit_shared_refresh_waits_total", dimensions: [("profile", service.profileName)])
                #expect(waits.reduce(0) { $0 + $1.totalValue } == 10)
                let timer = try metrics.expectTimer("loginkit_token_request_duration_seconds", [("grant", "refresh_token"), ("issuer", issuer)])
                #expect(timer.values.count == 1 && (timer.values.first ?? -1) > 0)

                // Client credentials through the per-target cache: requested once, then from memory.
                let tokens = ClientCredentialsTokens(api: fixture.api, store: store, clock: fixture.clock)
                let clientToken = try await tokens.accessToken(for: TokenTarget(audience: "https://telemetry.example"))
                _ = try await tokens.accessToken(for: TokenTarget(audience: "https://telemetry.example"))
                #expect(requests("client_credentials", "success") == 1)

                // Spans: one per token request, naming grant and issuer, never a token or secret.
                let spans = tracer.finishedSpans.filter { $0.attributes.get("loginkit.issuer") == .string(issuer) }
                #expect(spans.count == 4)  // password ×2, refresh, client credentials
                #expect(spans.allSatisfy { $0.operationName == "LoginKit token request" })
                let profile = try #require(try await store.profile(named: service.profileName))
                let secrets = ["dev-secret", "wrong", clientToken, profile.credentials.accessToken ?? "-", profile.credentials.refreshToken ?? "-"]
                for span in spans {
                    span.attributes.forEach { _, value in
                        for secret in secrets { #expect(!"\(value)".contains(secret)) }
                    }
                }
                for counter in metrics.counters {
                    for (_, value) in counter.dimensions {
                        for secret in secrets { #expect(!value.contains(secret)) }
                    }
                }
            }
        }
    }
}
