import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// `loginkit login` at a real terminal (tmux): the password prompt does not echo.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux"), "needs tmux (make test installs it)"), .timeLimit(.minutes(3)))
struct TTYTests {
    /// Runs a shell command to its end (a `SpawnedProcess`: the tmux server it may start inherits
    /// no descriptor of the test process, so nothing waits on the server's lifetime).
    @discardableResult
    func shell(_ command: String) async -> Int32 {
        await run("/bin/sh", ["-c", command])
    }

    @Test func thePasswordPromptDoesNotEcho() async throws {
        let binary = try loginkitPath()
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                // A script that waits for the prompt, reading the transcript as it grows.
                // The prompt has no newline, so read characters, not lines, as tail delivers them.
                let waitForPrompt = "import sys\nseen = ''\nwhile 'Password for demo' not in seen:\n    c = sys.stdin.read(1)\n    if not c: sys.exit(1)\n    seen += c\n"
                try waitForPrompt.write(toFile: directory + "/wait.py", atomically: true, encoding: .utf8)
                // A tmux server of the test's own (its socket in the temporary directory), ended below.
                let tmux = "tmux -S \(directory)/tmux.sock"
                let session = "loginkit-tty"
                let transcript = directory + "/transcript"
                // After the login: its exit status recorded, `done` signalled, and the pane kept open
                // (waiting on `end`, which never comes) so that the tmux server — which holds the
                // signal for a waiter that arrives late — lives until the test's kill-server.
                let command = "\(tmux) wait-for go; \(binary) login --issuer \(server.issuer) --client-id loginkit-cli --username demo --store \(directory)/tokens.json; echo $? > \(directory)/status; \(tmux) wait-for -S done; \(tmux) wait-for end"
                #expect(await shell("\(tmux) new-session -d -s \(session) -x 120 -y 20 '\(command)'") == 0)
                await shell("\(tmux) pipe-pane -t \(session) -o 'cat >> \(transcript)'")
                await shell("\(tmux) wait-for -S go")  // start loginkit only once the transcript is recorded
                #expect(await shell("timeout 20 bash -c 'python3 \(directory)/wait.py < <(tail -n +1 -f \(transcript))'") == 0)
                await shell("\(tmux) send-keys -t \(session) 'demo' Enter")
                // A bound, not a wait for an event: a full parallel test run on two cores can hold a
                // login for many seconds; a hung one still fails here, with the screen shown.
                let waited = await shell("timeout 60 \(tmux) wait-for done")
                await shell("\(tmux) kill-server")
                let screen = try String(contentsOfFile: transcript, encoding: .utf8)
                #expect(waited == 0, "loginkit did not finish within 60 s of the password (timeout/tmux exit \(waited)); the screen: \(screen)")
                let status = try? String(contentsOfFile: directory + "/status", encoding: .utf8)
                #expect(status?.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "loginkit's exit status: \(status ?? "none")")
                #expect(screen.contains("Password for demo:"))
                #expect(screen.contains("Logged in as demo"))
                #expect(!screen.contains("Password for demo: demo"), "the password was echoed")
                let stored = try await IDTokenStore(path: directory + "/tokens.json", sealing: .none).profile(named: "default")
                #expect(stored != nil)
            }
        }
    }
}
