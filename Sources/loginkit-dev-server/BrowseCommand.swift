// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import ArgumentParser
import LoginKitHTTP
import Foundation
import LoginKit
import LoginKitBrowserScript

/// `loginkit-dev-server browse URL`: a scripted browser that signs in at an authorization URL, for
/// `loginkit demo` and as `$BROWSER` (LoginKit appends the `file://` URL of a page that leads to
/// the authorization URL, which it follows as a browser would).
///
/// It is `BrowserScript` (shared with LoginKitMocks' `TestBrowser`) over a `CurlHTTPClient`: it loads the URL, fills in and submits the
/// sign-in form, reads each redirect's `Location` itself (nothing follows redirects automatically)
/// and finally loads the application's loopback redirect URI, as a browser would.
struct BrowseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "browse",
        abstract: "Sign in at an authorization URL the way a person in a browser would, without one.",
        discussion: """
            Loads URL, fills in the sign-in form (the dev server's, or another simple form with a \
            password field, or a form asking for one text field only) and presses Sign in (or Deny), follows the redirects by reading their \
            Location, and loads the application's redirect URI. One line on stderr says how it went; \
            the exit status is 0 when the application answered the redirect with 200. As a browser for \
            LoginKit: BROWSER="/path/to/loginkit-dev-server browse" (LoginKit appends the file:// URL of a \
            page that leads to the authorization URL, which this command follows). The password \
            is an argument, which other local users can read while it runs: use it with the dev \
            server's public users only.
            """
    )

    @Argument(help: "The authorization URL (http to loopback, or https), or the file:// page LoginKit hands a browser instead.") var url: String
    @Option(help: "The user to sign in as.") var username = "demo"
    @Option(help: "The password (the dev server's demo password by default).") var password = "demo"
    @Flag(help: "Press Deny instead of signing in.") var deny = false

    func validate() throws {
        guard URLParts(url) != nil || url.lowercased().hasPrefix("file://") else {
            throw ValidationError("\"\(escapingControlCharacters(url))\" is not an absolute http(s) URL")
        }
    }

    func run() async throws {
        let credentials = deny ? nil : (username: username, password: password)
        let attempt = deny ? "deny the sign-in" : "sign in as \(username)"
        let start: String
        do {
            start = try BrowserScript.followingLocalPage(url)
        } catch let failure as BrowserScript.Failure {
            throw ToolFailure("scripted browser: \(failure.message)")
        }
        let host = URLParts(start)?.authority ?? "?"
        let status: Int
        do {
            status = try await CurlHTTPClient.withClient { (client: CurlHTTPClient) async throws -> Int in
                var browser = BrowserScript(transport: client, credentials: credentials)
                let redirect = try await browser.signIn(at: start)
                return try await BrowserScript.load(redirect, over: client).status
            }
        } catch let failure as BrowserScript.Failure {
            throw ToolFailure("scripted browser: could not \(attempt) at \(host): \(failure.message)")
        } catch {
            throw ToolFailure("scripted browser: could not \(attempt) at \(host): \(error)")
        }
        guard status == 200 else {
            throw ToolFailure("scripted browser: the application answered its redirect with HTTP \(status)")
        }
        let outcome = deny ? "denied the sign-in" : "signed in as \(username)"
        FileHandle.standardError.write(Data("scripted browser: \(escapingControlCharacters(outcome)) at \(escapingControlCharacters(host))\n".utf8))
    }
}
#endif
