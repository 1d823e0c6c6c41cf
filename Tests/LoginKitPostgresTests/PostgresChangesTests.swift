import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitJOSE
import LoginKitMocks
import LoginKitPostgres
import LoginKitTestSupport
import PostgresNIO
import Testing

/// Reads from memory between notifications (LISTEN/NOTIFY), the change stamp `AuthService`'s
/// cached path trusts, and corrupt rows set aside in the quarantine table.
@Suite(.enabled(if: TestDatabase.available, "needs PostgreSQL: make test starts one"), .timeLimit(.minutes(3)))
struct PostgresChangesTests {
    /// Returns once `store`'s listener has handled every change committed before now: a marker row
    /// is inserted and its notification awaited (PostgreSQL delivers notifications in commit order).
    func sync(_ store: PostgresTokenStore) async throws {
        let marker = "sync-\(UUID().uuidString)"
        try await store.changes.waitForNotification(of: marker) {
            try await store.client.query(
                """
                INSERT INTO \(unescaped: store.configuration.table) (namespace, name, format, sealed, payload, version)
                VALUES (\(store.configuration.namespace), \(marker), 1, false, convert_to('{}', 'UTF8'), 1)
                """)
        }
    }

    /// A read is served from memory until a change to the row is notified — by any writer, here
    /// plain SQL from outside LoginKit (the table's trigger).
    @Test func readsComeFromMemoryUntilAnyCommittedChangeToTheRow() async throws {
        let configuration = TestDatabase.configuration()
        let namespace = configuration.namespace
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
            try await store.changes.wait { listening, _ in listening }
            #expect(store.isServingReadsFromMemory)
            try await store.save(sampleProfile("a"), as: "default")
            try await sync(store)  // our own write's notification is behind us
            #expect(try await store.profile(named: "default") == sampleProfile("a"))
            #expect(store.changes.cached("default") == .some(sampleProfile("a")))

            // A change that fires no trigger (replication role) is not seen: the read came from memory.
            try await store.client.withConnection { connection in
                let logger = store.configuration.logger
                try await connection.query("SET session_replication_role = replica", logger: logger)
                try await connection.query("UPDATE loginkit_profiles SET format = 99 WHERE namespace = \(namespace) AND name = 'default'", logger: logger)
                try await connection.query("RESET session_replication_role", logger: logger)
            }
            try await sync(store)
            #expect(try await store.profile(named: "default") == sampleProfile("a"), "served from memory")

            // Any committed change notifies; once it is handled the next read is a query (and sees format 99).
            try await store.changes.waitForNotification(of: "default") {
                try await store.client.query("UPDATE loginkit_profiles SET updated_at = now() WHERE namespace = \(namespace) AND name = 'default'")
            }
            let newer = await thrown { try await store.profile(named: "default") } as? TokenStoreError
            #expect(newer?.code == .unsupportedVersion)

            // An operator's DELETE is seen too.
            try await store.changes.waitForNotification(of: "default") {
                try await store.client.query("UPDATE loginkit_profiles SET format = 1 WHERE namespace = \(namespace) AND name = 'default'")
            }
            #expect(try await store.profile(named: "default") == sampleProfile("a"))
            #expect(store.changes.cached("default") == .some(sampleProfile("a")))
            try await store.changes.waitForNotification(of: "default") {
                try await store.client.query("DELETE FROM loginkit_profiles WHERE namespace = \(namespace) AND name = 'default'")
            }
            #expect(try await store.profile(named: "default") == nil)
        }
    }

    /// The refresh's stamped exclusive access (docs/refresh.md): PostgreSQL's own write reaches the
    /// stamp only with its notification, after the commit, so the store answers no stamp — the
    /// service then remembers nothing and its next call reads — and the write goes through as with
    /// `withExclusiveAccess(to:)`.
    @Test func theStampedExclusiveAccessAnswersNoStampAndStillWrites() async throws {
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: TestDatabase.configuration()) { store in
            let (result, stamp) = try await store.withExclusiveAccessStamped(to: "default") { transaction -> Int in
                transaction["default"] = sampleProfile("a")
                return 7
            }
            #expect(result == 7)
            #expect(stamp == nil)
            #expect(try await store.profile(named: "default") == sampleProfile("a"))
        }
    }

    /// A change in another namespace of the same table leaves this namespace's memory alone.
    @Test func otherNamespacesChangesDoNotDropThisOnesMemory() async throws {
        let mine = TestDatabase.configuration()
        let theirs = TestDatabase.configuration()
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: mine) { store in
            try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: theirs) { other in
                try await store.changes.wait { listening, _ in listening }
                try await store.save(sampleProfile("mine"), as: "default")
                try await sync(store)
                _ = try await store.profile(named: "default")
                #expect(store.changes.cached("default") == .some(sampleProfile("mine")))
                try await other.save(sampleProfile("theirs"), as: "default")
                try await sync(store)  // committed after theirs: theirs has been handled
                #expect(store.changes.cached("default") == .some(sampleProfile("mine")), "their change did not drop ours")
            }
        }
    }

    /// Hosts that spell the table differently (`loginkit_profiles`, `public.loginkit_profiles`)
    /// share one channel: it is named after the table's oid, not its spelling.
    @Test func hostsSpellingTheTableDifferentlySeeEachOthersChanges() async throws {
        let plain = TestDatabase.configuration()
        var qualified = plain
        qualified.table = "public.loginkit_profiles"
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: qualified) { store in
            try await store.changes.wait { listening, _ in listening }
            try await store.save(sampleProfile("a"), as: "default")
            try await sync(store)
            #expect(try await store.profile(named: "default") == sampleProfile("a"))
            try await store.changes.waitForNotification(of: "default") {
                try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: plain) { otherHost in
                    try await otherHost.save(sampleProfile("b"), as: "default")
                }
            }
            #expect(try await store.profile(named: "default") == sampleProfile("b"))
        }
    }

    /// A rename notifies the old name too: it is not served from memory afterwards.
    @Test func aRenamedRowIsGoneUnderItsOldName() async throws {
        let configuration = TestDatabase.configuration()
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
            try await store.changes.wait { listening, _ in listening }
            try await store.save(sampleProfile("a"), as: "old")
            try await sync(store)
            #expect(try await store.profile(named: "old") == sampleProfile("a"))
            try await store.changes.waitForNotification(of: "old") {
                try await store.client.query("UPDATE loginkit_profiles SET name = 'new' WHERE namespace = \(configuration.namespace) AND name = 'old'")
            }
            #expect(try await store.profile(named: "old") == nil)
            #expect(try await store.profile(named: "new") == sampleProfile("a"))
        }
    }

    /// The listening connection killed by the server: memory off (every stamp new, reads are
    /// queries), then back once the listener reconnects.
    @Test func aLostListenerTurnsMemoryOffUntilItIsBack() async throws {
        let configuration = TestDatabase.configuration()
        var connection = try TestDatabase.connection()
        connection.options.additionalStartupParameters.append(("application_name", configuration.namespace))  // to find its listener
        try await PostgresTokenStore.withStore(connection, configuration: configuration) { store in
            try await store.changes.wait { listening, _ in listening }
            let terminated = try await store.client.query(
                "SELECT count(pg_terminate_backend(pid))::int8 FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND application_name = \(configuration.namespace)")
            var count: Int64 = 0
            for try await value in terminated.decode(Int64.self) { count = value }
            #expect(count == 1)
            try await store.changes.wait { listening, _ in !listening }
            #expect(store.changeStamp() != store.changeStamp())
            try await store.changes.wait { listening, _ in listening }
            let steady = store.changeStamp()
            #expect(store.changeStamp() == steady)
        }
    }

    /// The heartbeat's checks: a disabled trigger, or the table dropped and made again (a new oid,
    /// so a new channel), turn memory off until the listener is right again.
    @Test func aDisabledTriggerOrARecreatedTableTurnsMemoryOffUntilItIsRightAgain() async throws {
        let table = "loginkit_heartbeat_\(UUID().uuidString.prefix(8).lowercased())"
        var configuration = TestDatabase.configuration(table: table)
        configuration.listenerHeartbeat = .milliseconds(200)
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
            try await store.changes.wait { listening, _ in listening }
            try await store.client.query(PostgresQuery(unsafeSQL: "ALTER TABLE \(table) DISABLE TRIGGER loginkit_notify"))
            try await store.changes.wait { listening, _ in !listening }
            try await store.client.query(PostgresQuery(unsafeSQL: "ALTER TABLE \(table) ENABLE TRIGGER loginkit_notify"))
            try await store.changes.wait { listening, _ in listening }

            try await store.client.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"))
            try await store.changes.wait { listening, _ in !listening }
            try await store.migrate()
            try await store.changes.wait { listening, _ in listening }
            try await store.save(sampleProfile("again"), as: "default")
            try await sync(store)
            #expect(try await store.profile(named: "default") == sampleProfile("again"))
            try await store.changes.waitForNotification(of: "default") {
                try await store.client.query("DELETE FROM \(unescaped: table) WHERE name = 'default'")
            }
            #expect(try await store.profile(named: "default") == nil, "the new table's channel is the one listened to")
        }
    }

    /// A sealed row that opens with the key but does not decode was written whole by a key holder
    /// (a newer LoginKit): refused as such and left in place, not quarantined.
    @Test func aSealedRowThatOpensButDoesNotDecodeIsLeftInPlace() async throws {
        let key = try SymmetricKey.random()
        let configuration = TestDatabase.configuration(sealing: .key(key), readsFromMemory: false)
        let associated = Array("loginkit-postgres:\(PostgresTokenStore.format):\(configuration.namespace)\u{0}future".utf8)
        let sealed = try AESGCM.seal(Array(#"{"kind":"from-the-future"}"#.utf8), key: key, associatedData: associated)
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
            try await store.client.query(
                """
                INSERT INTO loginkit_profiles (namespace, name, format, sealed, payload, version)
                VALUES (\(configuration.namespace), 'future', 1, true, \(ByteBuffer(bytes: sealed)), 1)
                """)
            let read = await thrown { try await store.profile(named: "future") } as? TokenStoreError
            #expect(read?.code == .unsupportedVersion)
            let write = await thrown { try await store.save(sampleProfile("x"), as: "future") } as? TokenStoreError
            #expect(write?.code == .unsupportedVersion)
            #expect(try await store.quarantinedRows().isEmpty)
            #expect(try await store.profileNames() == ["future"])
        }
    }

    /// The stamp AuthService's cached path trusts: steady while listening and nothing changed, new
    /// after another host's write; new on every call when nothing listens.
    @Test func theChangeStampMovesOnlyWhenAProfileChangedOrNobodyListens() async throws {
        let configuration = TestDatabase.configuration()
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
            try await store.changes.wait { listening, _ in listening }
            let first = store.changeStamp()
            #expect(store.changeStamp() == first)
            try await store.changes.waitForNotification(of: "default") {
                try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { otherHost in
                    try await otherHost.save(sampleProfile("b"), as: "default")
                }
            }
            #expect(store.changeStamp() != first)
        }
        var quiet = configuration
        quiet.readsFromMemory = false
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: quiet) { store in
            #expect(!store.isServingReadsFromMemory)
            #expect(store.changeStamp() != store.changeStamp())
        }
    }

    /// Two hosts' AuthServices: the one serving from memory hands out the other host's new token
    /// once the change is notified, without a query per token call in between.
    @Test func aServiceServingFromMemorySeesAnotherHostsLogin() async throws {
        let configuration = TestDatabase.configuration()
        try await DevServer.withServer { server in
            try await CurlHTTPClient.withClient { http in
                let api = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-cli"), transport: http)
                try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
                    try await store.changes.wait { listening, _ in listening }
                    let service = AuthService(api: api, store: store)
                    _ = try await service.logIn(for: User.ID(rawValue: "demo"), with: "demo")
                    let first = try await service.validAccessToken()
                    #expect(try await service.validAccessToken() == first)
                    let second = try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { otherHost in
                        let other = AuthService(api: api, store: otherHost)
                        _ = try await other.logIn(for: User.ID(rawValue: "demo"), with: "demo")
                        return try await other.validAccessToken()
                    }
                    #expect(second != first)
                    try await sync(store)
                    #expect(try await service.validAccessToken() == second)
                    #expect(server.monitor.requestCount(path: "/oauth/token") == 2, "two logins, no refresh")
                }
            }
        }
    }

    /// A corrupt row is not an error naming a DELETE: the next locked access (a login, a refresh)
    /// moves it to the quarantine table, kept as it was, and the save goes through.
    @Test func aCorruptRowIsQuarantinedNotDeletedAndTheNextSaveGoesThrough() async throws {
        var configuration = TestDatabase.configuration(readsFromMemory: false)
        configuration.namespace += #"-o'brien\"#
        let name = #"it's \'; a "name""#
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
            try await store.save(sampleProfile("kept"), as: "kept")
            try await store.client.query(
                """
                INSERT INTO loginkit_profiles (namespace, name, format, sealed, payload, version)
                VALUES (\(configuration.namespace), \(name), 1, false, convert_to('not a profile', 'UTF8'), 3)
                """)
            let error = try #require(await thrown { try await store.profile(named: name) } as? TokenStoreError)
            #expect(error.code == .corrupt)
            #expect(error.message.contains("loginkit_quarantine"))
            #expect(try await store.quarantinedRows().isEmpty, "a read without the lock sets nothing aside")

            // A locked access that changes nothing still sets the row aside, and says so.
            let recovered = try await store.withExclusiveAccess(to: name) { transaction in
                #expect(transaction[name] == nil)
                return transaction.recoveredFrom?.code
            }
            #expect(recovered == .corrupt)
            #expect(try await store.profile(named: name) == nil)
            let quarantined = try await store.quarantinedRows()
            #expect(quarantined.map(\.name) == [name])
            #expect(quarantined.first?.version == 3)
            #expect(quarantined.first?.reason.contains("does not decode") == true)
            let payloads = try await store.client.query(
                "SELECT convert_from(payload, 'UTF8') FROM loginkit_quarantine WHERE namespace = \(configuration.namespace) AND name = \(name)")
            var kept: [String] = []
            for try await payload in payloads.decode(String.self) { kept.append(payload) }
            #expect(kept == ["not a profile"], "kept byte for byte")

            // A second corrupt row under the same name: the save replaces it, and both stay quarantined.
            try await store.client.query(
                """
                INSERT INTO loginkit_profiles (namespace, name, format, sealed, payload, version)
                VALUES (\(configuration.namespace), \(name), 1, false, convert_to('{"also": "not"}', 'UTF8'), 5)
                """)
            try await store.save(sampleProfile("new"), as: name)
            #expect(try await store.profile(named: name) == sampleProfile("new"))
            #expect(try await store.quarantinedRows().map(\.version) == [3, 5])
            #expect(try await store.profile(named: "kept") == sampleProfile("kept"))
        }
        // Another namespace of the same table sees none of them.
        let elsewhere = try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: TestDatabase.configuration()) { store in
            try await store.quarantinedRows()
        }
        #expect(elsewhere.isEmpty)
    }
}

/// `sslmode` against the test cluster, whose certificate names `localhost` only and is signed by a
/// CA of its own (`LOGINKIT_TEST_POSTGRES_CA`).
@Suite(.enabled(if: TestDatabase.available, "needs PostgreSQL: make test starts one"), .timeLimit(.minutes(2)))
struct PostgresTLSTests {
    func url(host: String, _ parameters: String) throws -> String {
        let base = try #require(TestDatabase.url)
        let port = try #require(URLComponents(string: base)?.port)
        return "postgres://loginkit@\(host):\(port)/postgres?\(parameters)"
    }

    func roundTrip(_ url: String) async throws {
        var configuration = TestDatabase.configuration()
        configuration.operationTimeout = .seconds(10)
        try await PostgresTokenStore.withStore(try PostgresTokenStore.connection(url: url), configuration: configuration) { store in
            try await store.save(sampleProfile("tls"), as: "default")
            let rows = try await store.client.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            var encrypted: [Bool] = []
            for try await ssl in rows.decode(Bool.self) { encrypted.append(ssl) }
            #expect(encrypted == [!url.contains("sslmode=disable")])
        }
    }

    @Test func verifyFullConnectsToTheCertificatesNameWithItsCA() async throws {
        let ca = try #require(TestDatabase.certificateAuthority)
        try await roundTrip(try url(host: "localhost", "sslmode=verify-full&sslrootcert=\(ca)"))
        try await roundTrip(try url(host: "localhost", "sslmode=require&sslrootcert=\(ca)"))
        try await roundTrip(try url(host: "127.0.0.1", "sslmode=verify-ca&sslrootcert=\(ca)"))
        try await roundTrip(try url(host: "127.0.0.1", "sslmode=disable"))
    }

    @Test(arguments: [
        ("127.0.0.1", "sslmode=verify-full&sslrootcert=CA"),  // the certificate names localhost only
        ("localhost", "sslmode=verify-full"),  // the system's CAs do not know the test CA
        ("localhost", "sslmode=require&sslrootcert=system"),
        ("127.0.0.1", "sslmode=require&sslrootcert=CA"),
    ])
    func anUnverifiedServerIsRefused(_ host: String, _ parameters: String) async throws {
        let ca = try #require(TestDatabase.certificateAuthority)
        var configuration = TestDatabase.configuration()
        configuration.operationTimeout = .seconds(10)
        let connection = try PostgresTokenStore.connection(url: try url(host: host, parameters.replacingOccurrences(of: "=CA", with: "=\(ca)")))
        let error = await thrown {
            try await PostgresTokenStore.withStore(connection, configuration: configuration) { _ in }
        } as? TokenStoreError
        #expect(error?.code == .unavailable)
    }
}
