import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitJOSE
import LoginKitPostgres
import LoginKitTestSupport
import PostgresNIO
import Testing

/// `loginkit --store postgres://…` (and `LOGINKIT_STORE`) against the PostgreSQL `make test` starts:
/// `loginkit` hands the run to `loginkit-fleet`, which keeps the profile in the database.
@Suite(
    .enabled(
        if: ProcessInfo.processInfo.environment["LOGINKIT_TEST_POSTGRES_URL"] != nil || ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_POSTGRES"] == "1",
        "needs PostgreSQL: make test starts one"),
    .timeLimit(.minutes(3)))
struct FleetStoreCLITests {
    let database = ProcessInfo.processInfo.environment["LOGINKIT_TEST_POSTGRES_URL"]

    /// The test database's URL with a namespace of the test's own.
    func storeURL(namespace: String) throws -> String {
        let url = try #require(database, "run through scripts/with-postgres.sh (make test does)")
        return url + "?namespace=\(namespace)"
    }

    /// The same table and namespace, opened by the test itself.
    @discardableResult
    func withTestStore<T>(namespace: String, key: SymmetricKey? = nil, _ body: (PostgresTokenStore) async throws -> T) async throws -> T {
        var configuration = PostgresTokenStore.Configuration()
        configuration.namespace = namespace
        configuration.sealing = key.map { .key($0) } ?? StoreSealing.none
        configuration.readsFromMemory = false
        return try await PostgresTokenStore.withStore(try PostgresTokenStore.connection(url: try #require(database)), configuration: configuration, body)
    }

    @Test func loginStatusTokenAndLogoutKeepTheProfileInTheDatabaseSealedAndRefreshOnceAcrossProcesses() async throws {
        let namespace = "cli-\(UUID().uuidString)"
        let key = try SymmetricKey.random()
        let environment = ["LOGINKIT_STORE": try storeURL(namespace: namespace), "LOGINKIT_STORE_KEY": Data(key.bytes).base64EncodedString()]
        try await DevServer.withServer { server in
            let login = try await loginkit(
                ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"],
                input: "demo\n", environment: environment)
            #expect(login.status == 0, "\(login.stderr)")

            let status = try await loginkit(["status"], environment: environment)
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("store:          postgres://loginkit@127.0.0.1:"))
            #expect(status.stdout.contains("(sealed)"))
            #expect(status.stdout.contains("namespace:      \(namespace)"))
            #expect(status.stdout.contains("quarantined:    none"))

            // The row is in the database, sealed: no token in it.
            let stored = try await withTestStore(namespace: namespace, key: key) { store in
                let rows = try await store.client.query("SELECT payload FROM loginkit_profiles WHERE namespace = \(namespace) AND name = 'default'")
                for try await payload in rows.decode(ByteBuffer.self) {
                    #expect(!String(decoding: payload.readableBytesView, as: UTF8.self).contains("eyJ"))
                }
                return try await store.profile(named: "default")
            }
            let token = try await loginkit(["token"], environment: environment)
            #expect(token.status == 0)
            #expect(token.stdout.trimmingCharacters(in: .newlines) == stored?.credentials.idToken?.rawValue)

            // Expired, two processes at once, the provider slow: one refresh.
            try await withTestStore(namespace: namespace, key: key) { store in try await expireStoredCredentials(in: store) }
            server.monitor.reset()
            server.monitor.injectFaults([.delay(milliseconds: 2000)], path: "/oauth/token")
            async let first = loginkit(["token", "--access"], environment: environment)
            async let second = loginkit(["token", "--access"], environment: environment)
            let (a, b) = try await (first, second)
            #expect(a.status == 0 && b.status == 0, "\(a.stderr) \(b.stderr)")
            #expect(a.stdout == b.stdout)
            #expect(server.monitor.requestCount(path: "/oauth/token") == 1)

            let logout = try await loginkit(["logout"], environment: environment)
            #expect(logout.status == 0, "\(logout.stderr)")
            let names = try await withTestStore(namespace: namespace, key: key) { store in try await store.profileNames() }
            #expect(names.isEmpty)
        }
    }

    /// A corrupt row: `status` says where it goes, the next login sets it aside, `status` and
    /// `store quarantine list` show it, `store quarantine purge --all` deletes it.
    @Test func aCorruptRowIsQuarantinedByTheNextLoginShownAndPurged() async throws {
        let namespace = "cli-\(UUID().uuidString)"
        let store = ["--store", try storeURL(namespace: namespace), "--profile", "broken"]
        try await withTestStore(namespace: namespace) { store in
            try await store.client.query(
                """
                INSERT INTO loginkit_profiles (namespace, name, format, sealed, payload, version)
                VALUES (\(namespace), 'broken', 1, false, convert_to('garbage', 'UTF8'), 1)
                """)
        }
        let before = try await loginkit(["status"] + store)
        #expect(before.status == 1)
        #expect(before.stderr.contains("loginkit_quarantine"), "\(before.stderr)")
        try await DevServer.withServer { server in
            let login = try await loginkit(
                ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"] + store, input: "demo\n")
            #expect(login.status == 0, "\(login.stderr)")
        }
        let after = try await loginkit(["status", "--json"] + store)
        #expect(after.status == 0, "\(after.stderr)")
        let fields = try #require(try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [String: Any])
        #expect((fields["quarantined"] as? String)?.hasPrefix("1 row(s) of \"broken\"") == true, "\(after.stdout)")
        let kept = try await withTestStore(namespace: namespace) { store in try await store.quarantinedRows() }
        #expect(kept.map(\.name) == ["broken"])

        // `store quarantine list` shows the row (never its payload); `purge --all` deletes it.
        let listed = try await loginkit(["store", "quarantine", "list", "--json"] + store)
        #expect(listed.status == 0, "\(listed.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]], "\(listed.stdout)")
        #expect(rows.map { $0["profile"] as? String } == ["broken"])
        #expect((rows.first?["id"] as? Int).map { Int64($0) } == kept.first?.id)
        #expect((rows.first?["quarantined_at"] as? String) != nil && (rows.first?["reason"] as? String) != nil)
        let text = try await loginkit(["store", "quarantine", "list"] + store)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("  broken  "), "\(text.stdout)")
        #expect(!listed.all.contains("garbage") && !text.all.contains("garbage"))

        let purge = try await loginkit(["store", "quarantine", "purge", "--all"] + store)
        #expect(purge.status == 0, "\(purge.stderr)")
        #expect(purge.stderr.contains("Deleted 1 row(s) from the quarantine table."), "\(purge.stderr)")
        let emptied = try await loginkit(["store", "quarantine", "list", "--json"] + store)
        #expect(emptied.status == 0, "\(emptied.stderr)")
        let remaining = try #require(try JSONSerialization.jsonObject(with: Data(emptied.stdout.utf8)) as? [Any], "\(emptied.stdout)")
        #expect(remaining.isEmpty)
    }

    /// `store quarantine` reads a database's quarantine table: a file store, or a purge that says
    /// neither `--all` nor `--id`, is a usage error.
    @Test func storeQuarantineIsForPostgresStoresAndPurgeNamesItsRows() async throws {
        try await withTemporaryDirectory { directory in
            let file = try await loginkit(["store", "quarantine", "list", "--store", directory + "/tokens.json"])
            #expect(file.status == 2)
            #expect(file.stderr.contains("postgres://"), "\(file.stderr)")
        }
        let unnamed = try await loginkit(["store", "quarantine", "purge", "--store", try storeURL(namespace: "none")])
        #expect(unnamed.status == 2, "\(unnamed.stderr)")
    }

    @Test func aPasswordOnTheCommandLineAndUnknownParametersAreUsageErrors() async throws {
        let url = try #require(database)
        let withPassword = url.replacingOccurrences(of: "postgres://loginkit@", with: "postgres://loginkit:hunter2@")
        let flagged = try await loginkit(["status", "--store", withPassword])
        #expect(flagged.status == 2)
        #expect(flagged.stderr.contains("PGPASSWORD"))
        #expect(!flagged.all.contains("hunter2"))
        let unknown = try await loginkit(["status", "--store=\(url)?sslcert=/tmp/x"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("sslcert"))
    }

    /// `loginkit` alone (no `loginkit-fleet` beside it) says what is missing instead of failing oddly.
    @Test func withoutLoginkitFleetBesideItLoginkitSaysSo() async throws {
        try await withTemporaryDirectory { directory in
            let lonely = directory + "/loginkit"
            #expect(await run("/bin/cp", [try loginkitPath(), lonely]) == 0)
            let result = try await loginkit(["status", "--store", try storeURL(namespace: "none")], executable: lonely)
            #expect(result.status == 2)
            #expect(result.stderr.contains("needs loginkit-fleet"), "\(result.stderr)")
            // Commands that open no store run in loginkit itself, whatever LOGINKIT_STORE says.
            let help = try await loginkit(["--version"], environment: ["LOGINKIT_STORE": try storeURL(namespace: "none")], executable: lonely)
            #expect(help.status == 0, "\(help.stderr)")
        }
    }
}

