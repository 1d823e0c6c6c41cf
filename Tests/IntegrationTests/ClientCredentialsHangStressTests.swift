import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitMocks
import LoginKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A second process's 200 concurrent callers ask for client-credentials tokens its store already
/// holds: every round ends, and every caller gets the token the store holds for its target.
///
/// A round is what a second process does: a fresh HTTP client, `OAuth2API`, `IDTokenStore` object
/// and `ClientCredentialsTokens` over the store file the first process filled, then 200 concurrent
/// `accessToken` calls, the provider's discovery GET racing them, and 8 more callers cancelled as
/// they start. The callers ask for 4 targets at 2 minimum validities: 8 flights, which take the
/// store's in-process lock and its file lock in turn (callers of one target and validity share
/// one flight, so a single one would never contend for the lock). Every eighth round the stored
/// tokens have expired: each target's first flight then makes the token request under the locks
/// while the others wait for them.
///
/// Each round runs under a watchdog: past ``roundLimit`` it prints, on stderr, what every caller
/// is doing, the store lock's state, every thread's kernel state and, when gdb is installed, every
/// thread's stack, then fails. `LOGINKIT_HANG_ROUNDS` sets the number of rounds (1 by default;
/// `make reliability` runs 2000).
@Suite(.timeLimit(.minutes(20)))
struct ClientCredentialsHangStressTests {
    static let callers = 200
    /// Callers whose task is cancelled as it starts: before, while or after it waits.
    static let cancelledCallers = 8
    static let targets = [
        TokenTarget(), TokenTarget(resources: ["https://api-a.example/v1"]),
        TokenTarget(resources: ["https://api-b.example/"], scope: "read"), TokenTarget(audience: "orders"),
    ]
    static let validities: [Duration] = [.zero, .seconds(1)]
    /// How long a round may take before the watchdog reports a hang (a healthy round takes
    /// milliseconds; the store's lock timeout, 30 s, ends a held file lock before this does).
    static let roundLimit: Duration = .seconds(60)
    static let tokenPath = "/oauth/token"
    static let discoveryPath = "/.well-known/openid-configuration"
    /// The registry's number for the discovery GET.
    static let discoveryCaller = -1

    /// The target (an index into ``targets``) and the minimum validity caller `caller` asks for.
    static func request(of caller: Int) -> (target: Int, validity: Duration) {
        (caller % targets.count, validities[(caller / targets.count) % validities.count])
    }

    @Test func twoHundredCallersOfASecondProcessGetTheStoredTokensAndNeverHang() async throws {
        let rounds = max(1, Int(ProcessInfo.processInfo.environment["LOGINKIT_HANG_ROUNDS"] ?? "") ?? 1)
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
                // The first process: one token per target, saved.
                let firstStore = try IDTokenStore(path: path, sealing: .none)
                let first = ClientCredentialsTokens(api: fixture.api, store: firstStore, clock: fixture.clock)
                for target in Self.targets { _ = try await first.accessToken(for: target) }
                var expected = try await Self.storedTokens(at: path)
                try #require(expected.allSatisfy { $0 != nil })

                let configuration = fixture.api.configuration
                let clock = fixture.clock
                let server = fixture.server
                for round in 1...rounds {
                    let expiring = round % 8 == 0
                    if expiring { clock.advance(by: .seconds(3600)) }  // every stored token has expired
                    let requestsBefore = server.monitor.requestCount(path: Self.tokenPath)
                    let discoveriesBefore = server.monitor.requestCount(path: Self.discoveryPath)
                    let registry = CallerRegistry()
                    let client = try CurlHTTPClient()
                    let results: [Int: String]
                    do {
                        results = try await Self.withWatchdog(limit: Self.roundLimit) {
                            try await Self.secondProcess(
                                path: path, configuration: configuration, clock: clock, client: client, registry: registry)
                        } onHang: {
                            await Self.printHangReport(
                                round: round, rounds: rounds, expiring: expiring, registry: registry, lockPath: path + ".lock",
                                server: server, requestsBefore: requestsBefore, discoveriesBefore: discoveriesBefore)
                            return RoundHung(round: round, rounds: rounds, limit: Self.roundLimit)
                        }
                    } catch let hang as RoundHung {
                        throw hang  // the client is left alone: a caller may still be stuck in it
                    } catch {
                        await client.shutdown()
                        throw error
                    }
                    await client.shutdown()

                    let stored = try await Self.storedTokens(at: path)
                    let requests = server.monitor.requestCount(path: Self.tokenPath) - requestsBefore
                    let missing = (0..<Self.callers).filter { results[$0] == nil }
                    let wrong = results.keys.filter { results[$0] != stored[Self.request(of: $0).target] }.sorted()
                    let expectedRequests = expiring ? Self.targets.count : 0
                    let replacedAsExpected = expiring ? zip(stored, expected).allSatisfy { $0 != $1 } : stored == expected
                    #expect(missing.isEmpty, "round \(round): callers \(missing.prefix(10)) got no token")
                    #expect(
                        wrong.isEmpty, "round \(round): callers \(wrong.prefix(10)) got another token than the store holds for their target")
                    #expect(requests == expectedRequests, "round \(round): \(requests) token requests, not \(expectedRequests)")
                    #expect(replacedAsExpected, "round \(round): the stored tokens \(expiring ? "were not all replaced" : "changed")")
                    expected = stored
                    // One failed round is the evidence; the next ones would only repeat it.
                    if !missing.isEmpty || !wrong.isEmpty || requests != expectedRequests || !replacedAsExpected { break }
                }
            }
        }
    }

    /// One round: what a second process does with the store the first one filled. Returns each
    /// caller's token; a cancelled caller that stopped waiting in time has none.
    static func secondProcess(
        path: String, configuration: OAuth2API.Configuration, clock: ManualClock, client: CurlHTTPClient, registry: CallerRegistry
    ) async throws -> [Int: String] {
        let store = try IDTokenStore(path: path, sealing: .none)
        let api = OAuth2API(configuration: configuration, transport: client, now: { clock.now })
        let tokens = ClientCredentialsTokens(api: api, store: store, clock: clock)
        return try await withThrowingTaskGroup(of: (caller: Int, token: String?).self) { group in
            group.addTask {
                // Shares the API's one discovery with any token request a flight makes.
                _ = try await registry.track(Self.discoveryCaller, "the discovery GET") { () async throws -> OAuth2API.Metadata? in
                    try await api.metadata()
                }
                return (caller: Self.discoveryCaller, token: nil)
            }
            for caller in 0..<(Self.callers + Self.cancelledCallers) {
                let (target, validity) = Self.request(of: caller)
                let cancelled = caller >= Self.callers
                let label = "caller \(caller): target \(target), minimum validity \(validity)\(cancelled ? ", cancelled as it starts" : "")"
                group.addTask {
                    let token = try await registry.track(caller, label) { () async throws -> String? in
                        let ask = { @Sendable in try await tokens.accessToken(for: Self.targets[target], minimumValidity: validity) }
                        if cancelled { return try await Self.cancelledAsItStarts(ask) }
                        return try await ask()
                    }
                    return (caller: caller, token: token)
                }
            }
            var results: [Int: String] = [:]
            for try await result in group {
                if let token = result.token { results[result.caller] = token }
            }
            return results
        }
    }

    /// Runs `operation` in a child task cancelled as it starts (after 0 to 3 yields, so that the
    /// cancellation lands before, while or after it waits): its token, or `nil` when it stopped
    /// waiting in time.
    ///
    /// - Throws: what `operation` throws, except `CancellationError`.
    static func cancelledAsItStarts(_ operation: @escaping @Sendable () async throws -> String) async throws -> String? {
        let outcome = await withTaskGroup(of: Result<String, any Error>.self) { group in
            group.addTask {
                do {
                    let token = try await operation()
                    return .success(token)
                } catch {
                    return .failure(error)
                }
            }
            for _ in 0..<Int.random(in: 0...3) { await Task.yield() }
            group.cancelAll()
            return await group.next() ?? .failure(CancellationError())
        }
        do {
            return try outcome.get()
        } catch is CancellationError {
            return nil
        }
    }

    /// The access token the store at `path` holds for each target, read through a store object
    /// of its own.
    static func storedTokens(at path: String) async throws -> [String?] {
        let store = try IDTokenStore(path: path, sealing: .none)
        var tokens: [String?] = []
        for target in targets {
            let name = ClientCredentialsTokens.profileName(base: "default", target: target)
            let token = try await store.profile(named: name)?.credentials.accessToken
            tokens.append(token)
        }
        return tokens
    }

    // MARK: The watchdog

    enum RoundEnd<T: Sendable>: Sendable {
        case finished(Result<T, any Error>)
        case timedOut
    }

    /// A round that did not end within the limit.
    struct RoundHung: Error, CustomStringConvertible {
        let round: Int
        let rounds: Int
        let limit: Duration

        var description: String {
            "round \(round) of \(rounds) did not end within \(limit); what every caller was doing, the store lock and the "
                + "threads are on stderr"
        }
    }

    /// `work`'s result; or, when `limit` passes first, the error `onHang` returns once it has
    /// printed what it can. `work` runs in a task of its own, cancelled but not awaited after a
    /// hang: a task group would wait for a stuck child for ever, and the test must fail instead.
    static func withWatchdog<T: Sendable>(
        limit: Duration, _ work: @escaping @Sendable () async throws -> T, onHang: () async -> any Error
    ) async throws -> T {
        let (ends, sink) = AsyncStream<RoundEnd<T>>.makeStream()
        let worker = Task {
            do {
                let value = try await work()
                sink.yield(.finished(.success(value)))
            } catch {
                sink.yield(.finished(.failure(error)))
            }
        }
        let deadline = Task {
            // A timeout, not a wait for an event: cancelled as soon as the round ends.
            do {
                try await ContinuousClock().sleep(for: limit)
                sink.yield(.timedOut)
            } catch {}
        }
        var end = RoundEnd<T>.timedOut
        for await first in ends {
            end = first
            break
        }
        deadline.cancel()
        await deadline.value
        sink.finish()
        switch end {
        case .finished(let result):
            await worker.value
            return try result.get()
        case .timedOut:
            let error = await onHang()
            worker.cancel()  // not awaited: a caller stuck in a wait that ignores cancellation must not hang the test too
            throw error
        }
    }

    /// What a hung round leaves behind, on stderr: the round, the requests the provider saw, the
    /// store lock, every caller's state, every thread's kernel state, and every thread's stack.
    static func printHangReport(
        round: Int, rounds: Int, expiring: Bool, registry: CallerRegistry, lockPath: String, server: DevServer,
        requestsBefore: Int, discoveriesBefore: Int
    ) async {
        let situation =
            expiring ? "stored tokens expired: one token request per target expected" : "stored tokens valid: no token request expected"
        var lines = ["=== ClientCredentialsHangStressTests: round \(round) of \(rounds) (\(situation)) did not end within \(roundLimit)"]
        lines.append(
            "provider: \(server.monitor.requestCount(path: tokenPath) - requestsBefore) token requests and "
                + "\(server.monitor.requestCount(path: discoveryPath) - discoveriesBefore) discovery GETs this round")
        lines.append("store lock file \(lockPath): \(lockFileState(lockPath))")
        lines += registry.report(limit: 60)
        lines.append("threads (/proc/self/task: R running, S sleeping, D uninterruptible, T stopped):")
        lines += threadStates()
        printToStandardError(lines)
        await printThreadStacks()
    }

    /// Whether an open descriptor (of this process or another) holds the lock file's `flock`, how
    /// many descriptors of this process have it open, and the process it names as its last holder.
    static func lockFileState(_ lockPath: String) -> String {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        let openHere = descriptors.filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == lockPath
        }.count
        let holder = ((try? String(contentsOfFile: lockPath, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let descriptor = open(lockPath, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return "cannot be opened (errno \(errno))" }
        defer { close(descriptor) }
        let state: String
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 {
            _ = flock(descriptor, LOCK_UN)
            state = "free"
        } else {
            state = errno == EWOULDBLOCK ? "held" : "unknown (errno \(errno))"
        }
        let recorded = holder.isEmpty ? "none" : "process \(holder)"
        return "flock \(state); open \(openHere) times in this process; last holder recorded: \(recorded)"
    }

    /// Each thread of this process (at most 200): its name, its scheduler state and where the
    /// kernel has it wait.
    static func threadStates() -> [String] {
        let tasks = "/proc/self/task"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: tasks) else { return ["  (\(tasks) cannot be read)"] }
        return names.compactMap { Int($0) }.sorted().prefix(200).map { id in
            func read(_ file: String) -> String {
                let text = (try? String(contentsOfFile: "\(tasks)/\(id)/\(file)", encoding: .utf8)) ?? "?"
                return text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let status = read("stat")
            // `pid (name) state …`: the state is the first field after the name's closing parenthesis.
            let state = status.lastIndex(of: ")").flatMap { status[status.index(after: $0)...].split(separator: " ").first }
            return "  thread \(id) \(read("comm")): state \(state.map { String($0) } ?? "?"), kernel wait \(read("wchan"))"
        }
    }

    /// Every thread's stack, written to stderr by gdb attached to this process, when `/usr/bin/gdb`
    /// exists (attaching needs ptrace permission: root, or `kernel.yama.ptrace_scope` 0). Bounded:
    /// 40 frames a thread, and gdb is killed after 60 s.
    static func printThreadStacks() async {
        let gdb = "/usr/bin/gdb"
        guard FileManager.default.isExecutableFile(atPath: gdb) else {
            printToStandardError(["(no \(gdb): thread stacks not printed)"])
            return
        }
        let process: SpawnedProcess
        do {
            process = try SpawnedProcess(
                gdb, ["-nx", "-batch", "-p", "\(getpid())", "-ex", "info threads", "-ex", "thread apply all bt 40"],
                stdout: .descriptor(STDERR_FILENO))
        } catch {
            printToStandardError(["(gdb did not start: \(error))"])
            return
        }
        let status = await withTaskGroup(of: Int32?.self) { group in
            group.addTask { await process.exitStatus() }
            group.addTask {
                try? await ContinuousClock().sleep(for: .seconds(60))  // a bound on gdb, not a wait for an event
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()  // ends the other child: the sleep throws; a waiting `exitStatus` kills gdb
            return first
        }
        printToStandardError([status.map { "(gdb exited with status \($0))" } ?? "(gdb took more than 60 s and was killed)"])
    }

    static func printToStandardError(_ lines: [String]) {
        try? FileHandle.standardError.write(contentsOf: Data((lines.joined(separator: "\n") + "\n").utf8))
    }

    // MARK: The callers' states

    /// What each caller of a round is doing, printed when the round hangs: Swift has no API that
    /// lists a process's tasks, so every caller reports its own state here.
    final class CallerRegistry: Sendable {
        enum State: Sendable {
            case running(since: ContinuousClock.Instant)
            case returned
            /// Returned no value: a cancelled caller that stopped waiting in time.
            case cancelled
            case threw(String)
        }

        private let entries = LockedState<[Int: (label: String, state: State)]>([:])

        /// Runs `operation` for `caller`, recording that it started and how it ended.
        func track<T: Sendable>(_ caller: Int, _ label: String, _ operation: () async throws -> T?) async throws -> T? {
            entries.withLock { $0[caller] = (label: label, state: State.running(since: .now)) }
            do {
                let value = try await operation()
                entries.withLock { $0[caller]?.state = value == nil ? .cancelled : .returned }
                return value
            } catch {
                let description = String(describing: error)
                entries.withLock { $0[caller]?.state = .threw(description) }
                throw error
            }
        }

        /// The counts by state, then a line per caller still running (at most `limit`) and per
        /// caller that threw (at most 10).
        func report(limit: Int) -> [String] {
            let now = ContinuousClock.now
            let entries = self.entries.withLock { $0 }.sorted { $0.key < $1.key }
            var running: [String] = []
            var threw: [String] = []
            var returned = 0
            var cancelled = 0
            for (_, entry) in entries {
                switch entry.state {
                case .running(let since): running.append("  still running after \(now - since): \(entry.label)")
                case .returned: returned += 1
                case .cancelled: cancelled += 1
                case .threw(let error): threw.append("  threw: \(entry.label): \(error)")
                }
            }
            var lines = [
                "callers: \(entries.count) started, \(returned) returned, \(cancelled) stopped waiting when cancelled, "
                    + "\(threw.count) threw, \(running.count) still running"
            ]
            lines += running.prefix(limit)
            if running.count > limit { lines.append("  … and \(running.count - limit) more still running") }
            lines += threw.prefix(10)
            return lines
        }
    }
}
