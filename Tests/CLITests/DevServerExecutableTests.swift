import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The dev identity provider is its own executable, `loginkit-dev-server`, which `loginkit
/// dev-server` execs and `loginkit demo` spawns; `loginkit` links no server framework.
@Suite(.timeLimit(.minutes(3)))
struct DevServerExecutableTests {
    /// `loginkit` does not link LoginKitDevServer: no Hummingbird or NIO symbol is in it.
    @Test func loginkitLinksNoServerFramework() async throws {
        let loginkit = try loginkitPath()
        let devServer = try devServerPath()
        // The modules as they appear in mangled symbol and type names; grep exits 0 on a match, 1 on none.
        for module in ["11Hummingbird", "8NIOPosix"] {
            #expect(await run("/usr/bin/env", ["grep", "-q", "-a", "-F", module, devServer]) == 0, "the check cannot see \(module)")
            #expect(await run("/usr/bin/env", ["grep", "-q", "-a", "-F", module, loginkit]) == 1, "loginkit links \(module)")
        }
    }

    /// `loginkit-dev-server` prints its issuer and exits 0 once its standard input ends.
    @Test func theExecutablePrintsItsIssuerAndStopsWhenItsStandardInputEnds() async throws {
        let child = try ServerChild(try devServerPath(), ["--exit-on-stdin-eof", "--quiet"])
        let line = await child.firstLine()
        #expect(line.hasPrefix("issuer: http://127.0.0.1:"), "\(line)")
        let issuer = String(line.dropFirst("issuer: ".count))
        try await CurlHTTPClient.withClient { client in
            let request = try #require(HTTPRequest(method: .get, url: issuer + "/.well-known/openid-configuration"))
            let (response, body) = try await client.send(request, body: nil)
            #expect(response.status.code == 200)
            #expect(String(decoding: body, as: UTF8.self).contains("\"authorization_endpoint\""))
        }
        child.closeStandardInput()
        #expect(await child.exitStatus() == 0)
    }

    /// `--help` and `help` print the usage on stdout and exit 0 (not an error on stderr, exit 1).
    @Test func helpIsPrintedAsHelp() async throws {
        for arguments in [["--help"], ["help"], ["serve", "--help"]] {
            let help = try await loginkit(arguments, executable: try devServerPath())
            #expect(help.status == 0, "\(arguments): \(help.all)")
            #expect(help.stdout.contains("USAGE"), "\(arguments): \(help.all)")
            #expect(help.stderr.isEmpty, "\(arguments): \(help.all)")
        }
    }

    /// SIGTERM stops `loginkit-dev-server` with exit status 0.
    @Test func sigtermStopsTheExecutableCleanly() async throws {
        let child = try ServerChild(try devServerPath(), ["--quiet"])
        #expect(await child.firstLine().hasPrefix("issuer: "))
        child.process.kill(.SIGTERM)
        #expect(await child.exitStatus() == 0)
        child.closeStandardInput()
    }

    /// `loginkit dev-server` execs `loginkit-dev-server` (the same process, its options such as
    /// `--exit-on-stdin-eof` included).
    @Test func loginkitDevServerExecsTheExecutable() async throws {
        let child = try ServerChild(try loginkitPath(), ["dev-server", "--exit-on-stdin-eof", "--quiet"])
        let line = await child.firstLine()
        #expect(line.hasPrefix("issuer: http://127.0.0.1:"), "\(line)")
        let image = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(child.process.pid)/exe")
        #expect(image.hasSuffix("/loginkit-dev-server"), "\(image)")
        child.closeStandardInput()
        #expect(await child.exitStatus() == 0)
    }

    /// `loginkit dev-server` without `loginkit-dev-server` beside it: exit 2, naming it — even with
    /// one on the `PATH` (the build directory's), which is never run: only the companion installed
    /// with `loginkit` is. (Run from the `PATH`, the server would read the end of its stdin and exit 0.)
    @Test func loginkitDevServerWithoutTheExecutableIsAUsageError() async throws {
        try await withTemporaryDirectory { directory in
            let copy = directory + "/loginkit"
            try FileManager.default.copyItem(atPath: try loginkitPath(), toPath: copy)
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: copy)
            let onPath = URL(fileURLWithPath: try devServerPath()).deletingLastPathComponent().path
            let errors = try TestPipe()
            let process = try SpawnedProcess(
                copy, ["dev-server", "--exit-on-stdin-eof", "--quiet"],
                environment: ProcessInfo.processInfo.environment.merging(["PATH": onPath + ":/usr/bin:/bin"]) { $1 }, stdout: .null,
                stderr: .descriptor(errors.writeEnd))
            close(errors.writeEnd)
            let stderr = String(decoding: await errors.readToEnd(), as: UTF8.self)
            #expect(await process.exitStatus() == 2)
            #expect(stderr.contains("loginkit-dev-server was not found beside loginkit"), "\(stderr)")
        }
    }

    /// `loginkit dev-server` runs the server without the variables that hold secrets: the server's
    /// `/proc/PID/environ`, which the user's other processes may read, lacks them (a variable
    /// without a secret is kept, which shows the check can read it).
    @Test func loginkitDevServerWithholdsTheSecretVariables() async throws {
        let secrets = [
            "LOGINKIT_CLIENT_SECRET": "Client-Secret-\(UUID().uuidString)", "LOGINKIT_STORE_KEY": "Store-Key-\(UUID().uuidString)",
            "PGPASSWORD": "Pg-Password-\(UUID().uuidString)", "LOGINKIT_STORE": "postgres://fleet:Store-Url-\(UUID().uuidString)@127.0.0.1/db",
        ]
        let child = try LoginKitTestSupport.ChildProcess(
            try loginkitPath(), ["dev-server", "--quiet"], environment: secrets.merging(["LOGINKIT_TEST_KEPT": "kept"]) { $1 })
        var lines = child.lines.makeAsyncIterator()
        let line = await lines.next() ?? ""
        let environ = (try? String(contentsOfFile: "/proc/\(child.process.pid)/environ", encoding: .utf8)) ?? ""
        child.process.kill(.SIGTERM)
        #expect(await child.waitForExit() == 0)
        #expect(line.hasPrefix("issuer: http://127.0.0.1:"), "\(line)")
        let variables = environ.split(separator: "\0").map(String.init)
        try #require(variables.contains("LOGINKIT_TEST_KEPT=kept"), "the server's environment could not be read")
        for (name, value) in secrets {
            #expect(!variables.contains { $0.hasPrefix(name + "=") }, "\(name) reached the dev server")
            #expect(!environ.contains(value), "\(name)'s value reached the dev server")
        }
    }

    /// `loginkit demo` spawns `loginkit-dev-server` and signs in through a scripted browser.
    @Test func theDemoRunsAgainstTheExecutableWithAScriptedBrowser() async throws {
        let demo = try await loginkit(["demo"])
        #expect(demo.status == 0, "\(demo.all)")
        #expect(demo.stdout.contains("2. Sign in through the browser (authorization code + PKCE), with a scripted browser"))
        #expect(demo.stdout.contains("→ signed in as "))
        #expect(demo.stderr.contains("scripted browser: signed in as demo at 127.0.0.1:"), "\(demo.stderr)")
        #expect(demo.stdout.contains("the server counted 1 token request(s)"), "\(demo.stdout)")
        #expect(demo.stdout.contains("< minimum 9.0.0"), "\(demo.stdout)")
        #expect(demo.stdout.contains("revocation requests: ") && !demo.stdout.contains("revocation requests: 0"), "\(demo.stdout)")
    }

    /// `browse` as `$BROWSER` (the URL appended) completes a browser login; with `--deny` the login
    /// is denied; with a wrong password it exits 1.
    @Test func browseSignsInAsTheBrowserVariable() async throws {
        let browse = try devServerPath() + " browse"
        try await DevServer.withServer { server in
            try await CurlHTTPClient.withClient { client in
                let api = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-cli"), transport: client)
                var configuration = BrowserLogin.Configuration()
                configuration.timeout = .seconds(60)
                var environment = ProcessInfo.processInfo.environment
                environment["BROWSER"] = browse
                let credentials = try await BrowserLogin(
                    api: api, launcher: SystemBrowserLauncher(environment: environment), configuration: configuration
                ).run()
                let claims = try #require(try credentials.idToken?.unverifiedClaims())
                #expect(claims["preferred_username"]?.stringValue == "demo")

                environment["BROWSER"] = browse + " --deny"
                let denied = await thrown {
                    try await BrowserLogin(api: api, launcher: SystemBrowserLauncher(environment: environment), configuration: configuration).run()
                }
                #expect((denied as? LoginError)?.code == .accessDenied, "\(String(describing: denied))")

                let request = try await api.authorizationRequest(redirectURI: "http://127.0.0.1/callback", options: AuthorizationOptions())
                #expect(await run(try devServerPath(), ["browse", request.url, "--password", "wrong"]) == 1)
            }
        }
    }
}

/// The built `loginkit-dev-server`, beside `loginkit`.
func devServerPath() throws -> String {
    let path = URL(fileURLWithPath: try loginkitPath()).deletingLastPathComponent().appendingPathComponent("loginkit-dev-server").path
    try #require(FileManager.default.isExecutableFile(atPath: path), "build it with `swift build --build-tests` (make test does)")
    return path
}

/// A server child process with a pipe on its stdin (closing it is the end of input) and one on its stdout.
struct ServerChild {
    let process: SpawnedProcess
    private let input: TestPipe
    private let output: Int32

    init(_ executable: String, _ arguments: [String]) throws {
        let input = try TestPipe()
        let output = try TestPipe()
        process = try SpawnedProcess(executable, arguments, stdin: .descriptor(input.readEnd), stdout: .descriptor(output.writeEnd))
        close(input.readEnd)
        close(output.writeEnd)
        self.input = input
        self.output = output.readEnd
    }

    /// The first line on the child's stdout, without its newline ("" when stdout ends first).
    func firstLine() async -> String {
        let descriptor = output
        return await onDedicatedThread {
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(descriptor, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
            return String(decoding: line, as: UTF8.self)
        }
    }

    /// Closes our end of the child's stdin: the child reads the end of its input.
    func closeStandardInput() {
        input.writeAndClose(Data())
    }

    /// Waits for the exit, then closes our end of its stdout.
    func exitStatus() async -> Int32 {
        let status = await process.exitStatus()
        close(output)
        return status
    }
}
