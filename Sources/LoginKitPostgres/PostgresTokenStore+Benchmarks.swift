// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres

extension PostgresTokenStore {
    /// The store's change generation: it moves on every change notification the store handles,
    /// every write through it and every start or loss of its listener. For the benchmarks
    /// (`Benchmarks/`, `@_spi(Benchmarks) import LoginKitPostgres`), which time a change's way to
    /// many stores; not API.
    @_spi(Benchmarks) public var benchmarkChangeGeneration: UInt64 { changes.generation }

    /// Returns once ``run()`` listens and the change generation is no longer `generation` (`nil`:
    /// as soon as it listens); throws `TokenStoreError` `.unavailable` after `timeout`, or on
    /// cancellation. For the benchmarks (`Benchmarks/`), which wait on a notification's arrival
    /// without polling; not API.
    @_spi(Benchmarks) public func benchmarkAwaitChange(after generation: UInt64?, timeout: Duration) async throws {
        try await changes.wait(timeout: timeout) { listening, current in listening && current != generation }
    }
}
#endif
