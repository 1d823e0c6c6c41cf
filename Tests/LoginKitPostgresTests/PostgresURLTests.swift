@testable import LoginKitPostgres
import PostgresNIO
import Testing

/// What `connection(url:)` makes of a URL's host, and the SQL literals error messages suggest:
/// pure functions, no database needed.
@Suite
struct PostgresURLTests {
    @Test(arguments: ["localhost", "LocalHost", "127.0.0.1", "127.1.2.3", "127.255.255.254", "::1", "[::1]", "0:0:0:0:0:0:0:1", "0000::0001"])
    func loopbackAddressesGoWithoutTLSByDefault(_ host: String) {
        #expect(PostgresTokenStore.isLoopbackHost(host))
        #expect(PostgresTokenStore.defaultSSLMode(host: host) == "disable")
    }

    /// Names that only start like a loopback address are resolved by DNS and may be anywhere.
    @Test(arguments: [
        "127.db.example.com", "127.0.0.1.example.com", "127.example", "127", "127.1", "127.0.0", "127.0.0.256",
        "127.0.0.01", "0177.0.0.1", "0x7f.0.0.1", "128.0.0.1", "10.0.0.1", "::2", "::ffff:127.0.0.1", "::1%lo",
        "localhost.example.com", "db.example.com", "",
    ])
    func everyOtherHostRequiresTLSByDefault(_ host: String) {
        #expect(!PostgresTokenStore.isLoopbackHost(host))
        #expect(PostgresTokenStore.defaultSSLMode(host: host) == "require")
    }

    @Test func theURLsHostReachesTheClientWithoutBrackets() throws {
        let ipv6 = try PostgresTokenStore.connection(url: "postgres://app@[::1]:5433/tokens")
        #expect(ipv6.host == "::1")
        #expect(ipv6.port == 5433)
        #expect(ipv6.database == "tokens")
        let named = try PostgresTokenStore.connection(url: "postgres://app:secret@127.db.example.com/tokens")
        #expect(named.host == "127.db.example.com")
    }

    @Test func sqlLiteralsDoubleQuotesAndEscapeBackslashesAndControlCharacters() {
        #expect(sqlLiteral("default") == "'default'")
        #expect(sqlLiteral("o'brien") == "'o''brien'")
        #expect(sqlLiteral("x' OR name <> '") == "'x'' OR name <> '''")
        #expect(sqlLiteral(#"back\slash'"#) == #"E'back\\slash'''"#)
        #expect(sqlLiteral("line\nbreak\u{1B}[31m") == #"E'line\x0Abreak\x1B[31m'"#)
        #expect(sqlLiteral("caf\u{E9} \u{85}") == "E'caf\u{E9} \\u0085'")
    }
}
