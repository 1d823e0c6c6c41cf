import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// `loginkit profiles default NAME` for a row `token --resource` keeps for one target
/// (`<profile>#<32 hex digits>`): refused as a usage error, the store's default untouched.
@Suite(.timeLimit(.minutes(2)))
struct ProfilesDefaultCLITests {
    @Test func aTargetsRowIsRefusedAndTheDefaultStays() async throws {
        try await withDemoLoggedIn { server, _, storePath in
            let common = ["--store", storePath]
            try await logInDemo(at: server, common + ["--profile", "work"])
            let target = "work#" + String(repeating: "0123456789abcdef", count: 2)
            let store = try IDTokenStore(path: storePath)
            let work = try #require(try await store.profile(named: "work"))
            try await store.save(work, as: target)
            #expect(try await loginkit(["profiles", "default", "work"] + common).status == 0)

            let refused = try await loginkit(["profiles", "default", target] + common)
            #expect(refused.status == 2, "\(refused.all)")
            #expect(!refused.stderr.contains("is the default now"), "\(refused.stderr)")
            #expect(try await loginkit(["profiles", "default"] + common).stdout == "work\n")
            #expect(try await store.profile(named: target)?.attributes["default"] == nil)
        }
    }
}
