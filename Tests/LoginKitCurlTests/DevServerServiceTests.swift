import HTTPTypes
import LoginKitCurl
import LoginKitDevServer
import LoginKitHTTP
import Logging
import ServiceLifecycle
import Testing

/// `DevServer` as a swift-service-lifecycle `Service`: it serves while its group runs, and a
/// graceful shutdown lets a request in progress finish before the server stops.
@Suite(.timeLimit(.minutes(2)))
struct DevServerServiceTests {
    let logger = Logger(label: "loginkit.test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func aGracefulShutdownFinishesTheRequestInProgressThenStops() async throws {
        try await withServerAndClient { server, client in
            let group = ServiceGroup(services: [server], logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let arrivals = server.monitor.arrivals()
                // Long enough that a shutdown by cancellation would cut it off.
                async let inProgress = client.send(.get, server.url("/test/delay/1000"))
                await awaitArrival(of: "/test/delay/1000", in: arrivals)
                await group.triggerGracefulShutdown()
                let (response, _) = try await inProgress
                #expect(response.status == .ok)
                try await tasks.waitForAll()  // the group is done, so run() has returned
            }
            // Stopped: the port no longer answers.
            await #expect(throws: NetworkError.self) { _ = try await client.send(.get, server.url("/test/echo")) }
        }
    }

    @Test func cancellingTheGroupStopsTheServer() async throws {
        try await withServerAndClient { server, client in
            let group = ServiceGroup(services: [server], logger: logger)
            let running = Task { try await group.run() }
            let (response, _) = try await client.send(.get, server.url("/test/echo"))
            #expect(response.status == .ok)
            running.cancel()
            _ = await running.result  // whatever the group reports for a cancellation, run() has returned
            await #expect(throws: NetworkError.self) { _ = try await client.send(.get, server.url("/test/echo")) }
        }
    }
}
