import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// Mutual TLS (RFC 8705) end to end, deployed as it usually is: nginx on 127.0.0.1 terminates TLS
/// in front of the in-process dev provider, asks every client for a certificate without checking
/// its chain (`ssl_verify_client optional_no_ca`) and passes the one it got on in `X-Client-Cert`
/// (`$ssl_client_escaped_cert`), which the provider reads (`mtlsCertificateHeader`). Discovery,
/// served by the provider directly over http, names nginx's https origin in
/// `mtls_endpoint_aliases`. Certificates are made for each test with the openssl CLI.
@Suite(
    .enabled(
        if: FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") && FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"),
        "needs nginx (nginx-light) and openssl"),
    .timeLimit(.minutes(2)))
struct MTLSTests {
    static let nginx = "/usr/sbin/nginx"
    static let certificateHeader = "X-Client-Cert"

    /// A certificate file and its key file (mode 0600).
    struct TLSCredential {
        let certificate: String
        let key: String
    }

    /// Certificates in a temporary directory: a CA and the server certificate it signed for
    /// 127.0.0.1; client certificates the CA signed (`client`, and `stranger` with another subject);
    /// two self-signed client certificates with the same subject and different keys.
    struct Certificates {
        let directory: String
        var caFile: String { directory + "/ca.pem" }
        var server: TLSCredential { credential("server") }
        /// Signed by the CA, subject `O=LoginKit Tests, CN=mtls-client`.
        var client: TLSCredential { credential("client") }
        /// Signed by the CA, subject `O=LoginKit Tests, CN=stranger`.
        var stranger: TLSCredential { credential("stranger") }
        /// Self-signed, subject `CN=self-signed-client`.
        var selfSigned: TLSCredential { credential("self") }
        /// Self-signed with another key, subject `CN=self-signed-client` too.
        var otherSelfSigned: TLSCredential { credential("other-self") }

        func credential(_ name: String) -> TLSCredential {
            TLSCredential(certificate: directory + "/\(name).pem", key: directory + "/\(name).key")
        }

        static func make(in directory: String) async throws -> Certificates {
            let newKey = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
            let script = """
                set -e
                cd '\(directory)'
                openssl req -x509 \(newKey) -keyout ca.key -out ca.pem -days 30 -subj '/CN=LoginKit Test CA'
                openssl req \(newKey) -keyout server.key -out server.csr -subj '/CN=localhost'
                printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > server.ext
                openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 30 -extfile server.ext
                printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=clientAuth\\n' > client.ext
                for name in client stranger; do
                    cn=mtls-client; [ "$name" = stranger ] && cn=stranger
                    openssl req \(newKey) -keyout "$name.key" -out "$name.csr" -subj "/O=LoginKit Tests/CN=$cn"
                    openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$name.pem" -days 30 -extfile client.ext
                done
                for name in self other-self; do
                    openssl req -x509 \(newKey) -keyout "$name.key" -out "$name.pem" -days 30 -subj '/CN=self-signed-client'
                done
                chmod 600 *.key
                """
            let status = await LoginKitTestSupport.run("/bin/sh", ["-c", script])
            try #require(status == 0, "openssl could not make the certificates")
            return Certificates(directory: directory)
        }

        /// The subject of `certificate` as OpenSSL writes it per RFC 2253/4514 (`CN=…,O=…`): what
        /// a `tls_client_auth` client registers.
        func subjectDN(of certificate: String) async throws -> String {
            let (status, output) = try await runCapturing("/usr/bin/openssl", ["x509", "-in", certificate, "-noout", "-subject", "-nameopt", "RFC2253"])
            try #require(status == 0)
            let line = output.trimmingCharacters(in: .whitespacesAndNewlines)
            return line.hasPrefix("subject=") ? String(line.dropFirst("subject=".count)) : line
        }
    }

    /// The dev provider behind nginx.
    struct Deployment {
        let server: DevServer
        let certificates: Certificates
        /// nginx's https origin: where the mutual TLS aliases and the resource behind them are.
        let base: String
        /// The protected resource, behind nginx.
        var resource: String { base + "/api/resource" }
        /// Token-endpoint requests the provider got, and those of them that came with a certificate.
        var tokenRequests: (all: Int, withCertificate: Int) {
            (server.monitor.requestCount(path: "/oauth/token"), server.monitor.tokenRequestsWithCertificate)
        }
    }

    /// Starts the dev provider with two mutual TLS clients — `mtls-client` (`tls_client_auth`,
    /// registered by `client`'s subject) and `self-client` (`self_signed_tls_client_auth`,
    /// registered by `selfSigned`'s thumbprint) — and nginx in front of it; stops both whatever
    /// `body` does.
    func withDeployment<T>(_ body: (Deployment) async throws -> T) async throws -> T {
        try await withTemporaryDirectory { directory in
            let certificates = try await Certificates.make(in: directory)
            var configuration = DevServer.Configuration.quiet
            var tlsClient = DevClient(id: "mtls-client")
            tlsClient.tlsClientAuthSubjectDN = try await certificates.subjectDN(of: certificates.client.certificate)
            var selfSignedClient = DevClient(id: "self-client")
            selfSignedClient.selfSignedCertificateThumbprints = [try CertificateThumbprint.sha256(pemCertificateFile: certificates.selfSigned.certificate)]
            configuration.identityProvider.clients += [tlsClient, selfSignedClient]
            configuration.identityProvider.mtlsCertificateHeader = Self.certificateHeader
            return try await DevServer.withServer(configuration: configuration) { server in
                // A free port can be taken by another test between the choice and nginx's bind: then
                // another port, a few times at most.
                var attempt = 0
                while true {
                    attempt += 1
                    let port = try freeLoopbackPort()
                    let base = "https://127.0.0.1:\(port)"
                    server.identityProvider.mtlsBaseURL = base
                    do {
                        return try await withNginx(certificates: certificates, port: port, upstreamPort: server.port) {
                            try await body(Deployment(server: server, certificates: certificates, base: base))
                        }
                    } catch is NginxPortTaken where attempt < 5 {
                        continue
                    }
                }
            }
        }
    }

    /// Runs nginx on 127.0.0.1:`port` until `body` returns: TLS with the test server certificate,
    /// a client certificate asked for and not verified, every request proxied to the provider on
    /// `upstreamPort` with the certificate in `X-Client-Cert`. One process (`master_process off`),
    /// so that killing it leaves no worker behind. Ready once it logs its event method, which it
    /// does after it has opened its listening socket (`ngx_init_cycle`), as `openssl s_server`
    /// prints ACCEPT.
    func withNginx<T>(certificates: Certificates, port: Int, upstreamPort: Int, _ body: () async throws -> T) async throws -> T {
        let prefix = certificates.directory + "/nginx"
        try FileManager.default.createDirectory(atPath: prefix, withIntermediateDirectories: true)
        let configuration = """
            daemon off;
            master_process off;
            pid \(prefix)/nginx.pid;
            lock_file \(prefix)/nginx.lock;
            error_log stderr notice;
            events {
                worker_connections 64;
            }
            http {
                access_log off;
                client_body_temp_path \(prefix)/body;
                proxy_temp_path \(prefix)/proxy;
                fastcgi_temp_path \(prefix)/fastcgi;
                uwsgi_temp_path \(prefix)/uwsgi;
                scgi_temp_path \(prefix)/scgi;
                server {
                    listen 127.0.0.1:\(port) ssl;
                    ssl_certificate \(certificates.server.certificate);
                    ssl_certificate_key \(certificates.server.key);
                    ssl_verify_client optional_no_ca;
                    location / {
                        proxy_pass http://127.0.0.1:\(upstreamPort);
                        proxy_http_version 1.1;
                        proxy_set_header \(Self.certificateHeader) $ssl_client_escaped_cert;
                    }
                }
            }
            """
        try configuration.write(toFile: prefix + "/nginx.conf", atomically: true, encoding: .utf8)
        let server = try LoginKitTestSupport.ChildProcess("/bin/sh", ["-c", "exec \(Self.nginx) -p '\(prefix)' -c '\(prefix)/nginx.conf' -e stderr 2>&1"])
        do {
            var output: [String] = []
            var ready = false
            var lines = server.lines.makeAsyncIterator()
            while let line = await lines.next() {
                output.append(line)
                if line.contains("event method") {
                    ready = true
                    break
                }
            }  // the stream ends when nginx exits: it did not start
            if !ready, output.contains(where: { $0.contains("Address already in use") }) { throw NginxPortTaken() }
            try #require(ready, "nginx did not start:\n\(output.joined(separator: "\n"))")
            let result = try await body()
            server.kill()
            _ = await server.waitForExit()
            return result
        } catch {
            server.kill()
            _ = await server.waitForExit()
            throw error
        }
    }

    /// A client that trusts the test CA and presents `credential` (none: no client certificate).
    func withClient<T>(_ certificates: Certificates, presenting credential: TLSCredential?, _ body: (CurlHTTPClient) async throws -> T)
        async throws -> T
    {
        var configuration = CurlHTTPClient.Configuration()
        configuration.tls = CurlHTTPClient.TLS(caFile: certificates.caFile)
        configuration.tls.clientCertificate = credential?.certificate
        configuration.tls.clientKey = credential?.key
        configuration.connectTimeout = .seconds(5)
        return try await CurlHTTPClient.withClient(configuration: configuration, body)
    }

    /// An API for client `clientID` of the deployment's provider, authenticating with `method` over
    /// a client that presents `credential`, asking for scope `api`.
    func withAPI<T>(
        _ deployment: Deployment, clientID: String, method: OAuth2API.ClientAuthenticationMethod, presenting credential: TLSCredential?,
        configure: (inout OAuth2API.Configuration) -> Void = { _ in }, _ body: (OAuth2API, CurlHTTPClient) async throws -> T
    ) async throws -> T {
        try await withClient(deployment.certificates, presenting: credential) { client in
            var configuration = OAuth2API.Configuration(issuer: deployment.server.issuer, clientID: clientID)
            configuration.clientAuthenticationMethod = method
            configuration.scope = "api"
            configure(&configuration)
            return try await body(OAuth2API(configuration: configuration, transport: client), client)
        }
    }

    /// What `GET url` with `Authorization: Bearer token` over `client` gets: the status, the
    /// `WWW-Authenticate` challenge and the JSON body.
    func resource(_ url: String, token: String, over client: CurlHTTPClient) async throws -> (status: Int, challenge: String, body: JSONValue?) {
        var request = try #require(HTTPRequest(method: .get, url: url))
        request.headerFields[.authorization] = "Bearer " + token
        let (response, body) = try await client.send(request, body: nil)
        return (response.status.code, response.headerFields[.wwwAuthenticate] ?? "", try? JSONValue.parse(Array(body)))
    }

    /// The `cnf.x5t#S256` of an access token (RFC 8705 §3.1), read without verification.
    func boundThumbprint(of accessToken: String?) throws -> String? {
        let token = try #require(accessToken)
        return try JSONValue.parse(CompactJWS(parsing: token).payload)["cnf"]?["x5t#S256"]?.stringValue
    }

    @Test func aTLSClientAuthLoginGoesToTheAliasesAndIsBoundToTheCertificate() async throws {
        try await withDeployment { deployment in
            let credential = deployment.certificates.client
            let thumbprint = try CertificateThumbprint.sha256(pemCertificateFile: credential.certificate)
            try await withAPI(deployment, clientID: "mtls-client", method: .tlsClientAuth, presenting: credential) { api, client in
                let metadata = try await api.metadata()
                #expect(metadata.tokenEndpoint == deployment.base + "/oauth/token")
                #expect(metadata.revocationEndpoint == deployment.base + "/oauth/revoke")
                #expect(metadata.deviceAuthorizationEndpoint == deployment.base + "/oauth/device_authorization")
                #expect(metadata.pushedAuthorizationRequestEndpoint == deployment.base + "/oauth/par")
                #expect(metadata.tokenEndpointAuthMethodsSupported?.contains("tls_client_auth") == true)

                let credentials = try await api.clientCredentials(scope: "api")
                #expect(credentials.tokenType == "Bearer")
                #expect(try boundThumbprint(of: credentials.accessToken) == thumbprint)
                // Every token request went through nginx with the certificate: none to the plain endpoint.
                let requests = deployment.tokenRequests
                #expect(requests.all == 1 && requests.withCertificate == 1, "\(requests)")

                let token = try #require(credentials.accessToken)
                let accepted = try await resource(deployment.resource, token: token, over: client)
                #expect(accepted.status == 200, "\(accepted)")
                #expect(accepted.body?["x5t#S256"]?.stringValue == thumbprint)
                try await withClient(deployment.certificates, presenting: nil) { anonymous in
                    let refused = try await resource(deployment.resource, token: token, over: anonymous)
                    #expect(refused.status == 401 && refused.challenge.contains("invalid_token"), "\(refused)")
                }
                try await withClient(deployment.certificates, presenting: deployment.certificates.stranger) { stranger in
                    let refused = try await resource(deployment.resource, token: token, over: stranger)
                    #expect(refused.status == 401 && refused.challenge.contains("invalid_token"), "\(refused)")
                }

                // Revocation authenticates with the certificate at its alias too.
                #expect(try await api.revoke(credentials))
                let revoked = try await resource(deployment.resource, token: token, over: client)
                #expect(revoked.status == 401, "\(revoked)")
            }
        }
    }

    /// The binding is checked against the certificate the client presents — the bytes it read when
    /// it was created — not against the file as it is when the token arrives: a certificate file
    /// replaced meanwhile changes neither what is presented nor what is compared.
    @Test func theBindingIsCheckedAgainstThePresentedCertificateNotTheFileAsItIsNow() async throws {
        try await withDeployment { deployment in
            let credential = deployment.certificates.client
            let thumbprint = try CertificateThumbprint.sha256(pemCertificateFile: credential.certificate)
            let stranger = try String(contentsOfFile: deployment.certificates.stranger.certificate, encoding: .utf8)
            try await withAPI(deployment, clientID: "mtls-client", method: .tlsClientAuth, presenting: credential) { api, _ in
                try stranger.write(toFile: credential.certificate, atomically: true, encoding: .utf8)
                let credentials = try await api.clientCredentials(scope: "api")
                #expect(try boundThumbprint(of: credentials.accessToken) == thumbprint)
            }
        }
    }

    @Test func aTLSClientAuthClientWithAnotherCertificateOrNoneIsRefusedAtTheTokenEndpoint() async throws {
        try await withDeployment { deployment in
            for credential in [deployment.certificates.stranger, deployment.certificates.selfSigned, nil] {
                try await withAPI(deployment, clientID: "mtls-client", method: .tlsClientAuth, presenting: credential) { api, _ in
                    let error = await #expect(throws: LoginError.self) { try await api.clientCredentials(scope: "api") }
                    #expect(error?.code == .invalidClient, "\(String(describing: error))")
                }
            }
            #expect(deployment.tokenRequests.all == 3)
        }
    }

    @Test func aSelfSignedTLSClientAuthClientAuthenticatesWithItsRegisteredCertificateOnly() async throws {
        try await withDeployment { deployment in
            let registered = deployment.certificates.selfSigned
            let thumbprint = try CertificateThumbprint.sha256(pemCertificateFile: registered.certificate)
            try await withAPI(deployment, clientID: "self-client", method: .selfSignedTLSClientAuth, presenting: registered) { api, client in
                let credentials = try await api.clientCredentials(scope: "api")
                #expect(try boundThumbprint(of: credentials.accessToken) == thumbprint)
                let token = try #require(credentials.accessToken)
                let accepted = try await resource(deployment.resource, token: token, over: client)
                #expect(accepted.status == 200, "\(accepted)")
                // Same subject, another key: another certificate, for the resource as for the provider.
                try await withClient(deployment.certificates, presenting: deployment.certificates.otherSelfSigned) { other in
                    let refused = try await resource(deployment.resource, token: token, over: other)
                    #expect(refused.status == 401 && refused.challenge.contains("invalid_token"), "\(refused)")
                }
            }
            let other = deployment.certificates.otherSelfSigned
            try await withAPI(deployment, clientID: "self-client", method: .selfSignedTLSClientAuth, presenting: other) { api, _ in
                let error = await #expect(throws: LoginError.self) { try await api.clientCredentials(scope: "api") }
                #expect(error?.code == .invalidClient, "\(String(describing: error))")
            }
            let requests = deployment.tokenRequests
            #expect(requests.all == 2 && requests.withCertificate == 2, "\(requests)")
        }
    }

    @Test func aTokenBoundToAnotherCertificateThanTheOnePresentedIsRefused() async throws {
        try await withDeployment { deployment in
            let other = try CertificateThumbprint.sha256(pemCertificateFile: deployment.certificates.stranger.certificate)
            try await withAPI(
                deployment, clientID: "mtls-client", method: .tlsClientAuth, presenting: deployment.certificates.client,
                configure: { $0.clientCertificateThumbprint = other }
            ) { api, _ in
                let error = await #expect(throws: ServerError.self) { try await api.clientCredentials(scope: "api") }
                #expect(error?.code == .malformedResponse, "\(String(describing: error))")
                #expect(error?.message.contains("bound to another certificate") == true, "\(String(describing: error))")
            }
        }
    }

    /// Only a client that authenticates with its certificate uses the aliases, and only such a
    /// client refuses an alias that is not https (the provider here names a plain-http origin on
    /// another host).
    @Test func aliasesAreForTLSClientsAndMustBeHTTPS() async throws {
        var configuration = DevServer.Configuration.quiet
        configuration.identityProvider.mtlsCertificateHeader = Self.certificateHeader
        configuration.identityProvider.mtlsBaseURL = "http://id.example"
        try await DevServer.withServer(configuration: configuration) { server in
            try await CurlHTTPClient.withClient { client in
                let plain = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-cli"), transport: client)
                let metadata = try await plain.metadata()
                #expect(metadata.tokenEndpoint == server.issuer + "/oauth/token")
                #expect(metadata.mtlsEndpointAliases["token_endpoint"] == "http://id.example/oauth/token")

                var tls = OAuth2API.Configuration(issuer: server.issuer, clientID: "mtls-client")
                tls.clientAuthenticationMethod = .tlsClientAuth
                let error = await #expect(throws: ServerError.self) { try await OAuth2API(configuration: tls, transport: client).metadata() }
                #expect(error?.code == .misconfigured, "\(String(describing: error))")
                #expect(error?.message.contains("mtls_endpoint_aliases") == true, "\(String(describing: error))")
            }
        }
    }
}

/// nginx could not bind the port it was given: another test took it after it was chosen.
struct NginxPortTaken: Error {}
