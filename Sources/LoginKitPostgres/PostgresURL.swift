#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import LoginKit
public import PostgresNIO
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension PostgresTokenStore {
    /// A client configuration from a `postgres://user:password@host:port/database?sslmode=…` URL.
    ///
    /// `sslmode`: `disable`, `prefer`, or `require`/`verify-full` (TLS with the certificate and host
    /// name verified against the system's CAs). Without it: `disable` for a loopback host
    /// (`localhost`, an IPv4 address in `127.0.0.0/8`, `::1`), `require` for any other — a token
    /// store does not talk in clear over a network by default. A name that merely starts like an
    /// address (`127.db.example.com`) is not loopback. The pool is bounded by `maximumConnections`
    /// (default 4 here) and connecting by `connectTimeout` (default 5 s here); change them on the
    /// result.
    ///
    /// - Throws: `TokenStoreError` `.io` for a URL that is not a PostgreSQL URL (the message
    ///   never repeats the password).
    public static func connection(url text: String) throws(TokenStoreError) -> PostgresClient.Configuration {
        guard let url = URLComponents(string: text), url.scheme == "postgres" || url.scheme == "postgresql",
            let written = url.host, !written.isEmpty, let user = url.user, !user.isEmpty
        else {
            throw TokenStoreError(.io, path: "PostgreSQL URL", "the PostgreSQL URL must look like postgres://user[:password]@host[:port]/database")
        }
        let host = unbracketed(written)
        let database = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        let mode = url.queryItems?.first { $0.name == "sslmode" }?.value
        let tls: PostgresClient.Configuration.TLS
        switch mode ?? defaultSSLMode(host: host) {
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

    /// The `sslmode` used when the URL names none: `disable` for a loopback host, else `require`.
    static func defaultSSLMode(host: String) -> String {
        isLoopbackHost(host) ? "disable" : "require"
    }

    /// Whether `host` is loopback by what it is, not by how it starts: `localhost` (any case), an
    /// IPv4 literal in `127.0.0.0/8` (four decimal octets, as `inet_pton` reads them: no short,
    /// octal or hexadecimal forms), or the IPv6 literal `::1` in any spelling, bracketed or not.
    /// Anything else — `127.db.example.com`, `::ffff:127.0.0.1`, `::1%lo` — is not, so it gets TLS.
    static func isLoopbackHost(_ host: String) -> Bool {
        let host = unbracketed(host).lowercased()
        if host == "localhost" { return true }
        var ipv4 = in_addr()
        if inet_pton(AF_INET, host, &ipv4) == 1 {
            return withUnsafeBytes(of: ipv4) { $0.first == 127 }  // network byte order: first octet first
        }
        var ipv6 = in6_addr()
        if inet_pton(AF_INET6, host, &ipv6) == 1 {
            return withUnsafeBytes(of: ipv6) { bytes in bytes.dropLast().allSatisfy { $0 == 0 } && bytes.last == 1 }
        }
        return false
    }

    /// `host` without the brackets of an IPv6 literal (`[::1]` → `::1`).
    static func unbracketed(_ host: String) -> String {
        guard host.count >= 2, host.hasPrefix("["), host.hasSuffix("]") else { return host }
        return String(host.dropFirst().dropLast())
    }
}
