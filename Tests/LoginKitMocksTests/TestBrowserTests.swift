import Foundation
import LoginKit
import LoginKitMocks
import Testing

/// `TestBrowser` (and `loginkit-dev-server browse`, which shares its steps) on sign-in forms other
/// than the dev server's, served by a `MockHTTPTransport`.
@Suite(.timeLimit(.minutes(3)))
struct TestBrowserTests {
    static let redirect = "http://127.0.0.1:5000/callback?code=c&state=s"
    static let authorizationPath = "/oauth2/authorize?client_id=c&redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2Fcallback&state=s"
    static let authorizationURL = "https://id.test" + authorizationPath

    /// oidc-provider-mock's page: an identity picker with one text field (`sub`), no password, and
    /// "Deny access" in a form of its own: the username goes in the text field (no "the sign-in form
    /// has no password field").
    @Test func aFormWithOneTextFieldAndNoPasswordGetsTheUsername() async throws {
        let transport = MockHTTPTransport()
        let page = """
            <!doctype html><h1>Authorize Client</h1>
            <form method="post"><fieldset role="group">
              <input id="subject-input" type="text" name="sub" placeholder="Subject" aria-label="Subject" required autofocus />
              <button type="submit">Authorize</button>
            </fieldset></form>
            <form method="post"><button type="submit" name="action" value="deny">Deny access</button></form>
            """
        transport.enqueue(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: Data(page.utf8))
        transport.enqueue(status: .found, headers: [.location: Self.redirect])
        let browser = TestBrowser(transport: transport, action: .signIn(username: "alice", password: "unused"))

        #expect(try await browser.signIn(at: Self.authorizationURL) == Self.redirect)
        let load = await transport.nextRequest()
        #expect(load.arguments.request.method == .get)
        let submit = await transport.nextRequest()
        #expect(submit.arguments.request.method == .post)
        #expect(submit.arguments.request.path == Self.authorizationPath, "a form without action posts to its page")
        #expect(submit.arguments.body.map { String(decoding: $0, as: UTF8.self) } == "sub=alice")
        transport.verify()
    }

    /// Two text fields and no password: the browser does not guess which one names the user.
    @Test func aFormWithSeveralTextFieldsAndNoPasswordIsRefused() async throws {
        let transport = MockHTTPTransport()
        let page = """
            <form method="post"><input type="text" name="first"><input name="second">
            <button type="submit">Continue</button></form>
            """
        transport.enqueue(status: .ok, headers: [.contentType: "text/html"], body: Data(page.utf8))
        let browser = TestBrowser(transport: transport, action: .signIn(username: "alice", password: "unused"))

        let failure = await #expect(throws: TestBrowser.Failure.self) { try await browser.signIn(at: Self.authorizationURL) }
        #expect(failure?.message == "the sign-in form has no password field")
        #expect(transport.requestCount == 1, "nothing submitted")
        transport.verify()
    }
}
