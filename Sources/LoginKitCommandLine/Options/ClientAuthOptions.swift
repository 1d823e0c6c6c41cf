// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import LoginKit

/// `--client-auth`, `--private-key`, `--key-id`, `--signing-alg`: how a confidential client
/// authenticates (RFC 7523 `private_key_jwt` and `client_secret_jwt`, a secret in Basic or the
/// body, or RFC 8705 mutual TLS with the certificate of `--client-cert`). The secret itself comes
/// from `$LOGINKIT_CLIENT_SECRET` or stdin, never a flag.
struct ClientAuthOptions: ParsableArguments {
    /// `--client-auth`'s values.
    enum Method: String, CaseIterable, ExpressibleByArgument {
        case secretBasic = "secret-basic"
        case secretPost = "secret-post"
        case privateKeyJWT = "private-key-jwt"
        case clientSecretJWT = "client-secret-jwt"
        case tlsClientAuth = "tls-client-auth"
        case selfSignedTLSClientAuth = "self-signed-tls-client-auth"

        var library: OAuth2API.ClientAuthenticationMethod {
            switch self {
            case .secretBasic: .basic
            case .secretPost: .post
            case .privateKeyJWT: .privateKeyJWT
            case .clientSecretJWT: .clientSecretJWT
            case .tlsClientAuth: .tlsClientAuth
            case .selfSignedTLSClientAuth: .selfSignedTLSClientAuth
            }
        }
    }

    @Option(name: .customLong("client-auth"), help: "How the client authenticates (default: private-key-jwt with --private-key, else chosen from discovery; the two TLS methods present --client-cert).")
    var clientAuth: Method?
    @Option(name: .customLong("private-key"), help: "PEM or JWK file of the client's private key for private_key_jwt; must be mode 0600.")
    var privateKey: String?
    @Option(name: .customLong("key-id"), help: "The kid the provider registered the key under.") var keyID: String?
    @Option(name: .customLong("signing-alg"), help: "RS256, PS256, ES256, … (default: RS256 for RSA keys, ES256/ES384 by curve, EdDSA).")
    var signingAlgorithm: String?

    func validate() throws {
        if clientAuth == .privateKeyJWT && privateKey == nil { throw ValidationError("--client-auth private-key-jwt needs --private-key") }
        if let clientAuth, clientAuth != .privateKeyJWT, privateKey != nil {
            throw ValidationError("--private-key goes with --client-auth private-key-jwt, not \(clientAuth.rawValue)")
        }
        if privateKey == nil, keyID != nil || signingAlgorithm != nil { throw ValidationError("--key-id and --signing-alg need --private-key") }
        if let signingAlgorithm, JWSAlgorithm(rawValue: signingAlgorithm) == nil {
            throw ValidationError("--signing-alg must be one of \(JWSAlgorithm.allCases.map(\.rawValue).joined(separator: ", "))")
        }
    }

    /// The flags given, for "applies to … only" messages.
    var given: [String] {
        [("--client-auth", clientAuth != nil), ("--private-key", privateKey != nil), ("--key-id", keyID != nil), ("--signing-alg", signingAlgorithm != nil)]
            .filter(\.1).map(\.0)
    }

    /// The attributes a profile keeps so that a later `token` authenticates the same way: the
    /// method and the key file's absolute path (never the key).
    var attributes: [String: String] {
        var attributes: [String: String] = [:]
        attributes["client_auth"] = clientAuth?.library.rawValue ?? (privateKey != nil ? OAuth2API.ClientAuthenticationMethod.privateKeyJWT.rawValue : nil)
        attributes["private_key"] = privateKey.map(Self.absolute)
        attributes["key_id"] = keyID
        attributes["signing_alg"] = signingAlgorithm
        return attributes
    }

    /// Sets the method and loads the key given.
    ///
    /// - Throws: `CLIFailure` (exit 1) for a key file others can read, (exit 2) for one that is not a key.
    func apply(to configuration: inout OAuth2API.Configuration) throws {
        try Self.apply(attributes, to: &configuration)
    }

    /// Sets what a profile's `attributes` record: the method, and the key read from its file again.
    static func apply(_ attributes: [String: String], to configuration: inout OAuth2API.Configuration) throws {
        if let method = attributes["client_auth"].flatMap(OAuth2API.ClientAuthenticationMethod.init(rawValue:)) {
            configuration.clientAuthenticationMethod = method
        }
        if let path = attributes["private_key"] {
            configuration.clientAssertionKey = try loadKey(
                path: path, algorithm: attributes["signing_alg"].flatMap(JWSAlgorithm.init(rawValue:)), keyID: attributes["key_id"])
        }
    }

    /// Runs `body`, which talks to the provider as `configuration`'s client. When that client had
    /// neither a secret nor a key nor an identity source for its assertion nor a TLS client
    /// authentication method, its requests went out unauthenticated: a provider refusing the client
    /// (`invalid_client`, or HTTP 401) then gets a failure that says no secret was supplied, with
    /// the exit code the refusal has anyway. Every other error passes unchanged.
    static func namingMissingCredential<T>(of configuration: OAuth2API.Configuration?, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            guard let configuration, configuration.clientSecret == nil, configuration.clientAssertionKey == nil,
                configuration.clientAssertionSource == nil,
                ![.tlsClientAuth, .selfSignedTLSClientAuth].contains(configuration.clientAuthenticationMethod),
                let answer = clientRefusal(error)
            else { throw error }
            let refusal = CLIFailure(error)
            throw CLIFailure(
                exitCode: refusal.exitCode,
                "the provider refused the client \"\(Terminal.printable(configuration.clientID, limit: 200))\" (\(Terminal.printable(answer, limit: 100))), "
                    + "and no client secret was supplied: a confidential client needs $LOGINKIT_CLIENT_SECRET (or --client-secret-stdin "
                    + "with `login --client-credentials`), or its key with --private-key",
                detail: refusal.detail)
        }
    }

    /// The provider's answer when `error` is its refusal of the client's authentication
    /// (`invalid_client`, `HTTP 401`); `nil` for any other error.
    private static func clientRefusal(_ error: any Error) -> String? {
        switch error {
        case let error as LoginError where error.code == .invalidClient: return error.providerError ?? "invalid_client"
        case let error as ServerError where error.status == 401: return "HTTP 401"
        default: return nil
        }
    }

    static func absolute(_ path: String) -> String {
        guard !path.hasPrefix("/"), let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        return String(cString: cwd) + "/" + path
    }

    /// Reads a private key file: a regular file of the user's own, mode 0600 or stricter (refused
    /// otherwise, as a readable store is), PEM or a JWK.
    static func loadKey(path: String, algorithm: JWSAlgorithm?, keyID: String?) throws -> SigningKey {
        let bytes = try readPrivateFile(path, what: "the private key")
        do {
            if bytes.first(where: { ![0x20, 0x0A, 0x0D, 0x09].contains($0) }) == UInt8(ascii: "{") {
                return try SigningKey(jwkText: bytes, algorithm: algorithm, keyID: keyID)
            }
            return try SigningKey(pem: String(decoding: bytes, as: UTF8.self), algorithm: algorithm, keyID: keyID)
        } catch {
            throw CLIFailure(exitCode: 2, "the private key \(Terminal.printable(path, limit: 300)): \(error.message)")
        }
    }

    /// A private file of the user's own: refused (exit 1) when others may read it or it is not
    /// theirs, as a readable store is; exit 2 when it does not exist.
    static func readPrivateFile(_ path: String, what: String) throws -> [UInt8] {
        guard let bytes = try StoreFileSystem.readPrivateFile(path) else {
            throw CLIFailure(exitCode: 2, "\(what) \(Terminal.printable(path, limit: 300)) does not exist")
        }
        return bytes
    }
}
#endif
