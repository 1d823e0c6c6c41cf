// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit

/// A profile's access token as the commands that hand it to other programs take it (`git-credential`,
/// `docker-credential`, `exec`): valid, refreshed when needed through the profile's `AuthService` —
/// once across processes, as for `token` — and replaced when a server refused it.
enum ProfileAccessToken {
    /// A valid access token.
    struct Issued: Sendable {
        let token: String
        /// When it expires, when the provider said.
        let expiresAt: Date?
        /// A refresh whose credentials could not be saved: the token is good, the session ends with
        /// this process (``ProfileCall/unsavedFailure(_:)`` says so).
        let unsaved: TokenStoreError?
    }

    /// The access token of profile `name` in `store`, valid for at least `minimumValidity`, asked of
    /// the provider (when it must be) through a client made with `network` — presenting the TLS
    /// client certificate the profile's login recorded, unless `network` names one.
    ///
    /// - Throws: `CLIFailure` exit 3 when there is no such profile; exit 1 when the provider issued
    ///   no access token; exit 5 when the token holds spaces or control characters (it would change
    ///   the meaning of what it is written into); what `AuthService` throws (`LoginRequiredError`
    ///   when a login is needed, `NetworkError`, `ServerError`, `TokenStoreError`).
    static func valid(
        profile name: String, store: any TokenStore, network: CurlHTTPClient.Configuration, minimumValidity: Duration
    ) async throws -> Issued {
        guard let stored = try await store.profile(named: name) else { throw notLoggedIn(name) }
        let call = try await withService(of: stored, named: name, store: store, network: network) { service in
            try await service.validCredentials(minimumValidity: minimumValidity)
        }
        let credentials = try call.result.get()
        guard let token = credentials.accessToken else {
            throw CLIFailure(exitCode: 1, "the provider issued no access token for profile \"\(Terminal.printable(name, limit: 100))\"")
        }
        guard !token.isEmpty, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw CLIFailure(exitCode: 5, "the provider's access token holds spaces, control or non-ASCII characters; it is handed to no other program")
        }
        return Issued(token: token, expiresAt: credentials.expiresAt, unsaved: call.unsaved)
    }

    /// Makes the next token of profile `name` a new one when the profile holds `rejected` (`nil`:
    /// whatever access token it holds) — a server refused it: the forced refresh, one across
    /// processes however many callers reject the same token. A profile holding another token (it
    /// was replaced already, or it never was this profile's) is left alone.
    ///
    /// The client is made as for ``valid(profile:store:network:minimumValidity:)``.
    ///
    /// - Returns: whether the profile held that token and was refreshed.
    /// - Throws: `CLIFailure` exit 1 when the refreshed credentials could not be saved; what
    ///   `AuthService` throws (`LoginRequiredError` `.cannotRefresh` without a refresh token).
    static func replace(
        _ rejected: String?, profile name: String, store: any TokenStore, network: CurlHTTPClient.Configuration
    ) async throws -> Bool {
        guard let stored = try await store.profile(named: name), let held = stored.credentials.accessToken else { return false }
        if let rejected, !sameToken(held, rejected) { return false }
        let call = try await withService(of: stored, named: name, store: store, network: network) { service in
            try await service.validCredentials(rejecting: held)
        }
        _ = try call.result.get()
        if let unsaved = call.unsaved { throw ProfileCall.unsavedFailure(unsaved) }
        return true
    }

    /// Runs `body` with the `AuthService` of profile `name` (`stored`, in `store`) as ``ProfileCall``
    /// runs it, through a client made with `network` — presenting the TLS client certificate the
    /// profile's login recorded, unless `network` names one; a refused client names the credential
    /// it lacks (``ClientAuthOptions/namingMissingCredential(of:_:)``).
    ///
    /// - Returns: what `body` returned or threw, and the refresh whose credentials could not be saved.
    /// - Throws: what making the client or the profile's API throws.
    private static func withService(
        of stored: StoredProfile, named name: String, store: any TokenStore, network: CurlHTTPClient.Configuration,
        _ body: @Sendable (AuthService) async throws -> Credentials
    ) async throws -> (result: Result<Credentials, any Error>, unsaved: TokenStoreError?) {
        let configuration = ClientCertificateOptions.presenting(network, recordedIn: stored.attributes)
        return try await CurlHTTPClient.withClient(configuration: configuration) { client in
            let api = try APIFactory.api(
                for: stored.source, attributes: stored.attributes, from: store, transport: client, clientSecret: APIFactory.environmentSecret)
            return await ProfileCall.run(api: api, store: store, profile: name) { service in
                try await ClientAuthOptions.namingMissingCredential(of: (api as? OAuth2API)?.configuration) {
                    try await body(service)
                }
            }
        }
    }

    /// The failure for a profile that does not exist (exit 3).
    static func notLoggedIn(_ name: String) -> CLIFailure {
        CLIFailure(exitCode: 3, "not logged in (profile \"\(Terminal.printable(name, limit: 100))\"); run `loginkit login`")
    }

    /// Whether `a` and `b` are the same token, in time that depends on their lengths only: the
    /// comparison with a token another program sent tells it nothing about the stored one.
    static func sameToken(_ a: String, _ b: String) -> Bool {
        let left = Array(a.utf8)
        let right = Array(b.utf8)
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for index in left.indices { difference |= left[index] ^ right[index] }
        return difference == 0
    }
}
#endif
