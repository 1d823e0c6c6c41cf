/// Opens the authorization URL in a browser. `SystemBrowserLauncher` is the real one; a launcher
/// that throws `LoginError` `.browserUnavailable` opens none (the URL is shown and a pasted redirect
/// accepted instead: the CLI's `--no-browser`); `TestBrowser` in `LoginKitMocks` signs in against
/// the dev server like a browser would.
///
/// Concurrency contract: `Sendable`. `open` may keep running while the login waits for the redirect
/// (a launcher that waits for its browser to exit, a scripted browser, `SystemBrowserLauncher`
/// keeping the page it handed the browser); when the login ends, however it ends, it is cancelled
/// and must return promptly, leaving the browser itself alone. The login awaits it before returning.
public protocol BrowserLauncher: Sendable {
    /// Opens `url`.
    ///
    /// - Throws: `LoginError` `.browserUnavailable` when no browser can be opened: the login
    ///   then shows the URL and accepts a pasted redirect. Any other error ends the login.
    func open(_ url: String) async throws
}

/// A launcher that never opens a browser: the login shows the URL and waits for the redirect (from a
/// browser elsewhere, through an SSH tunnel) or a pasted redirect URL. What `--no-browser` uses.
package struct NoBrowserLauncher: BrowserLauncher {
    /// A launcher that opens nothing.
    package init() {}

    /// Always throws `LoginError` `.browserUnavailable`.
    package func open(_ url: String) async throws {
        throw LoginError(.browserUnavailable, "opening a browser is turned off")
    }
}
