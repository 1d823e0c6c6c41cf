#if CLI
import Foundation
import LoginKit
import LoginKitCommandLine
import LoginKitTestSupport
import Testing

/// The words the CLI suggests pasting into a shell (the step-up login's `--acr-values`, the
/// issuer, the profile) come back from `/bin/sh` as exactly one word: a value a resource server
/// chose can neither end the quoting nor run a command.
struct ShellQuotingTests {
    static let hostile = [
        "a'\u{301};touch pwned;'\u{301}b",  // an apostrophe with a combining mark: one Character, two scalars
        "'\u{200D}",
        "x'\u{FE0F}",
        "plain",
        "two words",
        "$(touch pwned)",
        "`touch pwned`",
        "'",
        "",
    ]

    @Test(arguments: hostile)
    func theShellReadsTheQuotedWordBackUnchanged(_ value: String) async throws {
        try await withTemporaryDirectory { directory in
            let run = try await loginkit(
                ["-c", "cd \(Terminal.shellWord(directory)) && printf '%s\\n' \(Terminal.shellWord(value))"], executable: "/bin/sh")
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout == value + "\n")
            #expect(!FileManager.default.fileExists(atPath: directory + "/pwned"))
        }
    }
}
#endif
