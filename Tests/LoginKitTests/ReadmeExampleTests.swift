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
        var serverConfiguration = DevServer.Configuration()
        serverConfiguration.logLevel = .critical
        let server = try await DevServer.start(configuration: serverConfiguration)
        let tokenURL = server.url("/test/echo")
        do {
            let status = try await readmeExample(tokenURL: tokenURL)
            #expect(status == 200)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
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
