#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import LoginKit
public import PostgresNIO

extension PostgresTokenStore {
    /// A client configuration from a `postgres://user:password@host:port/database?sslmode=…` URL.
    ///
    /// `sslmode`: `disable`, `prefer`, or `require`/`verify-full` (TLS with the certificate and host
    /// name verified against the system's CAs). Without it: `disable` for a loopback host,
    /// `require` for any other — a token store does not talk in clear over a network by default.
    /// The pool is bounded by `maximumConnections` (default 4 here) and connecting by
    /// `connectTimeout` (default 5 s here); change them on the result.
    ///
    /// - Throws: `TokenStoreError` `.io` for a URL that is not a PostgreSQL URL (the message
    ///   never repeats the password).
    public static func connection(url text: String) throws(TokenStoreError) -> PostgresClient.Configuration {
        guard let url = URLComponents(string: text), url.scheme == "postgres" || url.scheme == "postgresql",
            let host = url.host, !host.isEmpty, let user = url.user, !user.isEmpty
        else {
            throw TokenStoreError(.io, path: "PostgreSQL URL", "the PostgreSQL URL must look like postgres://user[:password]@host[:port]/database")
        }
        let database = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        let mode = url.queryItems?.first { $0.name == "sslmode" }?.value
        let loopback = host == "localhost" || host == "::1" || host.hasPrefix("127.")
        let tls: PostgresClient.Configuration.TLS
        switch mode ?? (loopback ? "disable" : "require") {
        case "disable": tls = .disable
        case "prefer", "allow": tls = .prefer(.makeClientConfiguration())
        case "require", "verify-ca", "verify-full": tls = .require(.makeClientConfiguration())
        case let other:
            throw TokenStoreError(.io, path: "PostgreSQL URL", "sslmode \(other) is not one of disable, prefer, require, verify-full")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: url.port ?? 5432, username: user, password: url.password,
            database: database.isEmpty ? nil : database, tls: tls)
        configuration.options.maximumConnections = 4
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }
}
