import Foundation
import Glibc
import LoginKit
import LoginKitTestSupport
import Testing

@Suite(.timeLimit(.minutes(3)))
struct SystemBrowserLauncherTests {
    let url = "https://id.example/authorize?a=1&b=two%20words"

    @Test func browserCommandsFollowTheLinuxConvention() {
        #expect(SystemBrowserLauncher.browserCommands("firefox", url: url) == [["firefox", url]])
        #expect(
            SystemBrowserLauncher.browserCommands("lynx -accept_all_cookies:w3m %s", url: url) == [
                ["lynx", "-accept_all_cookies", url], ["w3m", url],
            ])
        #expect(
            SystemBrowserLauncher.browserCommands("'/opt/my browser/run' --url=%s \"--literal=%%s\" a\\ b", url: url)
                == [["/opt/my browser/run", "--url=" + url, "--literal=%s", "a b"]]
        )
        #expect(SystemBrowserLauncher.browserCommands(": :", url: url).isEmpty)
    }

    @Test func noDisplayOrAnSSHSessionMeansNoDesktopBrowser() {
        #expect(SystemBrowserLauncher.noDisplayReason([:]) != nil)
        #expect(SystemBrowserLauncher.noDisplayReason(["DISPLAY": ":0"]) == nil)
        #expect(SystemBrowserLauncher.noDisplayReason(["WAYLAND_DISPLAY": "wayland-0"]) == nil)
        #expect(
            SystemBrowserLauncher.noDisplayReason(["DISPLAY": ":0", "SSH_CONNECTION": "192.0.2.1 50000 192.0.2.2 22"])
                != nil)
    }

    @Test func withoutBrowserVariableOrDisplayNoBrowserIsOpened() async {
        let error = await thrown { try await SystemBrowserLauncher(environment: ["PATH": "/usr/bin:/bin"]).open(url) }
        #expect((error as? LoginError)?.code == .browserUnavailable)
        #expect((error as? LoginError)?.message.contains("display") == true)
    }

    @Test func theBrowserVariableIsTriedInOrderWithThePageAndWithoutADisplay() async throws {
        try await withTemporaryDirectory { directory in
            let output = directory + "/opened"
            // The first command fails; the second writes its first argument, the page's URL, to a file.
            let variable = "false:sh -c 'printf %%s \"$1\" > \(output)' browser %s"
            let launcher = SystemBrowserLauncher(environment: ["BROWSER": variable, "PATH": "/usr/bin:/bin"])
            try await withPage(leadingTo: url, environment: launcher.environment) { page in
                try await launcher.open(page: page)
                #expect(try String(contentsOfFile: output, encoding: .utf8) == page.fileURL)
            }
        }
    }

    @Test func aBrowserVariableWhoseCommandsAllFailMeansNoBrowser() async {
        let error = await thrown {
            try await SystemBrowserLauncher(environment: ["BROWSER": "false:/nonexistent/browser", "DISPLAY": ":0"])
                .open(url)
        }
        #expect((error as? LoginError)?.code == .browserUnavailable)
        #expect((error as? LoginError)?.message.contains("\"false\" exited with status 1") == true)
    }

    /// The browser's environment holds none of LoginKit's secrets (`LOGINKIT_CLIENT_SECRET`,
    /// `LOGINKIT_STORE_KEY`), which would be readable in its `/proc/PID/environ` for as long as it runs.
    @Test func theBrowserGetsNoneOfLoginKitsSecrets() async throws {
        try await withTemporaryDirectory { directory in
            let output = directory + "/environment"
            let environment = [
                "BROWSER": "sh -c 'env > \(output)' browser %s", "PATH": "/usr/bin:/bin",
                "LOGINKIT_CLIENT_SECRET": "client-s3cret", "LOGINKIT_STORE_KEY": "store-k3y",
                // A fleet store's password (loginkit-fleet's login runs the browser too).
                "PGPASSWORD": "db-pa55", "LOGINKIT_STORE": "postgres://app:db-ur1-pa55@db.example/app",
                "LOGINKIT_ISSUER": "https://id.example.com",
            ]
            let launcher = SystemBrowserLauncher(environment: environment)
            try await withPage(leadingTo: url, environment: environment) { try await launcher.open(page: $0) }
            let seen = try String(contentsOfFile: output, encoding: .utf8)
            for secret in ["client-s3cret", "store-k3y", "db-pa55", "db-ur1-pa55"] {
                #expect(!seen.contains(secret), "\(seen)")
            }
            #expect(seen.contains("LOGINKIT_ISSUER=https://id.example.com"), "the rest is handed on")
        }
    }

    /// The command is looked up on the `PATH` of the environment the launcher was given, not on the
    /// calling process's own `PATH` (as `posix_spawnp` would).
    @Test func theBrowserCommandIsLookedUpOnTheGivenPath() async throws {
        try await withTemporaryDirectory { directory in
            let opened = directory + "/opened"
            let script = directory + "/my-browser"
            try writeExecutable("#!/bin/sh\nprintf %s \"$1\" > \(opened)\n", to: script)
            let launcher = SystemBrowserLauncher(environment: ["BROWSER": "my-browser", "PATH": directory + ":/usr/bin:/bin"])
            try await withPage(leadingTo: url, environment: launcher.environment) { page in
                try await launcher.open(page: page)
                #expect(try String(contentsOfFile: opened, encoding: .utf8) == page.fileURL)
            }

            let error = await thrown {
                try await SystemBrowserLauncher(environment: ["BROWSER": "my-browser", "PATH": "/usr/bin:/bin"]).open(url)
            }
            #expect((error as? LoginError)?.code == .browserUnavailable)
        }
    }

    // MARK: The page the browser gets instead of the URL

    /// The authorization URL of a login: its `state`, PKCE challenge and loopback port are what
    /// another local user must not read.
    let authorizationURL =
        "https://id.example/authorize?response_type=code&state=S7ate-Value_1&code_challenge=Ch4llenge-Value_2"
        + "&redirect_uri=http%3A%2F%2F127.0.0.1%3A54321%2Fcallback"
    var secretsOfTheURL: [String] {
        ["S7ate-Value_1", "Ch4llenge-Value_2", "127.0.0.1%3A54321", "127.0.0.1:54321", "authorize?"]
    }

    /// The browser's command line and environment (what `/proc/PID/cmdline` and `/proc/PID/environ`
    /// show every local user) hold the page's `file://` URL, never the authorization URL; the page
    /// is mode 0600 in a directory of mode 0700 under `$XDG_RUNTIME_DIR`, and leads to the URL.
    @Test func theBrowserSeesAPrivatePageAndNeverTheURL() async throws {
        try await withTemporaryDirectory { directory in
            let runtime = try makeDirectory(directory + "/runtime", mode: 0o700)
            let record = try makeDirectory(directory + "/record", mode: 0o700)
            let script = directory + "/browser"
            try writeExecutable(
                """
                #!/bin/sh
                tr '\\000' '\\n' < /proc/$$/cmdline > '\(record)/argv'
                tr '\\000' '\\n' < /proc/$$/environ > '\(record)/environ'
                page="${1#file://}"
                stat -c %a "$page" > '\(record)/mode'
                stat -c %a "${page%/*}" > '\(record)/directory-mode'
                cat "$page" > '\(record)/page'

                """, to: script)
            let launcher = SystemBrowserLauncher(
                environment: ["BROWSER": "'\(script)'", "PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": runtime])
            let page = try BrowserHandoffPage.write(leadingTo: authorizationURL, environment: launcher.environment)
            defer { page.remove() }
            #expect(page.path.hasPrefix(runtime + "/loginkit-"), "\(page.path)")
            try await launcher.open(page: page)

            func recorded(_ name: String) throws -> String {
                try String(contentsOfFile: record + "/" + name, encoding: .utf8)
            }
            let argv = try recorded("argv").split(separator: "\n").map(String.init)
            #expect(argv.last == page.fileURL, "\(argv)")
            let environ = try recorded("environ")
            for secret in secretsOfTheURL {
                #expect(!argv.contains(where: { $0.contains(secret) }), "argv shows \(secret): \(argv)")
                #expect(!environ.contains(secret), "the environment shows \(secret)")
            }
            #expect(try recorded("mode") == "600\n")
            #expect(try recorded("directory-mode") == "700\n")
            let html = try recorded("page")
            let escaped = authorizationURL.replacing("&", with: "&amp;")
            #expect(html.contains("<meta http-equiv=\"refresh\" content=\"0;url=\(escaped)\">"), "\(html)")
            #expect(html.contains("href=\"\(escaped)\""))
            #expect(html.contains("location.replace("))
            #expect(!html.contains(authorizationURL), "every & escaped")

            page.remove()
            #expect(!FileManager.default.fileExists(atPath: page.path))
            #expect(!FileManager.default.fileExists(atPath: page.directory))
        }
    }

    /// Each page has a fresh directory and a random name; the URL is HTML-escaped wherever it appears.
    @Test func pagesAreFreshRandomAndEscaped() async throws {
        try await withTemporaryDirectory { directory in
            let runtime = try makeDirectory(directory + "/runtime", mode: 0o700)
            let hostile = "https://id.example/a?x=\"><script>alert(1)</script>&y='z'"
            let first = try BrowserHandoffPage.write(leadingTo: hostile, environment: ["XDG_RUNTIME_DIR": runtime])
            defer { first.remove() }
            let second = try BrowserHandoffPage.write(leadingTo: hostile, environment: ["XDG_RUNTIME_DIR": runtime])
            defer { second.remove() }
            #expect(first.directory != second.directory)
            let firstName = try #require(first.path.split(separator: "/").last)
            let secondName = try #require(second.path.split(separator: "/").last)
            #expect(firstName != secondName)
            #expect(firstName.count >= "login-".count + 22 + ".html".count, "16 random bytes in the name")
            let html = try String(contentsOfFile: first.path, encoding: .utf8)
            #expect(!html.contains("<script>alert"))
            #expect(!html.contains("'z'"))
            #expect(html.contains("x=&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;y=&#39;z&#39;"))
        }
    }

    /// `$XDG_RUNTIME_DIR` is used only when it is the user's own with mode 0700; else the page goes
    /// to `$TMPDIR`, still in a directory of its own with mode 0700.
    @Test func aRuntimeDirectoryOthersMayEnterIsPassedOver() async throws {
        try await withTemporaryDirectory { directory in
            let runtime = try makeDirectory(directory + "/runtime", mode: 0o755)
            let temporary = try makeDirectory(directory + "/tmp", mode: 0o700)
            let page = try BrowserHandoffPage.write(
                leadingTo: url, environment: ["XDG_RUNTIME_DIR": runtime, "TMPDIR": temporary + "/"])
            defer { page.remove() }
            #expect(page.path.hasPrefix(temporary + "/loginkit-"), "\(page.path)")
            #expect(permissions(of: page.directory) == 0o700)
            #expect(permissions(of: page.path) == 0o600)
            #expect(page.fileURL == "file://" + page.path)
        }
    }

    /// When no command opens the page, `open` throws at once and leaves no page behind.
    @Test func noPageIsLeftWhenNoBrowserOpens() async throws {
        try await withTemporaryDirectory { directory in
            let runtime = try makeDirectory(directory + "/runtime", mode: 0o700)
            let error = await thrown {
                try await SystemBrowserLauncher(
                    environment: ["BROWSER": "false", "PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": runtime]
                ).open(authorizationURL)
            }
            #expect((error as? LoginError)?.code == .browserUnavailable)
            #expect(try FileManager.default.contentsOfDirectory(atPath: runtime).isEmpty)
        }
    }
}

/// A page for `url`, removed after `body`.
private func withPage<T>(
    leadingTo url: String, environment: [String: String], _ body: (BrowserHandoffPage) async throws -> T
) async throws -> T {
    let page = try BrowserHandoffPage.write(leadingTo: url, environment: environment)
    defer { page.remove() }
    return try await body(page)
}

/// Makes the directory `path` with exactly `mode`; returns `path`.
private func makeDirectory(_ path: String, mode: mode_t) throws -> String {
    guard mkdir(path, mode) == 0, chmod(path, mode) == 0 else {
        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
    return path
}

/// The permission bits of `path`, or `nil` when it cannot be inspected.
private func permissions(of path: String) -> mode_t? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o777
}
