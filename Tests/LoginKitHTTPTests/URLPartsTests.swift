import HTTPTypes
import LoginKitHTTP
import Testing

@Suite struct URLPartsTests {
    @Test func splitsAnHTTPSURL() throws {
        let parts = try #require(URLParts("HTTPS://ID.Example.com:8443/oauth/token?x=1#frag"))
        #expect(parts.scheme == "https")
        #expect(parts.host == "id.example.com")
        #expect(parts.port == 8443)
        #expect(parts.authority == "ID.Example.com:8443")
        #expect(parts.pathAndQuery == "/oauth/token?x=1")
        #expect(!parts.isLoopback)
    }

    @Test func defaultsThePathToSlash() throws {
        #expect(try #require(URLParts("http://127.0.0.1:8080")).pathAndQuery == "/")
        #expect(try #require(URLParts("http://127.0.0.1?a=b")).pathAndQuery == "/?a=b")
    }

    @Test(arguments: [
        "http://127.0.0.1/", "http://127.1.2.3:9/", "http://localhost:1/", "http://[::1]:80/", "http://LOCALHOST/",
    ])
    func recognisesLoopback(_ url: String) throws {
        #expect(try #require(URLParts(url)).isLoopback)
    }

    @Test(arguments: [
        "http://128.0.0.1/", "http://127.0.0.1.example.com/", "http://example.com/", "http://[::2]/",
        "http://127.0.0.256/", "http://localhost.example/",
    ])
    func rejectsNonLoopbackAsLoopback(_ url: String) throws {
        #expect(try #require(URLParts(url)).isLoopback == false)
    }

    @Test(arguments: [
        "", "example.com", "ftp://example.com/", "file:///etc/passwd", "https://user:pw@example.com/",
        "https://:443/", "https://example.com:0/", "https://example.com:99999/", "https://example.com:x/",
        "https://exa mple.com/", "https://example.com/\r\nX: y", "https://[::1/",
    ])
    func refusesWhatIsNotAnAbsoluteHTTPURL(_ url: String) {
        #expect(URLParts(url) == nil)
    }

    @Test func buildsRequestsFromURLStrings() throws {
        let request = try #require(HTTPRequest(method: .post, url: "https://id.example.com/token?a=1"))
        #expect(request.scheme == "https")
        #expect(request.authority == "id.example.com")
        #expect(request.path == "/token?a=1")
        #expect(request.urlString == "https://id.example.com/token?a=1")
        #expect(HTTPRequest(method: .get, url: "not a url") == nil)
    }
}
