import LoginKit
import Testing

@Suite struct CallbackHTTPRequestTests {
    private func parse(_ text: String) -> CallbackHTTPRequest.Parse {
        CallbackHTTPRequest.parse(Array(text.utf8))
    }

    @Test func aBrowsersCallbackParses() {
        let head =
            "GET /callback?code=abc&state=xyz HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: Mozilla/5.0\r\nAccept: text/html\r\n\r\n"
        #expect(
            parse(head) == .complete(CallbackHTTPRequest(method: "GET", path: "/callback", query: "code=abc&state=xyz"))
        )
        #expect(parse("GET / HTTP/1.0\r\n\r\n") == .complete(CallbackHTTPRequest(method: "GET", path: "/", query: "")))
    }

    @Test func anUnfinishedHeadWaitsForMore() {
        #expect(parse("GET /callback HTTP/1.1\r\nHost: x\r\n") == .incomplete)
        #expect(parse("") == .incomplete)
    }

    @Test func aHeadOver8KiBIsTooLarge() {
        let padding = String(repeating: "a", count: 8 * 1024)
        #expect(parse("GET /callback HTTP/1.1\r\nHost: x\r\nX-Padding: \(padding)") == .tooLarge)
        #expect(parse("GET /callback HTTP/1.1\r\nHost: x\r\nX-Padding: \(padding)\r\n\r\n") == .tooLarge)
    }

    @Test(arguments: [
        "GET /callback HTTP/1.1\nHost: x\r\n\r\n",  // bare LF
        "GET /callback HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",  // obs-fold
        "GET  /callback HTTP/1.1\r\nHost: x\r\n\r\n",  // two spaces
        "get /callback HTTP/1.1\r\nHost: x\r\n\r\n",  // lower-case method
        "GET http://127.0.0.1/callback HTTP/1.1\r\nHost: x\r\n\r\n",  // absolute form
        "GET /callback HTTP/2.0\r\nHost: x\r\n\r\n",
        "GET /callback HTTP/1.1\r\n\r\n",  // no Host
        "GET /callback HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        "GET /callback HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n",
        "GET /callback HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET /callback HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n",
        "GET /callback HTTP/1.1\r\nHost: x\u{1}\r\n\r\n",  // control character
        "GET /caf\u{E9} HTTP/1.1\r\nHost: x\r\n\r\n",  // not ASCII
    ])
    func malformedHeadsAreRefused(_ head: String) {
        guard case .invalid = parse(head) else {
            Issue.record("accepted: \(head.debugDescription)")
            return
        }
    }
}
