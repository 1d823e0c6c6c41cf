// Built with LoginKit's "Postgres" and "Lifecycle" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres && Lifecycle
// loginkit-test-helper: the child process the multi-process tests start.
//
//   increment <store> <profile> <count>   <count> locked read-modify-write increments of attributes["counter"]
//                                         (whole-store transactions)
//   increment-profile <store> <profile> <count>
//                                         the same, each a transaction on that profile only
//   hold-profile <store> <profile>        takes a transaction on <profile>, prints "held", waits for a line on
//                                         stdin, then increments the profile's counter and exits
//   hold-store <store>                    prints "waiting", takes a whole-store transaction and prints, inside it,
//                                         "held <name>=<counter>,…" (every profile, sorted)
//   migrate <store> <step>                saves profile "migrated" (which migrates a format 1 store); at the
//                                         migration step whose description is <step> prints "at <step>" and
//                                         blocks reading a line from stdin
//   migrate-loop <store>                  the same save, printing every migration step's description, one a line
//   save-loop <store> <profile> <progress> saves counter 1, 2, 3, …, recording each value once its save returned
//   token <store> <issuer> <client-id>    prints a valid ID token for profile "default", refreshing as needed
//   expire <store>                        makes profile "default" expired (its sealing kept: a keyring's key
//                                         is found through the process's own keyrings)
//   measure-save <directory> <rounds>     median save latency against a bare durable write
//   pg-token <url> <namespace> <issuer> <client-id> <callers>
//                                         <callers> concurrent validAccessToken() through a
//                                         PostgresTokenStore; prints each distinct token, one a line
//   browse [--deny] [--forge-state] [--record FILE] [--print-redirect] URL
//                                         a browser for $BROWSER: TestBrowser signs in as demo/demo
//                                         (or denies) at URL and delivers the redirect to the app
//                                         (or prints it, to paste); --record appends the redirect to
//                                         FILE; --forge-state first delivers a copy with another state
//                                         (as another local process would), then the real one. URL may
//                                         be the file:// page LoginKit hands a browser. Prints nothing
//                                         else on stdout: a launcher's child shares the app's stdout.
//   service-group <store>                 an AuthService under a ServiceGroup that stops on SIGTERM;
//                                         prints "ready" once the group runs, "stopped" when it ended
//   identity-program-ignoring-sigchld <program>
//                                         ignores SIGCHLD, then asks IdentitySource.program(<program>)
//                                         for its token: prints "token" (never the token itself),
//                                         "unavailable: <message>" for a ServerError .unavailable, or
//                                         "error: <error>"
import Foundation
import LoginKit
import LoginKitLifecycle
import LoginKitMocks
import LoginKitPostgres
import Logging
import ServiceLifecycle

@main
struct TestHelper {
    static func main() async {
        let arguments = CommandLine.arguments
        do {
            switch arguments.dropFirst().first {
            case "increment" where arguments.count == 5:
                guard let count = Int(arguments[4]) else { throw Usage() }
                try await increment(store: try IDTokenStore(path: arguments[2], sealing: .environment), profile: arguments[3], count: count)
            case "increment-profile" where arguments.count == 5:
                guard let count = Int(arguments[4]) else { throw Usage() }
                try await incrementProfile(store: try IDTokenStore(path: arguments[2], sealing: .environment), profile: arguments[3], count: count)
            case "hold-profile" where arguments.count == 4:
                try await holdProfile(store: try IDTokenStore(path: arguments[2], sealing: .environment), profile: arguments[3])
            case "hold-store" where arguments.count == 3:
                try await holdStore(try IDTokenStore(path: arguments[2], sealing: .environment))
            case "migrate" where arguments.count == 4:
                try await migrate(store: arguments[2], stoppingAt: arguments[3])
            case "migrate-loop" where arguments.count == 3:
                try await migrate(store: arguments[2], stoppingAt: nil)
            case "expire" where arguments.count == 3:
                try await IDTokenStore(path: arguments[2], sealing: .none).withExclusiveAccess(to: "default") { transaction in
                    guard var profile = transaction["default"] else { return }
                    profile.credentials.expiresAt = Date().addingTimeInterval(-5)
                    profile.credentials.idTokenExpiresAt = Date().addingTimeInterval(-5)
                    profile.updatedAt = Date().addingTimeInterval(-3605)
                    profile.credentials.issuedAt = profile.updatedAt
                    transaction["default"] = profile
                }
            case "token" where arguments.count == 5:
                let token = try await CurlHTTPClient.withClient { client in
                    let api = OAuth2API(configuration: .init(issuer: arguments[3], clientID: arguments[4]), transport: client)
                    let service = AuthService(api: api, store: try IDTokenStore(path: arguments[2], sealing: .environment))
                    return try await service.validIDToken()
                }
                print(token.rawValue)
            case "pg-token" where arguments.count == 7:
                guard let callers = Int(arguments[6]) else { throw Usage() }
                var configuration = PostgresTokenStore.Configuration()
                configuration.namespace = arguments[3]
                let tokens = try await PostgresTokenStore.withStore(try PostgresTokenStore.connection(url: arguments[2]), configuration: configuration) { store in
                    try await CurlHTTPClient.withClient { client in
                        let api = OAuth2API(configuration: .init(issuer: arguments[4], clientID: arguments[5]), transport: client)
                        let service = AuthService(api: api, store: store)
                        return try await withThrowingTaskGroup(of: String.self) { group in
                            for _ in 0..<callers { group.addTask { try await service.validAccessToken() } }
                            var tokens: Set<String> = []
                            for try await token in group { tokens.insert(token) }
                            return tokens
                        }
                    }
                }
                for token in tokens.sorted() { print(token) }
            case "measure-save" where arguments.count == 4:
                guard let count = Int(arguments[3]) else { throw Usage() }
                try await measureSave(directory: arguments[2], count: count)
            case "browse" where arguments.count >= 3:
                try await browse(Array(arguments.dropFirst(2)))
            case "service-group" where arguments.count == 3:
                try await serviceGroup(store: arguments[2])
            case "save-loop" where arguments.count == 5:
                try await saveLoop(store: try IDTokenStore(path: arguments[2], sealing: .environment), profile: arguments[3], progress: arguments[4])
            case "identity-program-ignoring-sigchld" where arguments.count == 3:
                await identityProgramIgnoringSIGCHLD(arguments[2])
            default:
                throw Usage()
            }
        } catch {
            FileHandle.standardError.write(Data("loginkit-test-helper: \(error)\n".utf8))
            exit(1)
        }
    }

    struct Usage: Error, CustomStringConvertible {
        var description: String {
            "usage: increment <store> <profile> <count> | increment-profile <store> <profile> <count> | hold-profile <store> <profile> | hold-store <store> | migrate <store> <step> | migrate-loop <store> | save-loop <store> <profile> | browse [--deny] [--forge-state] [--record FILE] [--print-redirect] URL"
        }
    }

    /// `service-group <store>`: an `AuthService` as the one service of a group that shuts down on
    /// SIGTERM (its API is never called: nothing listens at its issuer).
    static func serviceGroup(store path: String) async throws {
        try await CurlHTTPClient.withClient { client in
            let api = OAuth2API(configuration: .init(issuer: "http://127.0.0.1:9", clientID: "cli"), transport: client)
            let service = AuthService(api: api, store: try IDTokenStore(path: path, sealing: .none))
            // The group's signal source takes SIGTERM; until it listens, the signal is ignored
            // rather than fatal (the test's one SIGTERM comes after "ready", which the group's
            // second service prints once the group runs).
            signal(SIGTERM, SIG_IGN)
            let group = ServiceGroup(
                configuration: .init(
                    services: [.init(service: service), .init(service: ReadyLine())], gracefulShutdownSignals: [.sigterm],
                    logger: Logger(label: "test-helper")))
            try await group.run()
            print("stopped")
        }
    }

    /// `identity-program-ignoring-sigchld <program>`: the program as an identity source in a process
    /// that ignores SIGCHLD, whose children the kernel reaps as they exit (their exit statuses
    /// lost). Prints what came of it on one line.
    static func identityProgramIgnoringSIGCHLD(_ program: String) async {
        signal(SIGCHLD, SIG_IGN)
        do {
            _ = try await CurlHTTPClient.withClient { client in
                try await IdentitySource.program(program).token(transport: client)
            }
            print("token")
        } catch let error as ServerError where error.code == .unavailable {
            print("unavailable: \(error.message)")
        } catch {
            print("error: \(error)")
        }
    }

    /// Prints "ready" when its group starts it, then runs until the group shuts down.
    struct ReadyLine: Service {
        func run() async throws {
            FileHandle.standardOutput.write(Data("ready\n".utf8))  // unbuffered: the test waits for it
            try? await gracefulShutdown()
        }
    }

    /// `browse [--deny] [--forge-state] [--record FILE] [--print-redirect] URL` (the URL last, as
    /// `SystemBrowserLauncher` appends it to `$BROWSER`).
    static func browse(_ options: [String]) async throws {
        guard let url = options.last else { throw Usage() }
        var deny = false, forgeState = false, printRedirect = false
        var record: String?
        var flags = options.dropLast().makeIterator()
        while let flag = flags.next() {
            switch flag {
            case "--deny": deny = true
            case "--forge-state": forgeState = true
            case "--print-redirect": printRedirect = true
            case "--record":
                guard let path = flags.next() else { throw Usage() }
                record = path
            default: throw Usage()
            }
        }
        let (action, forging, printing, recording) = (deny ? TestBrowser.Action.deny : .demo, forgeState, printRedirect, record)
        try await CurlHTTPClient.withClient { client in
            let browser = TestBrowser(transport: client, action: action)
            let redirect = try await browser.signIn(at: url)
            if let recording { append(redirect + "\n", to: recording) }
            if printing {
                print(redirect)
            } else {
                if forging { try await browser.deliver(Self.replacingState(in: redirect)) }
                try await browser.deliver(redirect)
            }
        }
    }

    /// `url` with its `state` parameter's value replaced: a forged response.
    static func replacingState(in url: String) -> String {
        guard let start = url.range(of: "state=") else { return url }
        let end = url[start.upperBound...].firstIndex(of: "&") ?? url.endIndex
        return url.replacingCharacters(in: start.upperBound..<end, with: "forged-state")
    }

    /// Appends `line` to the file at `path` in one `write` (O_APPEND: concurrent writers do not mix).
    static func append(_ line: String, to path: String) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    static func profile(counter: Int) -> StoredProfile {
        StoredProfile(
            credentials: Credentials(accessToken: "access-\(counter)", refreshToken: "refresh-\(counter)"),
            source: CredentialSource(kind: .oauth2, endpoint: "https://issuer.test", clientID: "cli"),
            attributes: ["counter": "\(counter)"]
        )
    }

    static func increment(store: IDTokenStore, profile name: String, count: Int) async throws {
        for _ in 0..<count {
            try await store.withExclusiveAccess { transaction in
                let current = transaction[name].flatMap { Int($0.attributes["counter"] ?? "") } ?? 0
                transaction[name] = profile(counter: current + 1)
            }
        }
    }

    static func incrementProfile(store: IDTokenStore, profile name: String, count: Int) async throws {
        for _ in 0..<count {
            try await store.withExclusiveAccess(to: name) { transaction in
                let current = transaction[name].flatMap { Int($0.attributes["counter"] ?? "") } ?? 0
                transaction[name] = profile(counter: current + 1)
            }
        }
    }

    /// `hold-profile`: a transaction on one profile that lasts until the test sends a line.
    static func holdProfile(store: IDTokenStore, profile name: String) async throws {
        try await store.withExclusiveAccess(to: name) { transaction in
            writeLine("held")
            _ = await readLineOffThePool()
            let current = transaction[name].flatMap { Int($0.attributes["counter"] ?? "") } ?? 0
            transaction[name] = profile(counter: current + 1)
        }
    }

    /// `hold-store`: a whole-store transaction that reports what it holds once inside.
    static func holdStore(_ store: IDTokenStore) async throws {
        writeLine("waiting")
        try await store.withExclusiveAccess { transaction in
            let counters = transaction.profiles.keys.sorted().map { name in
                "\(name)=\(transaction[name]?.attributes["counter"] ?? "")"
            }
            writeLine("held " + counters.joined(separator: ","))
        }
    }

    /// `migrate` / `migrate-loop`: saves profile "migrated", which migrates a format 1 store. With a
    /// step, stops there (prints "at <step>", then blocks on stdin: the test kills the process);
    /// without, prints every step as it passes.
    static func migrate(store path: String, stoppingAt step: String?) async throws {
        let store = try IDTokenStore(path: path, sealing: .environment)
        IDTokenStore.onMigrationStep(in: path) { passed in
            let description = passed.description
            guard let step else { return TestHelper.writeLine(description) }
            guard description == step else { return }
            TestHelper.writeLine("at " + step)
            _ = readLine()  // blocks this step, as a slow disk would, until the test kills the process
        }
        try await store.save(profile(counter: 1), as: "migrated")
        IDTokenStore.onMigrationStep(in: path, nil)
    }

    /// Writes `line` and a newline to stdout at once (unbuffered: the test waits for it).
    static func writeLine(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// A line from stdin, read on a thread of its own (never blocking the cooperative pool); nil at EOF.
    static func readLineOffThePool() async -> String? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: readLine()) }
        }
    }

    /// Median latency of `IDTokenStore.save` and of a bare write + fsync + rename + directory fsync
    /// of the same bytes, interleaved, in `directory` (use a real disk, not tmpfs).
    static func measureSave(directory: String, count: Int) async throws {
        let store = try IDTokenStore(path: directory + "/measure.json", sealing: .none)
        try await store.save(profile(counter: 0), as: "default")
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/measure.json")))
        var storeTimes: [Duration] = []
        var bareTimes: [Duration] = []
        let clock = ContinuousClock()
        for round in 1...count {
            storeTimes.append(try await clock.measure { try await store.save(profile(counter: round), as: "default") })
            bareTimes.append(clock.measure { bareDurableWrite(bytes, directory: directory) })
        }
        func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }
        print("IDTokenStore.save median: \(median(storeTimes))")
        print("bare write+fsync+rename+dirfsync median: \(median(bareTimes))")
        print("ratio: \(Double(median(storeTimes).components.attoseconds + median(storeTimes).components.seconds * 1_000_000_000_000_000_000) / Double(median(bareTimes).components.attoseconds + median(bareTimes).components.seconds * 1_000_000_000_000_000_000))")
    }

    static func bareDurableWrite(_ bytes: [UInt8], directory: String) {
        let temporary = directory + "/bare.tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        fsync(descriptor)
        close(descriptor)
        rename(temporary, directory + "/bare.json")
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY)
        fsync(directoryDescriptor)
        close(directoryDescriptor)
    }

    /// Saves 1, 2, 3, …; after each save returns, appends the value to `progress` (so the parent
    /// knows every completed save even after a SIGKILL) and prints it.
    static func saveLoop(store: IDTokenStore, profile name: String, progress: String) async throws {
        let descriptor = open(progress, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Usage() }
        defer { close(descriptor) }
        for counter in 1...1_000_000 {
            try await store.save(profile(counter: counter), as: name)
            let line = Array("\(counter)\n".utf8)
            _ = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            FileHandle.standardOutput.write(Data(line))
        }
    }
}
#else
import Foundation

/// Built without the trait this tool needs: says so and exits 2.
@main
enum TestHelperWithoutTrait {
    static func main() {
        FileHandle.standardError.write(Data("loginkit-test-helper: built without LoginKit's \"Postgres\" and \"Lifecycle\" traits; build with `swift build --enable-all-traits` (make does)\n".utf8))
        exit(2)
    }
}
#endif
