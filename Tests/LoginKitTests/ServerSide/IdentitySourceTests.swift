import Foundation
import HTTPTypes
@testable import LoginKit
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Identity sources against real files, programs and HTTP servers on 127.0.0.1: what each kind
/// reads, when it reads again, what it refuses, and that no error carries the token.
@Suite(.timeLimit(.minutes(1)))
struct IdentitySourceTests {
    // MARK: Files

    @Test func aFileIsReadWithoutTheWhitespaceAroundItsTokenAndKept() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/token"
            let token = jwt(expiresIn: 3600)
            try writeInPlace("\n  \(token) \n\n", to: path)
            let source = IdentitySource.file(path)
            #expect(try await source.token(transport: UnusedTransport()) == token)
            #expect(try await source.token(transport: UnusedTransport()) == token)
            #expect(IdentitySource.fetchCount(of: source) == 1)
        }
    }

    @Test func aFileRotatedByRenameOrRewrittenInPlaceIsReadAgainAtTheNextCall() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/token"
            let source = IdentitySource.file(path)
            let first = jwt(expiresIn: 3600)
            try writeInPlace(first, to: path)
            #expect(try await source.token(transport: UnusedTransport()) == first)

            let second = jwt(expiresIn: 3600)
            try writeInPlace(second, to: path + ".new")
            try #require(rename(path + ".new", path) == 0)
            #expect(try await source.token(transport: UnusedTransport()) == second)

            let third = jwt(expiresIn: 3600)
            try writeInPlace(third + "\n\n", to: path)  // the same inode, another size
            #expect(try await source.token(transport: UnusedTransport()) == third)
            #expect(IdentitySource.fetchCount(of: source) == 3)
        }
    }

    @Test func aMissingFileIsAnErrorThatNamesThePath() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/absent"
            let error = await thrown { try await IdentitySource.file(path).token(transport: UnusedTransport()) }
            let loginError = try #require(error as? LoginError)
            #expect(loginError.code == .invalidConfiguration)
            #expect(loginError.message.contains(path))
        }
    }

    @Test func aTokenNearExpiryIsFetchedAgainAtEachCall() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/token"
            // Judged at the time it was made, however long the test waits to run: valid, but
            // within the 60 s margin.
            let minted = Date()
            let token = jwt(expiresIn: 30)
            try writeInPlace(token, to: path)
            let source = IdentitySource.file(path)
            try await IdentitySource.$clock.withValue({ minted }) { () async throws in
                #expect(try await source.token(transport: UnusedTransport()) == token)
                #expect(try await source.token(transport: UnusedTransport()) == token)
            }
            #expect(IdentitySource.fetchCount(of: source) == 2)
        }
    }

    @Test func anExpiredTokenIsAnErrorThatDoesNotShowIt() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/token"
            let token = jwt(expiresIn: -10)
            try writeInPlace(token, to: path)
            let error = await thrown { try await IdentitySource.file(path).token(transport: UnusedTransport()) }
            let loginError = try #require(error as? LoginError)
            #expect(loginError.code == .invalidConfiguration)
            #expect(loginError.message.contains("expired"))
            expectNoToken(token, in: loginError)
        }
    }

    @Test(arguments: [0o666, 0o620, 0o602] as [mode_t])
    func aTokenFileOthersCanWriteIsRefusedNamingTheFix(_ mode: mode_t) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/token"
            let token = jwt(expiresIn: 3600)
            try writeInPlace(token, to: path)
            try #require(chmod(path, mode) == 0)
            let link = directory + "/link"
            try #require(symlink(path, link) == 0)
            // The file's mode counts, not the link's.
            for (source, named) in [(IdentitySource.file(path), path), (IdentitySource.file(link), link)] {
                let error = await thrown { try await source.token(transport: UnusedTransport()) }
                let loginError = try #require(error as? LoginError)
                #expect(loginError.code == .invalidConfiguration)
                #expect(loginError.message.contains("chmod go-w \(named)"), "\(loginError.message)")
                expectNoToken(token, in: loginError)
            }
            // Only its owner can write it (a projected token's 0644): read, through the link too.
            try #require(chmod(path, 0o644) == 0)
            #expect(try await IdentitySource.file(link).token(transport: UnusedTransport()) == token)
        }
    }

    @Test func aFileRewrittenOrReplacedWhileItIsReadIsReadAgain() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/token"
            let source = IdentitySource.file(path)
            try writeInPlace(jwt(expiresIn: 3600), to: path)
            let rewritten = jwt(expiresIn: 3600)
            var attempts: [Int] = []
            // Rewritten in place between the identity check and the read: the same inode, another size.
            let fetched = try source.readTokenFile(path) { attempt in
                attempts.append(attempt)
                if attempt == 0 { try? writeInPlace(rewritten + "\n\n", to: path) }
            }
            #expect(fetched.token == rewritten)
            #expect(attempts == [0, 1])
            #expect(fetched.validator == source.currentValidator())

            // Replaced by a rename between the identity check and the read.
            let renamed = jwt(expiresIn: 3600)
            attempts = []
            let replaced = try source.readTokenFile(path) { attempt in
                attempts.append(attempt)
                if attempt == 0 {
                    try? writeInPlace(renamed, to: path + ".new")
                    _ = rename(path + ".new", path)
                }
            }
            #expect(replaced.token == renamed)
            #expect(attempts == [0, 1])
        }
    }

    @Test func aFileThatKeepsChangingIsReadThreeTimesThenItsLastReadIsTakenOrRefused() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/token"
            let source = IdentitySource.file(path)
            try writeInPlace(jwt(expiresIn: 3600), to: path)
            let tokens = (0..<3).map { _ in jwt(expiresIn: 3600) }
            var attempts: [Int] = []
            // Before each read it gets another size than the check before that read saw.
            let fetched = try source.readTokenFile(path) { attempt in
                attempts.append(attempt)
                try? writeInPlace(tokens[min(attempt, 2)] + String(repeating: "\n", count: attempt + 1), to: path)
            }
            #expect(attempts == [0, 1, 2])
            #expect(fetched.token == tokens[2])
            // Kept with the identity from before that read: the next caller reads the file again.
            #expect(fetched.validator != source.currentValidator())

            // Its last read holds no token: an error that says so, which a later try may not meet.
            let error = #expect(throws: ServerError.self) {
                _ = try source.readTokenFile(path) { attempt in try? writeInPlace(String(repeating: " ", count: attempt + 1), to: path) }
            }
            #expect(error?.code == .unavailable)
            #expect(error?.message.contains("kept changing") == true)
        }
    }

    // MARK: Programs

    @Test func aProgramThatPrintsABareJWTGivesIt() async throws {
        try await withTemporaryDirectory { directory in
            let token = jwt(expiresIn: 3600)
            let path = try program("printf '%s\\n' '\(token)'\n", in: directory)
            let source = IdentitySource.program(path)
            #expect(try await source.token(transport: UnusedTransport()) == token)
            #expect(try await source.token(transport: UnusedTransport()) == token)
            #expect(IdentitySource.fetchCount(of: source) == 1)
        }
    }

    @Test func aProgramThatPrintsGooglesDocumentGivesItsTokenUntilItsExpirationTime() async throws {
        try await withTemporaryDirectory { directory in
            let token = jwt(expiresIn: 3600)
            let minted = Date()
            let soon = Int(minted.timeIntervalSince1970) + 30  // earlier than the JWT's exp: it counts
            let document =
                #"{"version":1,"success":true,"token_type":"urn:ietf:params:oauth:token-type:id_token","id_token":"\#(token)","expiration_time":\#(soon)}"#
            let path = try program("printf '%s\\n' '\(document)'\n", in: directory)
            let source = IdentitySource.program(path, arguments: ["--audience", "api://app"])
            // Judged at the time the document was made, however long the test waits to run.
            try await IdentitySource.$clock.withValue({ minted }) { () async throws in
                #expect(try await source.token(transport: UnusedTransport()) == token)
                #expect(try await source.token(transport: UnusedTransport()) == token)
            }
            #expect(IdentitySource.fetchCount(of: source) == 2)
        }
    }

    @Test func aProgramReportingFailureGivesItsCodeAndMessage() async throws {
        try await withTemporaryDirectory { directory in
            let document = #"{"version":1,"success":false,"code":"401","message":"Caller not authorized."}"#
            let path = try program("printf '%s\\n' '\(document)'\nexit 1\n", in: directory)
            let error = await thrown { try await IdentitySource.program(path).token(transport: UnusedTransport()) }
            let serverError = try #require(error as? ServerError)
            #expect(serverError.code == .unavailable)
            #expect(serverError.providerError == "401")
            #expect(serverError.message.contains("Caller not authorized."))
            #expect(serverError.message.hasPrefix("exec:" + path))
        }
    }

    @Test func aProgramThatExitsWithAFailureStatusIsAnError() async throws {
        try await withTemporaryDirectory { directory in
            let path = try program("exit 3\n", in: directory)
            let error = await thrown { try await IdentitySource.program(path).token(transport: UnusedTransport()) }
            let serverError = try #require(error as? ServerError)
            #expect(serverError.code == .unavailable)
            #expect(serverError.message.contains("status 3"))
        }
    }

    @Test func aProgramThatHangsWithItsOutputOpenIsKilledAtItsTimeout() async throws {
        try await withTemporaryDirectory { directory in
            // A child in the background keeps the output open too.
            let path = try program("sleep 600 &\nexec sleep 600\n", in: directory)
            let error = await thrown { try await IdentitySource.program(path, timeout: .seconds(1)).token(transport: UnusedTransport()) }
            let serverError = try #require(error as? ServerError)
            #expect(serverError.code == .unavailable)
            #expect(serverError.message.contains("timeout"))
        }
    }

    @Test func aProgramThatPrintsMoreThan64KiBIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            let path = try program("head -c 70000 /dev/zero | tr '\\0' a\n", in: directory)
            let error = await thrown { try await IdentitySource.program(path).token(transport: UnusedTransport()) }
            let loginError = try #require(error as? LoginError)
            #expect(loginError.code == .invalidConfiguration)
            #expect(loginError.message.contains("64 KiB"))
        }
    }

    @Test func aProgramThatIsNotThereIsAConfigurationError() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/no-such-helper"
            let error = await thrown { try await IdentitySource.program(path).token(transport: UnusedTransport()) }
            let loginError = try #require(error as? LoginError)
            #expect(loginError.code == .invalidConfiguration)
            #expect(loginError.message.contains(path))
        }
    }

    @Test func aProgramThatPrintsNoTokenIsRefusedWithoutRepeatingWhatItPrinted() async throws {
        try await withTemporaryDirectory { directory in
            let path = try program("echo opaque-secret-output\n", in: directory)
            let error = await thrown { try await IdentitySource.program(path).token(transport: UnusedTransport()) }
            let loginError = try #require(error as? LoginError)
            #expect(loginError.code == .invalidConfiguration)
            expectNoToken("opaque-secret-output", in: loginError)
        }
    }

    @Test func aProgramThatExitsWhileItsChildKeepsItsOutputOpenGivesItsTokenAtOnce() async throws {
        try await withTemporaryDirectory { directory in
            let token = jwt(expiresIn: 3600)
            let gate = directory + "/gate"
            try makeFIFO(gate)
            // The child: in a session of its own (outside the program's process group), its output
            // the program's, blocked until the test opens the gate.
            let path = try program("printf '%s\\n' '\(token)'\nsetsid cat \"$1\" &\nexit 0\n", in: directory)
            let source = IdentitySource.program(path, arguments: [gate], timeout: .seconds(600))
            let result: Result<String, any Error>
            do {
                result = .success(try await source.token(transport: UnusedTransport()))
            } catch {
                result = .failure(error)
            }
            await release(gate)
            #expect(try result.get() == token)
        }
    }

    @Test func aProgramEndedByASignalIsAnErrorThoughItPrintedAToken() async throws {
        try await withTemporaryDirectory { directory in
            let token = jwt(expiresIn: 3600)
            let gate = directory + "/gate"
            try makeFIFO(gate)
            let path = try program("printf '%s\\n' '\(token)'\nsetsid cat \"$1\" &\nkill -9 $$\n", in: directory)
            let error = await thrown { try await IdentitySource.program(path, arguments: [gate], timeout: .seconds(600)).token(transport: UnusedTransport()) }
            await release(gate)
            let serverError = try #require(error as? ServerError)
            #expect(serverError.code == .unavailable)
            #expect(serverError.message.contains("signal 9"), "\(serverError.message)")
            expectNoToken(token, in: serverError)
        }
    }

    /// In a process that ignores SIGCHLD the kernel reaps the program as it exits, and its exit
    /// status is lost: what it printed is not taken. Run in a child process (the test helper):
    /// SIGCHLD's disposition is the whole process's.
    @Test func aProgramWhoseExitStatusIsLostIsAnErrorThoughItPrintedAToken() async throws {
        let helper = try testHelperPath()
        try await withTemporaryDirectory { directory in
            let token = jwt(expiresIn: 3600)
            let path = try program("printf '%s\\n' '\(token)'\nexit 3\n", in: directory)
            let (status, output) = try await runCapturing(helper, ["identity-program-ignoring-sigchld", path])
            #expect(status == 0, "\(output)")
            #expect(output.hasPrefix("unavailable: exec:" + path), "\(output)")
            #expect(output.contains("exit status could not be read"), "\(output)")
            #expect(!output.contains(token))
        }
    }

    /// Watched through a pidfd, or (where the kernel refuses one) by checking for the exit between
    /// bounded waits: each run closes the pipe's read end and the pidfd, and reaps the program,
    /// although a child it left holds the pipe open. Where this process can open a pidfd (asked
    /// of another program, not of LoginKit's own call), a run watched through one has one.
    @Test(arguments: [true, false])
    func everyRunClosesItsDescriptorsAndReapsItsProgram(watchingWithProcessDescriptor: Bool) async throws {
        let pidfdsWork: Bool
        if watchingWithProcessDescriptor {
            pidfdsWork = await processDescriptorsWork()
        } else {
            pidfdsWork = false
        }
        try await withTemporaryDirectory { directory in
            let token = jwt(expiresIn: 3600)
            // Notes the pipe its output goes to, prints the token, and leaves a child in a session
            // of its own that holds that pipe open until the test opens the gate.
            let path = try program(
                "out=$(readlink /proc/$$/fd/1)\nprintf '%s\\n' \"$out\" > \"$1.pipe\"\nprintf '%s\\n' '\(token)'\nsetsid cat \"$1\" &\n", in: directory)
            let source = IdentitySource.program(path)
            for index in 0..<3 {
                let gate = directory + "/gate-\(index)"
                try makeFIFO(gate)
                let run = try source.startProgram(
                    path, arguments: [gate], environment: ProcessInfo.processInfo.environment,
                    watchesExitWithProcessDescriptor: watchingWithProcessDescriptor)
                let outcome = try? await source.outcome(of: run, timeout: .seconds(600))
                let pipe = IdentitySource.trimmed(contents(of: gate + ".pipe"))
                let targets = openDescriptorTargets()
                let exitDescriptorOpen = run.exitDescriptor.map { isProcessDescriptor($0, of: run.pid) } ?? false
                await release(gate)
                #expect(outcome?.exitCode == 0)
                let printed = String(decoding: outcome?.output ?? [], as: UTF8.self)
                #expect(printed.contains(token))
                #expect(pipe.hasPrefix("pipe:["), "\(pipe)")
                #expect(!targets.contains(pipe), "the read end of \(pipe) is still open")
                #expect(!exitDescriptorOpen, "the pidfd of \(run.pid) is still open")
                if !watchingWithProcessDescriptor {
                    #expect(run.exitDescriptor == nil)
                } else if pidfdsWork {
                    #expect(run.exitDescriptor != nil, "pidfd_open works here, but the run of \(run.pid) has no pidfd")
                }
            }
        }
    }

    @Test func aCancelledWaitKillsTheProgramWhichIsThenReaped() async throws {
        try await withTemporaryDirectory { directory in
            let gate = directory + "/gate"
            let started = directory + "/started"
            try makeFIFO(gate)
            try makeFIFO(started)
            // Leaves a child in a session of its own that holds its output, says so, then blocks.
            let path = try program("setsid cat \"$1\" &\necho started > \"$2\"\nexec sleep 600\n", in: directory)
            let source = IdentitySource.program(path)
            let run = try source.startProgram(path, arguments: [gate, started], environment: ProcessInfo.processInfo.environment)
            let waiting = Task { try await source.outcome(of: run, timeout: .seconds(600)) }
            await awaitWriter(on: started)
            waiting.cancel()
            let error = await thrown { try await waiting.value }
            // Finished once the program has been killed and reaped.
            let outcome = try? await run.finished.wait()
            await release(gate)
            #expect(error is CancellationError)
            #expect(outcome?.exitCode == 128 + SIGKILL)
        }
    }

    @Test func aProgramStartedWithAnotherEnvironmentIsRunAgain() async throws {
        try await withTemporaryDirectory { directory in
            let path = try program("printf '%s\\n' \"$WORKLOAD_TOKEN\"\n", in: directory)
            let source = IdentitySource.program(path)
            let first = jwt(expiresIn: 3600)
            let second = jwt(expiresIn: 3600)
            #expect(try await source.token(transport: UnusedTransport(), environment: ["WORKLOAD_TOKEN": first]) == first)
            #expect(try await source.token(transport: UnusedTransport(), environment: ["WORKLOAD_TOKEN": second]) == second)
            // The environment the program would get is the first one (LoginKit's secrets stay out): kept.
            let withSecret = ["WORKLOAD_TOKEN": first, "LOGINKIT_STORE_KEY": "store-key"]
            #expect(try await source.token(transport: UnusedTransport(), environment: withSecret) == first)
            #expect(IdentitySource.fetchCount(of: source) == 2)
        }
    }

    // MARK: Failures

    @Test func aFailedProgramRunOrRequestIsRememberedButAFailedFileReadIsNot() async throws {
        try await withTemporaryDirectory { directory in
            let path = try program("exit 3\n", in: directory)
            let source = IdentitySource.program(path)
            let first = await thrown { try await source.token(transport: UnusedTransport()) } as? ServerError
            let second = await thrown { try await source.token(transport: UnusedTransport()) } as? ServerError
            #expect(first?.code == .unavailable)
            #expect(second?.message == first?.message)
            #expect(IdentitySource.fetchCount(of: source) == 1)

            // A file may appear at any moment: read again at once.
            let file = IdentitySource.file(directory + "/not-yet")
            let missing = await thrown { try await file.token(transport: UnusedTransport()) }
            #expect(missing is LoginError)
            let token = jwt(expiresIn: 3600)
            try writeInPlace(token, to: directory + "/not-yet")
            #expect(try await file.token(transport: UnusedTransport()) == token)
            #expect(IdentitySource.fetchCount(of: file) == 2)
        }
        let server = try TokenServer { _ in (503, "application/json", #"{"error":"temporarily_unavailable"}"#) }
        defer { server.stop() }
        try await CurlHTTPClient.withClient { client in
            let source = IdentitySource.url(server.url("/token/\(UUID().uuidString)"), field: "access_token")
            let first = await thrown { try await source.token(transport: client) } as? ServerError
            let second = await thrown { try await source.token(transport: client) } as? ServerError
            #expect(first?.status == 503)
            #expect(second?.status == 503)
            #expect(server.requests.count == 1)
            #expect(IdentitySource.fetchCount(of: source) == 1)
        }
    }

    @Test func aRememberedFailureIsHandedOutForTenSecondsAndForgottenOnceATokenIsKept() {
        var cache = IdentitySource.Cache()
        let now = Date()
        let key = IdentitySource.FetchKey(source: .url("https://metadata.test/token"), inputs: IdentitySource.FetchKey.Inputs())
        cache.remember(ServerError(.unavailable, "down"), for: key, at: now)
        guard case .failure(let error)? = cache.kept(for: key, validator: .unchanging, now: now.addingTimeInterval(9.9)) else {
            Issue.record("expected the remembered failure")
            return
        }
        #expect((error as? ServerError)?.message == "down")
        #expect(cache.kept(for: key, validator: .unchanging, now: now.addingTimeInterval(10)) == nil)
        #expect(cache.kept(for: IdentitySource.FetchKey(source: .url("https://metadata.test/other"), inputs: IdentitySource.FetchKey.Inputs()), validator: .unchanging, now: now) == nil)

        cache.store(IdentitySource.Cache.Entry(token: "t", expiresAt: nil, fetchedAt: now, validator: .unchanging), for: key)
        #expect(cache.failures[key] == nil)
        guard case .success(let token)? = cache.kept(for: key, validator: .unchanging, now: now) else {
            Issue.record("expected the kept token")
            return
        }
        #expect(token == "t")
    }

    // MARK: Environment variables

    @Test func aVariableIsReadFromTheEnvironmentGivenAndAnUnsetOneIsAnError() async throws {
        let name = "LOGINKIT_TEST_IDENTITY_\(UUID().uuidString.prefix(8))"
        let source = IdentitySource.environment(name)
        let token = jwt(expiresIn: 3600)
        #expect(try await source.token(transport: UnusedTransport(), environment: [name: " \(token)\n"]) == token)
        #expect(try await source.token(transport: UnusedTransport(), environment: [name: token]) == token)

        let error = await thrown { try await source.token(transport: UnusedTransport(), environment: [:]) }
        let loginError = try #require(error as? LoginError)
        #expect(loginError.code == .invalidConfiguration)
        #expect(loginError.message.contains(name))

        let expired = jwt(expiresIn: -10)
        let refusal = await thrown { try await source.token(transport: UnusedTransport(), environment: [name: expired]) }
        #expect((refusal as? LoginError)?.code == .invalidConfiguration)
        if let refusal { expectNoToken(expired, in: refusal) }
    }

    @Test(arguments: ["LOGINKIT_CLIENT_SECRET", "LOGINKIT_STORE_KEY", "PGPASSWORD", "LOGINKIT_STORE", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"])
    func loginKitsOwnSecretsAreNoIdentitySource(_ name: String) async throws {
        let source = IdentitySource.environment(name)
        let secret = "secret-\(UUID().uuidString)"
        let error = await thrown { try await source.token(transport: UnusedTransport(), environment: [name: secret]) }
        let loginError = try #require(error as? LoginError)
        #expect(loginError.code == .invalidConfiguration)
        #expect(loginError.message.contains(name))
        expectNoToken(secret, in: loginError)
        #expect(IdentitySource.fetchCount(of: source) == 0)
    }

    // MARK: URLs

    @Test func aURLIsAskedWithItsHeadersAndItsTokenReadAtTheField() async throws {
        let token = jwt(expiresIn: 3600)
        let server = try TokenServer { request in
            guard request.values(of: "metadata") == ["true"] else {
                return (400, "application/json", #"{"error":"bad_request","error_description":"Required metadata header not specified"}"#)
            }
            switch request.target.prefix(while: { $0 != "?" }) {
            case "/metadata/token": return (200, "application/json", #"{"access_token":"\#(token)","expires_in":"300","token_type":"Bearer"}"#)
            case "/nested": return (200, "application/json", #"{"data":{"token":"\#(token)"}}"#)
            default: return (200, "text/plain", "\(token)\n")
            }
        }
        defer { server.stop() }
        try await CurlHTTPClient.withClient { client in
            let metadata = IdentitySource.url(server.url("/metadata/token?resource=api"), headers: ["Metadata": "true"], field: "access_token")
            #expect(try await metadata.token(transport: client) == token)
            #expect(try await metadata.token(transport: client) == token)
            #expect(IdentitySource.fetchCount(of: metadata) == 1)

            let nested = IdentitySource.url(server.url("/nested"), headers: ["Metadata": "true"], field: "data.token")
            #expect(try await nested.token(transport: client) == token)
            let whole = IdentitySource.url(server.url("/plain"), headers: ["Metadata": "true"])
            #expect(try await whole.token(transport: client) == token)

            let missing = await thrown {
                try await IdentitySource.url(server.url("/nested"), headers: ["Metadata": "true"], field: "data.other").token(transport: client)
            }
            #expect((missing as? ServerError)?.code == .malformedResponse)

            let refused = await thrown { try await IdentitySource.url(server.url("/metadata/token")).token(transport: client) }
            let serverError = try #require(refused as? ServerError)
            #expect(serverError.code == .unexpectedStatus)
            #expect(serverError.status == 400)
            #expect(serverError.providerError == "bad_request")
            #expect(serverError.message.hasPrefix("url:" + server.url("/metadata/token")))
        }
    }

    @Test func anHTMLErrorPageIsNotRepeated() async throws {
        let token = jwt(expiresIn: 3600)
        let server = try TokenServer { _ in
            (500, "text/html", "<html><body>Internal error while issuing \(token)</body></html>")
        }
        defer { server.stop() }
        try await CurlHTTPClient.withClient { client in
            let error = await thrown { try await IdentitySource.url(server.url("/token"), field: "access_token").token(transport: client) }
            let serverError = try #require(error as? ServerError)
            #expect(serverError.code == .unexpectedStatus)
            #expect(serverError.status == 500)
            #expect(!serverError.message.contains("<html"))
            expectNoToken(token, in: serverError)
        }
    }

    // MARK: GitHub Actions

    @Test func gitHubActionsIsAskedWithTheRequestTokenAndTheAudienceEncoded() async throws {
        let token = jwt(expiresIn: 3600)
        let requestToken = "request-token-\(UUID().uuidString)"
        let server = try TokenServer { request in
            guard request.values(of: "authorization") == ["bearer \(requestToken)"] else {
                return (401, "application/json", #"{"message":"Bad credentials"}"#)
            }
            return (200, "application/json", #"{"count":1,"value":"\#(token)"}"#)
        }
        defer { server.stop() }
        try await CurlHTTPClient.withClient { client in
            let audience = "api://Azure AD/\(UUID().uuidString)"
            let source = IdentitySource.gitHubActions(audience: audience)
            let environment = [
                "ACTIONS_ID_TOKEN_REQUEST_URL": server.url("/github/token?api-version=2.0"), "ACTIONS_ID_TOKEN_REQUEST_TOKEN": requestToken,
            ]
            #expect(try await source.token(transport: client, environment: environment) == token)
            let encoded = audience.replacingOccurrences(of: ":", with: "%3A").replacingOccurrences(of: "/", with: "%2F")
                .replacingOccurrences(of: " ", with: "%20")
            #expect(server.requests.map(\.target) == ["/github/token?api-version=2.0&audience=\(encoded)"])

            // Another job's variables: not the token kept for the first.
            var wrong = environment
            wrong["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = "wrong-request-token"
            let error = await thrown { try await source.token(transport: client, environment: wrong) }
            let serverError = try #require(error as? ServerError)
            #expect(serverError.code == .unexpectedStatus)
            #expect(serverError.status == 401)
            #expect(serverError.message.contains("Bad credentials"))
            expectNoToken("wrong-request-token", in: serverError)

            let unset = await thrown { try await source.token(transport: client, environment: [:]) }
            let loginError = try #require(unset as? LoginError)
            #expect(loginError.code == .invalidConfiguration)
            #expect(loginError.message.contains("ACTIONS_ID_TOKEN_REQUEST_URL"))
        }
    }

    // MARK: Sharing

    @Test func fiftyConcurrentCallersShareOneFetch() async throws {
        let token = jwt(expiresIn: 3600)
        let fetch = TestGate()
        let callers = TestGate()
        let transport = GatedTransport(gate: fetch, answer: #"{"access_token":"\#(token)"}"#)
        let source = IdentitySource.url("https://metadata.test/\(UUID().uuidString)", field: "access_token")
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    callers.note()
                    return try await source.token(transport: transport)
                }
            }
            await callers.arrived(count: 50)
            await fetch.arrived(count: 1)
            fetch.open()
            for try await value in group {
                #expect(value == token)
            }
        }
        #expect(IdentitySource.fetchCount(of: source) == 1)
        #expect(fetch.arrivals == 1)
    }

    @Test func callersWithOtherGitHubVariablesGetTheirOwnTokenFromAFetchOfTheirOwn() async throws {
        let fetch = TestGate()
        let tokens = ["request-a": jwt(expiresIn: 3600), "request-b": jwt(expiresIn: 3600)]
        let transport = GitHubTransport(gate: fetch) { tokens[$0] }
        let source = IdentitySource.gitHubActions(audience: "api://\(UUID().uuidString)")
        let first = Task { try await source.token(transport: transport, environment: gitHubEnvironment("request-a")) }
        await fetch.arrived(count: 1)
        // Another job's variables while the first fetch is under way: a fetch of its own.
        let second = Task { try await source.token(transport: transport, environment: gitHubEnvironment("request-b")) }
        await fetch.arrived(count: 2)
        fetch.open()
        let firstToken = try await first.value
        let secondToken = try await second.value
        #expect(firstToken == tokens["request-a"])
        #expect(secondToken == tokens["request-b"])
        #expect(IdentitySource.fetchCount(of: source) == 2)
    }

    @Test func aDiscardedTokenIsFetchedAgainUnderEveryEnvironmentOnlyWhileItIsStillKept() async throws {
        let first = jwt(expiresIn: 3600)
        let second = jwt(expiresIn: 3600)
        let answers = LockedState([first, first, second, second])
        let transport = GitHubTransport(gate: nil) { _ in answers.withLock { queue -> String? in queue.isEmpty ? nil : queue.removeFirst() } }
        let source = IdentitySource.gitHubActions(audience: "api://\(UUID().uuidString)")
        let jobA = gitHubEnvironment("request-a")
        let jobB = gitHubEnvironment("request-b")
        #expect(try await source.token(transport: transport, environment: jobA) == first)
        #expect(try await source.token(transport: transport, environment: jobB) == first)

        // Another token, or another source: nothing is dropped.
        IdentitySource.discard(second, for: source)
        IdentitySource.discard(first, for: .gitHubActions(audience: "api://other"))
        #expect(try await source.token(transport: transport, environment: jobA) == first)
        #expect(IdentitySource.fetchCount(of: source) == 2)

        // Refused by the provider: dropped under both environments, and each fetches anew.
        IdentitySource.discard(first, for: source)
        #expect(try await source.token(transport: transport, environment: jobA) == second)
        #expect(try await source.token(transport: transport, environment: jobB) == second)
        #expect(IdentitySource.fetchCount(of: source) == 4)
    }

    @Test func theCacheKeepsAtMost64TokensDroppingUnusableOnesFirstThenTheOldest() {
        var cache = IdentitySource.Cache()
        let now = Date()
        func entry(expiresIn seconds: Double, fetchedAfter offset: Double) -> IdentitySource.Cache.Entry {
            IdentitySource.Cache.Entry(
                token: "t", expiresAt: now.addingTimeInterval(seconds), fetchedAt: now.addingTimeInterval(offset), validator: .unchanging)
        }
        func key(_ name: String, value: String = "t") -> IdentitySource.FetchKey {
            IdentitySource.FetchKey(source: .environment(name), inputs: IdentitySource.FetchKey.Inputs(values: [value]))
        }
        let nearExpiry = key("NEAR_EXPIRY")
        cache.store(entry(expiresIn: 30, fetchedAfter: 0), for: nearExpiry)
        for index in 0..<63 {
            cache.store(entry(expiresIn: 3600, fetchedAfter: Double(index)), for: key("V\(index)"))
        }
        #expect(cache.entries.count == 64)
        cache.store(entry(expiresIn: 3600, fetchedAfter: 100), for: key("NEW"))
        #expect(cache.entries.count == 64)
        #expect(cache.entries[nearExpiry] == nil)
        #expect(cache.token(for: key("NEW"), validator: .unchanging, now: now) == "t")
        #expect(cache.token(for: key("NEW"), validator: .file(nil), now: now) == nil)
        #expect(cache.token(for: key("NEW", value: "other"), validator: .unchanging, now: now) == nil)
        cache.store(entry(expiresIn: 3600, fetchedAfter: 101), for: key("NEWER"))
        #expect(cache.entries.count == 64)
        #expect(cache.entries[key("V0")] == nil)
        #expect(cache.entries[key("V1")] != nil)
    }

    // MARK: Specifications

    static let specified: [IdentitySource] = [
        .file("/var/run/secrets/tokens/app"),
        .program("/usr/local/bin/token-helper"),
        .url(
            "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=api://app", headers: ["Metadata": "true"],
            field: "access_token"),
        .url("https://tokens.example/token"),
        .gitHubActions(),
        .gitHubActions(audience: "api://AzureADTokenExchange"),
        .environment("APP_IDENTITY_TOKEN"),
    ]

    @Test(arguments: IdentitySourceTests.specified)
    func aSpecificationParsesBackIntoItsSource(_ source: IdentitySource) throws {
        var headers: [String: String] = [:]
        var field: String?
        if case .url(_, let given, let path) = source {
            headers = given
            field = path
        }
        #expect(try IdentitySource(specification: source.specification, headers: headers, field: field) == source)
        #expect(source.specification.hasPrefix(source.kindName))
        #expect(source.displayName.hasPrefix(source.kindName))
    }

    @Test func theKindNamesAreTheSpecificationsPrefixes() throws {
        #expect(try IdentitySource(specification: "exec:token-helper", timeout: .seconds(5)) == .program("token-helper", timeout: .seconds(5)))
        #expect(IdentitySource.program("/bin/helper").kindName == "exec")
        #expect(IdentitySource.gitHubActions().kindName == "github-actions")
        #expect(IdentitySource.environment("X").kindName == "env")
    }

    @Test(arguments: [
        "", "file:", "exec:", "url:", "url:not a url", "url:ftp://files.example/token", "url:https://user:password@host.example/token",
        "env:", "env:A=B", "github-actions:", "FILE:/x", "ftp:/x", "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhcHAifQ.c2lnbmF0dXJl",
    ])
    func aBadSpecificationIsRefusedWithoutRepeatingASecret(_ specification: String) {
        let error = #expect(throws: LoginError.self) { _ = try IdentitySource(specification: specification) }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("password") == false)
        #expect(error?.message.contains("eyJ") == false)
    }

    @Test func headersAFieldAndATimeoutAreRefusedWhereTheyDoNotApply() {
        #expect(throws: LoginError.self) { _ = try IdentitySource(specification: "file:/x", headers: ["Metadata": "true"]) }
        #expect(throws: LoginError.self) { _ = try IdentitySource(specification: "env:X", field: "access_token") }
        #expect(throws: LoginError.self) { _ = try IdentitySource(specification: "url:https://x.example/", field: "data..token") }
        #expect(throws: LoginError.self) { _ = try IdentitySource(specification: "exec:/bin/helper", timeout: .zero) }
    }

    @Test func theDisplayNameShowsNoHeaderValueNorQuery() {
        let source = IdentitySource.url("https://metadata.example/token?sig=s3cr3t", headers: ["Authorization": "Bearer hunter2"], field: "t")
        #expect(source.displayName == "url:https://metadata.example/token?...")
        #expect(source.specification == "url:https://metadata.example/token?sig=s3cr3t")
        #expect(IdentitySource.gitHubActions(audience: "api://app").displayName == "github-actions:api://app")
        #expect(IdentitySource.file("/var/run/token").displayName == "file:/var/run/token")
    }
}

// MARK: Helpers

/// An unsigned JWT (a made-up signature: identity sources never verify) expiring `seconds` from
/// now (none when `nil`), different at each call.
private func jwt(expiresIn seconds: Double?) -> String {
    var claims: [String: JSONValue] = [
        "iss": .string("https://workload.test"), "sub": .string("system:serviceaccount:default:app"), "jti": .string(UUID().uuidString),
    ]
    if let seconds { claims["exp"] = .number(String(Int(Date().timeIntervalSince1970 + seconds))) }
    let header = Base64URL.encode(Array(#"{"alg":"ES256","typ":"JWT"}"#.utf8))
    return header + "." + Base64URL.encode(Array(JSONValue.object(claims).serialized.utf8)) + ".c2lnbmF0dXJl"
}

/// Writes `text` to `path` in place (the same inode when the file exists), mode 0600.
private func writeInPlace(_ text: String, to path: String) throws {
    try LoginKitTestSupport.writeInPlace(text, to: path, mode: 0o600)
}

/// A shell script in `directory`, mode 0700, that runs `body`; its path.
private func program(_ body: String, in directory: String) throws -> String {
    let path = directory + "/token-helper"
    try writeExecutable("#!/bin/sh\n" + body, to: path)
    guard chmod(path, 0o700) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return path
}

/// Checks that neither the message nor the description of `error` holds `token`.
private func expectNoToken(_ token: String, in error: any Error, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(!String(describing: error).contains(token), sourceLocation: sourceLocation)
    if let error = error as? any LoginKitError {
        #expect(!error.message.contains(token), sourceLocation: sourceLocation)
    }
}

/// A transport for sources that send no request: any request is a test failure.
private struct UnusedTransport: HTTPTransport {
    func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        Issue.record("unexpected request to \(request.path ?? "")")
        throw CancellationError()
    }
}

/// A transport that holds each request at `gate`, then answers 200 with the JSON `answer`.
private struct GatedTransport: HTTPTransport {
    let gate: TestGate
    let answer: String

    func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        await gate.pass()
        return (HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]), Data(answer.utf8))
    }
}

/// An HTTP/1.1 server on 127.0.0.1 (a `LoopbackListener`) that answers each request with the
/// status, content type and body `answer` gives, and records the requests.
private final class TokenServer: Sendable {
    private let listener: LoopbackListener
    private let seen = LockedState<[LoopbackHTTPRequest]>([])

    init(answer: @escaping @Sendable (LoopbackHTTPRequest) -> (Int, String, String)) throws {
        listener = try LoopbackListener()
        listener.start { [seen] connection in
            var connection = connection
            while let request = connection.readRequest() {
                seen.withLock { $0.append(request) }
                let (status, type, body) = answer(request)
                let head = "HTTP/1.1 \(status) \(status < 400 ? "OK" : "Error")\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
                guard connection.transmit(Array((head + body).utf8)) else { return }
            }
        }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    func url(_ path: String) -> String {
        listener.url(path)
    }

    /// Every request read so far, in order.
    var requests: [LoopbackHTTPRequest] { seen.withLock { $0 } }

    /// Stops accepting and ends every connection.
    func stop() {
        listener.stop()
    }
}

/// `ACTIONS_ID_TOKEN_REQUEST_URL` and `ACTIONS_ID_TOKEN_REQUEST_TOKEN` of a job whose request token
/// is `requestToken` (the URL is answered by `GitHubTransport`).
private func gitHubEnvironment(_ requestToken: String) -> [String: String] {
    ["ACTIONS_ID_TOKEN_REQUEST_URL": "https://github-actions.test/token?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": requestToken]
}

/// A transport that answers as GitHub's token endpoint: each request held at `gate` when there is
/// one, then `{"count":1,"value":TOKEN}` with the token `answer` gives for the request's bearer
/// token, or 401 when it gives none.
private struct GitHubTransport: HTTPTransport {
    let gate: TestGate?
    let answer: @Sendable (String) -> String?

    func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        await gate?.pass()
        let authorization = request.headerFields[.authorization] ?? ""
        let requestToken = authorization.hasPrefix("bearer ") ? String(authorization.dropFirst("bearer ".count)) : ""
        guard let token = answer(requestToken) else {
            return (HTTPResponse(status: .unauthorized, headerFields: [.contentType: "application/json"]), Data(#"{"message":"Bad credentials"}"#.utf8))
        }
        return (HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]), Data(#"{"count":1,"value":"\#(token)"}"#.utf8))
    }
}

/// A FIFO at `path` (mode 0600): a program's child blocks reading it until `release(_:)`.
private func makeFIFO(_ path: String) throws {
    guard mkfifo(path, 0o600) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
}

/// Opens `fifo` for writing and closes it, on a thread of its own: its reader — blocked on it now,
/// or once it opens it — reads its end and goes on.
private func release(_ fifo: String) async {
    _ = await onDedicatedThread { () -> Bool in
        let descriptor = open(fifo, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        close(descriptor)
        return true
    }
}

/// Returns once a program has opened `fifo` for writing and written to it or closed it (waited for
/// on a thread of its own).
private func awaitWriter(on fifo: String) async {
    _ = await onDedicatedThread { () -> Bool in
        let descriptor = open(fifo, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        var byte: UInt8 = 0
        _ = read(descriptor, &byte, 1)
        close(descriptor)
        return true
    }
}

/// The text of the small file at `path`, read to its end (a /proc file states no size); empty when
/// it cannot be read.
private func contents(of path: String) -> String {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return "" }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count <= 0 { break }
        bytes.append(contentsOf: buffer[..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Where the symbolic link at `path` leads, or `nil`.
private func linkTarget(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let capacity = buffer.count
    let count = readlink(path, &buffer, capacity)
    guard count >= 0 else { return nil }
    return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Where each descriptor open in this process leads now: `pipe:[INODE]`, a pidfd, a path.
private func openDescriptorTargets() -> [String] {
    guard let directory = opendir("/proc/self/fd") else { return [] }
    defer { closedir(directory) }
    var targets: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if Int32(name) != nil, let target = linkTarget("/proc/self/fd/" + name) { targets.append(target) }
    }
    return targets
}

/// Whether a process started from this one can open a pidfd (`pidfd_open(2)`: Linux 5.3, and no
/// sandbox refusing it), asked of Python's `os.pidfd_open` so that the answer does not depend on
/// LoginKit's own call; `false` without a Python 3.9 or later.
private func processDescriptorsWork() async -> Bool {
    let probe = "import os; os.close(os.pidfd_open(os.getpid())); print('pidfd')"
    let answer = try? await runCapturing("/usr/bin/env", ["python3", "-c", probe])
    return answer?.status == 0 && answer?.output.contains("pidfd") == true
}

/// Whether this process's `descriptor` is a pidfd of `pid`, or of a process reaped since (which a
/// run never leaves: it closes its pidfd before it reaps).
private func isProcessDescriptor(_ descriptor: Int32, of pid: pid_t) -> Bool {
    let info = contents(of: "/proc/self/fdinfo/\(descriptor)")
    return info.contains("Pid:\t\(pid)\n") || info.contains("Pid:\t-1\n")
}
