import Foundation
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

    @Test func theBrowserVariableIsTriedInOrderWithTheURLAndWithoutADisplay() async throws {
        try await withTemporaryDirectory { directory in
            let output = directory + "/opened"
            // The first command fails; the second writes its first argument, the URL, to a file.
            let variable = "false:sh -c 'printf %%s \"$1\" > \(output)' browser %s"
            try await SystemBrowserLauncher(environment: ["BROWSER": variable, "PATH": "/usr/bin:/bin"]).open(url)
            #expect(try String(contentsOfFile: output, encoding: .utf8) == url)
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
            try await SystemBrowserLauncher(environment: environment).open(url)
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
            try await SystemBrowserLauncher(environment: ["BROWSER": "my-browser", "PATH": directory + ":/usr/bin:/bin"])
                .open(url)
            #expect(try String(contentsOfFile: opened, encoding: .utf8) == url)

            let error = await thrown {
                try await SystemBrowserLauncher(environment: ["BROWSER": "my-browser", "PATH": "/usr/bin:/bin"]).open(url)
            }
            #expect((error as? LoginError)?.code == .browserUnavailable)
        }
    }
}
