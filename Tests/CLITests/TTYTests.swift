import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// `loginkit login` at a real terminal (tmux): the password prompt does not echo.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux"), "needs tmux (make test installs it)"), .timeLimit(.minutes(1)))
struct TTYTests {
    /// Runs a shell command on its own thread, waiting for it to finish.
    @discardableResult
    func shell(_ command: String) async -> Int32 {
        await onDedicatedThread {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", command]
            guard (try? process.run()) != nil else { return -1 }
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    @Test func thePasswordPromptDoesNotEcho() async throws {
        let binary = try loginkitPath()
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let session = "loginkit-tty-\(UUID().uuidString.prefix(8))"
                let transcript = directory + "/transcript"
                let command = "tmux wait-for \(session)-go; \(binary) login --issuer \(server.issuer) --client-id loginkit-cli --username demo --store \(directory)/tokens.json; tmux wait-for -S \(session)-done"
                #expect(await shell("tmux new-session -d -s \(session) -x 120 -y 20 '\(command)'") == 0)
                defer { Task { await shell("tmux kill-session -t \(session) 2>/dev/null") } }
                await shell("tmux pipe-pane -t \(session) -o 'cat >> \(transcript)'")
                await shell("tmux wait-for -S \(session)-go")  // start loginkit only once the transcript is recorded
                // Wait (bounded) for the prompt to be written, reading the transcript as it grows.
                // The prompt has no newline, so read characters, not lines, as tail delivers them.
                let waitForPrompt = "import sys\nseen = ''\nwhile 'Password for demo' not in seen:\n    c = sys.stdin.read(1)\n    if not c: sys.exit(1)\n    seen += c\n"
                try waitForPrompt.write(toFile: directory + "/wait.py", atomically: true, encoding: .utf8)
                #expect(await shell("timeout 20 bash -c 'python3 \(directory)/wait.py < <(tail -n +1 -f \(transcript))'") == 0)
                await shell("tmux send-keys -t \(session) 'demo' Enter")
                #expect(await shell("timeout 20 tmux wait-for \(session)-done") == 0)
                let screen = try String(contentsOfFile: transcript, encoding: .utf8)
                #expect(screen.contains("Password for demo:"))
                #expect(screen.contains("Logged in as demo"))
                #expect(!screen.contains("Password for demo: demo"), "the password was echoed")
                let stored = try await IDTokenStore(path: directory + "/tokens.json", sealing: .none).profile(named: "default")
                #expect(stored != nil)
            }
        }
    }
}
