import LoginKitHTTP

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Opens the URL the way Linux programs do: `$BROWSER` when set, else `xdg-open`.
///
/// The browser is never given the URL itself, which every local user could read on its command line
/// (`/proc/PID/cmdline`) for as long as it runs — and with the URL's `state` and loopback port,
/// sign the user in to an account of theirs (login CSRF). It gets the `file://` URL of a private
/// page that sends it on to the URL: mode 0600, with a random name, in a fresh directory of mode
/// 0700 under `$XDG_RUNTIME_DIR` (when the user owns it with mode 0700) or the temporary directory.
/// The page is removed when `open` ends — which, once a browser opened,
/// is when the login cancels it.
///
/// - `$BROWSER` is honoured with or without a display (it may be a terminal browser or a script). It
///   is a colon-separated list of commands, tried in order until one exits with status 0; each is
///   split into words like a shell would (quotes, backslashes; no expansions), `%s` stands for the
///   page's URL (`%%` for `%`), and without `%s` that URL is appended as the last argument. A
///   terminal browser runs on the caller's terminal.
/// - Without `$BROWSER`, when there is no display (`DISPLAY` and `WAYLAND_DISPLAY` unset) or this is
///   an SSH session (`SSH_CONNECTION`, `SSH_CLIENT`, `SSH_TTY`), no browser is opened; otherwise
///   `xdg-open` with the page's URL, detached from the terminal (its own process group, output
///   discarded).
///
/// No command goes through a shell. The login never waits for the browser: `open` waits for the
/// command's exit only to learn whether it failed, and is cancelled when the login ends first (the
/// browser keeps running). Exit statuses are collected on a thread of their own.
public struct SystemBrowserLauncher: BrowserLauncher {
    /// The environment consulted (`BROWSER`, `DISPLAY`, `WAYLAND_DISPLAY`, `SSH_*`, `PATH`: the
    /// browser command is looked up there; `XDG_RUNTIME_DIR`, `TMPDIR`: where the page goes) and
    /// handed to the browser, less LoginKit's secrets (`ChildProcess.secretVariables`).
    package let environment: [String: String]

    /// A launcher for `environment`; `nil` takes the process's own.
    public init(environment: [String: String]? = nil) {
        self.environment = environment ?? ProcessInfo.processInfo.environment
    }

    /// Opens `url` through a private page that leads to it, and keeps that page until cancelled: it
    /// returns only by throwing. Give it to a login (`AuthService.logInWithBrowser`), which cancels
    /// it when it ends; the page is removed then, or as soon as no browser could be opened.
    ///
    /// - Throws: `LoginError` `.browserUnavailable` when no browser can be opened (the reason says
    ///   why) or the page cannot be written; `CancellationError` when cancelled — how it ends once a
    ///   browser opened (the browser is left running).
    public func open(_ url: String) async throws {
        if browserVariable == nil, let reason = Self.noDisplayReason(environment) {
            throw LoginError(.browserUnavailable, reason)
        }
        let page = try BrowserHandoffPage.write(leadingTo: url, environment: environment)
        defer { page.remove() }
        try await open(page: page)
        // The browser may read the page at any time until the login ends, which cancels this.
        let (untilCancelled, keepAlive) = AsyncStream<Void>.makeStream()
        defer { keepAlive.finish() }
        for await _ in untilCancelled {}
        throw CancellationError()
    }

    /// Runs the browser command on `page`'s `file://` URL; returns when a command exited with status
    /// 0, leaving the page to the caller.
    ///
    /// - Throws: `LoginError` `.browserUnavailable` when no browser can be opened; `CancellationError`
    ///   when cancelled while a browser runs (it is left running).
    package func open(page: BrowserHandoffPage) async throws {
        let target = page.fileURL
        if let variable = browserVariable {
            var failures: [String] = []
            for command in Self.browserCommands(variable, url: target) {
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
        let status = try await BrowserProcess.start(["xdg-open", target], environment: environment, streams: .detached)
            .status()
        guard status == 0 else {
            throw LoginError(.browserUnavailable, "xdg-open could not open the page (exit status \(status))")
        }
    }

    /// `$BROWSER`, unless unset or blank.
    private var browserVariable: String? {
        guard let variable = environment["BROWSER"], !variable.allSatisfy(\.isWhitespace) else { return nil }
        return variable
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
