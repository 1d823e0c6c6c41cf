import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// `login --client-credentials --private-key`, `token --resource/--audience`, `exchange`, against
/// the dev provider with the client's public key registered.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "needs openssl"), .timeLimit(.minutes(3)))
struct ServerSideCLITests {
    @Test func aKeyClientLogsInGetsOneTokenPerResourceAcrossProcessesAndExchanges() async throws {
        try await withTemporaryDirectory { directory in
            let keyPath = directory + "/client-key.pem"
            #expect(await run("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyPath]) == 0)
            let pem = try String(contentsOfFile: keyPath, encoding: .utf8)
            let keyLine = String(pem.split(separator: "\n")[1])
            try await DevServer.withServer { server in
                var provider = server.identityProvider
                provider.clients.append(DevClient(id: "svc-key", publicKeys: [try SigningKey(pem: pem, keyID: "k1").publicJWK()]))
                server.identityProvider = provider
                let common = ["--store", directory + "/tokens.json"]
                let login = ["login", "--issuer", server.issuer, "--client-id", "svc-key", "--client-credentials", "--private-key", keyPath, "--key-id", "k1"]

                // A key others can read is refused, as a readable store is.
                #expect(chmod(keyPath, 0o644) == 0)
                let readable = try await loginkit(login + common)
                #expect(readable.status == 1)
                #expect(readable.stderr.contains("accessible by other users"))
                #expect(chmod(keyPath, 0o600) == 0)

                let loggedIn = try await loginkit(login + common)
                #expect(loggedIn.status == 0, "\(loggedIn.stderr)")
                server.monitor.reset()

                // Two processes at once, the provider slow: one request for the resource.
                server.monitor.injectFaults([.delay(milliseconds: 700)], path: "/oauth/token")
                async let first = loginkit(["token", "--resource", "https://api-a.example/"] + common)
                async let second = loginkit(["token", "--resource", "https://api-a.example/"] + common)
                let (a1, a2) = try await (first, second)
                #expect(a1.status == 0 && a2.status == 0, "\(a1.stderr) \(a2.stderr)")
                #expect(a1.stdout == a2.stdout)
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1)
                let token = a1.stdout.trimmingCharacters(in: .newlines)
                #expect(try JWTClaims(payload: CompactJWS(parsing: token).payload).audience == ["https://api-a.example/"])

                let b = try await loginkit(["token", "--resource", "https://api-b.example/", "--scope", "read"] + common)
                #expect(b.status == 0)
                #expect(server.monitor.requestCount(path: "/oauth/token") == 2)
                _ = try await loginkit(["token", "--resource", "https://api-a.example/"] + common)
                _ = try await loginkit(["token", "--resource", "https://api-b.example/", "--scope", "read"] + common)
                #expect(server.monitor.requestCount(path: "/oauth/token") == 2)  // both cached

                // Token exchange: a user's token for another audience, the client signing with its key.
                let user = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin", "--profile", "demo"] + common,
                    input: "demo\n")
                #expect(user.status == 0)
                let subject = try await loginkit(["token", "--access", "--profile", "demo"] + common)
                let exchanged = try await loginkit(
                    ["exchange", "--issuer", server.issuer, "--client-id", "svc-key", "--private-key", keyPath, "--key-id", "k1", "--subject-token", "-",
                     "--audience", "https://orders.example"],
                    input: subject.stdout)
                #expect(exchanged.status == 0, "\(exchanged.stderr)")
                let issued = try JWTClaims(payload: CompactJWS(parsing: exchanged.stdout.trimmingCharacters(in: .newlines)).payload)
                #expect(issued.audience == ["https://orders.example"])
                #expect(issued.subject == "248289761001")
                let refused = try await loginkit(
                    ["exchange", "--issuer", server.issuer, "--client-id", "svc-key", "--private-key", keyPath, "--key-id", "k1", "--subject-token", "-"],
                    input: "at.not-a-token\n")
                #expect(refused.status == 4)
                #expect(!refused.all.contains("at.not-a-token"))

                for output in [readable, loggedIn, a1, b, exchanged, refused] { #expect(!output.all.contains(keyLine)) }
            }
        }
    }

    @Test func flagsThatCannotWorkAreRefusedBeforeAnythingIsSent() async throws {
        #expect(try await loginkit(["exchange", "--issuer", "http://127.0.0.1:9", "--client-id", "c", "--subject-token", "a-token"]).status == 2)
        #expect(try await loginkit(["login", "--issuer", "http://127.0.0.1:9", "--client-id", "c", "--client-credentials", "--client-auth", "private-key-jwt"]).status == 2)
        #expect(try await loginkit(["token", "--resource", "https://api.example/", "--login", "browser"]).status == 2)
        try await withTemporaryDirectory { directory in
            // A profile that is not a client-credentials login has no targets.
            try await DevServer.withServer { server in
                let common = ["--store", directory + "/tokens.json"]
                #expect(try await loginkit(["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"] + common, input: "demo\n").status == 0)
                let target = try await loginkit(["token", "--resource", "https://api.example/"] + common)
                #expect(target.status == 2)
                #expect(target.stderr.contains("client-credentials"))
            }
        }
    }
}
