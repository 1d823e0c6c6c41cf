import Foundation
import HTTPTypes
import LoginKitCurl
import LoginKitHTTP
import LoginKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// TLS against `openssl s_server` with certificates made for the test: verification is always on,
/// a custom CA file works, and wrong hosts, pins and expired certificates are typed errors.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "needs openssl"), .timeLimit(.minutes(2)))
struct TLSTests {
    /// Certificates in a temporary directory: a CA, and server certificates it signed.
    struct Certificates {
        let directory: String
        var caFile: String { directory + "/ca.pem" }

        static func make(in directory: String) async throws -> Certificates {
            let script = """
                set -e
                cd '\(directory)'
                openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 30 -subj '/CN=LoginKit Test CA'
                openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj '/CN=localhost'
                printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > good.ext
                printf 'subjectAltName=DNS:other.test\\n' > other.ext
                openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out good.pem -days 30 -extfile good.ext
                openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out other.pem -days 30 -extfile other.ext
                openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out expired.pem -days -1 -extfile good.ext
                openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout stranger.key -out stranger.csr -subj '/CN=stranger'
                openssl pkey -in server.key -pubout -outform DER | openssl dgst -sha256 -binary | base64 > server.pin
                openssl pkey -in stranger.key -pubout -outform DER | openssl dgst -sha256 -binary | base64 > stranger.pin
                """
            #expect(await LoginKitTestSupport.run("/bin/sh", ["-c", script]) == 0)
            return Certificates(directory: directory)
        }

        func pin(_ name: String) throws -> String {
            "sha256//" + (try String(contentsOfFile: directory + "/\(name).pin", encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// Runs `openssl s_server` with `certificate` until `body` returns.
    func withServer<T>(certificate: String, certificates: Certificates, _ body: (Int) async throws -> T) async throws -> T {
        try await withOpenSSLServer(
            [
                "-cert", certificates.directory + "/\(certificate).pem", "-key", certificates.directory + "/server.key", "-www",
                "-naccept", "50",
            ], body)
    }

    /// The status of a GET of `url` with `tls`, or the error.
    func get(_ url: String, tls: CurlHTTPClient.TLS) async -> Result<Int, any Error> {
        await getOverTLS(url, tls: tls).map { answer in answer.0.status.code }
    }

    func tlsFailure(_ result: Result<Int, any Error>) -> NetworkError? {
        guard case .failure(let error) = result else { return nil }
        return error as? NetworkError
    }

    @Test func verificationIsOnAndACustomCAFileWorks() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await Certificates.make(in: directory)
            try await withServer(certificate: "good", certificates: certificates) { port in
                let unknownCA = await get("https://localhost:\(port)/", tls: .init())
                #expect(tlsFailure(unknownCA)?.code == .tls, "\(unknownCA)")
                let trusted = await get("https://localhost:\(port)/", tls: .init(caFile: certificates.caFile))
                #expect((try? trusted.get()) == 200, "\(trusted)")
            }
        }
    }

    @Test func aHostNameMismatchIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await Certificates.make(in: directory)
            try await withServer(certificate: "other", certificates: certificates) { port in
                let result = await get("https://localhost:\(port)/", tls: .init(caFile: certificates.caFile))
                #expect(tlsFailure(result)?.code == .tls, "\(result)")
            }
        }
    }

    @Test func anExpiredCertificateIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await Certificates.make(in: directory)
            try await withServer(certificate: "expired", certificates: certificates) { port in
                let result = await get("https://localhost:\(port)/", tls: .init(caFile: certificates.caFile))
                #expect(tlsFailure(result)?.code == .tls, "\(result)")
            }
        }
    }

    @Test func aPinnedKeyMustMatch() async throws {
        try await withTemporaryDirectory { directory in
            let certificates = try await Certificates.make(in: directory)
            try await withServer(certificate: "good", certificates: certificates) { port in
                let matching = await get("https://localhost:\(port)/", tls: .init(caFile: certificates.caFile, pinnedPublicKey: try certificates.pin("server")))
                #expect((try? matching.get()) == 200, "\(matching)")
                let mismatch = await get("https://localhost:\(port)/", tls: .init(caFile: certificates.caFile, pinnedPublicKey: try certificates.pin("stranger")))
                #expect(tlsFailure(mismatch)?.code == .tls, "\(mismatch)")
                #expect(tlsFailure(mismatch)?.transportCode == 90)  // CURLE_SSL_PINNEDPUBKEYNOTMATCH
            }
        }
    }
}

