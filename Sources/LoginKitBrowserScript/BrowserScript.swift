import HTTPTypes
package import LoginKitHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The steps of a scripted browser, shared by `TestBrowser` (LoginKitMocks) and
/// `loginkit-dev-server browse`: load an authorization URL over an `HTTPTransport`, fill in and
/// submit the sign-in form (or press "Deny"), and follow redirects by hand (each `Location` read,
/// resolved and loaded with `GET`; the transport follows none) until one goes to the login's
/// `redirect_uri`. Cookies are kept per host in ``cookies``; forms are submitted as
/// `application/x-www-form-urlencoded`.
package struct BrowserScript: Sendable {
    /// A page as the browser received it.
    package struct Page: Sendable {
        package let url: String
        package let status: Int
        package let body: String
        /// The `Location` header, on a redirect.
        package let location: String?
    }

    /// The provider's pages did not lead to the application.
    package struct Failure: Error, Sendable {
        package let message: String
        init(_ message: String) { self.message = message }
    }

    /// The most requests one sign-in may take.
    package static let maximumSteps = 20

    let transport: any HTTPTransport
    /// What the sign-in form is filled with, or `nil` to deny.
    let credentials: (username: String, password: String)?
    /// Cookies by host, name and value.
    package var cookies: [String: [String: String]]

    package init(
        transport: any HTTPTransport, credentials: (username: String, password: String)?,
        cookies: [String: [String: String]] = [:]
    ) {
        self.transport = transport
        self.credentials = credentials
        self.cookies = cookies
    }

    /// Follows `start` (or, for a local page, where it leads: ``followingLocalPage(_:)``) through the
    /// provider's pages, doing the sign-in on the form, and returns the redirect to the application
    /// without loading it. Every page loaded goes to `loaded`.
    ///
    /// - Throws: ``Failure``; the transport's errors.
    package mutating func signIn(at url: String, loaded: (Page) -> Void = { _ in }) async throws -> String {
        let start = try Self.followingLocalPage(url)
        let target = Self.redirectTarget(of: start)
        var next: (method: HTTPRequest.Method, url: String, form: String?) = (.get, start, nil)
        for _ in 0..<Self.maximumSteps {
            let page = try await load(next.method, next.url, form: next.form)
            loaded(page)
            if (300..<400).contains(page.status) {
                guard let location = page.location, let resolved = HTMLForm.resolve(location, against: next.url) else {
                    throw Failure("HTTP \(page.status) without a usable Location at \(Self.path(of: next.url))")
                }
                if Self.isRedirect(resolved, to: target, from: start) { return resolved }
                next = (.get, resolved, nil)
                continue
            }
            guard page.status == 200 else {
                throw Failure("the provider answered HTTP \(page.status) at \(Self.path(of: next.url))")
            }
            guard let form = HTMLForm.first(in: page.body) else {
                throw Failure("the page at \(Self.path(of: next.url)) has neither a form nor a redirect")
            }
            do {
                next = try form.submission(signingInAs: credentials, on: next.url)
            } catch {
                throw Failure(error.message)
            }
        }
        throw Failure("no redirect to the application after \(Self.maximumSteps) requests")
    }

    /// Loads `url` with `GET` as a browser following a redirect would (no cookies sent).
    ///
    /// - Throws: ``Failure`` when `url` is not absolute; the transport's errors.
    package static func load(_ url: String, over transport: any HTTPTransport) async throws -> Page {
        try await fetch(.get, url, headers: [.accept: "text/html"], body: nil, transport: transport).page
    }

    // MARK: Loading

    private mutating func load(_ method: HTTPRequest.Method, _ url: String, form: String?) async throws -> Page {
        let host = URLParts(url)?.host ?? ""
        var headers: HTTPFields = [.accept: "text/html"]
        if let jar = cookies[host], !jar.isEmpty {
            headers[.cookie] = jar.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        }
        if form != nil { headers[.contentType] = "application/x-www-form-urlencoded" }
        let (page, setCookies) = try await Self.fetch(
            method, url, headers: headers, body: form.map { Data($0.utf8) }, transport: transport)
        for cookie in setCookies {
            let pair = cookie.split(separator: ";", maxSplits: 1).first ?? ""
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { continue }
            let name = String(parts[0].filter { $0 != " " && $0 != "\t" })
            guard !name.isEmpty else { continue }
            cookies[host, default: [:]][name] = String(parts[1].filter { $0 != " " && $0 != "\t" })
        }
        return page
    }

    private static func fetch(
        _ method: HTTPRequest.Method, _ url: String, headers: HTTPFields, body: Data?, transport: any HTTPTransport
    ) async throws -> (page: Page, setCookies: [String]) {
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
    package static func path(of url: String) -> String {
        String(pathOnly(URLParts(url)?.pathAndQuery ?? "/"))
    }
}
