@testable import LoginKitPostgres
import Foundation
import LoginKit
import LoginKitTestSupport
import PostgresNIO
import Testing

/// The owner check holds for a connection as a superuser too: for one, PostgreSQL's
/// `pg_has_role(owner, 'MEMBER')` is true whatever the owner, so that check alone took every
/// object another role made as the store's own.
@Suite(.enabled(if: TestDatabase.available, "needs PostgreSQL: make test starts one"), .timeLimit(.minutes(3)))
struct SecurityReviewPostgresTests {
    /// Where others may create, another role makes the table, quarantine table and change function
    /// first; a store that connects as a superuser (the test cluster's own role, and a common
    /// setup) refuses them, naming their owner, and writes nothing into the table — whose owner
    /// would read every profile, and whose trigger function would run as the superuser.
    @Test func aSuperuserConnectionRefusesObjectsAnotherRoleMadeFirst() async throws {
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let (squatter, schema) = ("squatter_su_\(suffix)", "squat_su_\(suffix)")
        try await TestSQL.run([
            "CREATE ROLE \(squatter) LOGIN",
            "CREATE SCHEMA \(schema)", "GRANT USAGE, CREATE ON SCHEMA \(schema) TO PUBLIC",
        ])
        var failure: (any Error)?
        do {
            #expect(try await TestSQL.values("SELECT rolsuper FROM pg_roles WHERE rolname = current_user", Bool.self) == [true])
            let configuration = TestDatabase.configuration(table: "\(schema).loginkit_profiles", readsFromMemory: false)
            try await PostgresTokenStore.withStore(try TestSQL.connection(as: squatter), configuration: configuration) { _ in }

            let refused = await thrown {
                try await PostgresTokenStore.withStore(try TestSQL.connection(), configuration: configuration) { store in
                    try await store.save(sampleProfile("superuser"), as: "default")
                }
            } as? TokenStoreError
            #expect(refused?.code == .wrongOwner, "\(String(describing: refused))")
            #expect(refused?.message.contains(squatter) == true)
            #expect(try await TestSQL.values("SELECT count(*) FROM \(schema).loginkit_profiles", Int64.self) == [0], "nothing was written there")
        } catch {
            failure = error
        }
        try await TestSQL.run(["DROP SCHEMA \(schema) CASCADE", "DROP OWNED BY \(squatter)", "DROP ROLE \(squatter)"])
        if let failure { throw failure }
    }
}
