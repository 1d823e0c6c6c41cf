import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// `loginkit token --force-refresh`: a refresh even while the token is valid, shared by the
/// invocations that run at once.
@Suite(.timeLimit(.minutes(3)))
struct ForceRefreshCLITests {
    /// Four processes at once, the token valid, the provider slow: one token request, and all four
    /// print the same new token — the one the store then holds. A forced refresh after that one
    /// has ended is a refresh of its own.
    @Test func concurrentForcedRefreshesShareOneRefresh() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let path = directory + "/tokens.json"
                let common = ["--store", path]
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"] + common,
                    input: "demo\n")
                try #require(login.status == 0, "\(login.stderr)")
                let before = try #require(try await IDTokenStore(path: path, sealing: .none).profile(named: "default")?.credentials.accessToken)

                server.monitor.reset()
                // Four invocations started while the test holds the store's lock: each started before
                // any replacement could be issued (the refresh needs the lock), so they share one.
                let store = try IDTokenStore(path: path, sealing: .none)
                let children = try await loginkitChildrenStartedUnderLock(of: store, count: 4, ["token", "--access", "--force-refresh"] + common)
                var runs: [Run] = []
                for child in children {
                    var output = ""
                    for await line in child.lines { output += line + "\n" }
                    runs.append(Run(status: await child.waitForExit(), stdout: output, stderr: ""))
                }
                #expect(runs.allSatisfy { $0.status == 0 }, "\(runs.map(\.status))")
                let tokens = Set(runs.map { $0.stdout.trimmingCharacters(in: .newlines) })
                let stored = try #require(try await IDTokenStore(path: path, sealing: .none).profile(named: "default")?.credentials.accessToken)
                #expect(tokens == [stored], "all four print the one new token")
                #expect(stored != before)
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1)

                let again = try await loginkit(["token", "--access", "--force-refresh"] + common)
                #expect(again.status == 0, "\(again.stderr)")
                #expect(again.stdout.trimmingCharacters(in: .newlines) != stored)
                #expect(server.monitor.requestCount(path: "/oauth/token") == 2)

                let target = try await loginkit(["token", "--force-refresh", "--resource", "https://api.example/"] + common)
                #expect(target.status == 2, "\(target.all)")
            }
        }
    }
}
