// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKit
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// stderr, TTY detection, no-echo password input and the spinner.
package enum Terminal {
    private static let verboseFlag = Atomic<Bool>(false)

    /// Whether `--verbose` was given.
    static var verbose: Bool {
        get { verboseFlag.load(ordering: .relaxed) }
        set { verboseFlag.store(newValue, ordering: .relaxed) }
    }

    static var stdinIsTTY: Bool { isatty(STDIN_FILENO) == 1 }
    static var stderrIsTTY: Bool { isatty(STDERR_FILENO) == 1 }

    /// Writes all of `text` to `descriptor`, unbuffered (a failed write is dropped: there is
    /// nowhere left to report it).
    static func writeAll(_ text: String, to descriptor: Int32) {
        _ = LoginKit.writeAll(Array(text.utf8), to: descriptor)
    }

    /// Writes one line to stderr.
    static func standardError(_ line: String) {
        writeAll(line + "\n", to: STDERR_FILENO)
    }

    /// Writes `loginkit: warning: <text>` to stderr.
    static func warning(_ text: String) {
        standardError("loginkit: warning: \(printable(text, limit: 1000))")
    }

    /// `text` as it may reach the terminal: control characters (newline, ESC, CSI, DEL) and
    /// bidirectional overrides written as visible `\u{…}` escapes, at most `limit` characters.
    /// Everything a provider or a token chose (a claim, a device code or URI, an error message)
    /// goes through this before it is printed, so that it can neither forge lines nor drive the
    /// terminal.
    static func printable(_ text: String, limit: Int = 200) -> String {
        let escaped = escapingControlCharacters(text)
        return escaped.count > limit ? String(escaped.prefix(limit)) + "…" : escaped
    }

    /// `word` as a POSIX shell reads it back as one word: single-quoted unless it is plain. Quoting
    /// works on Unicode scalars, as the shell reads bytes: an apostrophe followed by a combining
    /// mark is one `Character` to Swift but still ends a quoted string for the shell.
    package static func shellWord(_ word: String) -> String {
        let plainScalars = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,=@:".unicodeScalars)
        let plain = !word.isEmpty && word.unicodeScalars.allSatisfy { plainScalars.contains($0) }
        guard !plain else { return word }
        var quoted = String.UnicodeScalarView()
        quoted.append("'")
        for scalar in word.unicodeScalars {
            if scalar == "'" { quoted.append(contentsOf: "'\\''".unicodeScalars) } else { quoted.append(scalar) }
        }
        quoted.append("'")
        return String(quoted)
    }

    /// stderr for library log lines: each line written as one line, its control characters escaped
    /// (log messages and metadata quote claims and provider answers).
    struct EscapingStandardError: TextOutputStream, Sendable {
        mutating func write(_ string: String) {
            let line = string.hasSuffix("\n") ? String(string.dropLast()) : string
            Terminal.standardError(escapingControlCharacters(line))
        }
    }

    /// Reads a password from the terminal without echo.
    static func readPasswordWithoutEcho(prompt: String) throws -> String {
        writeAll(prompt, to: STDERR_FILENO)
        var original = termios()
        guard tcgetattr(STDIN_FILENO, &original) == 0 else {
            throw CLIFailure.usage("cannot read a password without a terminal; use --password-stdin")
        }
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &original)
            writeAll("\n", to: STDERR_FILENO)
        }
        guard let line = readLine(strippingNewline: true) else {
            throw CLIFailure.usage("no password was entered")
        }
        return line
    }

    /// Reads one line (a password or secret) from stdin.
    static func readSecretLine(_ what: String) throws -> String {
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw CLIFailure.usage("expected the \(what) on standard input")
        }
        return line
    }

    /// Shows a spinner on stderr (TTY only) while `body` runs.
    nonisolated(nonsending) static func withSpinner<T>(_ label: String, _ body: () async throws -> T) async rethrows -> T {
        guard stderrIsTTY else { return try await body() }
        let spinner = Task {
            let frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
            var index = 0
            while !Task.isCancelled {
                writeAll("\r\(frames[index % frames.count]) \(label)", to: STDERR_FILENO)
                index += 1
                try? await Task.sleep(for: .milliseconds(100))  // animation frame, not a wait for an event
            }
            writeAll("\r\u{1B}[K", to: STDERR_FILENO)
        }
        defer { spinner.cancel() }
        let result = try await body()
        spinner.cancel()
        await spinner.value
        return result
    }
}
#endif
