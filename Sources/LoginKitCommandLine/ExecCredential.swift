// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What `loginkit token --exec-credential` prints: kubectl's exec credential plugin answer,
/// `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{…}}`, with
/// the token in `status.token` and its expiry in `status.expirationTimestamp` (RFC 3339, UTC), so
/// that kubectl caches it until then and runs `loginkit` again afterwards. See docs/cli.md.
enum ExecCredential {
    private struct Document: Encodable {
        let apiVersion: String
        let kind: String
        let status: Status
    }

    private struct Status: Encodable {
        let token: String
        /// Left out when the expiry is unknown: kubectl then uses the token until it is refused.
        let expirationTimestamp: String?
    }

    /// The ExecCredential JSON for `token`, one line, keys sorted, no escaped slashes.
    ///
    /// - Throws: `EncodingError` (not expected for strings).
    static func json(token: String, expiresAt: Date?) throws -> String {
        let document = Document(
            apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential",
            status: Status(token: token, expirationTimestamp: expiresAt.map { Self.timestamp($0) })
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(document), as: UTF8.self)
    }

    /// `date` in RFC 3339 UTC, whole seconds: `2026-11-23T10:00:00Z`.
    static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}
#endif
