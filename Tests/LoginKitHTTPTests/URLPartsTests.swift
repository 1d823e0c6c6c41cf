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

    /// Delimiters count by their byte, as libcurl splits the URL: a combining mark after `@` or `:`
    /// does not hide them. A port and a loopback octet are ASCII digits only.
    @Test(arguments: [
        "https://user@\u{301}example.com/", "https://example.com:\u{301}443/", "https://example.com:+443/",
        "https://example.com:0443x/", "https://example.com:123456/",
    ])
    func splitsOnBytesNotCharacters(_ url: String) {
        #expect(URLParts(url) == nil)
    }

    @Test func readsSchemesPortsAndHostsByTheirBytes() throws {
        let mixed = try #require(URLParts("HtTpS://\u{00C9}xample.COM:08443?q"))
        #expect(mixed.scheme == "https")
        #expect(mixed.host == "\u{00E9}xample.com")
        #expect(mixed.port == 8443)
        #expect(mixed.pathAndQuery == "/?q")
        #expect(try #require(URLParts("http://[::1]")).port == nil)
        #expect(URLParts("httpx://example.com/") == nil)
        #expect(URLParts("http:/example.com/") == nil)
    }

    @Test(arguments: ["http://127.+1.0.1/", "http://127.0.0.1./", "http://127..0.1/", "http://127.0.0.0001/", "http://127.0.0/"])
    func loopbackNeedsFourDecimalOctets(_ url: String) throws {
        #expect(try #require(URLParts(url)).isLoopback == false)
    }

    /// libcurl and glibc read an octet with a leading zero as octal and resolve `127.0.0.08` in DNS:
    /// not loopback, so it gets neither plain http nor the no-proxy rule.
    @Test(arguments: ["http://127.0.0.08/", "http://127.08.0.1/", "http://127.0.0.099/", "http://127.0.0.019/", "http://127.000.000.001/", "http://0127.0.0.1/"])
    func octetsWithALeadingZeroAreNotLoopback(_ url: String) throws {
        #expect(try #require(URLParts(url)).isLoopback == false)
    }

    /// Cloud metadata services answer plain HTTP on link-local addresses; only addresses written
    /// as such count, never a name and never an octet that libcurl would read another way.
    @Test func linkLocalAddressesAreThoseWrittenAsSuch() throws {
        for url in ["http://169.254.169.254/metadata", "http://169.254.0.1/", "http://[fe80::a9fe:a9fe]/", "http://[FEBF::1]:80/"] {
            #expect(try #require(URLParts(url)).isLinkLocal, "\(url)")
        }
        for url in [
            "http://169.255.169.254/", "http://169.254.169.0254/", "http://0169.254.169.254/", "http://169.254.169/",
            "http://metadata.google.internal/", "http://[fec0::1]/", "http://[fe8::1]/", "http://127.0.0.1/", "http://169.254.169.254.example/",
        ] {
            #expect(try #require(URLParts(url)).isLinkLocal == false, "\(url)")
        }
    }

    @Test func aZeroOctetIsLoopback() throws {
        #expect(try #require(URLParts("http://127.0.0.0:80/")).isLoopback)
        #expect(try #require(URLParts("http://127.10.200.255/")).isLoopback)
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
