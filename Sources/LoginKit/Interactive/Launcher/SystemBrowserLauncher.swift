import LoginKitHTTP

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Opens the URL the way Linux programs do: `$BROWSER` when set, else `xdg-open`.
///
/// - `$BROWSER` is honoured with or without a display (it may be a terminal browser or a script). It
///   is a colon-separated list of commands, tried in order until one exits with status 0; each is
///   split into words like a shell would (quotes, backslashes; no expansions), `%s` stands for the
///   URL (`%%` for `%`), and without `%s` the URL is appended as the last argument. A terminal
///   browser runs on the caller's terminal.
/// - Without `$BROWSER`, when there is no display (`DISPLAY` and `WAYLAND_DISPLAY` unset) or this is
///   an SSH session (`SSH_CONNECTION`, `SSH_CLIENT`, `SSH_TTY`), no browser is opened; otherwise
///   `xdg-open URL`, detached from the terminal (its own process group, output discarded).
///
/// No command goes through a shell. The login never waits for the browser: `open` waits for the
/// command's exit only to learn whether it failed, and is cancelled when the login ends first (the
/// browser keeps running). Exit statuses are collected on a thread of their own.
public struct SystemBrowserLauncher: BrowserLauncher {
    /// The environment consulted (`BROWSER`, `DISPLAY`, `WAYLAND_DISPLAY`, `SSH_*`, `PATH`: the
    /// browser command is looked up there) and handed to the browser, less LoginKit's secrets
    /// (`LOGINKIT_CLIENT_SECRET`, `LOGINKIT_STORE_KEY`).
    package let environment: [String: String]

    /// A launcher for `environment`; `nil` takes the process's own.
    public init(environment: [String: String]? = nil) {
        self.environment = environment ?? ProcessInfo.processInfo.environment
    }

    /// Opens `url`; returns when the command exited with status 0.
    ///
    /// - Throws: `LoginError` `.browserUnavailable` when no browser can be opened (the reason
    ///   says why); `CancellationError` when cancelled while a browser runs (it is left running).
    public func open(_ url: String) async throws {
        if let variable = environment["BROWSER"], !variable.allSatisfy(\.isWhitespace) {
            var failures: [String] = []
            for command in Self.browserCommands(variable, url: url) {
                let name = printableExcerpt(command.first ?? "")
                do {
                    let status = try await BrowserProcess.start(command, environment: environment, streams: .inherit)
                        .status()
                    if status == 0 { return }
                    failures.append("\"\(name)\" exited with status \(status)")
                } catch let error as LoginError where error.code == .browserUnavailable {
                    failures.append(error.message)
                }
            }
            throw LoginError(
                .browserUnavailable, "no command in $BROWSER opened the page (\(failures.joined(separator: "; ")))")
        }
        if let reason = Self.noDisplayReason(environment) {
            throw LoginError(.browserUnavailable, reason)
        }
        let status = try await BrowserProcess.start(["xdg-open", url], environment: environment, streams: .detached)
            .status()
        guard status == 0 else {
            throw LoginError(.browserUnavailable, "xdg-open could not open the page (exit status \(status))")
        }
    }

    /// Why no desktop browser can be opened for `environment`, or `nil` when one can be tried.
    package static func noDisplayReason(_ environment: [String: String]) -> String? {
        func isSet(_ name: String) -> Bool { !(environment[name] ?? "").isEmpty }
        if isSet("SSH_CONNECTION") || isSet("SSH_CLIENT") || isSet("SSH_TTY") {
            return "this is an SSH session, so no browser is opened here"
        }
        if !isSet("DISPLAY") && !isSet("WAYLAND_DISPLAY") {
            return "there is no display (DISPLAY and WAYLAND_DISPLAY are unset)"
        }
        return nil
    }

    /// The commands `$BROWSER` names, as argument vectors with the URL in place; empty commands are
    /// skipped.
    package static func browserCommands(_ variable: String, url: String) -> [[String]] {
        variable.split(separator: ":").compactMap { command -> [String]? in
            let parts = words(of: command)
            guard !parts.isEmpty else { return nil }
            var substituted = false
            var arguments = parts.map { word -> String in
                let (text, replaced) = substitutingURL(in: word, url: url)
                substituted = substituted || replaced
                return text
            }
            if !substituted { arguments.append(url) }
            return arguments
        }
    }

    /// `command` split into words as a POSIX shell would split it, without expansions: blanks
    /// separate words, `'…'` quotes literally, `"…"` quotes with backslash escapes, `\` escapes one
    /// character.
    package static func words(of command: some StringProtocol) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote: Character?
        var escaping = false
        for character in command {
            if escaping {
                current.append(character)
                escaping = false
                continue
            }
            if let quoteCharacter = quote {
                if character == quoteCharacter {
                    quote = nil
                } else if character == "\\" && quoteCharacter == "\"" {
                    escaping = true
                } else {
                    current.append(character)
                }
                continue
            }
            switch character {
            case "\\":
                escaping = true
                inWord = true
            case "'", "\"":
                quote = character
                inWord = true
            case " ", "\t", "\n":
                if inWord { words.append(current) }
                current = ""
                inWord = false
            default:
                current.append(character)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }

    /// `word` with `%s` replaced by `url` and `%%` by `%`; whether a `%s` was there.
    private static func substitutingURL(in word: String, url: String) -> (String, Bool) {
        var result = ""
        var replaced = false
        var index = word.startIndex
        while index < word.endIndex {
            let character = word[index]
            let next = word.index(after: index)
            if character == "%", next < word.endIndex, word[next] == "s" || word[next] == "%" {
                if word[next] == "s" {
                    result += url
                    replaced = true
                } else {
                    result += "%"
                }
                index = word.index(after: next)
            } else {
                result.append(character)
                index = next
            }
        }
        return (result, replaced)
    }
}
