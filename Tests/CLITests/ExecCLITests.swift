import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// `loginkit exec -- COMMAND`: the command runs in loginkit's place with a valid access token in its
/// environment and without LoginKit's secrets, its exit status is the command's, and a command that
/// cannot run fails as a shell says so.
@Suite(.timeLimit(.minutes(2)))
struct ExecCLITests {
    @Test func theCommandGetsAValidTokenAndItsExitStatusIsTheCommands() async throws {
        try await withDemoLoggedIn { server, _, storePath in
            let store = ["--store", storePath]
            let token = try await storedAccessToken(storePath)
            let counted = try await loginkit(["exec"] + store + ["--", "/bin/sh", "-c", #"printf %s "$LOGINKIT_ACCESS_TOKEN" | wc -c"#])
            #expect(counted.status == 0, "\(counted.stderr)")
            #expect(Int(counted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == token.utf8.count)

            let named = try await loginkit(["exec", "--env", "API_TOKEN"] + store + ["--", "/bin/sh", "-c", #"printf %s "$API_TOKEN""#])
            #expect(named.stdout == token)
            #expect(server.isValidAccessToken(named.stdout))

            #expect(try await loginkit(["exec"] + store + ["--", "/bin/sh", "-c", "exit 7"]).status == 7)
            // Arguments after -- are the command's, options included.
            let echoed = try await loginkit(["exec"] + store + ["--", "/bin/sh", "-c", #"printf '%s|' "$@""#, "sh", "--store", "-x"])
            #expect(echoed.stdout == "--store|-x|")
        }
    }

    @Test func theCommandGetsNoSecretOfLoginKitAndNoDescriptorItOpened() async throws {
        try await withDemoLoggedIn { _, _, storePath in
            let secrets = ["LOGINKIT_CLIENT_SECRET": "client-secret-for-loginkit-only", "PGPASSWORD": "database-password-for-loginkit-only"]
            let environment = try await loginkit(["exec", "--store", storePath, "--", "env"], environment: secrets)
            #expect(environment.status == 0, "\(environment.stderr)")
            let lines = environment.stdout.split(separator: "\n").map(String.init)
            #expect(!lines.contains { $0.hasPrefix("LOGINKIT_CLIENT_SECRET=") || $0.hasPrefix("PGPASSWORD=") })
            #expect(!environment.stdout.contains("for-loginkit-only"))
            #expect(lines.contains("LOGINKIT_ACCESS_TOKEN=\(try await storedAccessToken(storePath))"))

            // ls's own directory descriptor is 3 when nothing above 2 leaked into it.
            let descriptors = try await loginkit(["exec", "--store", storePath, "--", "ls", "/proc/self/fd"])
            #expect(descriptors.status == 0, "\(descriptors.stderr)")
            #expect(Set(descriptors.stdout.split(whereSeparator: \.isWhitespace).map(String.init)).isSubset(of: ["0", "1", "2", "3"]), "\(descriptors.stdout)")
        }
    }

    @Test func anExpiredTokenIsRefreshedOnceBeforeTheCommandRuns() async throws {
        try await withDemoLoggedIn { server, _, storePath in
            let first = try await storedAccessToken(storePath)
            try await expireStoredCredentials(in: IDTokenStore(path: storePath))
            server.expireAccessTokens()
            let before = server.monitor.requestCount(path: "/oauth/token")
            let run = try await loginkit(["exec", "--store", storePath, "--", "/bin/sh", "-c", #"printf %s "$LOGINKIT_ACCESS_TOKEN""#])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(server.monitor.requestCount(path: "/oauth/token") == before + 1)
            #expect(run.stdout != first)
            #expect(server.isValidAccessToken(run.stdout))
        }
    }

    @Test func aCommandThatCannotRunFailsAsAShellSays() async throws {
        try await withDemoLoggedIn { _, _, storePath in
            let store = ["--store", storePath]
            let missing = try await loginkit(["exec"] + store + ["--", "loginkit-test-no-such-command"])
            #expect(missing.status == 127)
            #expect(missing.stderr.contains("command not found"), "\(missing.stderr)")
            #expect(try await loginkit(["exec"] + store + ["--", "/nonexistent/loginkit-test"]).status == 127)

            let script = (storePath as NSString).deletingLastPathComponent + "/not-executable.sh"
            try "#!/bin/sh\necho ran\n".write(toFile: script, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: script)
            let refused = try await loginkit(["exec"] + store + ["--", script])
            #expect(refused.status == 126)
            #expect(refused.stdout.isEmpty)

            #expect(try await loginkit(["exec", "--env", "1BAD"] + store + ["--", "/bin/true"]).status == 2)
            #expect(try await loginkit(["exec"] + store).status == 2)
            let loggedOut = try await loginkit(["exec", "--profile", "nobody"] + store + ["--", "/bin/sh", "-c", "echo ran"])
            #expect(loggedOut.status == 3)
            #expect(loggedOut.stdout.isEmpty)
        }
    }

    /// The command starts with the signal mask `loginkit` was started with — a signal its caller
    /// blocked stays blocked (perl blocks SIGUSR1, then replaces itself with `loginkit`) — and with
    /// none of those the runtime's threads block.
    @Test func theCommandGetsTheSignalMaskLoginKitWasStartedWith() async throws {
        let perl = "/usr/bin/perl"
        try #require(FileManager.default.isExecutableFile(atPath: perl), "Debian's perl-base (an essential package) blocks the signal")
        try await withDemoLoggedIn { _, _, storePath in
            let command = ["exec", "--store", storePath, "--", "grep", "SigBlk", "/proc/self/status"]
            let executable = try loginkitPath()
            let blocking = ["-MPOSIX", "-e", "sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGUSR1)) or die; exec @ARGV or die", executable]
            let blocked = try await loginkit(blocking + command, executable: perl)
            #expect(blocked.status == 0, "\(blocked.stderr)")
            #expect(blocked.stdout == "SigBlk:\t0000000000000200\n", "SIGUSR1 (10) is bit 9")
            let unblocked = try await loginkit(command)
            #expect(unblocked.status == 0, "\(unblocked.stderr)")
            #expect(unblocked.stdout == "SigBlk:\t0000000000000000\n")
        }
    }
}
