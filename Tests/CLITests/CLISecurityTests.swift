import Foundation
import LoginKitJOSE
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The CLI's defences: unverified ID tokens, terminal injection, tokens on argv, key-set failures,
/// core dumps, a Cognito region that is no region.
@Suite(.timeLimit(.minutes(3)))
struct CLISecurityTests {
    /// A JSON login without `--issuer`, or with `--issuer` but no `--client-id`, has nothing to verify
    /// its ID token with: a usage error (exit 2), so that an `alg: none` token never logs a profile in.
    @Test func aJSONLoginWithNothingToVerifyItsTokenIsAUsageError() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let store = ["--store", directory + "/tokens.json"]
                for extra in [[], ["--issuer", server.issuer]] {
                    server.monitor.injectFaults([.forgedIDToken(.algNone)], path: "/login")
                    let run = try await loginkit(
                        ["login", "--login-url", server.url("/login")] + extra + ["--username", "demo", "--password-stdin"] + store, input: "demo\n"
                    )
                    #expect(run.status == 2, "\(extra): \(run.stderr)")
                    #expect(!run.stderr.contains("Logged in"), "\(extra)")
                    server.monitor.clearFaults()
                }
                #expect(server.monitor.requestCount(path: "/login") == 0, "the password was sent")
                #expect(try await loginkit(["status"] + store).status == 3, "a profile was saved")
            }
        }
    }

    /// Forged tokens fail verification (7); the keys come from the `jwks_uri` discovery names, not
    /// from a fixed `<issuer>/.well-known/jwks.json`.
    @Test func aJSONLoginVerifiesItsTokenWithTheKeysDiscoveryNames() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let store = ["--store", directory + "/tokens.json"]
                let arguments = [
                    "login", "--login-url", server.url("/login"), "--issuer", server.issuer, "--client-id", "loginkit-cli",
                    "--username", "demo", "--password-stdin",
                ] + store
                for forgery in DevFault.IDTokenForgery.allCases {
                    server.monitor.injectFaults([.forgedIDToken(forgery)], path: "/login")
                    let run = try await loginkit(arguments, input: "demo\n")
                    #expect(run.status == 7, "\(forgery): \(run.stderr)")
                    #expect(!run.stderr.contains("Logged in"), "\(forgery)")
                }
                #expect(try await loginkit(["status"] + store).status == 3)
                let good = try await loginkit(arguments, input: "demo\n")
                #expect(good.status == 0, "\(good.stderr)")
                #expect(good.stderr.contains("Logged in as demo"))
                #expect(server.monitor.requestCount(path: "/.well-known/openid-configuration") > 0, "the jwks_uri did not come from discovery")
            }
        }
    }

    /// The explicit opt-out stores the token unverified, says so, and does not name the user after
    /// the token's claims.
    @Test func theInsecureOptOutSaysSo() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let store = ["--store", directory + "/tokens.json"]
                let arguments = ["login", "--login-url", server.url("/login"), "--insecure-skip-id-token-verification", "--username", "demo", "--password-stdin"]
                server.monitor.injectFaults([.forgedIDToken(.algNone)], path: "/login")
                let run = try await loginkit(arguments + store, input: "demo\n")
                #expect(run.status == 0, "\(run.stderr)")
                #expect(run.stderr.contains("warning"))
                #expect(run.stderr.contains("not verified"))
                #expect(try await loginkit(arguments + ["--issuer", server.issuer] + store, input: "demo\n").status == 2)
            }
        }
    }

    /// A claim (`preferred_username`, `sub` in the library's log lines) and a device-flow URI with a
    /// newline and escape sequences: escaped or refused, never raw on stderr or stdout.
    @Test func providerChosenTextNeverReachesTheTerminalRaw() async throws {
        let hostile = "mallory\nadmin\u{1B}[2J\u{1B}]0;pwned\u{07}"
        var configuration = DevServer.Configuration.quiet
        configuration.identityProvider.users.append(DevUser(username: hostile, password: "pw", subject: "s\n\u{1B}[31m-1"))
        configuration.identityProvider.deviceVerificationURI = "https://example.test/\nadmin\u{1B}[2Jdevice"
        configuration.identityProvider.deviceInterval = .seconds(1)
        func isClean(_ text: String) -> Bool {
            !text.contains("\u{1B}") && !text.contains("\u{07}") && !text.split(separator: "\n").contains { $0.hasPrefix("admin") }
        }
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer(configuration: configuration) { server in
                let store = ["--store", directory + "/tokens.json"]
                let oidc = ["--issuer", server.issuer, "--client-id", "loginkit-cli"]
                let trace = ["LOGINKIT_LOG_LEVEL": "trace"]
                let login = try await loginkit(["login"] + oidc + ["--username", hostile, "--password-stdin"] + store, input: "pw\n", environment: trace)
                #expect(login.status == 0, "\(login.stderr.debugDescription)")
                #expect(login.stderr.contains("Logged in as mallory"))
                #expect(isClean(login.stderr), "\(login.stderr.debugDescription)")
                let status = try await loginkit(["status"] + store)
                #expect(status.status == 0)
                #expect(isClean(status.stdout), "\(status.stdout.debugDescription)")

                // The first poll is denied, so that even a CLI that printed the prompt ends at once.
                server.monitor.injectFaults([.oauthError("access_denied")], path: "/oauth/token")
                let device = try await loginkit(["login"] + oidc + ["--device", "--profile", "device"] + store, environment: trace)
                #expect(device.status != 0)
                #expect(isClean(device.stderr), "\(device.stderr.debugDescription)")
            }
        }
    }

    /// A token given on the command line gets a warning, and `--help` names the stdin form.
    @Test func verifyWarnsAboutATokenOnTheCommandLine() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let store = ["--store", directory + "/tokens.json"]
                let login = ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"]
                #expect(try await loginkit(login + store, input: "demo\n").status == 0)
                let token = try await loginkit(["token"] + store).stdout.trimmingCharacters(in: .newlines)
                let verify = ["--issuer", server.issuer, "--audience", "loginkit-cli"]

                let onArgv = try await loginkit(["verify", token] + verify)
                #expect(onArgv.status == 0, "\(onArgv.stderr)")
                #expect(onArgv.stderr.contains("warning") && onArgv.stderr.contains("standard input"))
                #expect(!onArgv.stderr.contains(token))

                let onStdin = try await loginkit(["verify", "-"] + verify, input: token + "\n")
                #expect(onStdin.status == 0, "\(onStdin.stderr)")
                #expect(onStdin.stderr.isEmpty)
                #expect(onStdin.stdout.contains("\"preferred_username\":\"demo\""))

                let help = try await loginkit(["verify", "--help"])
                let words = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")  // however it wraps
                #expect(words.contains("verify - --issuer") && words.contains("other local users"), "\(help.stdout)")
            }
        }
    }

    /// The issuer's keys cannot be fetched: a network or server failure (5), not a token that
    /// failed verification (7).
    @Test func aKeySetThatCannotBeFetchedIsANetworkFailure() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let login = [
                    "login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin",
                    "--store", directory + "/tokens.json",
                ]
                server.monitor.injectFaults([.status(503)], path: "/.well-known/jwks.json")
                let unavailable = try await loginkit(login, input: "demo\n")
                #expect(unavailable.status == 5, "\(unavailable.stderr)")
                server.monitor.clearFaults()
                server.monitor.injectFaults([.dropConnection, .dropConnection], path: "/.well-known/jwks.json")
                let dropped = try await loginkit(login + ["--profile", "dropped"], input: "demo\n")
                #expect(dropped.status == 5, "\(dropped.stderr)")
                server.monitor.clearFaults()
            }
        }
    }

    /// A Cognito region that is no AWS region name is a usage error before any request: it would go
    /// into the issuer (and, without an endpoint, the host name) with the password sent there.
    @Test func aCognitoRegionThatIsNoAWSRegionIsAUsageError() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let run = try await loginkit([
                    "login", "--cognito-pool-id", "eu-west-1_AbC123", "--cognito-region", "evil.example/x?", "--cognito-endpoint", server.url("/cognito"),
                    "--client-id", "c", "--username", "demo", "--password-stdin", "--store", directory + "/tokens.json",
                ], input: "demo\n")
                #expect(run.status == 2, "\(run.stderr)")
                #expect(run.stderr.contains("region"))
                #expect(server.monitor.requestCount(path: "/cognito/") == 0)
            }
        }
    }

    /// A password in `--store postgres://user:password@…` is refused (exit 2) by `loginkit` itself,
    /// before `loginkit-fleet` would run with it on its argv: a stand-in `loginkit-fleet` beside a
    /// copy of `loginkit` records whether it ran. The same URL in `LOGINKIT_STORE` is handed over.
    @Test func aPasswordInTheStoreFlagIsRefusedBeforeLoginkitFleetRuns() async throws {
        try await withTemporaryDirectory { directory in
            let copy = directory + "/loginkit"
            try FileManager.default.copyItem(atPath: try loginkitPath(), toPath: copy)
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: copy)
            let ran = directory + "/fleet-ran"
            try writeExecutable("#!/bin/sh\ntouch '\(ran)'\nexit 42\n", to: directory + "/loginkit-fleet")
            let password = "Db-Secret-\(UUID().uuidString)"
            let url = "postgres://fleet:\(password)@127.0.0.1:9/db"
            for arguments in [["status", "--store", url], ["logout", "--store=\(url)"]] {
                let refused = try await loginkit(arguments, executable: copy)
                #expect(refused.status == 2, "\(arguments[0]): \(refused.all)")
                #expect(refused.stderr.contains("the --store URL holds a password"), "\(refused.stderr)")
                #expect(!refused.all.contains(password))
                #expect(!FileManager.default.fileExists(atPath: ran), "loginkit-fleet ran with the password on its argv")
            }
            let handedOver = try await loginkit(["status"], environment: ["LOGINKIT_STORE": url], executable: copy)
            #expect(handedOver.status == 42, "\(handedOver.all)")
            #expect(FileManager.default.fileExists(atPath: ran), "the stand-in for loginkit-fleet cannot tell")
        }
    }

    /// `--host` accepts only loopback addresses: the dev server's users and secrets stay local.
    @Test func theDevServerRefusesANonLoopbackHost() async throws {
        let run = try await loginkit(["dev-server", "--host", "0.0.0.0"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("--allow-non-loopback"), "\(run.stderr)")
    }

    /// The process holding the password and tokens cannot dump core. The child starts with the soft
    /// core limit raised to the hard one, so that an inherited 0 proves nothing. `PR_SET_DUMPABLE`
    /// is cleared, so that no process of the same user can read the CLI's `/proc/PID/environ` and
    /// `mem` while it holds the password. As root (CI containers), the CLI
    /// and the reader both run as `nobody` (setpriv), since root reads any process's `/proc`.
    @Test func theCLIRunsWithCoreDumpsDisabledAndIsNotDumpable() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                // Hold discovery long enough to look at the process while it has the password.
                server.monitor.injectFaults([.delay(milliseconds: 5000)], path: "/.well-known/openid-configuration")
                let arrivals = server.monitor.arrivals()
                let asRoot = getuid() == 0
                let unprivileged = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
                if asRoot { #expect(chown(directory, 65534, 65534) == 0) }
                // As `nobody`, the binary must be reachable by `nobody`: a checkout in a private
                // directory (`mktemp -d`) is not, so a copy in the test's directory is run.
                var binary = try loginkitPath()
                if asRoot {
                    let copy = directory + "/loginkit"
                    try FileManager.default.copyItem(atPath: binary, toPath: copy)
                    #expect(chmod(copy, 0o755) == 0)
                    binary = copy
                }
                let stdin = try TestPipe()
                let command = [
                    "/bin/sh", "-c", #"ulimit -S -c "$(ulimit -H -c)" 2>/dev/null; exec "$0" "$@""#, binary,
                    "login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin",
                    "--store", directory + "/tokens.json",
                ]
                let launch = asRoot ? unprivileged + command : command
                let process = try SpawnedProcess(
                    launch[0], Array(launch.dropFirst()),
                    environment: ProcessInfo.processInfo.environment.merging(["HOME": directory]) { $1 },
                    stdin: .descriptor(stdin.readEnd), stdout: .null, stderr: .null
                )
                close(stdin.readEnd)
                stdin.writeAndClose(Data("demo\n".utf8))
                // Discovery arrives while the CLI holds the password — or the CLI ended first, which
                // fails the test at once instead of waiting out its time limit.
                let (events, event) = AsyncStream<Bool>.makeStream()
                let arrival = Task {
                    for await path in arrivals where path == "/.well-known/openid-configuration" {
                        event.yield(true)
                        return
                    }
                }
                let ending = Task {  // never cancelled: cancelling a wait for the child kills it
                    _ = await process.exitStatus()
                    event.yield(false)
                }
                var next = events.makeAsyncIterator()
                let arrived = await next.next() ?? false
                arrival.cancel()
                try #require(arrived, "the CLI ended before it asked for discovery")
                let limits = (try? String(contentsOfFile: "/proc/\(process.pid)/limits", encoding: .utf8)) ?? ""
                let read = ["/bin/cat", "/proc/\(process.pid)/environ"]
                let reader = asRoot ? unprivileged + read : read
                let readStatus = try await SpawnedProcess(reader[0], Array(reader.dropFirst()), stdout: .null, stderr: .null)
                    .exitStatus()
                process.kill(.SIGKILL)
                _ = await process.exitStatus()
                await ending.value
                let core = try #require(limits.split(separator: "\n").first(where: { $0.hasPrefix("Max core file size") }), "\(limits)")
                let fields = core.split(separator: " ")  // Max core file size <soft> <hard> bytes
                try #require(fields.count >= 6, "\(core)")
                #expect(fields[4] == "0" && fields[5] == "0", "\(core)")
                #expect(readStatus != 0, "a process of the same user read the CLI's /proc/PID/environ")
            }
        }
    }
}

/// A private CA: `--ca-file`, `LOGINKIT_CA_FILE`, `CURL_CA_BUNDLE` and `SSL_CERT_FILE` make the CLI
/// trust it; without them the TLS failure is a network failure. An `openssl s_server -WWW` serves
/// a discovery document and a key set over TLS with a certificate the test's CA signed.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "needs openssl"), .timeLimit(.minutes(2)))
struct CLITrustTests {
    /// A free loopback port (bound and released; s_server binds it right after).
    static func freePort() throws -> Int { try freeLoopbackPort() }

    @Test func aPrivateCAIsTrustedThroughTheFlagAndTheVariables() async throws {
        try await withTemporaryDirectory { directory in
            let script = """
                set -e
                cd '\(directory)'
                openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 30 -subj '/CN=LoginKit CLI Test CA'
                openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj '/CN=localhost'
                printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > server.ext
                openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 30 -extfile server.ext
                mkdir -p www/.well-known
                """
            try #require(await LoginKitTestSupport.run("/bin/sh", ["-c", script]) == 0)
            let port = try Self.freePort()
            let issuer = "https://localhost:\(port)"
            let key = try SigningKey.generate(.es256, keyID: "cli-ca-test")
            let discovery = JSONValue.object([
                "issuer": .string(issuer), "jwks_uri": .string(issuer + "/.well-known/jwks.json"), "token_endpoint": .string(issuer + "/token"),
            ])
            try discovery.serialized.write(toFile: directory + "/www/.well-known/openid-configuration", atomically: true, encoding: .utf8)
            try JWKSet(keys: [try key.publicJWK()]).json.serialized.write(toFile: directory + "/www/.well-known/jwks.json", atomically: true, encoding: .utf8)
            let now = Int(Date().timeIntervalSince1970)
            let claims = JSONValue.object([
                "iss": .string(issuer), "sub": .string("ca-user"), "aud": .string("cli"), "iat": .number("\(now)"), "exp": .number("\(now + 600)"),
            ])
            let token = try CompactJWS.sign(payload: Array(claims.serialized.utf8), with: key, extraHeader: ["typ": .string("JWT")])

            let server = try ChildProcess("/bin/sh", [
                "-c", "cd '\(directory)/www' && exec openssl s_server -accept 127.0.0.1:\(port) -cert ../server.pem -key ../server.key -WWW",
            ])
            defer { server.kill() }
            var lines = server.lines.makeAsyncIterator()
            while let line = await lines.next() {
                if line.contains("ACCEPT") { break }
            }  // s_server prints ACCEPT once listening

            let verify = ["verify", "-", "--issuer", issuer, "--audience", "cli"]
            let untrusted = try await loginkit(verify, input: token + "\n")
            #expect(untrusted.status == 5, "\(untrusted.stderr)")
            let flag = try await loginkit(verify + ["--ca-file", directory + "/ca.pem"], input: token + "\n")
            #expect(flag.status == 0, "\(flag.stderr)")
            #expect(flag.stdout.contains("ca-user"))
            for variable in ["LOGINKIT_CA_FILE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"] {
                let trusted = try await loginkit(verify, input: token + "\n", environment: [variable: directory + "/ca.pem"])
                #expect(trusted.status == 0, "\(variable): \(trusted.stderr)")
            }
            let missing = try await loginkit(verify + ["--ca-file", directory + "/missing.pem"], input: token + "\n")
            #expect(missing.status == 2, "\(missing.stderr)")
        }
    }
}
