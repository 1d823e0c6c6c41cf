import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitJOSE
import LoginKitMocks
import LoginKitPostgres
import LoginKitTestSupport
import Logging
import PostgresNIO
import Testing

/// The PostgreSQL that `make test` starts (scripts/with-postgres.sh); without it these tests are
/// skipped, unless LOGINKIT_REQUIRE_POSTGRES=1 (make test) makes that a failure.
enum TestDatabase {
    static let url = ProcessInfo.processInfo.environment["LOGINKIT_TEST_POSTGRES_URL"]
    static let clusterScript = ProcessInfo.processInfo.environment["LOGINKIT_TEST_PG_CLUSTER"]
    /// The CA that signed the test cluster's certificate (for the name `localhost`).
    static let certificateAuthority = ProcessInfo.processInfo.environment["LOGINKIT_TEST_POSTGRES_CA"]
    static var available: Bool { url != nil || ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_POSTGRES"] == "1" }

    static func connection() throws -> PostgresClient.Configuration {
        let url = try #require(url, "run through scripts/with-postgres.sh (make test does)")
        return try PostgresTokenStore.connection(url: url)
    }

    /// A store configuration on a namespace of its own, so that tests running at once stay apart.
    /// Tests that change rows behind the store's back read without memory (`readsFromMemory`), so
    /// that they need not await the notification of their change.
    static func configuration(
        sealing: StoreSealing = .none, table: String = "loginkit_profiles", readsFromMemory: Bool = true
    ) -> PostgresTokenStore.Configuration {
        var configuration = PostgresTokenStore.Configuration()
        configuration.namespace = "test-\(UUID().uuidString)"
        configuration.sealing = sealing
        configuration.table = table
        configuration.readsFromMemory = readsFromMemory
        return configuration
    }
}

func sampleProfile(_ marker: String) -> StoredProfile {
    StoredProfile(
        credentials: Credentials(
            accessToken: "access-\(marker)", refreshToken: "refresh-\(marker)", expiresAt: Date(timeIntervalSince1970: 1_900_000_000.25)),
        source: CredentialSource(kind: .oauth2, endpoint: "https://issuer.test", clientID: "cli"),
        userID: "user-\(marker)", attributes: ["marker": marker], updatedAt: Date(timeIntervalSince1970: 1_800_000_000.5))
}

@Suite(.enabled(if: TestDatabase.available, "needs PostgreSQL: make test starts one"), .timeLimit(.minutes(3)))
struct PostgresTokenStoreTests {
    @Test func readsAndWritesAreTimed() async throws {
        _ = TestTelemetry.systems
        let reads = { TestTelemetry.timerCount("loginkit_store_operation_duration_seconds", [("operation", "read"), ("store", "postgres")]) }
        let writes = { TestTelemetry.timerCount("loginkit_store_operation_duration_seconds", [("operation", "write"), ("store", "postgres")]) }
        let (readsBefore, writesBefore) = (reads(), writes())
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: TestDatabase.configuration()) { store in
            try await store.save(sampleProfile("timed"), as: "timed")
            _ = try await store.profile(named: "timed")
        }
        #expect(reads() > readsBefore)
        #expect(writes() > writesBefore)
    }

    @Test func profilesRoundTripAndTheMigrationIsIdempotent() async throws {
        // Four stores migrating a new table at once, then again: no error, one table.
        let table = "loginkit_migrate_\(UUID().uuidString.prefix(8).lowercased())"
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: TestDatabase.configuration(table: table)) { store in
                        try await store.migrate()
                    }
                }
            }
            try await group.waitForAll()
        }
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: TestDatabase.configuration(table: table)) { store in
            #expect(try await store.profile(named: "default") == nil)
            #expect(try await store.profileNames() == [])
            try await store.save(sampleProfile("a"), as: "default")
            try await store.save(sampleProfile("b"), as: "work")
            #expect(try await store.profile(named: "default") == sampleProfile("a"))
            #expect(try await store.profile(named: "work") == sampleProfile("b"))
            #expect(try await store.profileNames() == ["default", "work"])
            try await store.save(sampleProfile("c"), as: "default")
            #expect(try await store.profile(named: "default") == sampleProfile("c"))
            try await store.removeProfile(named: "work")
            try await store.removeProfile(named: "work")  // removing a missing profile is not an error
            #expect(try await store.profileNames() == ["default"])

            // The whole-store transaction sees and changes every profile of the namespace.
            try await store.withExclusiveAccess { transaction in
                #expect(transaction.profiles.keys.sorted() == ["default"])
                transaction["x"] = sampleProfile("x")
                transaction["default"] = nil
            }
            #expect(try await store.profileNames() == ["x"])

            // Each write moved the row's version on: 1 after the insert, 2 after one update.
            try await store.save(sampleProfile("y"), as: "x")
            let version = try await store.client.query("SELECT version FROM \(unescaped: table) WHERE namespace = \(store.configuration.namespace) AND name = 'x'")
            var versions: [Int64] = []
            for try await value in version.decode(Int64.self) { versions.append(value) }
            #expect(versions == [2])
        }
    }

    @Test func sealedRowsHoldNoTokenAndOpenOnlyWithTheirKeyAndName() async throws {
        let key = try SymmetricKey.random()
        let configuration = TestDatabase.configuration(sealing: .key(key))
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
            try await store.save(sampleProfile("secret"), as: "default")
            #expect(try await store.profile(named: "default") == sampleProfile("secret"))
            let rows = try await store.client.query(
                "SELECT sealed, payload FROM loginkit_profiles WHERE namespace = \(configuration.namespace) AND name = 'default'")
            for try await (sealed, payload) in rows.decode((Bool, ByteBuffer).self) {
                #expect(sealed)
                let bytes = String(decoding: payload.readableBytesView, as: UTF8.self)
                #expect(!bytes.contains("access-secret") && !bytes.contains("refresh-secret"))
            }
            // A row copied to another profile name does not open: the name is sealed in.
            try await store.client.query(
                """
                INSERT INTO loginkit_profiles (namespace, name, format, sealed, payload, version)
                SELECT namespace, 'copy', format, sealed, payload, version FROM loginkit_profiles
                WHERE namespace = \(configuration.namespace) AND name = 'default'
                """)
            let copied = await thrown { try await store.profile(named: "copy") } as? TokenStoreError
            #expect(copied?.code == .wrongKey)
        }
        // Another key, and no key: typed errors, and the row is left as it was.
        var otherKey = configuration
        otherKey.sealing = .key(try SymmetricKey.random())
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: otherKey) { store in
            let wrong = await thrown { try await store.profile(named: "default") } as? TokenStoreError
            #expect(wrong?.code == .wrongKey)
            #expect(wrong.map { !"\($0)".contains("secret") } ?? false)
        }
        var noKey = configuration
        noKey.sealing = .none
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: noKey) { store in
            let missing = await thrown { try await store.save(sampleProfile("other"), as: "default") } as? TokenStoreError
            #expect(missing?.code == .sealedWithoutKey)
        }
        let reopened = try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
            try await store.profile(named: "default")
        }
        #expect(reopened == sampleProfile("secret"))
    }

    @Test func newerRowsAreRefusedAndOutOfScopeWritesAndConflictsWriteNothing() async throws {
        let configuration = TestDatabase.configuration(readsFromMemory: false)
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
            let namespace = configuration.namespace
            try await store.save(sampleProfile("a"), as: "default")
            try await store.client.query("UPDATE loginkit_profiles SET format = 99 WHERE namespace = \(namespace) AND name = 'default'")
            let newer = await thrown { try await store.profile(named: "default") } as? TokenStoreError
            #expect(newer?.code == .unsupportedVersion)
            let overwrite = await thrown { try await store.save(sampleProfile("b"), as: "default") } as? TokenStoreError
            #expect(overwrite?.code == .unsupportedVersion)
            try await store.client.query("UPDATE loginkit_profiles SET format = 1 WHERE namespace = \(namespace) AND name = 'default'")
            #expect(try await store.profile(named: "default") == sampleProfile("a"))

            let outOfScope = await thrown {
                try await store.withExclusiveAccess(to: "default") { transaction in
                    transaction["default"] = sampleProfile("c")
                    transaction["other"] = sampleProfile("d")
                }
            } as? TokenStoreError
            #expect(outOfScope?.code == .outOfScope)
            #expect(try await store.profileNames() == ["default"])
            #expect(try await store.profile(named: "default") == sampleProfile("a"))

            // A writer that ignores the lock inserts the row we are about to create: our write
            // fails with .conflict instead of overwriting it.
            let conflict = await thrown {
                try await store.withExclusiveAccess(to: "new") { transaction in
                    try await store.client.query(
                        """
                        INSERT INTO loginkit_profiles (namespace, name, format, sealed, payload, version)
                        VALUES (\(namespace), 'new', 1, false, convert_to('{}', 'UTF8'), 7)
                        """)
                    transaction["new"] = sampleProfile("mine")
                }
            } as? TokenStoreError
            #expect(conflict?.code == .conflict)
            let rows = try await store.client.query("SELECT version FROM loginkit_profiles WHERE namespace = \(namespace) AND name = 'new'")
            var versions: [Int64] = []
            for try await version in rows.decode(Int64.self) { versions.append(version) }
            #expect(versions == [7])
        }
    }

    /// Four processes × 250 concurrent callers, an expired token, a refresh token that rotates and
    /// dies on reuse: one refresh at the provider, every caller served the same fresh token.
    @Test func fourProcessesOfManyCallersRefreshOnce() async throws {
        let helper = try testHelperPath()
        let url = try #require(TestDatabase.url)
        let configuration = TestDatabase.configuration()
        try await DevServer.withServer { server in
            #expect(server.identityProvider.rotatesRefreshTokens && server.identityProvider.revokesFamilyOnReuse)
            try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
                try await CurlHTTPClient.withClient { client in
                    let api = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-cli"), transport: client)
                    _ = try await AuthService(api: api, store: store).logIn(for: User.ID(rawValue: "demo"), with: "demo")
                }
                try await expireStoredCredentials(in: store)
                server.monitor.reset()
                // The refresh takes 2 s at the provider: every process finds the token expired
                // while it runs, so only the lock keeps the others from refreshing too.
                server.monitor.injectFaults([.delay(milliseconds: 2000)], path: "/oauth/token")

                let children = try (0..<4).map { _ in
                    try ChildProcess(helper, ["pg-token", url, configuration.namespace, server.issuer, "loginkit-cli", "250"])
                }
                var tokens: Set<String> = []
                for child in children {
                    for await line in child.lines { tokens.insert(line) }
                    #expect(await child.waitForExit() == 0)
                }
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1)
                #expect(tokens.count == 1)
                #expect(tokens.first == (try await store.profile(named: "default"))?.credentials.accessToken)
            }
        }
    }
}

/// A database of the test's own, stopped and started again while an AuthService uses it.
@Suite(.enabled(if: TestDatabase.clusterScript != nil || ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_POSTGRES"] == "1", "needs PostgreSQL: make test starts one"), .timeLimit(.minutes(3)))
struct PostgresOutageTests {
    @Test func aStoppedDatabaseGivesTypedErrorsAndValidTokensFromMemoryThenRecovers() async throws {
        let script = try #require(TestDatabase.clusterScript)
        let creating = ContinuousClock.now
        let created = try await runCapturing(script, ["create"])
        try #require(created.status == 0)
        FileHandle.standardError.write(Data("PostgresOutageTests: cluster created in \(creating.duration(to: .now))\n".utf8))
        let parts = created.output.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        let directory = try #require(parts.first)
        let port = try #require(parts.last)
        // The cluster is removed whatever happens.
        var failure: (any Error)?
        do {
            try await exercise(script: script, directory: directory, url: "postgres://loginkit@127.0.0.1:\(port)/postgres")
        } catch {
            failure = error
        }
        #expect(await run(script, ["destroy", directory]) == 0)
        if let failure { throw failure }
    }

    /// A server that stops answering (its processes frozen: the connections stay open, nothing
    /// comes back, as in a network partition) ends each call at its deadline with `.unavailable`
    /// (the lock wait set past the suite's time limit, so only `operationTimeout` can end them);
    /// once the server answers again the store works, and what the timed-out calls left behind
    /// has rolled back.
    @Test func aFrozenDatabaseEndsEachCallAtItsDeadline() async throws {
        let script = try #require(TestDatabase.clusterScript)
        let created = try await runCapturing(script, ["create"])
        try #require(created.status == 0)
        let parts = created.output.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        let directory = try #require(parts.first)
        let port = try #require(parts.last)
        var configuration = TestDatabase.configuration(readsFromMemory: false)
        // What a frozen server costs each call below; with the whole suite running in parallel
        // a shorter deadline also ends calls to a server that is only slow.
        configuration.operationTimeout = .seconds(5)
        configuration.lockTimeout = .seconds(600)
        var failure: (any Error)?
        do {
            try await PostgresTokenStore.withStore(
                try PostgresTokenStore.connection(url: "postgres://loginkit@127.0.0.1:\(port)/postgres"), configuration: configuration
            ) { store in
                try await store.save(sampleProfile("a"), as: "default")  // the pool keeps a connection
                #expect(await run(script, ["freeze", directory]) == 0)
                // Each call ends at its deadline, not at a later one (PostgresNIO's connect timeout,
                // the 600 s lock wait): the slack is for a loaded machine.
                let clock = ContinuousClock()
                let bound = configuration.operationTimeout + .seconds(3)
                // The write first: it gets the pool's open connection, so its transaction waits on a
                // connection that does not answer (the others wait for a new one).
                var write: TokenStoreError?, read: TokenStoreError?, other: TokenStoreError?
                let times = [
                    await clock.measure { write = await thrown { try await store.save(sampleProfile("b"), as: "default") } as? TokenStoreError },
                    await clock.measure { read = await thrown { try await store.profile(named: "default") } as? TokenStoreError },
                    await clock.measure { other = await thrown { try await store.save(sampleProfile("c"), as: "other") } as? TokenStoreError },
                ]
                #expect(await run(script, ["thaw", directory]) == 0)
                #expect(read?.code == .unavailable)
                #expect(write?.code == .unavailable)
                #expect(other?.code == .unavailable)
                #expect(times.allSatisfy { $0 < bound }, "each call ends at its deadline: \(times)")
                // Answering again: the timed-out transactions rolled back (or their writes are
                // there whole), and new calls go through.
                try await store.save(sampleProfile("d"), as: "default")
                #expect(try await store.profile(named: "default")?.userID == "user-d")
                #expect(try await store.profile(named: "other") == nil, "a transaction given up on did not commit later")

                // Frozen after the writes are decided: the commit is not confirmed in time, and once
                // the server answers the row is the old one or the new one, whole.
                var committing: TokenStoreError?
                let commitTime = await clock.measure {
                    committing = await thrown {
                        try await store.withExclusiveAccess(to: "default") { transaction in
                            transaction["default"] = sampleProfile("e")
                            #expect(await run(script, ["freeze", directory]) == 0)
                        }
                    } as? TokenStoreError
                }
                #expect(await run(script, ["thaw", directory]) == 0)
                #expect(committing?.code == .unavailable)
                #expect(commitTime < bound)
                let after = try await store.profile(named: "default")
                #expect(after == sampleProfile("d") || after == sampleProfile("e"))
            }
        } catch {
            failure = error
        }
        _ = await run(script, ["thaw", directory])  // a frozen server cannot be stopped
        #expect(await run(script, ["destroy", directory]) == 0)
        if let failure { throw failure }
    }

    /// A store call whose task is cancelled while it waits for the stopped database throws
    /// `CancellationError`, not `.unavailable` (the pool fails a cancelled connection request with
    /// its own error). The store's deadlines run on a manual clock, so only the cancellation ends
    /// the calls; they are cancelled once their deadline timers sleep (the call is under way).
    func cancelledCallsThrowCancellation(url: String, configuration: PostgresTokenStore.Configuration) async throws {
        var configuration = configuration
        let clock = ManualClock()
        configuration.clock = clock
        configuration.readsFromMemory = false
        // A client of its own: `withStore` would need the database up (it migrates first).
        let client = PostgresClient(configuration: try PostgresTokenStore.connection(url: url))
        let store = try PostgresTokenStore(client: client, configuration: configuration)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            let read = Task { try await store.profile(named: "default") }
            await clock.waitForSleepers(1)
            read.cancel()
            #expect(await thrown { try await read.value } is CancellationError)
            let write = Task { try await store.save(sampleProfile("x"), as: "other") }
            await clock.waitForSleepers(1)
            write.cancel()
            #expect(await thrown { try await write.value } is CancellationError)
            group.cancelAll()
        }
    }

    /// Many transactions racing their deadlines against a stopped database each end with
    /// `.unavailable`: none waits on after its deadline for a connection the pool will not hand out
    /// (the pool need not honour the cancellation of a connection request: this call hung two
    /// runs of `make test`, docs/development.md). Short deadlines on the real clock, so that they
    /// fall at every point of the pool's connection attempts and back-off.
    func transactionsRacingTheirDeadlinesEachEnd(url: String, configuration: PostgresTokenStore.Configuration) async throws {
        var configuration = configuration
        configuration.readsFromMemory = false
        let client = PostgresClient(configuration: try PostgresTokenStore.connection(url: url))
        let deadlines = (0..<200).map { Duration.milliseconds(1 + ($0 * 37) % 150) }  // 1 … 150 ms, spread
        let stores = try deadlines.map { deadline in
            var callConfiguration = configuration
            callConfiguration.operationTimeout = deadline
            return try PostgresTokenStore(client: client, configuration: callConfiguration)
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            let codes = await withTaskGroup(of: TokenStoreError.Code?.self) { calls in
                for (index, callStore) in stores.enumerated() {
                    calls.addTask {
                        let error = await thrown { try await callStore.save(sampleProfile("r\(index)"), as: "racer") }
                        return (error as? TokenStoreError)?.code
                    }
                }
                var codes: [TokenStoreError.Code?] = []
                for await code in calls { codes.append(code) }
                return codes
            }
            #expect(codes.count == deadlines.count)
            #expect(codes.allSatisfy { $0 == .unavailable }, "every call ends, with .unavailable: \(codes)")
            group.cancelAll()
        }
    }

    func exercise(script: String, directory: String, url: String) async throws {
        // Without memory reads: the reads right after the stop must reach the stopped database.
        var configuration = TestDatabase.configuration(readsFromMemory: false)
        configuration.operationTimeout = .seconds(5)  // what a stopped database costs each call below
        configuration.lockTimeout = .seconds(600)  // past the time limit: only operationTimeout may end a call
        // This test hung runs of `make test` on 2026-11-25 and 2026-11-26 (docs/development.md):
        // each step is logged on stderr, so that a hung run's log names the step; with
        // LOGINKIT_TEST_POSTGRES_TRACE=1 the store's pool logs every event too.
        if ProcessInfo.processInfo.environment["LOGINKIT_TEST_POSTGRES_TRACE"] == "1" {
            var logger = Logger(label: "loginkit.postgres.outage", factory: { StreamLogHandler.standardError(label: $0) })
            logger.logLevel = .trace
            configuration.logger = logger
        }
        let started = ContinuousClock.now
        func step(_ name: String) {
            FileHandle.standardError.write(Data("PostgresOutageTests: \(started.duration(to: .now)): \(name)\n".utf8))
        }
        try await DevServer.withServer { server in
            try await PostgresTokenStore.withStore(try PostgresTokenStore.connection(url: url), configuration: configuration) { store in
                try await CurlHTTPClient.withClient { client in
                    let api = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-cli"), transport: client)
                    let clock = ManualClock()
                    let service = AuthService(api: api, store: store, clock: clock)
                    step("log in")
                    _ = try await service.logIn(for: User.ID(rawValue: "demo"), with: "demo")
                    let token = try await service.validAccessToken()

                    step("stop the database")
                    #expect(await run(script, ["stop", directory]) == 0)
                    step("read with the database stopped")
                    let read = await thrown { try await store.profile(named: "default") } as? TokenStoreError
                    #expect(read?.code == .unavailable)
                    step("write with the database stopped")
                    let write = await thrown { try await store.save(sampleProfile("x"), as: "other") } as? TokenStoreError
                    #expect(write?.code == .unavailable)
                    step("transactions racing their deadlines with the database stopped")
                    try await transactionsRacingTheirDeadlinesEachEnd(url: url, configuration: configuration)
                    step("calls cancelled with the database stopped")
                    try await cancelledCallsThrowCancellation(url: url, configuration: configuration)
                    step("a valid token from memory")
                    #expect(try await service.validAccessToken() == token, "a still-valid token is served from memory")
                    // An hour later the token needs a refresh, which needs the store's lock: a typed error.
                    // No hang: the service's refresh deadline runs on the manual clock and the lock
                    // wait is 10 minutes (set above), so only the store's 5 s operation timeout can
                    // end this with `.unavailable` within the suite's time limit.
                    clock.advance(by: .seconds(3600))
                    step("a refresh with the database stopped")
                    let refresh = await thrown { try await service.validAccessToken() } as? TokenStoreError
                    #expect(refresh?.code == .unavailable)
                    #expect(server.monitor.requestCount(path: "/oauth/token") == 1, "no refresh without the lock")

                    step("start the database")
                    #expect(await run(script, ["start", directory]) == 0)
                    step("read after the restart")
                    #expect(try await store.profile(named: "default") != nil)
                    step("refresh after the restart")
                    let refreshed = try await service.validAccessToken()
                    #expect(refreshed != token)
                    #expect(server.monitor.requestCount(path: "/oauth/token") == 2)
                    #expect(try await store.profile(named: "default")?.credentials.accessToken == refreshed)
                    step("done")
                }
            }
        }
    }
}
