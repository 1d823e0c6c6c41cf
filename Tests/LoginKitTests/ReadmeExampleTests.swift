#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit
import LoginKitDevServer
import Testing

/// The README's usage example, verbatim but for the URL, run against the dev server: if the README
/// example stops compiling or working, this fails.
@Suite struct ReadmeExampleTests {
    @Test func theReadmeTransportExampleWorks() async throws {
        let status = try await DevServer.withServer { server in
            try await readmeExample(tokenURL: server.url("/test/echo"))
        }
        #expect(status == 200)
    }

    private func readmeExample(tokenURL: String) async throws -> Int {
        // --- README begins
        let client = try CurlHTTPClient()
        guard let request = HTTPRequest(
            method: .post, url: tokenURL,
            headerFields: [.contentType: "application/x-www-form-urlencoded"]
        ) else { throw NetworkError(.invalidRequest, "bad token URL") }
        let (response, body) = try await client.send(request, body: Data("grant_type=client_credentials".utf8))
        print(response.status, body.count)
        await client.shutdown()
        // --- README ends
        return response.status.code
    }
}
