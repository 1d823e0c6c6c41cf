#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitCurl
import LoginKitDevServer
import LoginKitHTTP
import Testing

/// Runs `body` with a fresh dev server and a client, and stops both whatever happens.
func withServerAndClient<T>(
    configuration: CurlHTTPClient.Configuration = .init(),
    _ body: (DevServer, CurlHTTPClient) async throws -> T
) async throws -> T {
    try await DevServer.withServer { server in
        try await CurlHTTPClient.withClient(configuration: configuration) { client in
            try await body(server, client)
        }
    }
}

extension CurlHTTPClient {
    /// Sends a request to a URL string; the test fails when the URL is not valid.
    func send(
        _ method: HTTPRequest.Method,
        _ url: String,
        headers: HTTPFields = [:],
        body: Data? = nil
    ) async throws -> (HTTPResponse, Data) {
        let request = try #require(HTTPRequest(method: method, url: url, headerFields: headers))
        return try await send(request, body: body)
    }
}

/// Waits for the first arrival of `path` on a stream subscribed before the request was sent.
func awaitArrival(of path: String, in arrivals: AsyncStream<String>) async {
    for await arrived in arrivals where arrived == path { return }
}

/// Waits for `count` arrivals of `path`.
func awaitArrivals(of path: String, count: Int, in arrivals: AsyncStream<String>) async {
    var seen = 0
    for await arrived in arrivals where arrived == path {
        seen += 1
        if seen == count { return }
    }
}
