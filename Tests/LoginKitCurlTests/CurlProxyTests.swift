#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitCurl
import LoginKitDevServer
import LoginKitHTTP
import LoginKitTestSupport
import Testing

/// Loopback destinations never go through a proxy. A second dev server stands in for the proxy: a
/// proxied request reaches it in absolute form (`GET http://host/path`), which it routes by path like
/// any other, so its counters show exactly what went through the proxy. The proxy is the client's
/// explicit `proxy` option rather than `http_proxy`, which would be process-wide while tests run in
/// parallel; libcurl treats both the same way.
@Suite(.timeLimit(.minutes(3)))
struct CurlProxyTests {
    @Test func loopbackDestinationsNeverGoThroughTheProxyEvenOnARecycledHandle() async throws {
        try await DevServer.withServer { proxy in
            var elsewhere = DevServer.Configuration.quiet
            elsewhere.host = "127.0.0.2"  // loopback, but not in libcurl's default no_proxy list
            try await DevServer.withServer(configuration: elsewhere) { target in
                var configuration = CurlHTTPClient.Configuration()
                configuration.proxy = proxy.baseURL
                configuration.allowsInsecureHTTP = true  // for the control requests: plain http to a name that is not loopback
                try await CurlHTTPClient.withClient(configuration: configuration) { client in
                    // Control: a name that is not loopback goes to the proxy (which answers it).
                    let remote = "http://login.example.test/test/status/200"
                    let (viaProxy, _) = try await client.send(.get, remote)
                    #expect(viaProxy.status == .ok)
                    #expect(proxy.monitor.requestCount(path: "/test/status/200") == 1)

                    // The same, recycled easy handle, now a password to 127.0.0.2: straight to the target.
                    let (direct, _) = try await client.send(.post, target.url("/test/echo"), body: Data("password=hunter2".utf8))
                    #expect(direct.status == .ok)
                    #expect(target.monitor.requestCount(path: "/test/echo") == 1)
                    #expect(proxy.monitor.requestCount(path: "/test/echo") == 0, "a loopback request went through the proxy")

                    // And back: the loopback setting did not stick to the handle.
                    let (again, _) = try await client.send(.get, remote)
                    #expect(again.status == .ok)
                    #expect(proxy.monitor.requestCount(path: "/test/status/200") == 2)
                    #expect(target.monitor.requestCount(path: "/test/status/200") == 0)
                }
            }
        }
    }

    @Test func aProxyURLWithCredentialsIsRefusedWithoutRepeatingThem() throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.proxy = "http://user:hunter2@proxy.example:3128"
        let error = try #require(throws: NetworkError.self) { _ = try CurlHTTPClient(configuration: configuration) }
        #expect(error.code == .invalidRequest)
        #expect(!String(describing: error).contains("hunter2"))
    }
}
