// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Logging
import PostgresNIO

extension PostgresTokenStore {
    /// A row of this store's table and namespace that did not decode, as set aside in the
    /// quarantine table. The payload stays in the database (for a person to look at); it is not
    /// read back here.
    public struct QuarantinedRow: Sendable, Hashable {
        /// The profile the row was stored as.
        public var name: String
        /// The row's version when it was moved.
        package var version: Int64
        /// When it was moved.
        public var quarantinedAt: Date
        /// Why: what did not decode.
        public var reason: String
    }

    /// The rows of this table and namespace that were set aside, oldest first. They stay until an
    /// operator removes them (`DELETE FROM loginkit_quarantine WHERE …`).
    public func quarantinedRows() async throws -> [QuarantinedRow] {
        let query: PostgresQuery = """
            SELECT name, version, quarantined_at, reason FROM \(unescaped: quarantineTable)
            WHERE source_table = (SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                                  WHERE c.oid = to_regclass(\(table)))
                AND namespace = \(configuration.namespace) ORDER BY id
            """
        return try await withDeadline(configuration.operationTimeout) { [client, logger = configuration.logger] in
            var rows: [QuarantinedRow] = []
            for try await (name, version, quarantinedAt, reason) in try await client.query(query, logger: logger).decode((String, Int64, Date, String).self) {
                rows.append(QuarantinedRow(name: name, version: version, quarantinedAt: quarantinedAt, reason: reason))
            }
            return rows
        }
    }
}
#endif
