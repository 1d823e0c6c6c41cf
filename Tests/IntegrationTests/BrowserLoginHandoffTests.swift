import Foundation
import Glibc
import LoginKit
import LoginKitHTTP
import LoginKitTestSupport
import Testing

/// A browser login through `SystemBrowserLauncher` and a browser process of its own (a script that
/// records what it was given, then the test helper's scripted browser): what the browser process
/// shows every local user, and what is left once the login has ended.
@Suite(.timeLimit(.minutes(2)))
struct BrowserLoginHandoffTests {
    /// Another local user can read a browser's command line and environment (`/proc/PID/cmdline`,
    /// `/proc/PID/environ`); with the authorization URL's `state` and loopback port they could sign
    /// the user in to an account of theirs (login CSRF). The browser gets the `file://` URL of a
    /// private page instead — mode 0600, in a directory of mode 0700 under `$XDG_RUNTIME_DIR` —
    /// which leads to the URL, and which is gone once the login has ended.
    @Test func theBrowserIsHandedAPrivatePageAndNeverTheURL() async throws {
        let helper = try testHelperPath()
        try await withFixture(configure: unpushed) { fixture in
            try await withTemporaryDirectory { directory in
                let runtime = directory + "/runtime"
                let record = directory + "/record"
                for path in [runtime, record] {
                    try #require(mkdir(path, 0o700) == 0 && chmod(path, 0o700) == 0)
                }
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
                    exec '\(helper)' browse "$1"

                    """, to: script)
                let launcher = SystemBrowserLauncher(
                    environment: ProcessInfo.processInfo.environment.merging(
                        ["BROWSER": "'\(script)'", "XDG_RUNTIME_DIR": runtime]) { $1 })
                let events = EventLog()
                let credentials = try await BrowserLogin(api: fixture.api, launcher: launcher, clock: fixture.clock)
                    .run(onEvent: { events.record($0) })
                #expect(credentials.accessToken != nil)
                // The login has ended: its page and the page's directory are gone.
                #expect(try FileManager.default.contentsOfDirectory(atPath: runtime).isEmpty)

                var opened: String?
                for case .waitingForBrowser(let url, _) in events.all { opened = url }
                let url = try #require(opened)
                let redirectURI = try #require(parameter("redirect_uri", in: url))
                let port = try #require(URLParts(redirectURI)?.port)
                let state = try #require(parameter("state", in: url))
                let challenge = try #require(parameter("code_challenge", in: url))
                let secrets = [state, challenge, "127.0.0.1:\(port)", "127.0.0.1%3A\(port)", url]
                func recorded(_ name: String) throws -> String {
                    try String(contentsOfFile: record + "/" + name, encoding: .utf8)
                }
                let argv = try recorded("argv").split(separator: "\n").map(String.init)
                let environ = try recorded("environ")
                for secret in secrets {
                    #expect(!argv.contains(where: { $0.contains(secret) }), "the command line shows \(secret): \(argv)")
                    #expect(!environ.contains(secret), "the environment shows \(secret)")
                }
                let pageURL = try #require(argv.last)
                #expect(pageURL.hasPrefix("file://\(runtime)/loginkit-") && pageURL.hasSuffix(".html"), "\(pageURL)")
                #expect(try recorded("mode") == "600\n")
                #expect(try recorded("directory-mode") == "700\n")
                let page = try recorded("page")
                #expect(page.contains("content=\"0;url=\(url.replacing("&", with: "&amp;"))\""), "\(page)")
            }
        }
    }
}
