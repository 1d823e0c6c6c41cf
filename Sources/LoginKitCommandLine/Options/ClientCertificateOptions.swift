// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
import LoginKit

/// `--client-cert`, `--client-key`: the TLS client certificate every connection presents (mutual
/// TLS, RFC 8705), for `--client-auth tls-client-auth|self-signed-tls-client-auth` and for tokens
/// the provider binds to the certificate. The transport reads both files when the client is
/// made: the key must be a regular file of the user's own with mode `0600` (else exit 1, as for
/// `--private-key`). A login records the two paths in the profile (`client_cert`, `client_key`;
/// never the key itself), so that `token`, `request` and `logout` present the same certificate
/// without the flags; given to them, the flags win for that run.
struct ClientCertificateOptions: ParsableArguments {
    @Option(
        name: .customLong("client-cert"),
        help: ArgumentHelp(
            "A PEM file with the TLS client certificate to present (mutual TLS, RFC 8705), optionally followed by its intermediate CA certificates; needs --client-key.",
            valueName: "file"))
    var clientCertificate: String?
    @Option(
        name: .customLong("client-key"),
        help: ArgumentHelp("The unencrypted PEM private key of --client-cert; must be mode 0600.", valueName: "file"))
    var clientKey: String?

    func validate() throws {
        if (clientCertificate == nil) != (clientKey == nil) { throw ValidationError("--client-cert and --client-key go together") }
    }

    /// The profile attribute that records the certificate file's absolute path.
    static let certificateAttribute = "client_cert"
    /// The profile attribute that records the key file's absolute path (never the key).
    static let keyAttribute = "client_key"

    /// Sets the flags' certificate and key, when given, as the client certificate of `configuration`.
    func apply(to configuration: inout CurlHTTPClient.Configuration) {
        guard let clientCertificate, let clientKey else { return }
        configuration.tls.clientCertificate = clientCertificate
        configuration.tls.clientKey = clientKey
    }

    /// What a profile records of the certificate `transport` presents, so that later commands
    /// present it too: the two files' absolute paths; none for a transport that presents none.
    static func attributes(presentedBy transport: any HTTPTransport) -> [String: String] {
        guard let tls = (transport as? CurlHTTPClient)?.configuration.tls, let certificate = tls.clientCertificate, let key = tls.clientKey
        else { return [:] }
        return [certificateAttribute: ClientAuthOptions.absolute(certificate), keyAttribute: ClientAuthOptions.absolute(key)]
    }

    /// `configuration` presenting the certificate a profile's `attributes` record, unless it
    /// presents one already (`--client-cert` wins) or they record none.
    static func presenting(_ configuration: CurlHTTPClient.Configuration, recordedIn attributes: [String: String]) -> CurlHTTPClient.Configuration {
        guard configuration.tls.clientCertificate == nil, let certificate = attributes[certificateAttribute], let key = attributes[keyAttribute]
        else { return configuration }
        var configuration = configuration
        configuration.tls.clientCertificate = certificate
        configuration.tls.clientKey = key
        return configuration
    }

    /// `configuration` presenting the certificate profile `name` of `store` records (see
    /// ``presenting(_:recordedIn:)``), when `isUsed` says the run talks to that profile's provider.
    /// A profile that cannot be read changes nothing: the command reads it next and says why.
    static func presenting(
        _ configuration: CurlHTTPClient.Configuration, profile name: String, in store: any TokenStore,
        isUsed: (StoredProfile) -> Bool = { _ in true }
    ) async -> CurlHTTPClient.Configuration {
        guard configuration.tls.clientCertificate == nil, let stored = try? await store.profile(named: name), isUsed(stored) else {
            return configuration
        }
        return presenting(configuration, recordedIn: stored.attributes)
    }

    /// Runs `body` with `client`, or, when the profile `attributes` record a certificate that
    /// `client` does not present (and no `--client-cert` was given), with a client like it that
    /// presents that one.
    ///
    /// - Throws: what `body` throws; `NetworkError` `.invalidRequest` when the recorded files
    ///   cannot be used (a key others can read, a file that is gone).
    static func withClient<T>(
        _ client: CurlHTTPClient, presentingCertificateIn attributes: [String: String], _ body: (CurlHTTPClient) async throws -> T
    ) async throws -> T {
        let configuration = presenting(client.configuration, recordedIn: attributes)
        guard configuration.tls.clientCertificate != client.configuration.tls.clientCertificate else { return try await body(client) }
        return try await CurlHTTPClient.withClient(configuration: configuration, body)
    }
}
#endif
