// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
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
    /// Parameters, as libpq names them:
    /// - `sslmode`: `disable`; `prefer`/`allow` (TLS when the server offers it); `require` and
    ///   `verify-full` (TLS with the certificate chain *and* the host name verified — stricter than
    ///   libpq's `require`, which verifies nothing); `verify-ca` (the chain verified, not the name).
    ///   Without it: `disable` for a loopback host (`localhost`, an IPv4 address in `127.0.0.0/8`,
    ///   `::1`), `require` for any other — a token store does not talk in clear over a network by
    ///   default. A name that merely starts like an address (`127.db.example.com`) is not loopback.
    /// - `sslrootcert`: a PEM file of the CAs to trust instead of the system's (`system`: the system's).
    /// - `connect_timeout`: seconds (default 5 here). `application_name`: shown in `pg_stat_activity`.
    ///
    /// Any other parameter is refused rather than ignored (client certificates, `sslcert`/`sslkey`,
    /// are not supported). The pool is bounded by `maximumConnections` (default 4 here); change it
    /// on the result.
    ///
    /// - Throws: `TokenStoreError` `.io` for a URL that is not a PostgreSQL URL, an unknown
    ///   parameter or a CA file that cannot be read (the message never repeats the password).
    public static func connection(url text: String) throws(TokenStoreError) -> PostgresClient.Configuration {
        guard let url = URLComponents(string: text), url.scheme == "postgres" || url.scheme == "postgresql",
            let written = url.host, !written.isEmpty, let user = url.user, !user.isEmpty
        else {
            throw TokenStoreError(.io, path: "PostgreSQL URL", "the PostgreSQL URL must look like postgres://user[:password]@host[:port]/database")
        }
        let host = unbracketed(written)
        let database = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        var parameters: [String: String] = [:]
        for item in url.queryItems ?? [] {
            guard ["sslmode", "sslrootcert", "connect_timeout", "application_name"].contains(item.name) else {
                throw TokenStoreError(
                    .io, path: "PostgreSQL URL",
                    "the URL parameter \"\(item.name)\" is not supported (supported: sslmode, sslrootcert, connect_timeout, application_name)")
            }
            parameters[item.name] = item.value ?? ""
        }
        var verification = TLSConfiguration.makeClientConfiguration()
        if let roots = parameters["sslrootcert"], roots != "system" {
            guard !roots.isEmpty, access(roots, R_OK) == 0 else {
                throw TokenStoreError(.io, path: "PostgreSQL URL", "sslrootcert \"\(roots)\" does not exist or cannot be read")
            }
            verification.trustRoots = .file(roots)
        }
        let tls: PostgresClient.Configuration.TLS
        switch parameters["sslmode"] ?? defaultSSLMode(host: host) {
        case "disable": tls = .disable
        case "prefer", "allow": tls = .prefer(verification)
        case "require", "verify-full": tls = .require(verification)
        case "verify-ca":
            verification.certificateVerification = .noHostnameVerification
            tls = .require(verification)
        case let other:
            throw TokenStoreError(.io, path: "PostgreSQL URL", "sslmode \(other) is not one of disable, allow, prefer, require, verify-ca, verify-full")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: url.port ?? 5432, username: user, password: url.password,
            database: database.isEmpty ? nil : database, tls: tls)
        configuration.options.maximumConnections = 4
        configuration.options.connectTimeout = .seconds(5)
        if let timeout = parameters["connect_timeout"] {
            guard let seconds = Int(timeout), (1...3600).contains(seconds) else {
                throw TokenStoreError(.io, path: "PostgreSQL URL", "connect_timeout must be a number of seconds from 1 to 3600")
            }
            configuration.options.connectTimeout = .seconds(Int64(seconds))
        }
        if let name = parameters["application_name"], !name.isEmpty {
            configuration.options.additionalStartupParameters.append(("application_name", name))
        }
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
#endif
