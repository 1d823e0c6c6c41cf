public import LoginKit

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
/// (`demo`/`demo`) and other simple forms with a password field.
///
/// ```swift
/// let browser = TestBrowser(transport: client)                  // signs in as demo/demo
/// let login = BrowserLogin(api: api, launcher: browser, clock: clock)
/// let credentials = try await login.run()
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
        public let location: String?
    }

    /// The browser could not get through the provider's pages.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// What went wrong.
        public let message: String
        init(_ message: String) { self.message = message }
        public var description: String { "TestBrowser.Failure: \(message)" }
    }

    /// The most requests one sign-in may take.
    public static let maximumSteps = 20

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
    public let action: Action

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
    /// - Throws: ``Failure`` when the provider's pages do not lead to the redirect; the transport's
    ///   errors.
    public func open(_ url: String) async throws {
        try await deliver(try await signIn(at: url))
    }

    /// Follows `url` through the provider's pages, doing ``action`` on the sign-in form, and returns
    /// the redirect to the application without loading it: what a user would copy from the address
    /// bar and paste.
    ///
    /// - Throws: ``Failure``; the transport's errors.
    public func signIn(at url: String) async throws -> String {
        let start = rewriteAuthorizationURL(url)
        state.withLock { $0.openedURLs.append(start) }
        let target = Self.redirectTarget(of: start)
        var next: (method: HTTPRequest.Method, url: String, form: String?) = (.get, start, nil)
        for _ in 0..<Self.maximumSteps {
            let page = try await load(next.method, next.url, form: next.form)
            if (300..<400).contains(page.status) {
                guard let location = page.location, let resolved = HTMLForm.resolve(location, against: next.url) else {
                    throw Failure("HTTP \(page.status) without a usable Location at \(Self.path(of: next.url))")
                }
                if Self.isRedirect(resolved, to: target, from: start) { return rewriteRedirect(resolved) }
                next = (.get, resolved, nil)
                continue
            }
            guard page.status == 200 else {
                throw Failure("the provider answered HTTP \(page.status) at \(Self.path(of: next.url))")
            }
            guard let form = HTMLForm.first(in: page.body) else {
                throw Failure("the page at \(Self.path(of: next.url)) has neither a form nor a redirect")
            }
            next = try form.submission(for: action, on: next.url)
        }
        throw Failure("no redirect to the application after \(Self.maximumSteps) requests")
    }

    /// Loads `redirect` as a browser following the provider's redirect to the application would,
    /// and records the answer in ``callbackPages``. The load finishes even when the calling task is
    /// cancelled meanwhile (the login that waited for it has moved on), so the page is never lost.
    ///
    /// - Throws: the transport's errors.
    public func deliver(_ redirect: String) async throws {
        state.withLock { $0.deliveredRedirects.append(redirect) }
        let transport = self.transport
        let loading = Task {
            try await Self.fetch(.get, redirect, headers: [.accept: "text/html"], body: nil, transport: transport)
        }
        let (page, _) = try await loading.value
        state.withLock { $0.callbackPages.append(page) }
    }

    // MARK: Loading

    private func load(_ method: HTTPRequest.Method, _ url: String, form: String?) async throws -> Page {
        let host = URLParts(url)?.host ?? ""
        var headers: HTTPFields = [.accept: "text/html"]
        if let cookies = state.withLock({ $0.cookies[host] }), !cookies.isEmpty {
            headers[.cookie] = cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
                separator: "; ")
        }
        if form != nil { headers[.contentType] = "application/x-www-form-urlencoded" }
        let (page, setCookies) = try await Self.fetch(
            method, url, headers: headers, body: form.map { Data($0.utf8) }, transport: transport)
        state.withLock { state in
            state.pages.append(page)
            for cookie in setCookies {
                let pair = cookie.split(separator: ";", maxSplits: 1).first ?? ""
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2 else { continue }
                let name = String(parts[0].filter { $0 != " " && $0 != "\t" })
                guard !name.isEmpty else { continue }
                state.cookies[host, default: [:]][name] = String(parts[1].filter { $0 != " " && $0 != "\t" })
            }
        }
        return page
    }

    private static func fetch(
        _ method: HTTPRequest.Method, _ url: String, headers: HTTPFields, body: Data?, transport: any HTTPTransport
    ) async throws -> (Page, setCookies: [String]) {
        guard let request = HTTPRequest(method: method, url: url, headerFields: headers) else {
            throw Failure("\(path(of: url)) is not an absolute http(s) URL")
        }
        let (response, data) = try await transport.send(request, body: body)
        let page = Page(
            url: url, status: response.status.code, body: String(decoding: data, as: UTF8.self),
            location: response.headerFields[.location])
        return (page, response.headerFields[values: .setCookie])
    }

    // MARK: Where the sign-in ends

    /// The `redirect_uri` the authorization URL names.
    private static func redirectTarget(of url: String) -> URLParts? {
        guard let query = url.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
        return FormURLEncoding.decodeFields(query).fields["redirect_uri"].flatMap(URLParts.init)
    }

    /// Whether `url` is the redirect to the application: the `redirect_uri`'s scheme, host, port and
    /// path; without one, any loopback URL off the provider's origin.
    private static func isRedirect(_ url: String, to target: URLParts?, from start: String) -> Bool {
        guard let parts = URLParts(url) else { return false }
        guard let target else { return parts.isLoopback && parts.authority != URLParts(start)?.authority }
        return parts.scheme == target.scheme && parts.host == target.host && parts.port == target.port
            && pathOnly(parts.pathAndQuery) == pathOnly(target.pathAndQuery)
    }

    private static func pathOnly(_ pathAndQuery: String) -> Substring {
        pathAndQuery.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    }

    /// A URL's path without its query, for messages (queries may hold codes).
    static func path(of url: String) -> String {
        String(pathOnly(URLParts(url)?.pathAndQuery ?? "/"))
    }
}
