import Foundation
import Glibc
@testable import LoginKit
import LoginKitHTTP
import LoginKitTestSupport
import Testing

/// What an outside review of the browser login and the token endpoint found.
@Suite(.timeLimit(.minutes(1)))
struct SecurityReviewTests {
    /// The page that hands the sign-in to the browser goes only where no other user can move it:
    /// in a directory others may write without the sticky bit, another user renames the page's
    /// fresh directory away and puts one of theirs in its place (the `chmod` to 0700 then fails
    /// unnoticed, the page is written into their directory, and they swap it for a page that sends
    /// the browser to their own authorization request, whose code they then redeem). A sticky
    /// directory, as `/tmp`, keeps others from renaming what it holds.
    @Test func aTemporaryDirectoryOthersMayWriteWithoutTheStickyBitIsPassedOver() async throws {
        try await withTemporaryDirectory { directory in
            let shared = try makeDirectory(directory + "/shared", mode: 0o777)
            let sticky = try makeDirectory(directory + "/sticky", mode: 0o1777)
            #expect(!BrowserHandoffPage.baseDirectories(["TMPDIR": shared]).contains(shared))
            #expect(BrowserHandoffPage.baseDirectories(["TMPDIR": sticky]).contains(sticky))

            let page = try BrowserHandoffPage.write(
                leadingTo: "https://id.example/authorize?state=S7ate&code_challenge=Ch4llenge", environment: ["TMPDIR": shared])
            defer { page.remove() }
            #expect(!page.path.hasPrefix(shared + "/"), "\(page.path)")
        }
    }

    /// A request that carries a client assertion (`private_key_jwt`, `client_secret_jwt`) is sent
    /// through the never-resending path whatever its grant: a copy that libcurl resends on a new
    /// connection after a reused one died carries the same `jti`, which a provider that saw the
    /// first copy refuses (RFC 7523 §3) — a client-credentials login or a revocation then fails as
    /// `invalid_client`, "check the client configuration".
    @Test func aRequestCarryingAClientAssertionIsNeverResent() async throws {
        let transport = TokenEndpointTests.RecordingTransport()
        var configuration = OAuth2API.Configuration(issuer: "https://id.example", clientID: "cli")
        configuration.usesDiscovery = false
        configuration.endpoints.token = "https://id.example/token"
        configuration.clientAssertionKey = try SigningKey.generate(.es256, keyID: nil)
        let api = OAuth2API(configuration: configuration, transport: transport)
        _ = try await api.clientCredentials(scope: "read")
        #expect(transport.paths == [.neverResent])
    }
}

/// Makes the directory `path` with exactly `mode` (the sticky bit included); returns `path`.
private func makeDirectory(_ path: String, mode: mode_t) throws -> String {
    guard mkdir(path, mode) == 0, chmod(path, mode) == 0 else {
        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
    return path
}
