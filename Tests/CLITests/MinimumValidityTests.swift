import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// A minimum validity the provider cannot grant: a provider that issues 45-second access tokens
/// with rotating refresh tokens, one logged-in profile, ten `loginkit token --access
/// --min-validity 3000` processes at once. One refresh and ten identical tokens, every round
/// (`LOGINKIT_MIN_VALIDITY_ROUNDS`, default 3; set it higher for a longer run).
@Suite(.timeLimit(.minutes(3)))
struct MinimumValidityTests {
    @Test func tenProcessesAskingMoreThanTheProviderGrantsRefreshOnce() async throws {
        let rounds = Int(ProcessInfo.processInfo.environment["LOGINKIT_MIN_VALIDITY_ROUNDS"] ?? "") ?? 3
        var configuration = DevServer.Configuration.quiet
        configuration.identityProvider.accessTokenLifetime = .seconds(45)
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer(configuration: configuration) { server in
                let path = directory + "/tokens.json"
                let common = ["--store", path]
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"] + common, input: "demo\n")
                #expect(login.status == 0, "\(login.stderr)")
                let store = try IDTokenStore(path: path)
                for round in 1...rounds {
                    try await expireStoredCredentials(in: store)
                    server.monitor.reset()
                    // Hold the refresh so that the processes overlap it: some read the store
                    // before it is saved, some after.
                    server.monitor.injectFaults([.delay(milliseconds: 200)], path: "/oauth/token")
                    let runs = try await withThrowingTaskGroup(of: Run.self) { group in
                        for _ in 0..<10 {
                            group.addTask { try await loginkit(["token", "--access", "--min-validity", "3000"] + common) }
                        }
                        return try await group.reduce(into: [Run]()) { $0.append($1) }
                    }
                    let failures = runs.filter { $0.status != 0 }.map(\.stderr)
                    #expect(failures.isEmpty, "round \(round): \(failures.prefix(3))")
                    let tokens = Set(runs.map { $0.stdout.trimmingCharacters(in: .newlines) })
                    #expect(tokens.count == 1, "round \(round): \(tokens.count) distinct tokens")
                    #expect(server.monitor.requestCount(path: "/oauth/token") == 1, "round \(round)")
                    if !failures.isEmpty || tokens.count != 1 { break }
                }
            }
        }
    }
}
