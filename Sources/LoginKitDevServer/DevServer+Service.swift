// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
public import ServiceLifecycle

extension DevServer: Service {
    /// Serves until the service group running it shuts down, then returns with the server stopped.
    ///
    /// The server already listens when ``start(configuration:)`` returns (so its port is known before
    /// the group starts); `run()` ties its end to the group's. A graceful shutdown stops accepting
    /// connections and lets the requests in progress finish; cancelling the task stops as ``stop()``
    /// does (the requests in progress get one second: a `ServiceGroup` whose
    /// `maximumCancellationDuration` is shorter ends the process first). Returns at once when the
    /// server was already stopped, and early when it stops for another reason (``stop()`` from
    /// elsewhere, a failure).
    public func run() async throws {
        let task = lifecycle.withLock { $0.running }
        let services = self.services
        await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Returns on graceful shutdown; throws when cancelled, below, once the server has stopped.
                    guard (try? await gracefulShutdown()) != nil else { return }
                    await services.triggerGracefulShutdown()
                }
                await task.value
                group.cancelAll()
            }
        } onCancel: {
            // As `stop()` does: accepted connections are served, then what is left is cancelled.
            Task { await self.stop() }
        }
        await stop()
    }
}
#endif
