import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// Eight processes (the test helper) ask for a token at once with an expired one stored: the
/// store's lock makes them refresh once.
@Suite(.timeLimit(.minutes(3)))
struct MultiProcessRefreshTests {
    @Test func eightProcessesMakeOneTokenRequest() async throws {
        let helper = try testHelperPath()
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await DevServer.withServer { server in
                try await CurlHTTPClient.withClient { client in
                    let api = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-cli"), transport: client)
                    let store = try IDTokenStore(path: path, sealing: .none)
                    _ = try await AuthService(api: api, store: store).logIn(for: User.ID(rawValue: "demo"), with: "demo")
                    try await expireStoredCredentials(in: store)
                    server.monitor.reset()
                    // A slow refresh: every process finds the token expired while it runs, so only
                    // the lock keeps the others from refreshing too.
                    server.monitor.injectFaults([.delay(milliseconds: 2000)], path: "/oauth/token")

                    let children = try (0..<8).map { _ in try ChildProcess(helper, ["token", path, server.issuer, "loginkit-cli"]) }
                    var tokens: Set<String> = []
                    for child in children {
                        var lines = child.lines.makeAsyncIterator()
                        if let line = await lines.next() { tokens.insert(line) }
                        #expect(await child.waitForExit() == 0)
                    }
                    #expect(server.monitor.requestCount(path: "/oauth/token") == 1)
                    #expect(tokens.count == 1)
                    #expect(tokens.first == (try await store.profile(named: "default"))?.credentials.idToken?.rawValue)
                }
            }
        }
    }
}
