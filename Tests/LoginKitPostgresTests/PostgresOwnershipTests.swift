@testable import LoginKitPostgres
import Foundation
import LoginKit
import LoginKitJOSE
import LoginKitTestSupport
import PostgresNIO
import Testing

/// SQL against the test database as its superuser, or as `role` (the test cluster trusts every
/// local connection, so any role with LOGIN connects without a password).
enum TestSQL {
    static func url(as role: String) throws -> String {
        let base = try #require(TestDatabase.url)
        var components = try #require(URLComponents(string: base))
        components.user = role
        return try #require(components.string)
    }

    static func connection(as role: String? = nil) throws -> PostgresClient.Configuration {
        guard let role else { return try TestDatabase.connection() }
        return try PostgresTokenStore.connection(url: try url(as: role))
    }

    /// Runs `statements` one after the other, each to its end.
    static func run(_ statements: [String], as role: String? = nil) async throws {
        let client = PostgresClient(configuration: try connection(as: role))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            for statement in statements {
                for try await _ in try await client.query(PostgresQuery(unsafeSQL: statement)) {}
            }
        }
    }

    /// The one column of every row `query` answers, as the superuser.
    static func values<T: PostgresDecodable & Sendable>(_ query: String, _ type: T.Type) async throws -> [T] {
        let client = PostgresClient(configuration: try TestDatabase.connection())
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            var values: [T] = []
            for try await value in try await client.query(PostgresQuery(unsafeSQL: query)).decode(T.self) { values.append(value) }
            return values
        }
    }
}

/// Roles that do not trust each other in one database: a store uses only objects its own role
/// (or a role it is a member of) owns, and a quarantine table nobody else may read.
@Suite(.enabled(if: TestDatabase.available, "needs PostgreSQL: make test starts one"), .timeLimit(.minutes(3)))
struct PostgresOwnershipTests {
    /// Where others may create (any schema before PostgreSQL 15 for `public`, here one granted to
    /// `PUBLIC`), another role makes the table, quarantine table and change function first and
    /// lets everyone write the table: the store refuses them, naming the table and its owner, and
    /// writes nothing into it. A squatted function alone is refused before anything is made.
    @Test func objectsAnotherRoleMadeFirstAreRefused() async throws {
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let (squatter, victim, schema, other) = ("squatter_\(suffix)", "victim_\(suffix)", "squat_\(suffix)", "squatfn_\(suffix)")
        try await TestSQL.run([
            "CREATE ROLE \(squatter) LOGIN", "CREATE ROLE \(victim) LOGIN",
            "CREATE SCHEMA \(schema)", "GRANT USAGE, CREATE ON SCHEMA \(schema) TO PUBLIC",
            "CREATE SCHEMA \(other)", "GRANT USAGE, CREATE ON SCHEMA \(other) TO PUBLIC",
        ])
        var failure: (any Error)?
        do {
            let configuration = TestDatabase.configuration(table: "\(schema).loginkit_profiles", readsFromMemory: false)
            try await PostgresTokenStore.withStore(try TestSQL.connection(as: squatter), configuration: configuration) { _ in }
            try await TestSQL.run(["GRANT ALL ON \(schema).loginkit_profiles, \(schema).loginkit_quarantine TO PUBLIC"], as: squatter)

            let refused = await thrown {
                try await PostgresTokenStore.withStore(try TestSQL.connection(as: victim), configuration: configuration) { store in
                    try await store.save(sampleProfile("victim"), as: "default")
                }
            } as? TokenStoreError
            #expect(refused?.code == .wrongOwner)
            #expect(refused?.message.contains("\"\(schema)\".\"loginkit_profiles\"") == true, "\(String(describing: refused))")
            #expect(refused?.message.contains(squatter) == true)
            #expect(try await TestSQL.values("SELECT count(*) FROM \(schema).loginkit_profiles", Int64.self) == [0], "nothing was written there")

            try await TestSQL.run(
                ["CREATE FUNCTION \(other).loginkit_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$"], as: squatter)
            var beside = configuration
            beside.table = "\(other).loginkit_profiles"
            let function = await thrown {
                try await PostgresTokenStore.withStore(try TestSQL.connection(as: victim), configuration: beside) { _ in }
            } as? TokenStoreError
            #expect(function?.code == .wrongOwner)
            #expect(function?.message.contains("loginkit_notify_change") == true)
            #expect(try await TestSQL.values("SELECT to_regclass('\(other).loginkit_profiles') IS NULL", Bool.self) == [true], "no table made beside it")
        } catch {
            failure = error
        }
        try await TestSQL.run([
            "DROP SCHEMA \(schema) CASCADE", "DROP SCHEMA \(other) CASCADE", "DROP OWNED BY \(squatter), \(victim)",
            "DROP ROLE \(squatter)", "DROP ROLE \(victim)",
        ])
        if let failure { throw failure }
    }

    /// A role without any privilege but CREATE on a schema of its own makes and uses its store
    /// there; the objects may then belong to a group role it is a member of. A quarantine table
    /// that grants privileges to others is refused until they are revoked.
    @Test func aRoleUsesItsOwnObjectsOrItsGroupsAndOnlyAPrivateQuarantineTable() async throws {
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let (app, owners, schema) = ("app_\(suffix)", "owners_\(suffix)", "own_\(suffix)")
        try await TestSQL.run([
            "CREATE ROLE \(app) LOGIN", "CREATE ROLE \(owners) NOLOGIN",
            "CREATE SCHEMA \(schema)", "GRANT USAGE, CREATE ON SCHEMA \(schema) TO \(app)",
        ])
        var failure: (any Error)?
        do {
            let configuration = TestDatabase.configuration(table: "\(schema).loginkit_profiles", readsFromMemory: false)
            func open(_ body: (PostgresTokenStore) async throws -> Void) async throws {
                try await PostgresTokenStore.withStore(try TestSQL.connection(as: app), configuration: configuration, body)
            }
            try await open { store in
                try await store.save(sampleProfile("mine"), as: "default")
                #expect(try await store.profile(named: "default") == sampleProfile("mine"))
            }
            #expect(
                try await TestSQL.values("SELECT relowner::regrole::text FROM pg_class WHERE oid = '\(schema).loginkit_profiles'::regclass", String.self) == [app])

            try await TestSQL.run([
                "GRANT \(owners) TO \(app)",
                "ALTER TABLE \(schema).loginkit_profiles OWNER TO \(owners)",
                "ALTER TABLE \(schema).loginkit_quarantine OWNER TO \(owners)",
                "ALTER FUNCTION \(schema).loginkit_notify_change() OWNER TO \(owners)",
            ])
            try await open { store in
                let profile = try await store.profile(named: "default")
                #expect(profile == sampleProfile("mine"))
            }

            try await TestSQL.run(["GRANT SELECT ON \(schema).loginkit_quarantine TO PUBLIC"])
            let readable = await thrown { try await open { _ in } } as? TokenStoreError
            #expect(readable?.code == .insecurePermissions)
            #expect(readable?.message.contains("PUBLIC") == true, "\(String(describing: readable))")
            try await TestSQL.run(["REVOKE ALL ON \(schema).loginkit_quarantine FROM PUBLIC"])
            try await open { store in
                let profile = try await store.profile(named: "default")
                #expect(profile == sampleProfile("mine"))
            }
        } catch {
            failure = error
        }
        try await TestSQL.run(["DROP SCHEMA \(schema) CASCADE", "DROP OWNED BY \(app), \(owners)", "DROP ROLE \(app)", "DROP ROLE \(owners)"])
        if let failure { throw failure }
    }
}

/// The quarantine table: what a sealed store sets aside, how long rows stay, and how they are purged.
@Suite(.enabled(if: TestDatabase.available, "needs PostgreSQL: make test starts one"), .timeLimit(.minutes(3)))
struct PostgresQuarantineTests {
    /// With a key configured every row LoginKit writes is sealed: an unsealed row was planted by
    /// someone who can write the table (with their issuer and client, for the next refresh to
    /// trust). It is never read — `.corrupt` on a read, absent under the lock — and set aside.
    @Test func aSealedStoreNeverReadsAnUnsealedRowAndSetsItAside() async throws {
        let key = try SymmetricKey.random()
        let configuration = TestDatabase.configuration(sealing: .key(key), readsFromMemory: false)
        let planted = StoredProfile(
            credentials: Credentials(accessToken: "planted", refreshToken: "planted-refresh", expiresAt: Date().addingTimeInterval(3600)),
            source: CredentialSource(kind: .oauth2, endpoint: "https://attacker.test", clientID: "cli"), userID: "mallory")
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        let json = try encoder.encode(planted)
        try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
            try await store.client.query(
                """
                INSERT INTO loginkit_profiles (namespace, name, format, sealed, payload, version)
                VALUES (\(configuration.namespace), 'default', 1, false, \(ByteBuffer(bytes: json)), 1)
                """)
            let read = await thrown { try await store.profile(named: "default") } as? TokenStoreError
            #expect(read?.code == .corrupt)
            #expect(read?.message.contains("not sealed") == true)
            let (seen, recovered) = try await store.withExclusiveAccess(to: "default") { transaction in
                (transaction["default"], transaction.recoveredFrom?.code)
            }
            #expect(seen == nil)
            #expect(recovered == .corrupt)
            let quarantined = try await store.quarantinedRows()
            #expect(quarantined.map(\.name) == ["default"])
            #expect(quarantined.first?.reason.contains("not sealed") == true)
            #expect(try await store.profile(named: "default") == nil)
        }
    }

    /// Rows past the retention are deleted when a store starts and when a row is set aside; the
    /// rest can be listed and purged, by number or all of a namespace. The table is shared by
    /// the stores of its schema (one of the test's own here), so a shorter retention applies to all.
    @Test func quarantinedRowsAreKeptForTheRetentionThenDeletedAndCanBePurged() async throws {
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let schema = "retention_\(suffix)"
        try await TestSQL.run(["CREATE SCHEMA \(schema)"])
        var failure: (any Error)?
        do {
            var configuration = TestDatabase.configuration(table: "\(schema).loginkit_profiles", readsFromMemory: false)
            let namespace = configuration.namespace
            func setAside(_ name: String, daysAgo: Int, in other: String? = nil) -> String {
                """
                INSERT INTO \(schema).loginkit_quarantine (source_table, namespace, name, format, sealed, payload, version, updated_at, quarantined_at, reason)
                VALUES ('\(schema).loginkit_profiles', '\(other ?? namespace)', '\(name)', 1, false, '\\x00', 1, now(), now() - interval '\(daysAgo) days', 'test')
                """
            }
            try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { _ in }
            try await TestSQL.run([setAside("old", daysAgo: 31), setAside("recent", daysAgo: 1), setAside("elsewhere", daysAgo: 1, in: "other-\(suffix)")])

            try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { store in
                #expect(try await store.quarantinedRows().map(\.name) == ["recent"], "a start deleted the row past 30 days")

                try await TestSQL.run([
                    setAside("old-again", daysAgo: 40),
                    """
                    INSERT INTO \(schema).loginkit_profiles (namespace, name, format, sealed, payload, version)
                    VALUES ('\(namespace)', 'broken', 1, false, convert_to('garbage', 'UTF8'), 1)
                    """,
                ])
                let recovered = try await store.withExclusiveAccess(to: "broken") { $0.recoveredFrom?.code }
                #expect(recovered == .corrupt)
                #expect(try await store.quarantinedRows().map(\.name) == ["recent", "broken"], "setting a row aside deleted the one past 30 days")

                let rows = try await store.quarantinedRows()
                #expect(try await store.purgeQuarantinedRows(ids: [rows[0].id]) == 1)
                #expect(try await store.quarantinedRows().map(\.name) == ["broken"])
                #expect(try await store.purgeQuarantinedRows() == 1)
                #expect(try await store.quarantinedRows().isEmpty)
            }
            #expect(try await TestSQL.values("SELECT name FROM \(schema).loginkit_quarantine", String.self) == ["elsewhere"], "another namespace's row is not purged")

            configuration.quarantineRetention = .seconds(3600)
            try await PostgresTokenStore.withStore(try TestDatabase.connection(), configuration: configuration) { _ in }
            #expect(try await TestSQL.values("SELECT name FROM \(schema).loginkit_quarantine", String.self) == [], "a day-old row is past an hour's retention")
        } catch {
            failure = error
        }
        try await TestSQL.run(["DROP SCHEMA \(schema) CASCADE"])
        if let failure { throw failure }
    }
}

/// The rules a transaction's second write keeps, and the configuration checks: no database needed.
@Suite
struct PostgresWriteAgainTests {
    typealias Row = PostgresTokenStore.Row

    let read = Row(format: 1, sealed: false, payload: [1], version: 3)
    let written = Row(format: 1, sealed: false, payload: [2], version: 4)

    /// A COMMIT that landed before its connection went leaves the rows as the writes leave them:
    /// then nothing is written again. Anything else is written again, with its version checks.
    @Test func writesAreMadeAgainUnlessTheirRowsAreThereAlready() {
        #expect(PostgresTokenStore.landed([.update(name: "a", written, expected: 3)], in: ["a": written]))
        #expect(!PostgresTokenStore.landed([.update(name: "a", written, expected: 3)], in: ["a": read]))
        #expect(!PostgresTokenStore.landed([.update(name: "a", written, expected: 3)], in: ["a": Row(format: 1, sealed: false, payload: [9], version: 4)]))
        #expect(PostgresTokenStore.landed([.delete(name: "a", expected: 3)], in: [:]))
        #expect(!PostgresTokenStore.landed([.delete(name: "a", expected: 3)], in: ["a": read]))
        // A row set aside and saved anew in one transaction: landed only with the new row there.
        let fresh = Row(format: 1, sealed: false, payload: [2], version: 1)
        let replaced: [PostgresTokenStore.Write] = [.quarantine(name: "a", expected: 3, reason: "does not decode"), .insert(name: "a", fresh)]
        #expect(!PostgresTokenStore.landed(replaced, in: ["a": read]))
        #expect(PostgresTokenStore.landed(replaced, in: ["a": fresh]))
    }

    @Test func aLostConnectionIsUnavailableAndSaysWhetherWritesMayHaveLanded() throws {
        var configuration = PostgresTokenStore.Configuration()
        configuration.sealing = .none
        let client = PostgresClient(configuration: .init(host: "127.0.0.1", username: "loginkit", password: nil, database: nil, tls: .disable))
        let store = try PostgresTokenStore(client: client, configuration: configuration)
        let beforeWrites = try #require(store.mapped(ConnectionLost()) as? TokenStoreError)
        #expect(beforeWrites.code == .unavailable)
        #expect(beforeWrites.message.contains("nothing was written"))
        let afterWrites = try #require(store.mapped(ConnectionLost(), writesHandedOver: true) as? TokenStoreError)
        #expect(afterWrites.code == .unavailable)
        #expect(afterWrites.message.contains("may or may not"))
        #expect(PostgresTokenStore.isConnectionFailure(ConnectionLost()))
        #expect(!PostgresTokenStore.isConnectionFailure(TokenStoreError(.conflict, path: "here", "changed")))
        #expect(!PostgresTokenStore.isConnectionFailure(CancellationError()))
    }

    @Test func aQuarantineRetentionMustBeLongerThanZero() throws {
        var configuration = PostgresTokenStore.Configuration()
        configuration.sealing = .none
        configuration.quarantineRetention = .zero
        let client = PostgresClient(configuration: .init(host: "127.0.0.1", username: "loginkit", password: nil, database: nil, tls: .disable))
        let error = #expect(throws: LoginError.self) { _ = try PostgresTokenStore(client: client, configuration: configuration) }
        #expect(error?.code == .invalidConfiguration)
    }
}
