import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// Runs `loginkit` with `directory` as its working directory (through `/bin/sh`, which changes into
/// it and then replaces itself with `loginkit`).
func loginkitInDirectory(_ directory: String, _ arguments: [String], input: String? = nil, environment: [String: String] = [:]) async throws -> Run {
    try await loginkit(
        ["-c", #"cd "$1" && shift && exec "$0" "$@""#, try loginkitPath(), directory] + arguments, input: input, environment: environment,
        executable: "/bin/sh")
}

/// Makes `path` a directory of the user's own, mode 0700, and returns it with symbolic links
/// resolved (as the kernel names a working directory).
func makePrivateTestDirectory(_ path: String) throws -> String {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: path)
    return URL(fileURLWithPath: path).resolvingSymlinksInPath().path
}

/// Writes `text` to `<directory>/.loginkit` with `mode`; the file's path.
@discardableResult
func writeLoginkitFile(_ text: String, in directory: String, mode: Int = 0o600) throws -> String {
    let path = directory + "/.loginkit"
    try? FileManager.default.removeItem(atPath: path)
    try #require(FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode]))
    try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)  // whatever the umask took away
    return path
}

/// The JSON `run` printed on stdout.
func stdoutJSONObject(_ run: Run) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.all)")
}

/// Which profile a command uses — `--profile`, `LOGINKIT_PROFILE`, the nearest `.loginkit`, the
/// store's default, `default` — and `loginkit profiles` (list, default, rm), with the real `loginkit`
/// against in-process dev servers.
@Suite(.timeLimit(.minutes(3)))
struct ProfilesCLITests {
    /// Two directories, each with a `.loginkit` naming a profile at its own issuer: a login in each
    /// lands in that directory's profile (a subdirectory inherits it, past a `.loginkit` that names
    /// no profile), `profiles --json` lists both with their issuer and user, and concurrent `token`
    /// processes in both directories each get their own profile's token — one refresh at each issuer.
    @Test func twoProfilesAtTwoIssuersAreChosenByTheirDirectories() async throws {
        try await withTemporaryDirectory { root in
            try await DevServer.withServer { first in
                try await DevServer.withServer { second in
                    let store = root + "/tokens.json"
                    let common = ["--store", store]
                    let alpha = try makePrivateTestDirectory(root + "/alpha")
                    let beta = try makePrivateTestDirectory(root + "/beta")
                    let alphaFile = try writeLoginkitFile("# the alpha project\nprofile = \"alpha\"  # at the first issuer\n", in: alpha)
                    try writeLoginkitFile("profile='beta'\n", in: beta)

                    let alphaLogin = try await logInDemo(at: first, common, in: alpha)
                    #expect(alphaLogin.stderr.contains(#"profile "alpha""#), "\(alphaLogin.stderr)")
                    let betaLogin = try await logInDemo(at: second, common, in: beta)
                    #expect(betaLogin.stderr.contains(#"profile "beta""#), "\(betaLogin.stderr)")

                    let file = try IDTokenStore(path: store, sealing: .none)
                    #expect(try await file.profileNames() == ["alpha", "beta"])
                    #expect(try await file.profile(named: "alpha")?.source.endpoint == first.issuer)
                    #expect(try await file.profile(named: "beta")?.source.endpoint == second.issuer)

                    // Deeper down, past a `.loginkit` with other keys only: still alpha's.
                    let source = try makePrivateTestDirectory(alpha + "/src")
                    let deeper = try makePrivateTestDirectory(source + "/module")
                    try writeLoginkitFile("[tools]\nprofile = \"ignored in a table\"\n", in: source)
                    try writeLoginkitFile("issuer = \"https://later.example\"\nretries = 3\n", in: deeper)
                    let status = try await loginkitInDirectory(deeper, ["status"] + common)
                    #expect(status.status == 0, "\(status.stderr)")
                    #expect(status.stdout.contains("profile:        alpha (from \(alphaFile))"), "\(status.stdout)")
                    let statusJSON = try stdoutJSONObject(try await loginkitInDirectory(deeper, ["status", "--json"] + common))
                    #expect(statusJSON["profile_source"] as? String == "file")
                    #expect(statusJSON["profile_file"] as? String == alphaFile)
                    #expect(statusJSON["issuer"] as? String == first.issuer)

                    let listed = try await loginkitInDirectory(root, ["profiles", "--json"] + common)
                    #expect(listed.status == 0, "\(listed.stderr)")
                    let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
                    #expect(entries.compactMap { $0["name"] as? String } == ["alpha", "beta"])
                    #expect(entries.compactMap { $0["issuer"] as? String } == [first.issuer, second.issuer])
                    #expect(entries.allSatisfy { $0["display_name"] as? String == "demo" && $0["email"] as? String == "demo@example.test" })
                    #expect(entries.allSatisfy { $0["default"] as? Bool == false && $0["client_id"] as? String == "loginkit-cli" })
                    let table = try await loginkitInDirectory(root, ["profiles"] + common)
                    #expect(table.stdout.split(separator: "\n").count == 3, "\(table.stdout)")  // the header and two rows
                    #expect(table.stdout.contains(first.issuer) && table.stdout.contains("demo (demo@example.test)"), "\(table.stdout)")

                    // Both expired, the providers slow: 4 processes in each directory at once.
                    try await expireStoredCredentials(in: file, profile: "alpha")
                    try await expireStoredCredentials(in: file, profile: "beta")
                    for server in [first, second] {
                        server.monitor.reset()
                        server.monitor.injectFaults([.delay(milliseconds: 300)], path: "/oauth/token")
                    }
                    let runs = try await withThrowingTaskGroup(of: (String, Run).self) { group in
                        for _ in 0..<4 {
                            group.addTask { ("alpha", try await loginkitInDirectory(alpha, ["token", "--access"] + common)) }
                            group.addTask { ("beta", try await loginkitInDirectory(beta, ["token", "--access"] + common)) }
                        }
                        return try await group.reduce(into: [(String, Run)]()) { $0.append($1) }
                    }
                    let failures = runs.filter { $0.1.status != 0 }.map { $0.1.stderr }
                    #expect(failures.isEmpty, "\(failures.prefix(3))")
                    let stored = try IDTokenStore(path: store, sealing: .none)
                    for name in ["alpha", "beta"] {
                        let tokens = Set(runs.filter { $0.0 == name }.map { $0.1.stdout.trimmingCharacters(in: .newlines) })
                        let expected = try #require(try await stored.profile(named: name)?.credentials.accessToken)
                        #expect(tokens == [expected], "\(name): every process gets its own profile's one refreshed token")
                    }
                    #expect(first.monitor.requestCount(path: "/oauth/token") == 1)
                    #expect(second.monitor.requestCount(path: "/oauth/token") == 1)
                }
            }
        }
    }

    /// `--profile` beats `LOGINKIT_PROFILE`, which beats the directory's `.loginkit`.
    @Test func theFlagBeatsTheVariableWhichBeatsTheFile() async throws {
        try await withTemporaryDirectory { root in
            try await DevServer.withServer { server in
                let common = ["--store", root + "/tokens.json"]
                let project = try makePrivateTestDirectory(root + "/project")
                let file = try writeLoginkitFile("profile = \"from-file\"\n", in: project)
                for name in ["from-file", "from-variable", "from-flag"] { try await logInDemo(at: server, common + ["--profile", name], in: root) }

                let byFile = try stdoutJSONObject(try await loginkitInDirectory(project, ["status", "--json"] + common))
                #expect(byFile["profile"] as? String == "from-file")
                #expect(byFile["profile_file"] as? String == file)
                let variable = ["LOGINKIT_PROFILE": "from-variable"]
                let byVariable = try stdoutJSONObject(try await loginkitInDirectory(project, ["status", "--json"] + common, environment: variable))
                #expect(byVariable["profile"] as? String == "from-variable")
                #expect(byVariable["profile_source"] as? String == "environment")
                let byFlag = try stdoutJSONObject(
                    try await loginkitInDirectory(project, ["status", "--json", "--profile", "from-flag"] + common, environment: variable))
                #expect(byFlag["profile"] as? String == "from-flag")
                #expect(byFlag["profile_source"] as? String == "flag")
                let text = try await loginkitInDirectory(project, ["status"] + common, environment: variable)
                #expect(text.stdout.contains("profile:        from-variable (from $LOGINKIT_PROFILE)"), "\(text.stdout)")
            }
        }
    }

    /// A `.loginkit` others could have written is refused, exit 2 naming it, whatever it says: one
    /// group-writable, one in a group-writable directory, a symbolic link; and a malformed one is
    /// refused naming its line. Nothing falls through to another profile.
    @Test func aContextFileOthersCouldWriteIsRefused() async throws {
        try await withTemporaryDirectory { root in
            try await DevServer.withServer { server in
                let common = ["--store", root + "/tokens.json"]
                try await logInDemo(at: server, common + ["--profile", "work"], in: root)
                let project = try makePrivateTestDirectory(root + "/project")

                let writable = try writeLoginkitFile("profile = \"work\"\n", in: project, mode: 0o620)
                let refused = try await loginkitInDirectory(project, ["token", "--access"] + common)
                #expect(refused.status == 2, "\(refused.all)")
                #expect(refused.stdout.isEmpty)
                #expect(refused.stderr.contains(writable) && refused.stderr.contains("group or others"), "\(refused.stderr)")

                try writeLoginkitFile("profile = \"work\"\n", in: project)
                #expect(try await loginkitInDirectory(project, ["token", "--access"] + common).status == 0)
                try FileManager.default.setAttributes([.posixPermissions: 0o770], ofItemAtPath: project)
                let inShared = try await loginkitInDirectory(project, ["status"] + common)
                #expect(inShared.status == 2, "\(inShared.all)")
                #expect(inShared.stderr.contains("which group or others can write"), "\(inShared.stderr)")
                try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: project)

                let elsewhere = try writeLoginkitFile("profile = \"work\"\n", in: try makePrivateTestDirectory(root + "/elsewhere"))
                try FileManager.default.removeItem(atPath: project + "/.loginkit")
                try FileManager.default.createSymbolicLink(atPath: project + "/.loginkit", withDestinationPath: elsewhere)
                let linked = try await loginkitInDirectory(project, ["status"] + common)
                #expect(linked.status == 2 && linked.stderr.contains("symbolic link"), "\(linked.all)")
                try FileManager.default.removeItem(atPath: project + "/.loginkit")

                let malformed = try writeLoginkitFile("# ok\nprofile = work\n", in: project)
                let unquoted = try await loginkitInDirectory(project, ["status"] + common)
                #expect(unquoted.status == 2, "\(unquoted.all)")
                #expect(unquoted.stderr.contains(malformed + ":2"), "\(unquoted.stderr)")
                try writeLoginkitFile("profile = \"work\"\nprofile = \"other\"\n", in: project)
                #expect(try await loginkitInDirectory(project, ["status"] + common).stderr.contains(".loginkit:2"))
            }
        }
    }

    /// `profiles default NAME` puts the mark in the store: a command with no other context then
    /// uses that profile, a new login into it keeps it the default, an unknown name changes
    /// nothing (exit 3); `profiles rm` logs a profile out (revoking) and `--unset` clears the default.
    @Test func theStoresDefaultChoosesWhereNothingElseDoes() async throws {
        try await withTemporaryDirectory { root in
            try await DevServer.withServer { server in
                let common = ["--store", root + "/tokens.json"]
                for name in ["personal", "work"] { try await logInDemo(at: server, common + ["--profile", name], in: root) }
                #expect(try await loginkitInDirectory(root, ["status"] + common).status == 3, "no default yet: profile \"default\", which does not exist")

                let set = try await loginkitInDirectory(root, ["profiles", "default", "work"] + common)
                #expect(set.status == 0, "\(set.stderr)")
                let byDefault = try stdoutJSONObject(try await loginkitInDirectory(root, ["status", "--json"] + common))
                #expect(byDefault["profile"] as? String == "work")
                #expect(byDefault["profile_source"] as? String == "store_default")
                #expect(try await loginkitInDirectory(root, ["profiles", "default"] + common).stdout == "work\n")
                let listed = try await loginkitInDirectory(root, ["profiles"] + common)
                #expect(listed.stdout.split(separator: "\n").contains { $0.hasPrefix("* work") }, "\(listed.stdout)")

                // A login with no context goes to the default profile, and keeps it the default.
                let again = try await logInDemo(at: server, common, in: root)
                #expect(again.stderr.contains(#"profile "work""#), "\(again.stderr)")
                #expect(try await loginkitInDirectory(root, ["profiles", "default"] + common).stdout == "work\n")

                let unknown = try await loginkitInDirectory(root, ["profiles", "default", "nobody"] + common)
                #expect(unknown.status == 3, "\(unknown.all)")
                #expect(try await loginkitInDirectory(root, ["profiles", "default"] + common).stdout == "work\n")
                #expect(try await loginkitInDirectory(root, ["profiles", "--profile", "work"] + common).status == 2)

                server.monitor.reset()
                let removed = try await loginkitInDirectory(root, ["profiles", "rm", "work"] + common)
                #expect(removed.status == 0, "\(removed.stderr)")
                #expect(removed.stderr.contains(#"Logged out of "work"; the provider revoked the tokens."#), "\(removed.stderr)")
                #expect(server.monitor.requestCount(path: "/oauth/revoke") == 2)
                let remaining = try await loginkitInDirectory(root, ["profiles", "--json"] + common)
                let names = try #require(try JSONSerialization.jsonObject(with: Data(remaining.stdout.utf8)) as? [[String: Any]]).compactMap { $0["name"] as? String }
                #expect(names == ["personal"])
                #expect(try await loginkitInDirectory(root, ["status"] + common).status == 3, "the default went with its profile")

                #expect(try await loginkitInDirectory(root, ["profiles", "default", "personal"] + common).status == 0)
                #expect(try await loginkitInDirectory(root, ["profiles", "default", "--unset"] + common).status == 0)
                let none = try await loginkitInDirectory(root, ["profiles", "default"] + common)
                #expect(none.status == 0 && none.stdout.isEmpty, "\(none.all)")
                let kept = try await loginkitInDirectory(root, ["profiles", "rm", "personal", "--no-revoke", "--json"] + common)
                #expect(try stdoutJSONObject(kept)["revocation"] as? String == "skipped")
                #expect(try await loginkitInDirectory(root, ["profiles", "--json"] + common).stdout == "[]\n")
            }
        }
    }
}

/// The store's default in a `postgres://` store (through `loginkit-fleet`): kept in the database
/// like every profile attribute, seen by every process that uses the store.
@Suite(
    .enabled(
        if: ProcessInfo.processInfo.environment["LOGINKIT_TEST_POSTGRES_URL"] != nil || ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_POSTGRES"] == "1",
        "needs PostgreSQL: make test starts one"),
    .timeLimit(.minutes(3)))
struct FleetProfilesCLITests {
    @Test func theDefaultProfileLivesInTheDatabase() async throws {
        let database = try #require(ProcessInfo.processInfo.environment["LOGINKIT_TEST_POSTGRES_URL"], "run through scripts/with-postgres.sh (make test does)")
        let key = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let environment = ["LOGINKIT_STORE": database + "?namespace=profiles-\(UUID().uuidString)", "LOGINKIT_STORE_KEY": key]
        try await withTemporaryDirectory { root in
            try await DevServer.withServer { server in
                for name in ["personal", "work"] {
                    let login = try await loginkitInDirectory(
                        root, ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin", "--profile", name],
                        input: "demo\n", environment: environment)
                    try #require(login.status == 0, "\(login.stderr)")
                }
                let set = try await loginkitInDirectory(root, ["profiles", "default", "work"], environment: environment)
                #expect(set.status == 0, "\(set.stderr)")
                let status = try stdoutJSONObject(try await loginkitInDirectory(root, ["status", "--json"], environment: environment))
                #expect(status["profile"] as? String == "work")
                #expect(status["profile_source"] as? String == "store_default")
                let listed = try await loginkitInDirectory(root, ["profiles", "--json"], environment: environment)
                let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]], "\(listed.all)")
                #expect(entries.compactMap { $0["name"] as? String } == ["personal", "work"])
                #expect(entries.compactMap { $0["default"] as? Bool } == [false, true])
            }
        }
    }
}
