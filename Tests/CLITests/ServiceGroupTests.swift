import Foundation
import LoginKitTestSupport
import Testing

/// `AuthService` as a swift-service-lifecycle `Service` (LoginKitLifecycle), in a process of its own
/// so that the signal reaches a real `ServiceGroup`.
@Suite struct ServiceGroupTests {
    /// A group whose one service is an `AuthService` ends on SIGTERM, and the process exits 0.
    @Test func aGroupWithAnAuthServiceStopsOnSIGTERM() async throws {
        try await withTemporaryDirectory { directory in
            let child = try ServerChild(try testHelperPath(), ["service-group", directory + "/tokens.json"])
            #expect(await child.firstLine() == "ready")
            child.process.kill(.SIGTERM)
            // Bounded: a group that does not stop fails the test after 30 s (the child is killed).
            let status = try await withThrowingTaskGroup(of: Int32?.self) { group in
                group.addTask { await child.exitStatus() }
                group.addTask {
                    try await ContinuousClock().sleep(for: .seconds(30))
                    return nil
                }
                defer { group.cancelAll() }
                return try await group.next() ?? nil
            }
            #expect(status == 0, "the group did not stop within 30 s of SIGTERM")
            child.closeStandardInput()
        }
    }
}
