import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// `loginkit` with its store's key in real OS keyrings: a private GNOME Keyring on a private D-Bus
/// bus, the kernel's persistent keyring, and the fallbacks when neither can be used.
@Suite(.timeLimit(.minutes(3)))
struct KeyringCLITests {
    static let required = ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_KEYRING"] == "1"
    static let kernelKeyringReason = KernelKeyringKeyProvider.unavailableReason

    func login(_ server: DevServer, store: String, environment: [String: String]) async throws -> Run {
        try await loginkit(
            ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin", "--store", store],
            input: "demo\n", environment: environment)
    }

    func statusJSON(store: String, environment: [String: String]) async throws -> [String: Any] {
        let status = try await loginkit(["status", "--json", "--store", store], environment: environment)
        #expect(status.status == 0, "\(status.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
    }

    @Test(.enabled(if: PrivateSecretService.isInstalled || required))
    func gnomeKeyringSealsTheStoreAndStatusSaysSo() async throws {
        try await PrivateSecretService.with { service in
            try await withTemporaryDirectory { directory in
                try await DevServer.withServer { server in
                    let store = directory + "/tokens.json"
                    var environment = service.environment
                    environment["LOGINKIT_STORAGE"] = "auto"
                    environment["LOGINKIT_LOG_LEVEL"] = "trace"
                    let loggedIn = try await login(server, store: store, environment: environment)
                    #expect(loggedIn.status == 0, "\(loggedIn.stderr)")
                    #expect(!loggedIn.stderr.contains("unencrypted"), "no fallback warning")

                    let status = try await loginkit(["status", "--store", store], environment: environment)
                    #expect(status.stdout.contains("storage:        secret-service (GNOME Keyring)\n"), "\(status.stdout)")
                    let json = try await statusJSON(store: store, environment: environment)
                    #expect(json["storage"] as? String == "secret-service")
                    #expect(json["storage_detail"] as? String == "GNOME Keyring")
                    #expect(json["sealed"] as? Bool == true)

                    let token = try await loginkit(["token", "--access", "--store", store], environment: environment)
                    #expect(token.status == 0, "\(token.stderr)")
                    let accessToken = token.stdout.trimmingCharacters(in: .newlines)
                    #expect(!(try storeText(at: store)).contains(accessToken))
                    #expect(try storeKeyReference(at: store)?["provider"] == "secret-service")
                    // Nothing secret in what the commands printed, even with every log line on.
                    for run in [loggedIn, token, status] { #expect(!run.stderr.contains(accessToken)) }

                    // Migration both ways, on demand.
                    let toPlain = try await loginkit(["store", "migrate", "--to", "plaintext", "--store", store], environment: environment)
                    #expect(toPlain.status == 0 && toPlain.stderr.contains("is now plaintext (by choice)"), "\(toPlain.stderr)")
                    #expect(try storeText(at: store).contains(accessToken))
                    #expect(try await statusJSON(store: store, environment: environment)["storage"] as? String == "plaintext")
                    let toKeyring = try await loginkit(["store", "migrate", "--to", "keyring", "--store", store], environment: environment)
                    #expect(toKeyring.status == 0 && toKeyring.stderr.contains("is now secret-service (GNOME Keyring)"), "\(toKeyring.stderr)")
                    #expect(!(try storeText(at: store)).contains(accessToken))
                    #expect(try await loginkit(["token", "--access", "--store", store], environment: environment).stdout == token.stdout)

                    // A locked collection: a typed failure at once, never a prompt or a hang.
                    try await service.lockCollection()
                    let locked = try await loginkit(["token", "--store", store], environment: environment)
                    #expect(locked.status == 1)
                    #expect(locked.stderr.contains("locked"), "\(locked.stderr)")

                    // The daemon killed mid-run: the sealed store is out of reach (not lost: nothing set
                    // aside), and a new store falls back to the next level, saying why.
                    await service.killKeyringDaemon()
                    let gone = try await loginkit(["status", "--store", store], environment: environment)
                    #expect(gone.status == 1 && gone.stderr.contains("cannot be read now"), "\(gone.stderr)")
                    #expect(try entriesBelow(directory, containing: "corrupt").isEmpty)
                    let other = directory + "/other.json"
                    let fallback = try await login(server, store: other, environment: environment)
                    #expect(fallback.status == 0, "\(fallback.stderr)")
                    let storage = try await statusJSON(store: other, environment: environment)
                    #expect(storage["storage"] as? String == (Self.kernelKeyringReason == nil ? "kernel-keyring" : "plaintext"))
                }
            }
        }
    }

    @Test(.enabled(if: PrivateSecretService.isInstalled || required))
    func twoProcessesRefreshingAGnomeKeyringSealedStoreMakeOneRequest() async throws {
        try await PrivateSecretService.with { service in
            var environment = service.environment
            environment["LOGINKIT_STORAGE"] = "secret-service"
            try await refreshOnceAcrossProcesses(environment: environment, level: "secret-service")
        }
    }

    @Test(.enabled(if: kernelKeyringReason == nil, "the kernel refuses keyctl here: seccompRefusingKeyctlFallsBackAtOnce covers it"))
    func twoProcessesRefreshingAKernelKeyringSealedStoreMakeOneRequest() async throws {
        // No D-Bus session bus (the helper removes it): the headless server's case, where `auto`
        // takes the kernel keyring.
        try await refreshOnceAcrossProcesses(environment: ["LOGINKIT_STORAGE": "auto"], level: "kernel-keyring")
    }

    func refreshOnceAcrossProcesses(environment: [String: String], level: String) async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let store = directory + "/tokens.json"
                let loggedIn = try await login(server, store: store, environment: environment)
                #expect(loggedIn.status == 0, "\(loggedIn.stderr)")
                let status = try await statusJSON(store: store, environment: environment)
                #expect(status["storage"] as? String == level)
                if level == "kernel-keyring" {
                    // The headless case: the level it fell back to, and why.
                    #expect(status["storage_detail"] as? String == "survives logout, not reboot; not secret-service: no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set)")
                }
                let before = try await loginkit(["token", "--access", "--store", store], environment: environment).stdout

                #expect(try await loginkit(["expire", store], environment: environment, executable: testHelperPath()).status == 0)
                server.monitor.reset()
                server.monitor.injectFaults([.delay(milliseconds: 300)], path: "/oauth/token")
                async let first = loginkit(["token", "--access", "--store", store], environment: environment)
                async let second = loginkit(["token", "--access", "--store", store], environment: environment)
                let runs = try await [first, second]
                #expect(runs.allSatisfy { $0.status == 0 }, "\(runs.map(\.stderr))")
                #expect(Set(runs.map(\.stdout)).count == 1 && runs[0].stdout != before, "both print the one refreshed token")
                #expect(server.monitor.requestCount(path: "/oauth/token") == 1)
                #expect(try storeKeyReference(at: store)?["provider"] == level)
            }
        }
    }

    @Test(.enabled(if: kernelKeyringReason == nil, "the kernel refuses keyctl here"))
    func aKeyLostToARebootIsLogInAgainAndTheFileIsSetAside() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let store = directory + "/tokens.json"
                let environment = ["LOGINKIT_STORAGE": "kernel-keyring"]
                #expect(try await login(server, store: store, environment: environment).status == 0)
                let id = try #require(try storeKeyReference(at: store)?["id"])
                let key = try #require(try await KernelKeyringKeyProvider().key(id: id))
                var logged = environment
                logged["LOGINKIT_LOG_LEVEL"] = "trace"
                let outputs = [
                    try await loginkit(["token", "--store", store], environment: logged), try await loginkit(["status", "--json", "--store", store], environment: logged),
                ]
                let forms = [Data(key.bytes).base64EncodedString(), key.bytes.map { String(format: "%02x", $0) }.joined()]
                for run in outputs { for form in forms { #expect(!run.all.contains(form), "the key never reaches output or logs") } }
                let sealedFiles = try storeFiles(at: store)
                try await KernelKeyringKeyProvider().removeKey(id: id)  // what a reboot does

                let token = try await loginkit(["token", "--store", store], environment: environment)
                #expect(token.status == 3)
                #expect(token.stderr.contains("sealed with a key that is no longer available"), "\(token.stderr)")
                #expect(token.stderr.contains("log in again"))
                let again = try await login(server, store: store, environment: environment)
                #expect(again.status == 0, "\(again.stderr)")
                let aside = Array(try filesSetAside(in: directory).values)
                for (file, bytes) in sealedFiles { #expect(aside.filter { $0 == bytes }.count == 1, "the unreadable \(file) is kept") }
                #expect(try await loginkit(["token", "--store", store], environment: environment).status == 0)
            }
        }
    }

    /// A container whose seccomp profile refuses keyctl (Docker's default), with no session bus:
    /// `auto` falls back to plaintext at once and says so in one line; choosing the kernel keyring
    /// fails with the reason; choosing plaintext is silent.
    static let hasPythonSeccomp = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/python3/dist-packages")) ?? []).contains { $0.hasPrefix("seccomp") }

    @Test(.enabled(if: hasPythonSeccomp || required))
    func seccompRefusingKeyctlFallsBackAtOnce() async throws {
        let confine = """
            import errno, os, sys, seccomp
            f = seccomp.SyscallFilter(seccomp.ALLOW)
            for name in ("keyctl", "add_key", "request_key"):
                f.add_rule(seccomp.ERRNO(errno.EPERM), name)
            f.load()
            os.execv(sys.argv[1], sys.argv[1:])
            """
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                func confined(_ arguments: [String], storage: String, input: String? = nil) async throws -> Run {
                    try await loginkit(["-c", confine, try loginkitPath()] + arguments, input: input, environment: ["LOGINKIT_STORAGE": storage], executable: "/usr/bin/python3")
                }
                let loginArguments = ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin", "--store"]
                let auto = try await confined(loginArguments + [directory + "/auto.json"], storage: "auto", input: "demo\n")
                #expect(auto.status == 0, "\(auto.stderr)")
                let warnings = auto.stderr.split(separator: "\n").filter { $0.contains("warning") }
                #expect(warnings.count == 1, "one warning line: \(auto.stderr)")
                #expect(warnings.first?.contains("tokens are saved unencrypted") == true)
                #expect(warnings.first?.contains("keyctl is refused here") == true)
                #expect(warnings.first?.contains("no D-Bus session bus") == true)
                let status = try await confined(["status", "--store", directory + "/auto.json"], storage: "auto")
                #expect(status.stdout.contains("storage:        plaintext (no keyring usable: secret-service: no D-Bus session bus"), "\(status.stdout)")

                let kernel = try await confined(loginArguments + [directory + "/kernel.json"], storage: "kernel-keyring", input: "demo\n")
                #expect(kernel.status == 1 && kernel.stderr.contains("keyctl is refused here"), "\(kernel.stderr)")
                #expect(!FileManager.default.fileExists(atPath: directory + "/kernel.json"))

                let plain = try await confined(loginArguments + [directory + "/plain.json"], storage: "plaintext", input: "demo\n")
                #expect(plain.status == 0 && !plain.stderr.contains("warning"), "\(plain.stderr)")
                #expect(try await confined(["status", "--store", directory + "/plain.json"], storage: "plaintext").stdout.contains("storage:        plaintext (by choice)"))
            }
        }
    }

    @Test func anUnknownStorageIsAUsageError() async throws {
        let run = try await loginkit(["status", "--storage", "vault"])
        #expect(run.status == 2 && run.stderr.contains("is not one of auto, secret-service, kernel-keyring, plaintext"), "\(run.stderr)")
    }
}
