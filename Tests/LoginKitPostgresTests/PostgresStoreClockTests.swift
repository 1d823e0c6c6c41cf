import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import LoginKit
import LoginKitMocks
import LoginKitPostgres
import LoginKitTestSupport
import PostgresNIO
import Testing

/// What the store checks and how long it waits, without a database: a listener that never answers
/// stands in for an unreachable PostgreSQL.
@Suite(.timeLimit(.minutes(3)))
struct PostgresStoreClockTests {
    /// The server takes the connection and never answers: only the operation timeout, moved on the
    /// manual clock, can end the read (on the system clock it would take 10 s).
    @Test func theOperationTimeoutRunsOnTheConfiguredClock() async throws {
        try await withSilentListener { port in
            let clock = ManualClock()
            var configuration = PostgresTokenStore.Configuration()
            configuration.sealing = .none
            configuration.clock = clock
            let client = PostgresClient(configuration: try PostgresTokenStore.connection(url: "postgres://loginkit@127.0.0.1:\(port)/postgres"))
            let store = try PostgresTokenStore(client: client, configuration: configuration)
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await client.run() }
                defer { group.cancelAll() }
                async let code = (thrown { try await store.profile(named: "default") } as? TokenStoreError)?.code
                await clock.waitForSleepers()
                #expect(clock.sleptDurations == [configuration.operationTimeout])
                clock.advance(by: configuration.operationTimeout)
                #expect(await code == .unavailable)
            }
        }
    }

    /// A table name is spliced into SQL, so it is checked; a bad one is the caller's configuration,
    /// not a failure of the store.
    @Test func aTableNameThatIsNotSchemaDotNameIsAConfigurationError() throws {
        var configuration = PostgresTokenStore.Configuration()
        configuration.sealing = .none
        configuration.table = "profiles; DROP TABLE users"
        let client = PostgresClient(configuration: .init(host: "127.0.0.1", username: "loginkit", password: nil, database: nil, tls: .disable))
        let error = #expect(throws: LoginError.self) { _ = try PostgresTokenStore(client: client, configuration: configuration) }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("PostgresTokenStore.Configuration.table") == true)
    }
}

/// Runs `body` with the port of a TCP listener on 127.0.0.1 that never accepts: connections complete
/// into its backlog, and then hear nothing.
func withSilentListener<T>(_ body: (Int) async throws -> T) async throws -> T {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(descriptor >= 0)
    defer { close(descriptor) }
    let port = try #require(bindToLoopback(descriptor, listen: true))
    return try await body(port)
}
