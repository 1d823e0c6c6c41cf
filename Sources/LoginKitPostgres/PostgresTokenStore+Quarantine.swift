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
        /// The row's number in the quarantine table.
        package var id: Int64
        /// The profile the row was stored as.
        public var name: String
        /// The row's version when it was moved.
        package var version: Int64
        /// When it was moved.
        public var quarantinedAt: Date
        /// Why: what did not decode.
        public var reason: String
    }

    /// The rows of this table and namespace that were set aside, oldest first. Each is kept for
    /// ``Configuration/quarantineRetention`` (30 days by default), or until purged
    /// (`loginkit store quarantine purge`).
    public func quarantinedRows() async throws -> [QuarantinedRow] {
        let objects = try await storeObjects()
        let query: PostgresQuery = """
            SELECT id, name, version, quarantined_at, reason FROM \(unescaped: objects.quarantine)
            WHERE source_table = \(objects.sourceTable) AND namespace = \(configuration.namespace) ORDER BY id
            """
        return try await withDeadline(configuration.operationTimeout) { [client, logger = configuration.logger] in
            var rows: [QuarantinedRow] = []
            for try await (id, name, version, quarantinedAt, reason) in try await client.query(query, logger: logger).decode((Int64, String, Int64, Date, String).self) {
                rows.append(QuarantinedRow(id: id, name: name, version: version, quarantinedAt: quarantinedAt, reason: reason))
            }
            return rows
        }
    }

    /// Deletes rows of this table and namespace from the quarantine table: those numbered `ids`
    /// (``QuarantinedRow/id``), or every one (`nil`). Rows of other tables and namespaces are
    /// left alone.
    ///
    /// - Returns: how many rows were deleted.
    package func purgeQuarantinedRows(ids: [Int64]? = nil) async throws -> Int {
        let objects = try await storeObjects()
        let namespace = configuration.namespace
        let query: PostgresQuery
        if let ids {
            query = """
                DELETE FROM \(unescaped: objects.quarantine)
                WHERE source_table = \(objects.sourceTable) AND namespace = \(namespace) AND id = ANY(\(ids)) RETURNING id
                """
        } else {
            query = "DELETE FROM \(unescaped: objects.quarantine) WHERE source_table = \(objects.sourceTable) AND namespace = \(namespace) RETURNING id"
        }
        return try await withDeadline(configuration.operationTimeout) { [client, logger = configuration.logger] in
            var count = 0
            for try await _ in try await client.query(query, logger: logger).decode(Int64.self) { count += 1 }
            return count
        }
    }
}
#endif
