// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `loginkit-dev-server`, the dev identity provider's own executable (so that `loginkit` links no
/// server framework): only the one installed beside `loginkit`, never one found on `PATH`; run in
/// this process's place by `loginkit dev-server`, started as a child by `loginkit demo`, either way
/// without the variables that hold secrets (`ChildProcess.secretVariables`).
///
/// The child is started with `posix_spawn`, not Foundation's `Process` (which waits for the exit on
/// a socket that a grandchild can keep open for ever, and lets every descriptor without `O_CLOEXEC`
/// leak into the child). It gets a pipe as stdin and stops when that pipe reaches its end
/// (`--exit-on-stdin-eof`), so it never outlives this process however this process ends; its
/// stdout is a pipe whose first line names the issuer; its stderr is ours. Its exit is collected
/// with `waitpid` on a thread of its own.
///
/// Concurrency contract: `Sendable`; ``stop()`` may be called from any task, more than once.
final class DevServerProcess: Sendable {
    /// The executable's name.
    static let executableName = "loginkit-dev-server"

    /// The child's process ID.
    let pid: pid_t
    /// The executable that runs (an absolute path when found beside `loginkit`).
    let executable: String
    /// The issuer URL the server printed, `http://127.0.0.1:PORT`.
    let issuer: String

    private struct State {
        var status: Int32?
        var waiters: [CheckedContinuation<Int32, Never>] = []
        /// Our end of the child's stdin; closing it stops the child.
        var standardInput: Int32?
    }
    private let state: LockedState<State>

    private init(pid: pid_t, executable: String, issuer: String, state: LockedState<State>) {
        self.pid = pid
        self.executable = executable
        self.issuer = issuer
        self.state = state
    }

    // MARK: Finding it

    /// The path of `loginkit-dev-server` beside this executable (`/proc/self/exe`).
    ///
    /// - Throws: a usage failure (exit 2) naming where it looked when there is none.
    static func locateExecutable() throws -> String {
        try locateCompanion(executableName)
    }

    // MARK: In this process's place

    /// Replaces this process with `loginkit-dev-server arguments` (`execve`): same process ID,
    /// terminal and signals, so Ctrl-C and SIGTERM reach the server itself; the environment without
    /// the variables that hold secrets, as every child gets it. Returns only by throwing.
    ///
    /// - Throws: a usage failure (exit 2) when the executable is missing; exit 1 when `execve` fails.
    static func replaceCurrentProcess(arguments: [String]) throws -> Never {
        let executable = try locateExecutable()
        // The server installs its own signal handling; it inherits the mask, so hand it an empty one.
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        _ = pthread_sigmask(SIG_SETMASK, &noSignals, nil)
        let environment = ChildProcess.childEnvironment(ProcessInfo.processInfo.environment)
        let failure = withCStringArray([executable] + arguments) { argv -> Int32 in
            withCStringArray(environment) { envp -> Int32 in
                _ = execve(executable, argv, envp)
                return errno
            }
        }
        throw CLIFailure(exitCode: 1, "could not run \(executable): \(String(cString: strerror(failure)))")
    }

    // MARK: As a child

    /// Starts `loginkit-dev-server serve --exit-on-stdin-eof --quiet arguments` and returns once it
    /// printed its issuer.
    ///
    /// - Throws: `CLIFailure` when the executable is missing (exit 2), cannot be started, or exits
    ///   before it listens (its own message is on stderr above).
    static func start(arguments: [String] = []) async throws -> DevServerProcess {
        let executable = try locateExecutable()
        let input = try makePipe()
        let output: (read: Int32, write: Int32)
        do {
            output = try makePipe()
        } catch {
            close(input.read)
            close(input.write)
            throw error
        }
        let pid: pid_t
        do {
            pid = try spawn(
                executable, ["serve", "--exit-on-stdin-eof", "--quiet"] + arguments, standardInput: input.read,
                standardOutput: output.write)
        } catch {
            for descriptor in [input.read, input.write, output.read, output.write] { close(descriptor) }
            throw error
        }
        close(input.read)
        close(output.write)
        let state = LockedState(State(standardInput: input.write))
        collectExit(of: pid, into: state)
        let line = await firstLine(of: output.read) ?? ""
        let process = DevServerProcess(pid: pid, executable: executable, issuer: String(line.dropFirst("issuer: ".count)), state: state)
        guard line.hasPrefix("issuer: "), URLParts(process.issuer) != nil else {
            let status = await process.stop()
            throw CLIFailure(exitCode: 1, "\(executableName) did not start (exit status \(status)); its messages, if any, are above")
        }
        return process
    }

    /// Starts a server, runs `body` with it, and stops the server whatever `body` does.
    nonisolated(nonsending) static func withServer<T>(
        arguments: [String] = [],
        _ body: (DevServerProcess) async throws -> T
    ) async throws -> T {
        let server = try await start(arguments: arguments)
        do {
            let result = try await body(server)
            _ = await server.stop()
            return result
        } catch {
            _ = await server.stop()
            throw error
        }
    }

    /// Stops the child: closes its stdin and sends SIGTERM, then waits for it to exit (SIGKILL
    /// after 10 s). Returns its exit code, or 128 + the signal that ended it.
    @discardableResult
    func stop() async -> Int32 {
        let pid = self.pid
        let input = state.withLock { state -> Int32? in
            defer { state.standardInput = nil }
            if state.status == nil { _ = kill(pid, SIGTERM) }  // not reaped: the pid is still the child's
            return state.standardInput
        }
        if let input { close(input) }
        return await withTaskGroup(of: Int32?.self, returning: Int32.self) { group in
            group.addTask { await self.exitStatus() }
            group.addTask {
                try? await Task.sleep(for: .seconds(10))  // a bound on a hung child, not a wait for an event
                return nil
            }
            var status: Int32?
            while status == nil, let next = await group.next() {
                if let next {
                    status = next
                } else {
                    self.sendSignal(SIGKILL)
                }
            }
            group.cancelAll()
            return status ?? 128 + SIGKILL
        }
    }

    /// The child's exit code (or 128 + the signal that ended it), once it has exited.
    func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Int32? in
                if let status = state.status { return status }
                state.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// Sends `number` unless the child has been reaped (its pid may then belong to another process).
    private func sendSignal(_ number: Int32) {
        let pid = self.pid
        state.withLock { state in
            if state.status == nil { _ = kill(pid, number) }
        }
    }

    // MARK: Process plumbing

    /// A pipe whose ends are close-on-exec (a child gets one only through `dup2`).
    private static func makePipe() throws -> (read: Int32, write: Int32) {
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else {
            throw CLIFailure(exitCode: 1, "could not create a pipe: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(descriptors[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(descriptors[1], F_SETFD, FD_CLOEXEC)
        return (descriptors[0], descriptors[1])
    }

    /// `posix_spawn` with stdin and stdout from these descriptors, stderr ours (`ChildProcess`).
    private static func spawn(_ executable: String, _ arguments: [String], standardInput: Int32, standardOutput: Int32) throws -> pid_t {
        do {
            return try ChildProcess.spawn(
                [executable] + arguments, environment: ChildProcess.childEnvironment(ProcessInfo.processInfo.environment),
                standardInput: .descriptor(standardInput), standardOutput: .descriptor(standardOutput), standardError: .inherit)
        } catch {
            throw CLIFailure(exitCode: 1, "could not start \(executable): \(error.message)")
        }
    }

    /// Reaps `pid` on a thread of its own and resumes the waiters with its exit code.
    private static func collectExit(of pid: pid_t, into state: LockedState<State>) {
        runOnThreadOfItsOwn {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            let code = ChildProcess.exitCode(fromWaitStatus: status)
            let waiters = state.withLock { state in
                state.status = code
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: code) }
        }
    }

    /// The first line `descriptor` delivers, without its newline; `nil` when it ends first. A thread
    /// of its own reads it, then keeps reading (and discarding) to the end, so that the child never
    /// blocks on a full pipe, and closes the descriptor.
    private static func firstLine(of descriptor: Int32) async -> String? {
        await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            runOnThreadOfItsOwn {
                var line: [UInt8] = []
                var delivered = false
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = read(descriptor, &buffer, buffer.count)
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 { break }
                    guard !delivered else { continue }
                    for byte in buffer[0..<count] {
                        if byte == UInt8(ascii: "\n") {
                            continuation.resume(returning: String(decoding: line, as: UTF8.self))
                            delivered = true
                            break
                        }
                        if line.count < 4096 { line.append(byte) }
                    }
                }
                close(descriptor)
                if !delivered { continuation.resume(returning: nil) }
            }
        }
    }
}

// MARK: The dev server's test endpoints, over HTTP

extension DevServerProcess {
    /// How many requests reached `path` (`GET /test/requests?path=…`); the count includes none of
    /// these requests themselves.
    ///
    /// - Throws: `NetworkError`; `CLIFailure` when the server answers something else than a count.
    func requestCount(path: String, client: any HTTPTransport) async throws -> Int {
        let text = try await testEndpoint(.get, "/test/requests?" + FormURLEncoding.encode([("path", path)]), body: nil, client: client)
        guard let count = Int(text.filter { !$0.isWhitespace }) else {
            throw CLIFailure(exitCode: 1, "the dev server answered /test/requests with something other than a count")
        }
        return count
    }

    /// Sets the minimum version of the policy at `/version-policy` (`PUT /test/minimum-version`).
    ///
    /// - Throws: `NetworkError`; `CLIFailure` when the server refuses it.
    func setMinimumVersion(_ version: String, client: any HTTPTransport) async throws {
        _ = try await testEndpoint(.put, "/test/minimum-version", body: Data(version.utf8), client: client)
    }

    private func testEndpoint(_ method: HTTPRequest.Method, _ path: String, body: Data?, client: any HTTPTransport) async throws -> String {
        guard let request = HTTPRequest(method: method, url: issuer + path) else {
            throw CLIFailure(exitCode: 1, "the dev server's issuer \(issuer) does not make a URL")
        }
        let (response, data) = try await client.send(request, body: body)
        guard response.status.code == 200 else {
            throw CLIFailure(exitCode: 1, "the dev server answered \(path) with HTTP \(response.status.code)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}


/// The path of a companion executable (`loginkit-dev-server`, `loginkit-fleet`) beside this one
/// (`/proc/self/exe`). Never one found on `PATH`: a companion runs with what this process holds
/// (the store's password for `loginkit-fleet`), so only the one installed with it is trusted.
///
/// - Throws: a usage failure (exit 2) naming where it looked when there is none.
func locateCompanion(_ name: String) throws -> String {
    let own = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    let directory = own.map { URL(fileURLWithPath: $0).deletingLastPathComponent().path }
    if let directory, FileManager.default.isExecutableFile(atPath: directory + "/" + name) {
        return directory + "/" + name
    }
    let beside = directory.map { " beside loginkit (\($0))" } ?? " beside loginkit"
    throw CLIFailure(
        exitCode: 2,
        "\(name) was not found\(beside); build it with `swift build --product \(name)` or install it next to loginkit"
    )
}
#endif
