import Foundation
import HTTPTypes
import LoginKitCurl
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// Mutual TLS against an `openssl s_server` that requires a client certificate the test CA signed,
/// with certificates made for the test: the configured certificate is presented, the key file is
/// checked when the client is created, a certificate or key libcurl cannot use fails the request
/// naming the files, and the RFC 8705 thumbprint matches OpenSSL's.
@Suite(
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "needs openssl"),
    .timeLimit(.minutes(2)))
struct ClientCertificateTests {
    /// `TLSTests.Certificates` (a CA, server certificates, a stranger's key), plus a client
    /// certificate the CA signed and its key, mode 0600.
    struct ClientCertificates {
        let server: TLSTests.Certificates
        var directory: String { server.directory }
        var caFile: String { server.caFile }
        /// The client's certificate alone.
        var certificate: String { directory + "/client.pem" }
        /// The client's certificate followed by the CA's.
        var chain: String { directory + "/client-chain.pem" }
        /// The client's private key followed by its certificate.
        var keyAndCertificate: String { directory + "/client-combined.pem" }
        var key: String { directory + "/client.key" }
        /// Another key than the certificate's (mode 0600).
        var strangerKey: String { directory + "/stranger.key" }
        /// The client's key, encrypted with a passphrase (mode 0600).
        var encryptedKey: String { directory + "/client-encrypted.key" }
        /// A PEM block labelled as a certificate that does not parse as one.
        var brokenCertificate: String { directory + "/broken.pem" }

        static func make(in directory: String) async throws -> ClientCertificates {
            let server = try await TLSTests.Certificates.make(in: directory)
            let script = """
                set -e
                cd '\(directory)'
                openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout client.key -out client.csr -subj '/CN=LoginKit Test Client'
                printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=clientAuth\\n' > client.ext
                openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 30 -extfile client.ext
                cat client.pem ca.pem > client-chain.pem
                cat client.key client.pem > client-combined.pem
                openssl pkey -in client.key -out client-encrypted.key -aes128 -passout pass:not-asked-for
                printf -- '-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----\\n' > broken.pem
                chmod 600 client.key client-combined.pem client-encrypted.key stranger.key
                """
            let status = await LoginKitTestSupport.run("/bin/sh", ["-c", script])
            try #require(status == 0)
            return ClientCertificates(server: server)
        }

        /// Trust in the test CA, and `certificate` with `key` as the client certificate.
        func tls(certificate: String, key: String) -> CurlHTTPClient.TLS {
            var tls = CurlHTTPClient.TLS(caFile: caFile)
            tls.clientCertificate = certificate
            tls.clientKey = key
            return tls
        }

        /// The base64 lines of `key`'s PEM: none may appear in an error.
        func secretLines(of key: String) throws -> [String] {
            try String(contentsOfFile: key, encoding: .utf8).split(separator: "\n").map(String.init)
                .filter { !$0.isEmpty && !$0.hasPrefix("-----") }
        }
    }

    /// An answer's status and body.
    struct Answer {
        let status: Int
        let body: String
    }

    /// Runs `openssl s_server` requiring a client certificate the test CA signed (`-Verify`), until
    /// `body` returns. `-www` answers every request with a status page that prints the client
    /// certificate it received.
    func withServer<T>(_ certificates: ClientCertificates, _ body: (Int) async throws -> T) async throws -> T {
        try await withOpenSSLServer(
            [
                "-cert", certificates.directory + "/good.pem", "-key", certificates.directory + "/server.key",
                "-CAfile", certificates.caFile, "-Verify", "1", "-www", "-naccept", "50",
            ], body)
    }

    /// The answer to a GET of `url` with `tls`, or the error.
    func get(_ url: String, tls: CurlHTTPClient.TLS) async -> Result<Answer, any Error> {
        await getOverTLS(url, tls: tls).map { answer in
            Answer(status: answer.0.status.code, body: String(decoding: answer.1, as: UTF8.self))
        }
    }

    func networkFailure(_ result: Result<Answer, any Error>) -> NetworkError? {
        guard case .failure(let error) = result else { return nil }
        return error as? NetworkError
    }

    /// The error `CurlHTTPClient.init` throws for `tls`, or `nil` when it makes a client.
    func creationError(_ tls: CurlHTTPClient.TLS) -> (any Error)? {
        var configuration = CurlHTTPClient.Configuration()
        configuration.tls = tls
        do {
            _ = try CurlHTTPClient(configuration: configuration)
            return nil
        } catch {
            return error
        }
    }

    /// What `openssl` says the RFC 8705 `x5t#S256` of the first certificate in `path` is.
    static func opensslThumbprint(of path: String) async throws -> String {
        let command =
            "openssl x509 -in '\(path)' -outform DER | openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d '=\\n'"
        let (status, output) = try await runCapturing("/bin/sh", ["-c", command])
        try #require(status == 0)
        return output
    }

    @Test func aServerThatRequiresAClientCertificateGetsTheConfiguredOne() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await ClientCertificates.make(in: directory)
            try await withServer(certificates) { port in
                let url = "https://localhost:\(port)/"
                for file in [certificates.certificate, certificates.chain] {
                    let answer = await get(url, tls: certificates.tls(certificate: file, key: certificates.key))
                    #expect((try? answer.get())?.status == 200, "\(answer)")
                    #expect(
                        (try? answer.get())?.body.contains("Subject: CN=LoginKit Test Client") == true,
                        "the server names the certificate it got")
                }
                let without = await get(url, tls: .init(caFile: certificates.caFile))
                #expect(networkFailure(without) != nil, "\(without)")
            }
        }
    }

    @Test func aCertificateOrKeyLibcurlCannotUseFailsTheRequestNamingTheFiles() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await ClientCertificates.make(in: directory)
            try await withServer(certificates) { port in
                let unusable = [
                    (certificates.certificate, certificates.strangerKey),  // not the certificate's key
                    (certificates.certificate, certificates.encryptedKey),  // refused, never a passphrase prompt
                    (certificates.brokenCertificate, certificates.key),
                ]
                for (certificate, key) in unusable {
                    let result = await get(
                        "https://localhost:\(port)/", tls: certificates.tls(certificate: certificate, key: key))
                    let error = try #require(networkFailure(result), "\(result)")
                    #expect(error.code == .tls)
                    #expect(error.transportCode == 58)  // CURLE_SSL_CERTPROBLEM
                    #expect(error.message.contains(certificate) && error.message.contains(key), "\(error)")
                    for line in try certificates.secretLines(of: key) {
                        #expect(!error.message.contains(line))
                    }
                }
            }
        }
    }

    @Test func aKeyFileOthersCanReadIsRefusedWhenTheClientIsCreated() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await ClientCertificates.make(in: directory)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: certificates.key)
            let error = try #require(
                creationError(certificates.tls(certificate: certificates.certificate, key: certificates.key))
                    as? NetworkError)
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains(certificates.key) && error.message.contains("644"), "\(error)")
            #expect(error.message.contains("chmod 600"), "\(error)")
            for line in try certificates.secretLines(of: certificates.key) {
                #expect(!error.message.contains(line))
            }
        }
    }

    @Test func aKeyReachedThroughASymbolicLinkIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await ClientCertificates.make(in: directory)
            let link = directory + "/link.key"
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: certificates.key)
            let error = try #require(
                creationError(certificates.tls(certificate: certificates.certificate, key: link)) as? NetworkError)
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains(link) && error.message.contains("symbolic link"), "\(error)")
        }
    }

    @Test func aCertificateNeedsItsKeyAndTheReverse() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await ClientCertificates.make(in: directory)
            var onlyCertificate = CurlHTTPClient.TLS(caFile: certificates.caFile)
            onlyCertificate.clientCertificate = certificates.certificate
            var onlyKey = CurlHTTPClient.TLS(caFile: certificates.caFile)
            onlyKey.clientKey = certificates.key
            for tls in [onlyCertificate, onlyKey] {
                let error = try #require(creationError(tls) as? NetworkError)
                #expect(error.code == .invalidRequest)
                #expect(error.message.contains("clientKey") || error.message.contains("clientCertificate"), "\(error)")
            }
            let missing = directory + "/missing.key"
            let error = try #require(
                creationError(certificates.tls(certificate: certificates.certificate, key: missing)) as? NetworkError)
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains(missing) && error.message.contains("does not exist"), "\(error)")
            #expect(creationError(certificates.tls(certificate: certificates.chain, key: certificates.key)) == nil)
        }
    }

    @Test func aCertificateFileWithoutACertificateIsRefusedWithoutQuotingIt() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await ClientCertificates.make(in: directory)
            // The key given for both: the certificate file then holds a private key and no certificate.
            let error = try #require(
                creationError(certificates.tls(certificate: certificates.key, key: certificates.key)) as? NetworkError)
            #expect(error.code == .invalidRequest)
            #expect(
                error.message.contains(certificates.key) && error.message.contains("no PEM certificate"), "\(error)")
            for line in try certificates.secretLines(of: certificates.key) {
                #expect(!error.message.contains(line))
            }
        }
    }

    @Test func theThumbprintIsTheSHA256OfTheFirstCertificatesDER() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await ClientCertificates.make(in: directory)
            let expected = try await Self.opensslThumbprint(of: certificates.certificate)
            #expect(expected.count == 43)  // 32 bytes, base64url without padding
            #expect(try CertificateThumbprint.sha256(pemCertificateFile: certificates.certificate) == expected)
            #expect(try CertificateThumbprint.sha256(pemCertificateFile: certificates.chain) == expected)
            #expect(try CertificateThumbprint.sha256(pemCertificateFile: certificates.keyAndCertificate) == expected)
            #expect(try CertificateThumbprint.sha256(pemCertificateFile: certificates.caFile) != expected)

            let noCertificate = #expect(throws: TokenVerificationError.self) {
                _ = try CertificateThumbprint.sha256(pemCertificateFile: certificates.key)
            }
            #expect(noCertificate?.code == .invalidKey)
            #expect(noCertificate?.message.contains(certificates.key) == true)
            let missing = #expect(throws: TokenVerificationError.self) {
                _ = try CertificateThumbprint.sha256(pemCertificateFile: directory + "/missing.pem")
            }
            #expect(missing?.code == .invalidKey)
        }
    }

    /// The files are read once, when the client is created: a key replaced afterwards by a link to
    /// another key is not used, on a new connection either (`-www` closes each connection, and the
    /// second request asks for one of its own). A new client reads the files again, and refuses the link.
    @Test func aKeyReplacedAfterTheClientIsCreatedIsNotUsed() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await ClientCertificates.make(in: directory)
            let tls = certificates.tls(certificate: certificates.certificate, key: certificates.key)
            try await withServer(certificates) { port in
                var configuration = CurlHTTPClient.Configuration()
                configuration.tls = tls
                configuration.connectTimeout = .seconds(5)
                try await CurlHTTPClient.withClient(configuration: configuration) { client in
                    let request = try #require(HTTPRequest(method: .get, url: "https://localhost:\(port)/"))
                    let (first, firstBody) = try await client.send(request, body: nil)
                    #expect(first.status.code == 200)
                    #expect(String(decoding: firstBody, as: UTF8.self).contains("Subject: CN=LoginKit Test Client"))

                    try FileManager.default.removeItem(atPath: certificates.key)
                    try FileManager.default.createSymbolicLink(
                        atPath: certificates.key, withDestinationPath: certificates.strangerKey)
                    let (second, secondBody) = try await client.sendNeverResent(request, body: nil)
                    #expect(second.status.code == 200)
                    #expect(String(decoding: secondBody, as: UTF8.self).contains("Subject: CN=LoginKit Test Client"))
                }
            }
            let error = try #require(creationError(tls) as? NetworkError)
            #expect(error.message.contains(certificates.key) && error.message.contains("symbolic link"), "\(error)")
        }
    }

    @Test func aKeyInADirectoryOthersCanWriteIsRefusedWhenTheClientIsCreated() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await ClientCertificates.make(in: directory)
            let shared = directory + "/shared"
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
            try FileManager.default.setAttributes([.posixPermissions: 0o770], ofItemAtPath: shared)
            let key = shared + "/client.key"
            try FileManager.default.copyItem(atPath: certificates.key, toPath: key)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
            let tls = certificates.tls(certificate: certificates.certificate, key: key)

            let error = try #require(creationError(tls) as? NetworkError)
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains("chmod go-w \(shared)") && error.message.contains("770"), "\(error)")
            for line in try certificates.secretLines(of: key) {
                #expect(!error.message.contains(line))
            }

            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: shared)
            #expect(creationError(tls) == nil)
        }
    }

    @Test func aCertificateReachedThroughASymbolicLinkIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await ClientCertificates.make(in: directory)
            let link = directory + "/link.pem"
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: certificates.certificate)
            let error = try #require(
                creationError(certificates.tls(certificate: link, key: certificates.key)) as? NetworkError)
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains(link) && error.message.contains("symbolic link"), "\(error)")
        }
    }
}
