#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitCurl
import LoginKitHTTP
import LoginKitTestSupport
import Testing

/// Plain HTTP to a link-local address (a cloud metadata service's `169.254.169.254`) is for an
/// identity source's own request only, inside `LinkLocalHTTP.$isAllowed`: any other request — a
/// token, revocation or device endpoint a discovery document names — is refused before anything
/// is sent, as plain HTTP to any host but loopback is.
@Suite(.timeLimit(.minutes(1)))
struct LinkLocalHTTPTests {
    @Test func plainHTTPToALinkLocalAddressIsRefusedOutsideAnIdentitySourcesRequest() async throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.proxy = ""
        try await CurlHTTPClient.withClient(configuration: configuration) { client in
            for url in ["http://169.254.169.254/", "http://169.254.169.254/metadata/identity/oauth2/token", "http://[fe80::1]/token"] {
                let error = await thrown { try await client.send(.post, url, body: Data("client_secret=s".utf8)) }
                let networkError = try #require(error as? NetworkError, "\(url): \(String(describing: error))")
                #expect(networkError.code == .insecureURL, "\(url)")
                #expect(networkError.transportCode == nil, "\(url): refused before any network activity")
            }
        }
    }

    /// Inside the flag the same kind of request is not refused as insecure: it goes out (and, as
    /// nothing answers at `169.254.0.1:9`, fails as the network makes it fail, within the short
    /// timeouts set here), and only the request that set the flag is let through.
    @Test func anIdentitySourcesRequestMayUsePlainHTTPToALinkLocalAddress() async throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.connectTimeout = .seconds(1)
        configuration.totalTimeout = .seconds(1)
        configuration.proxy = ""
        try await CurlHTTPClient.withClient(configuration: configuration) { client in
            let allowed = await LinkLocalHTTP.$isAllowed.withValue(true) {
                await thrown { try await client.send(.get, "http://169.254.0.1:9/") }
            }
            #expect((allowed as? NetworkError)?.code != .insecureURL, "\(String(describing: allowed))")

            // The flag is the request's task's: after it, the same URL is refused again.
            let after = await thrown { try await client.send(.get, "http://169.254.0.1:9/") }
            #expect((after as? NetworkError)?.code == .insecureURL)
        }
    }
}
