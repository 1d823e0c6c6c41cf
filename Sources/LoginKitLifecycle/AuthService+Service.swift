// Built with LoginKit's "Lifecycle" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Lifecycle
public import LoginKit
public import ServiceLifecycle

extension AuthService: Service {
    /// Runs until the service group shuts down, then shuts the service down.
    ///
    /// On the group's graceful shutdown (SIGTERM, `triggerGracefulShutdown()`) or when the task is
    /// cancelled, this stops the proactive refresh of held sessions and waits for a refresh whose
    /// request has already left, as ``AuthService/shutdown()`` does: rotated tokens are saved before
    /// the group finishes. Token calls keep working afterwards, without background refreshes.
    public func run() async throws {
        // Returns on graceful shutdown and throws when the task is cancelled: either way, the end.
        try? await gracefulShutdown()
        await shutdown()
    }
}
#endif
