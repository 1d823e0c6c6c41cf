import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitTestSupport
import Testing

/// `loginkit git-credential` as a real `git` runs it: clones and fetches over HTTP from a server
/// that takes only a live access token of the dev provider as the password, refreshes once after
/// the token expired, a refused token replaced through `erase`, and no answer without a session.
@Suite(.timeLimit(.minutes(3)))
struct GitCredentialCLITests {
    @Test func gitClonesThenFetchesAfterTheTokenExpiredWithOneRefresh() async throws {
        try await GitRig.with { rig in
            let clone = rig.directory + "/clone"
            let cloned = try await rig.git(["clone", "-q", rig.repositoryURL, clone])
            #expect(cloned.status == 0, "\(cloned.stderr)")
            #expect(try await rig.git(["log", "--format=%s"], in: clone).stdout == "one\n")
            let first = try #require(try await rig.storedCredentials().accessToken)
            let answered = rig.http.requests.filter { $0.status == 200 }
            #expect(!answered.isEmpty)
            #expect(answered.allSatisfy { $0.username == "oauth2" && $0.password == first })
            #expect(!cloned.all.contains(first))

            // A new commit; then the token expires, for the store and for the provider alike.
            try await rig.publishCommit("two")
            try await expireStoredCredentials(in: IDTokenStore(path: rig.storePath))
            rig.server.expireAccessTokens()
            let before = rig.server.monitor.requestCount(path: "/oauth/token")
            let fetched = try await rig.git(["fetch", "-q", "origin"], in: clone)
            #expect(fetched.status == 0, "\(fetched.stderr)")
            #expect(rig.server.monitor.requestCount(path: "/oauth/token") == before + 1)
            #expect(try await rig.git(["log", "--format=%s", "origin/main"], in: clone).stdout == "two\none\n")
            let second = try #require(try await rig.storedCredentials().accessToken)
            #expect(second != first)
            #expect(rig.http.requests.last?.password == second)
        }
    }

    @Test func aRefusedTokenIsErasedAndTheNextFetchGetsANewOne() async throws {
        try await GitRig.with { rig in
            let clone = rig.directory + "/clone"
            let cloned = try await rig.git(["clone", "-q", rig.repositoryURL, clone])
            try #require(cloned.status == 0, "\(cloned.stderr)")
            let first = try #require(try await rig.storedCredentials().accessToken)

            // The server refuses this token from now on, though the provider still holds it valid.
            rig.refuse(first)
            let before = rig.server.monitor.requestCount(path: "/oauth/token")
            let refused = try await rig.git(["fetch", "-q", "origin"], in: clone)
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("Authentication failed"), "\(refused.stderr)")
            // git ran `erase` with that token: one forced refresh, a new token in the store.
            #expect(rig.server.monitor.requestCount(path: "/oauth/token") == before + 1)
            let second = try #require(try await rig.storedCredentials().accessToken)
            #expect(second != first)
            #expect(rig.server.isValidAccessToken(second))

            let fetched = try await rig.git(["fetch", "-q", "origin"], in: clone)
            #expect(fetched.status == 0, "\(fetched.stderr)")
            #expect(rig.server.monitor.requestCount(path: "/oauth/token") == before + 1)
            #expect(rig.http.requests.last?.password == second)
        }
    }

    @Test func withoutASessionTheHelperAnswersNothingAndGitFailsAtOnce() async throws {
        try await GitRig.with { rig in
            let executable = try loginkitPath()
            let helper = "!\(GitRig.shellQuoted(executable)) git-credential --profile nobody"
            let cloned = try await rig.git(["clone", "-q", rig.repositoryURL, rig.directory + "/clone"], helper: helper)
            #expect(cloned.status != 0)
            // git asked the helper, heard nothing, and could not prompt (GIT_TERMINAL_PROMPT=0).
            #expect(cloned.stderr.contains("terminal prompts disabled"), "\(cloned.stderr)")
            #expect(cloned.stderr.contains("not logged in (profile \"nobody\")"), "\(cloned.stderr)")
            #expect(rig.http.requests.allSatisfy { $0.password == nil })

            let direct = try await rig.helper(["--profile", "nobody", "get"], input: "protocol=https\nhost=git.example\n\n")
            #expect(direct.status == 0)
            #expect(direct.stdout.isEmpty)
        }
    }

    @Test func getAnswersTheUsernameTheTokenAndItsExpiryOnly() async throws {
        try await GitRig.with { rig in
            try await rig.serve(["git.example", "127.0.0.1:8080"])
            let request = "protocol=https\nhost=git.example\npath=team/repo.git\n\n"
            let credentials = try await rig.storedCredentials()
            let token = try #require(credentials.accessToken)
            let expiry = try #require(credentials.expiresAt)
            let answer = try await rig.helper(["get"], input: request)
            #expect(answer.status == 0, "\(answer.stderr)")
            #expect(answer.stdout == "username=oauth2\npassword=\(token)\npassword_expiry_utc=\(Int64(expiry.timeIntervalSince1970.rounded(.down)))\n")
            #expect(!answer.stderr.contains(token))

            let named = try await rig.helper(["--username", "alice", "get"], input: request)
            #expect(named.stdout.hasPrefix("username=alice\npassword=\(token)\n"))
            let loopback = try await rig.helper(["get"], input: "protocol=http\nhost=127.0.0.1:8080\n\n")
            #expect(loopback.stdout.contains("password=\(token)\n"))

            // Clear text to a remote host, another protocol, another user, no host: no answer.
            for unanswered in [
                "protocol=http\nhost=git.example\n\n", "protocol=ssh\nhost=git.example\n\n",
                "protocol=https\nhost=git.example\nusername=bob\n\n", "protocol=https\n\n",
            ] {
                let run = try await rig.helper(["get"], input: unanswered)
                #expect(run.status == 0, "\(unanswered): \(run.stderr)")
                #expect(run.stdout.isEmpty, "\(unanswered)")
            }

            // store, an operation of a later git, and erase with another password change nothing.
            let before = rig.server.monitor.requestCount(path: "/oauth/token")
            for (operation, password) in [("store", token), ("capability", token), ("erase", "not-this-profile-s-token")] {
                let run = try await rig.helper([operation], input: "protocol=https\nhost=git.example\nusername=oauth2\npassword=\(password)\n\n")
                #expect(run.status == 0, "\(operation): \(run.stderr)")
                #expect(run.stdout.isEmpty, "\(operation)")
            }
            #expect(rig.server.monitor.requestCount(path: "/oauth/token") == before)
            #expect(try await rig.storedCredentials().accessToken == token)

            // A request that is no request: usage, nothing answered.
            let tooLong = try await rig.helper(["get"], input: String(repeating: "wwwauth[]=Basic realm=\"x\"\n", count: 300) + "\n")
            #expect(tooLong.status == 2 && tooLong.stdout.isEmpty)
            let notKeyValue = try await rig.helper(["get"], input: "protocol https\n\n")
            #expect(notKeyValue.status == 2 && notKeyValue.stdout.isEmpty)
        }
    }

    /// A helper git runs for every host (a `credential.helper` without one), or in a cloned
    /// repository holding a `.loginkit`, answers only for the hosts the profile serves: the host as
    /// git names it, lower-cased, with its port.
    @Test func getAnswersOnlyForAHostTheProfileServes() async throws {
        try await GitRig.with { rig in
            try await logInDemo(at: rig.server, ["--store", rig.storePath, "--profile", "work"])
            try await rig.serve(["git.example"], profile: "work")
            let token = try await rig.accessToken(of: "work")

            let evil = try await rig.helper(["--profile", "work", "get"], input: "protocol=https\nhost=evil.example\n\n")
            #expect(evil.status == 0, "\(evil.stderr)")
            #expect(evil.stdout.isEmpty, "work's token went to evil.example")
            #expect(evil.stderr.contains("configure --host evil.example --profile work"), "\(evil.stderr)")

            let upper = try await rig.helper(["--profile", "work", "get"], input: "protocol=https\nhost=GIT.EXAMPLE\n\n")
            #expect(upper.stdout.hasPrefix("username=oauth2\npassword=\(token)\n"), "\(upper.all)")
            let otherPort = try await rig.helper(["--profile", "work", "get"], input: "protocol=https\nhost=git.example:444\n\n")
            #expect(otherPort.status == 0 && otherPort.stdout.isEmpty, "\(otherPort.all)")

            // Without --profile the host chooses — never LOGINKIT_PROFILE or a cloned repository's .loginkit.
            let clone = try makePrivateTestDirectory(rig.directory + "/cloned")
            try writeLoginkitFile("profile = \"work\"\n", in: clone)
            let environment = ["LOGINKIT_STORE": rig.storePath]
            let contexts = [(clone, environment), (rig.directory, environment.merging(["LOGINKIT_PROFILE": "work"], uniquingKeysWith: { $1 }))]
            for (directory, variables) in contexts {
                let planted = try await loginkitInDirectory(
                    directory, ["git-credential", "get"], input: "protocol=https\nhost=evil.example\n\n", environment: variables)
                #expect(planted.status == 0 && planted.stdout.isEmpty, "\(planted.all)")
                let served = try await loginkitInDirectory(
                    directory, ["git-credential", "get"], input: "protocol=https\nhost=git.example\n\n", environment: variables)
                #expect(served.stdout.hasPrefix("username=oauth2\npassword=\(token)\n"), "\(served.all)")
            }
        }
    }

    /// Two profiles, each serving its own host, answer git with their own tokens without
    /// `--profile`; a host named for another profile moves to it; a new login of a profile keeps
    /// its hosts.
    @Test func eachHostIsAnsweredByTheProfileThatServesIt() async throws {
        try await GitRig.with { rig in
            for profile in ["work", "personal"] {
                try await logInDemo(at: rig.server, ["--store", rig.storePath, "--profile", profile])
                try await rig.serve(["git.\(profile).example"], profile: profile)
            }
            func answer(_ host: String) async throws -> String {
                try await rig.helper(["get"], input: "protocol=https\nhost=\(host)\n\n").stdout
            }
            let work = try await rig.accessToken(of: "work")
            let personal = try await rig.accessToken(of: "personal")
            #expect(work != personal)
            #expect(try await answer("git.work.example").contains("password=\(work)\n"))
            #expect(try await answer("git.personal.example").contains("password=\(personal)\n"))

            try await logInDemo(at: rig.server, ["--store", rig.storePath, "--profile", "work"])
            let again = try await rig.accessToken(of: "work")
            #expect(again != work)
            #expect(try await answer("git.work.example").contains("password=\(again)\n"), "the login dropped the profile's git host")

            try await rig.serve(["git.work.example"], profile: "personal")
            #expect(try await answer("git.work.example").contains("password=\(personal)\n"))
            let stale = try await rig.helper(["--profile", "work", "get"], input: "protocol=https\nhost=git.work.example\n\n")
            #expect(stale.stdout.isEmpty, "\(stale.all)")
        }
    }
}

/// A logged-in store (profile `default`, serving the server's host to git), a bare repository
/// `repo.git` with one commit served over git's dumb HTTP protocol by a server that takes only the
/// dev provider's live access tokens (less those the test refuses), and `git` run with `loginkit
/// git-credential` as its only helper — in a home of its own, without the system's configuration,
/// never prompting.
struct GitRig {
    let directory: String
    let storePath: String
    let server: DevServer
    let http: GitHTTPServer
    private let refused: LockedState<Set<String>>

    var repositoryURL: String { http.url("/repo.git") }
    /// The server's host as git names it in its requests.
    var host: String { "127.0.0.1:\(http.port)" }

    static func with<T>(_ body: (GitRig) async throws -> T) async throws -> T {
        _ = try gitPath()
        return try await withDemoLoggedIn { server, directory, storePath in
            for path in ["/srv", "/home"] {
                try FileManager.default.createDirectory(atPath: directory + path, withIntermediateDirectories: true)
            }
            let refused = LockedState(Set<String>())
            let http = try GitHTTPServer(root: directory + "/srv") { _, password in
                !refused.withLock { $0.contains(password) } && server.isValidAccessToken(password)
            }
            defer { http.stop() }
            let rig = GitRig(directory: directory, storePath: storePath, server: server, http: http, refused: refused)
            try await rig.serve([rig.host])
            try await rig.publishCommit("one")
            return try await body(rig)
        }
    }

    /// `loginkit git-credential configure --host …` for each of `hosts`: `profile` serves them.
    func serve(_ hosts: [String], profile: String = "default") async throws {
        let configured = try await helper(["configure", "--profile", profile] + hosts.flatMap { ["--host", $0] }, input: "")
        try #require(configured.status == 0, "\(configured.stderr)")
    }

    /// The access token `profile` holds in the store now.
    func accessToken(of profile: String) async throws -> String {
        try #require(try await IDTokenStore(path: storePath).profile(named: profile)?.credentials.accessToken)
    }

    /// From now on the server refuses `token`, whatever the provider says of it.
    func refuse(_ token: String) {
        refused.withLock { _ = $0.insert(token) }
    }

    /// The profile's credentials as the store holds them now.
    func storedCredentials() async throws -> Credentials {
        let profile = try await IDTokenStore(path: storePath).profile(named: "default")
        return try #require(profile).credentials
    }

    /// Runs `git arguments` (in `workingDirectory`) with `helper` as its only credential helper
    /// (default: this loginkit's `git-credential`, the profile chosen as usual).
    func git(_ arguments: [String], in workingDirectory: String? = nil, helper: String? = nil) async throws -> Run {
        let executable = try loginkitPath()
        let helperLine = helper ?? "!\(Self.shellQuoted(executable)) git-credential"
        let configuration = [
            "-c", "credential.helper=", "-c", "credential.helper=" + helperLine, "-c", "credential.useHttpPath=true",
            "-c", "gc.auto=0", "-c", "maintenance.auto=false",  // nothing left running in the background
        ]
        let location = workingDirectory.map { ["-C", $0] } ?? []
        return try await loginkit(location + configuration + arguments, environment: environment, executable: try gitPath())
    }

    /// Runs `loginkit git-credential arguments` by hand, with `input` as git's request.
    func helper(_ arguments: [String], input: String) async throws -> Run {
        try await loginkit(["git-credential"] + arguments, input: input, environment: ["LOGINKIT_STORE": storePath])
    }

    /// Commits `message` (an empty commit) in a work tree and publishes it in `repo.git` for the
    /// dumb protocol (`git update-server-info`).
    func publishCommit(_ message: String) async throws {
        let work = directory + "/work"
        let bare = directory + "/srv/repo.git"
        if !FileManager.default.fileExists(atPath: work) {
            try await succeed(["init", "-q", "--bare", "--initial-branch=main", bare])
            try await succeed(["init", "-q", "--initial-branch=main", work])
        }
        try await succeed(["commit", "-q", "--allow-empty", "-m", message], in: work)
        try await succeed(["push", "-q", bare, "main"], in: work)
        try await succeed(["update-server-info"], in: bare)
    }

    private func succeed(_ arguments: [String], in workingDirectory: String? = nil) async throws {
        let run = try await git(arguments, in: workingDirectory)
        try #require(run.status == 0, "git \(arguments.joined(separator: " ")): \(run.stderr)")
    }

    /// git's environment: a home of its own, no system configuration, no prompt, no proxy, the
    /// store; the helper inherits it.
    private var environment: [String: String] {
        [
            "HOME": directory + "/home", "XDG_CONFIG_HOME": directory + "/home/.config", "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "", "LC_ALL": "C",
            "http_proxy": "", "https_proxy": "", "HTTP_PROXY": "", "HTTPS_PROXY": "", "all_proxy": "", "ALL_PROXY": "",
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "GIT_AUTHOR_NAME": "LoginKit Test", "GIT_AUTHOR_EMAIL": "test@example.test",
            "GIT_COMMITTER_NAME": "LoginKit Test", "GIT_COMMITTER_EMAIL": "test@example.test",
            "LOGINKIT_STORE": storePath,
        ]
    }

    /// `word` single-quoted for the shell git runs a `!` helper with.
    static func shellQuoted(_ word: String) -> String {
        "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

/// The system's `git` (Debian's package `git`, which `make test` installs).
func gitPath() throws -> String {
    let path = "/usr/bin/git"
    try #require(FileManager.default.isExecutableFile(atPath: path), "these tests run the real git: install Debian's git (make test-deps)")
    return path
}
