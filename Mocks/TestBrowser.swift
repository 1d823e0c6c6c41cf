public import LoginKit
import LoginKitBrowserScript
import LoginKitHTTP

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A scripted browser for tests of browser logins: a `BrowserLauncher` that, given the authorization
/// URL, loads the provider's pages over an `HTTPTransport`, fills in and submits the sign-in form
/// (or presses "Deny"), and follows redirects until one goes to the login's `redirect_uri`, which it
/// then loads — delivering the callback to the loopback receiver exactly as a browser would.
///
/// Redirects are followed by hand (the transport never follows them): each `Location` is read,
/// resolved and loaded with `GET`, cookies are kept per host, forms are submitted as
/// `application/x-www-form-urlencoded`. It works against `LoginKitDevServer`'s sign-in form
/// (`demo`/`demo`) and other simple forms with a password field, or with one text field only (an
/// identity picker, which gets the username).
///
/// ```swift
/// let browser = TestBrowser(transport: client)                  // signs in as demo/demo
/// let service = AuthService(api: api, store: InMemoryTokenStore())
/// _ = try await service.logInWithBrowser(launcher: browser)
/// #expect(browser.callbackPages.first?.status == 200)
/// ```
///
/// The rewrite hooks let a test play an attacker: change the authorization URL before it is loaded
/// (another `nonce` or `code_challenge`), or the redirect before it is delivered (another `state`
/// or `iss`). Everything it loaded is recorded for assertions.
///
/// Concurrency contract: `Sendable`; one `open` at a time is what a test normally does, but the
/// records are safe to read from any task.
public final class TestBrowser: BrowserLauncher {
    /// What to do on the sign-in page.
    public enum Action: Sendable, Hashable {
        /// What the form is filled with: the username and password, or `nil` to deny.
        var credentials: (username: String, password: String)? {
            switch self {
            case .signIn(let username, let password): (username, password)
            case .deny: nil
            }
        }

        /// Fill in the username and password fields and press the first button that is not a denial.
        case signIn(username: String, password: String)
        /// Press the button whose name or value says deny (or cancel, reject, decline).
        case deny

        /// Sign in as the dev server's `demo`/`demo`.
        public static let demo = Action.signIn(username: "demo", password: "demo")
    }

    /// A page as the browser received it.
    public struct Page: Sendable {
        /// The URL loaded.
        public let url: String
        /// The HTTP status.
        public let status: Int
        /// The body, as text.
        public let body: String
        /// The `Location` header, on a redirect.
        package let location: String?

        init(_ page: BrowserScript.Page) {
            (url, status, body, location) = (page.url, page.status, page.body, page.location)
        }
    }

    /// The browser could not get through the provider's pages.
    package struct Failure: Error, Sendable, CustomStringConvertible {
        /// What went wrong.
        package let message: String
        init(_ message: String) { self.message = message }
        package var description: String { "TestBrowser.Failure: \(message)" }
    }

    /// The most requests one sign-in may take.
    package static let maximumSteps = BrowserScript.maximumSteps

    private struct State {
        var openedURLs: [String] = []
        var pages: [Page] = []
        var deliveredRedirects: [String] = []
        var callbackPages: [Page] = []
        var cookies: [String: [String: String]] = [:]
    }
    private let state = LockedState(State())
    private let transport: any HTTPTransport
    private let rewriteAuthorizationURL: @Sendable (String) -> String
    private let rewriteRedirect: @Sendable (String) -> String
    /// What it does on the sign-in page.
    package let action: Action

    /// A browser that loads pages over `transport` and does `action` on the sign-in page;
    /// `rewriteAuthorizationURL` changes the URL before it is loaded, `rewriteRedirect` the final
    /// redirect before it is delivered (or returned by ``signIn(at:)``).
    public init(
        transport: any HTTPTransport, action: Action = .demo,
        rewriteAuthorizationURL: @escaping @Sendable (String) -> String = { $0 },
        rewriteRedirect: @escaping @Sendable (String) -> String = { $0 }
    ) {
        self.transport = transport
        self.action = action
        self.rewriteAuthorizationURL = rewriteAuthorizationURL
        self.rewriteRedirect = rewriteRedirect
    }

    /// The authorization URLs opened, after rewriting.
    public var openedURLs: [String] { state.withLock { $0.openedURLs } }
    /// Every provider page loaded, in order (redirects included).
    public var pages: [Page] { state.withLock { $0.pages } }
    /// The redirects delivered to the application (they carry the code, or the error).
    public var deliveredRedirects: [String] { state.withLock { $0.deliveredRedirects } }
    /// What the application's redirect target (the loopback receiver) answered, in order.
    public var callbackPages: [Page] { state.withLock { $0.callbackPages } }

    /// Signs in at `url` and delivers the redirect to the application.
    ///
    /// - Throws: an error naming the page that did not lead on when the provider's pages do not lead
    ///   to the redirect; the transport's errors.
    public func open(_ url: String) async throws {
        try await deliver(try await signIn(at: url))
    }

    /// Follows `url` through the provider's pages, doing its `action` on the sign-in form, and returns
    /// the redirect to the application without loading it: what a user would copy from the address
    /// bar and paste.
    ///
    /// - Throws: an error naming the page that did not lead on; the transport's errors.
    public func signIn(at url: String) async throws -> String {
        let start = rewriteAuthorizationURL(url)
        let cookies = state.withLock { state in
            state.openedURLs.append(start)
            return state.cookies
        }
        var script = BrowserScript(transport: transport, credentials: action.credentials, cookies: cookies)
        do {
            let redirect = try await script.signIn(at: start) { page in
                state.withLock { $0.pages.append(Page(page)) }
            }
            state.withLock { [cookies = script.cookies] in $0.cookies = cookies }
            return rewriteRedirect(redirect)
        } catch let failure as BrowserScript.Failure {
            throw Failure(failure.message)
        }
    }

    /// Loads `redirect` as a browser following the provider's redirect to the application would,
    /// and records the answer in ``callbackPages``. The load finishes even when the calling task is
    /// cancelled meanwhile (the login that waited for it has moved on), so the page is never lost.
    ///
    /// - Throws: an error when `redirect` is not an absolute URL; the transport's errors.
    package func deliver(_ redirect: String) async throws {
        state.withLock { $0.deliveredRedirects.append(redirect) }
        let transport = self.transport
        let loading = Task { try await BrowserScript.load(redirect, over: transport) }
        let page: BrowserScript.Page
        do {
            page = try await loading.value
        } catch let failure as BrowserScript.Failure {
            throw Failure(failure.message)
        }
        state.withLock { $0.callbackPages.append(Page(page)) }
    }
}
