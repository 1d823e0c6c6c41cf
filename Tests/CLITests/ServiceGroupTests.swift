import Foundation
import LoginKitTestSupport
import Testing

/// `AuthService` as a swift-service-lifecycle `Service` (LoginKitLifecycle), in a process of its own
/// so that the signal reaches a real `ServiceGroup`.
@Suite(.timeLimit(.minutes(1))) struct ServiceGroupTests {
    /// A group whose one service is an `AuthService` ends on SIGTERM, and the process exits 0.
    @Test func aGroupWithAnAuthServiceStopsOnSIGTERM() async throws {
        try await withTemporaryDirectory { directory in
            let child = try ServerChild(try testHelperPath(), ["service-group", directory + "/tokens.json"])
            #expect(await child.firstLine() == "ready")
            child.process.kill(.SIGTERM)
            // A group that does not stop keeps the child running: the time limit ends the test, and
            // cancelling the wait kills the child.
            let status = await child.exitStatus()
            #expect(status == 0, "the group did not stop on SIGTERM")
            child.closeStandardInput()
        }
    }
}
