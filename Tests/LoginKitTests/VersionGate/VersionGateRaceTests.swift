import Foundation
import LoginKit
import LoginKitMocks
import Testing

/// Concurrent checks during the version gate's first fetch wait for it: the gate never fails open.
@Suite(.timeLimit(.minutes(3)))
struct VersionGateRaceTests {
    @Test func checksDuringTheFirstFetchWaitForIt() async throws {
        let transport = MockHTTPTransport()
        var configuration = VersionGate.Configuration(url: "https://policy.test/minimum.json", currentVersion: SemanticVersion(major: 1))
        configuration.failsClosed = true
        let gate = VersionGate(configuration: configuration, transport: transport, clock: ManualClock())
        let first = Task { try await gate.check() }
        let request = await transport.nextRequest()
        let second = Task { try await gate.check() }  // arrives while the first fetch is under way
        let third = Task { try await gate.check() }
        request.resume(returning: (
            HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]),
            Data(#"{"title":"Update","message":"Please update","version":"9.0.0"}"#.utf8)
        ))
        for check in [first, second, third] {
            #expect((await thrown(check) as? LoginError)?.code == .upgradeRequired)
        }
        #expect(transport.requestCount == 1)
        transport.verify()
    }

    func thrown(_ task: Task<Void, any Error>) async -> (any Error)? {
        do {
            try await task.value
            return nil
        } catch {
            return error
        }
    }
}
