import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// `loginkit logout` says what happened at the provider and in the store, with an exit code a
/// script can act on: 0 revoked (or nothing to log out), 8 deleted here but not revoked there,
/// 1 the store could not be changed.
@Suite(.timeLimit(.minutes(3)))
struct LogoutCLITests {
    /// The login every test starts from: demo at the dev server, into `store`, as `profile`.
    private func logIn(_ server: DevServer, store: String, profile: String = "default") async throws {
        let login = try await loginkit(
            ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin",
             "--store", store, "--profile", profile],
            input: "demo\n")
        try #require(login.status == 0, "\(login.stderr)")
    }

    /// The JSON object `run` printed on stdout.
    private func json(_ run: Run) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.all)")
    }

    @Test func aRevocationTheProviderAcceptsIsSaidInOneLineAndInJSON() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let store = directory + "/tokens.json"
                try await logIn(server, store: store)
                try await logIn(server, store: store, profile: "scripted")

                let logout = try await loginkit(["logout", "--store", store])
                #expect(logout.status == 0, "\(logout.stderr)")
                #expect(logout.stderr == "Logged out of \"default\"; the provider revoked the tokens.\n", "\(logout.stderr)")
                #expect(logout.stdout.isEmpty)

                let scripted = try await loginkit(["logout", "--json", "--store", store, "--profile", "scripted"])
                #expect(scripted.status == 0, "\(scripted.stderr)")
                let object = try json(scripted)
                #expect(object["profile"] as? String == "scripted")
                #expect(object["revocation"] as? String == "revoked")
                #expect(object["deleted"] as? Bool == true)
                #expect(server.monitor.requestCount(path: "/oauth/revoke") == 4)  // refresh and access token, twice
                #expect(try await loginkit(["status", "--store", store, "--profile", "scripted"]).status == 3)
            }
        }
    }

    /// The provider refuses the revocation (as real providers refuse public clients, 401): the
    /// profile is deleted here all the same, and the exit code and the line say the refresh token
    /// may stay valid at the provider.
    @Test func aRefusedRevocationDeletesTheProfileAndExits8() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let store = directory + "/tokens.json"
                try await logIn(server, store: store)
                try await logIn(server, store: store, profile: "scripted")

                server.monitor.injectFaults([.status(401)], path: "/oauth/revoke")
                let logout = try await loginkit(["logout", "--store", store])
                #expect(logout.status == 8, "\(logout.all)")
                #expect(logout.stderr.hasPrefix("loginkit: logged out of \"default\" here, but the revocation at the provider failed ("), "\(logout.stderr)")
                #expect(logout.stderr.contains("the refresh token may stay valid there until it expires"), "\(logout.stderr)")
                #expect(!logout.stderr.contains("Logged out of"))
                #expect(logout.stderr.split(separator: "\n").count == 1, "\(logout.stderr)")
                #expect(try await loginkit(["status", "--store", store]).status == 3, "the profile is deleted here")

                server.monitor.injectFaults([.status(401)], path: "/oauth/revoke")
                let scripted = try await loginkit(["logout", "--json", "--store", store, "--profile", "scripted"])
                #expect(scripted.status == 8, "\(scripted.all)")
                let object = try json(scripted)
                #expect(object["revocation"] as? String == "failed")
                #expect(object["deleted"] as? Bool == true)
                #expect((object["detail"] as? String)?.isEmpty == false)
            }
        }
    }

    /// A cleanup script logs out of a profile that may not exist: exit 0, nothing to log out (not
    /// exit 3 advising a login).
    @Test func aProfileThatDoesNotExistHasNothingToLogOut() async throws {
        try await withTemporaryDirectory { directory in
            let store = directory + "/tokens.json"
            let logout = try await loginkit(["logout", "--store", store, "--profile", "never-there"])
            #expect(logout.status == 0, "\(logout.all)")
            #expect(logout.stderr == "Nothing to log out: profile \"never-there\" does not exist.\n", "\(logout.stderr)")
            #expect(!logout.stderr.contains("loginkit login"))

            let scripted = try await loginkit(["logout", "--json", "--no-revoke", "--store", store, "--profile", "never-there"])
            #expect(scripted.status == 0, "\(scripted.all)")
            let object = try json(scripted)
            #expect(object["revocation"] as? String == "nothing")
            #expect(object["deleted"] as? Bool == false)
        }
    }

    /// A store that cannot be changed: logout exits 1 naming the store, never "Logged out", and the
    /// profile is still there. The failure is real for every user, root included: the store's name
    /// is so long (248 bytes) that its path, its directory (`.d`) and its `.lock` fit the file
    /// system's 255-byte name limit while the other files a change needs beside it (its
    /// `.shared.lock`, its temporary files) do not (ENAMETOOLONG), so the store reads but cannot be
    /// written.
    @Test func aStoreThatCannotBeChangedKeepsTheProfileAndExits1() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let written = directory + "/tokens.json"
                try await logIn(server, store: written)
                let store = directory + "/" + String(repeating: "t", count: 248)
                try FileManager.default.moveItem(atPath: written, toPath: store)
                try FileManager.default.moveItem(atPath: written + ".d", toPath: store + ".d")
                #expect(try await loginkit(["status", "--store", store]).status == 0, "the store reads")

                for extra in [[], ["--no-revoke"]] {
                    let logout = try await loginkit(["logout", "--store", store] + extra)
                    #expect(logout.status == 1, "\(extra): \(logout.all)")
                    #expect(logout.stderr.contains("could not be removed from the store \(store)"), "\(extra): \(logout.stderr)")
                    #expect(!logout.stderr.contains("Logged out"), "\(extra)")
                    #expect(try await IDTokenStore(path: store, sealing: .none).profile(named: "default") != nil, "\(extra): the profile is gone")
                }
            }
        }
    }
}
