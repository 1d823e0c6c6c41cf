@testable import LoginKitPostgres
import LoginKit
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

    /// A cancelled caller gets `CancellationError` for what the pool says (a cancelled connection
    /// request, a closed connection), not `.unavailable`; typed store errors stay as they are, and so
    /// does a failure after a transaction's writes were handed over (its COMMIT may have happened).
    @Test func aCancelledCallerGetsCancellationUnlessItsWritesWereHandedOver() async throws {
        struct PoolFailure: Error {}
        let client = PostgresClient(configuration: try PostgresTokenStore.connection(url: "postgres://app@127.0.0.1:1/tokens"))
        var configuration = PostgresTokenStore.Configuration()
        configuration.sealing = .none
        let store = try PostgresTokenStore(client: client, configuration: configuration)
        #expect((store.mapped(PoolFailure()) as? TokenStoreError)?.code == .unavailable)
        let lockFailed = TokenStoreError(.lockFailed, path: "here", "not granted")
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return (store.mapped(PoolFailure()), store.mapped(PoolFailure(), writesHandedOver: true), store.mapped(lockFailed))
        }
        let (pool, handedOver, typed) = await cancelled.value
        #expect(pool is CancellationError)
        #expect((handedOver as? TokenStoreError)?.code == .unavailable)
        #expect((typed as? TokenStoreError)?.code == .lockFailed)
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

/// The rule that keeps memory from serving a row that changed while it was being read: pure, no
/// database needed.
@Suite
struct StoreChangesTests {
    @Test func aReadThatRacedAChangeIsNotRemembered() {
        let changes = StoreChanges()
        changes.setListening(true)
        let generation = changes.beginRead()
        changes.notified("default")  // the change lands while the read's query is under way
        changes.remember(sampleProfileForChanges, as: "default", readUnder: generation)
        #expect(changes.cached("default") == nil)

        let clean = changes.beginRead()
        changes.remember(sampleProfileForChanges, as: "default", readUnder: clean)
        #expect(changes.cached("default") == .some(sampleProfileForChanges))
        changes.notified("other")
        #expect(changes.cached("default") == .some(sampleProfileForChanges), "another profile's change keeps this one")
        changes.invalidateAll()
        #expect(changes.cached("default") == nil)
    }

    @Test func nothingIsRememberedOrServedWhileNotListening() {
        let changes = StoreChanges()
        #expect(changes.beginRead() == nil)
        changes.remember(nil, as: "default", readUnder: changes.generation)
        #expect(changes.cached("default") == nil)
        #expect(changes.stamp() != changes.stamp())

        changes.setListening(true)
        changes.remember(nil, as: "default", readUnder: changes.beginRead())
        #expect(changes.cached("default") == .some(nil), "an absence is remembered too")
        let stamp = changes.stamp()
        #expect(changes.stamp() == stamp)
        let before = changes.beginRead()
        changes.setListening(false)
        changes.setListening(true)
        #expect(changes.cached("default") == nil, "memory starts over with a new listener")
        changes.remember(nil, as: "default", readUnder: before)
        #expect(changes.cached("default") == nil, "a read from before the listener came back is not remembered")
    }
}

private let sampleProfileForChanges = StoredProfile(
    credentials: Credentials(accessToken: "access", refreshToken: nil, expiresAt: nil),
    source: CredentialSource(kind: .oauth2, endpoint: "https://issuer.test", clientID: "cli"))
