import Foundation
import LoginKit
import LoginKitMocks
import LoginKitPostgres
import LoginKitTestSupport
import PostgresNIO
import Testing

/// PostgreSQL restarted (`pg_ctl stop -m fast`, then `start`) while one process refreshes under
/// the profile's lock and others wait for that lock. On a cluster of the test's own: the one the
/// whole run shares is never restarted.
@Suite(
    .enabled(
        if: TestDatabase.clusterScript != nil || ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_POSTGRES"] == "1",
        "needs PostgreSQL: make test starts one"),
    .timeLimit(.minutes(3)))
struct PostgresRestartTests {
    /// The waiters' connections die inside their lock wait: each hears of it at once and ends with
    /// `.unavailable` (never a second refresh at the provider). The holder's connection dies while
    /// the provider answers its refresh: its write is made again on a new connection once
    /// PostgreSQL is back, so the rotated refresh token is saved and the session lives on.
    @Test func aRestartDuringARefreshSavesTheRefreshedCredentialsAndEndsTheWaitsAtOnce() async throws {
        let script = try #require(TestDatabase.clusterScript)
        let created = try await runCapturing(script, ["create"])
        try #require(created.status == 0)
        let parts = created.output.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        let directory = try #require(parts.first)
        let port = try #require(parts.last)
        // The cluster is removed whatever happens.
        var failure: (any Error)?
        do {
            try await restartDuringARefresh(script: script, directory: directory, url: "postgres://loginkit@127.0.0.1:\(port)/postgres")
        } catch {
            failure = error
        }
        #expect(await run(script, ["destroy", directory]) == 0)
        if let failure { throw failure }
    }

    func restartDuringARefresh(script: String, directory: String, url: String) async throws {
        var configuration = TestDatabase.configuration(readsFromMemory: false)
        // The holder's second write has what is left of this after the provider answers; ample
        // on a loaded machine. The lock wait is past the suite's time limit: only the lost
        // connection can end a waiter's wait in time.
        configuration.operationTimeout = .seconds(20)
        configuration.lockTimeout = .seconds(600)
        let api = MockAuthAPI()
        let waiterAPI = MockAuthAPI()
        let expired = Credentials(accessToken: "access-old", refreshToken: "refresh-old", expiresAt: Date().addingTimeInterval(-5))
        let refreshed = Credentials(accessToken: "access-new", refreshToken: "refresh-new", expiresAt: Date().addingTimeInterval(3600))
        // A client each, as processes of their own: the holder, then three waiters.
        let connection = try PostgresTokenStore.connection(url: url)
        let clients = (0..<4).map { _ in PostgresClient(configuration: connection) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { await client.run() } }
            defer { group.cancelAll() }
            let stores = try clients.map { try PostgresTokenStore(client: $0, configuration: configuration) }
            let holderStore = stores[0]
            let waiterStores = Array(stores.dropFirst())
            try await holderStore.migrate()
            try await holderStore.save(StoredProfile(credentials: expired, source: api.source, userID: "demo"), as: "default")

            // The holder takes the lock and asks the provider, which does not answer yet.
            let holder = AuthService(api: api, store: holderStore)
            let holding = Task { try await holder.validAccessToken() }
            let refresh = await api.nextRefresh()

            // Three others find the token expired too, and wait for the lock.
            let waiting = waiterStores.map { store in
                Task { () -> (outcome: Result<String, any Error>, ended: ContinuousClock.Instant) in
                    do {
                        let token = try await AuthService(api: waiterAPI, store: store).validAccessToken()
                        return (.success(token), .now)
                    } catch {
                        return (.failure(error), .now)
                    }
                }
            }
            for store in waiterStores { try await store.progress.wait(until: .lockRequested, count: 1) }

            let restarted = ContinuousClock.now
            #expect(await run(script, ["stop", directory]) == 0)
            #expect(await run(script, ["start", directory]) == 0)

            // Every waiter ended when its connection did, not at AuthService's 60 s refresh deadline.
            for waiter in waiting {
                let (outcome, ended) = await waiter.value
                switch outcome {
                case .success(let token):
                    #expect(token == "access-new")
                case .failure(let error):
                    #expect((error as? TokenStoreError)?.code == .unavailable, "\(error)")
                }
                #expect(restarted.duration(to: ended) < .seconds(15), "a waiter ended \(restarted.duration(to: ended)) after the restart began")
            }
            #expect(waiterAPI.refreshCallCount == 0, "no second refresh of the same token")

            // The provider answers the holder now; its transaction's connection is gone.
            refresh.resume(returning: refreshed)
            #expect(try await holding.value == "access-new")
            #expect(holderStore.progress.count(.writtenAgain) == 1, "the writes were made again on a new connection")
            let stored = try await waiterStores[0].profile(named: "default")
            #expect(stored?.credentials.accessToken == "access-new")
            #expect(stored?.credentials.refreshToken == "refresh-new", "the rotated refresh token is saved")
            #expect(api.refreshCallCount == 1)
        }
    }
}
