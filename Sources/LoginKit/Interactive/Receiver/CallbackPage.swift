/// What the loopback receiver answers one request with, and whether that ends the login.
package struct ReceiverReply: Sendable {
    /// The HTTP status.
    package var status: Int
    /// The HTML page.
    package var page: String
    /// The login's outcome: a code, or the error that ends it; `nil` to keep waiting.
    package var outcome: Result<String, any Error>?

    /// A reply with `status` and `page`; an `outcome` ends the login.
    package init(status: Int, page: String, outcome: Result<String, any Error>? = nil) {
        self.status = status
        self.page = page
        self.outcome = outcome
    }
}

/// The pages the loopback receiver serves. Each is a fixed, short HTML text: nothing from the
/// request (no code, no state, no `error_description`) is ever echoed, so no page can leak a code
/// or a token, nor carry a script someone slipped into a parameter.
package enum CallbackPage {
    /// The reply for a callback on the expected path.
    package static func reply(for outcome: CallbackOutcome) -> ReceiverReply {
        switch outcome {
        case .notACallback:
            return ReceiverReply(status: 400, page: notASignInResponse)
        case .foreign:
            return ReceiverReply(status: 400, page: ignoredResponse)
        case .code(let code):
            return ReceiverReply(status: 200, page: signedIn, outcome: .success(code))
        case .failed(let error as LoginError) where error.isForgedResponse:
            return ReceiverReply(status: 400, page: otherIssuer, outcome: .failure(error))
        case .failed(let error as LoginError) where error.code == .accessDenied:
            return ReceiverReply(status: 200, page: denied, outcome: .failure(error))
        case .failed(let error):
            return ReceiverReply(status: 200, page: failed, outcome: .failure(error))
        }
    }

    static let signedIn = page(
        "Signed in", "You are signed in. You can close this window and return to the application.")
    static let denied = page("Sign-in denied", "The sign-in was denied. You can close this window.")
    static let failed = page("Sign-in failed", "The sign-in did not complete. Return to the application for details.")
    static let otherIssuer = page(
        "Sign-in refused",
        "This response does not come from the provider the application signs in with, so nothing was signed in. Return to the application and start again."
    )
    static let ignoredResponse = page(
        "Sign-in response refused",
        "This response does not belong to the sign-in in progress, so it was ignored. If you are signing in, finish in the window the application opened."
    )
    static let notASignInResponse = page(
        "Not a sign-in response", "This address only accepts the response of a sign-in.")
    static let notFound = page("Not found", "There is nothing here.")
    static let methodNotAllowed = page("Method not allowed", "This address only accepts GET.")
    static let badRequest = page("Bad request", "The request could not be read.")
    static let tooLarge = page("Request too large", "The request headers are too large.")

    private static func page(_ title: String, _ text: String) -> String {
        """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>\(title)</title></head>\
        <body><h1>\(title)</h1><p>\(text)</p></body></html>

        """
    }

    /// A complete HTTP/1.1 response carrying `page`; the connection is closed after it.
    static func response(status: Int, page: String, allow: String? = nil) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(reason(status))\r\n"
        head += "Content-Type: text/html; charset=utf-8\r\n"
        head += "Content-Length: \(page.utf8.count)\r\n"
        head += "Cache-Control: no-store\r\n"
        head += "Connection: close\r\n"
        head += "Referrer-Policy: no-referrer\r\n"
        head += "X-Content-Type-Options: nosniff\r\n"
        head += "Content-Security-Policy: default-src 'none'\r\n"
        if let allow { head += "Allow: \(allow)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + Array(page.utf8)
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 431: "Request Header Fields Too Large"
        default: "Error"
        }
    }
}
