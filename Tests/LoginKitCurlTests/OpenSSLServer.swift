import Foundation
import HTTPTypes
import LoginKitCurl
import LoginKitHTTP
import LoginKitTestSupport
import Testing

/// Runs `openssl s_server` on a free loopback port, with `arguments` after its `-accept`, until
/// `body` (given the port) returns; the server is killed then.
func withOpenSSLServer<T>(_ arguments: [String], _ body: (Int) async throws -> T) async throws -> T {
    let port = try freeLoopbackPort()
    let server = try ChildProcess("/usr/bin/openssl", ["s_server", "-accept", "127.0.0.1:\(port)"] + arguments)
    defer { server.kill() }
    var lines = server.lines.makeAsyncIterator()
    while let line = await lines.next() {
        if line.contains("ACCEPT") { break }
    }  // s_server prints ACCEPT once listening
    return try await body(port)
}

/// A GET of `url` by a client whose TLS settings are `tls` (at most 5 s to connect): the response
/// and its body, or the error the client or the request threw.
func getOverTLS(_ url: String, tls: CurlHTTPClient.TLS) async -> Result<(HTTPResponse, Data), any Error> {
    var configuration = CurlHTTPClient.Configuration()
    configuration.tls = tls
    configuration.connectTimeout = .seconds(5)
    do {
        return .success(
            try await CurlHTTPClient.withClient(configuration: configuration) { client in
                let request = try #require(HTTPRequest(method: .get, url: url))
                return try await client.send(request, body: nil)
            })
    } catch {
        return .failure(error)
    }
}
