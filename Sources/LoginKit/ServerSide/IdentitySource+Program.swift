#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKitJOSE
#if canImport(Glibc)
import Glibc
#endif

/// What an identity program left behind: what it printed (at most the limit and one byte more),
/// whether it printed more than the limit (it was then stopped), and its exit code (`nil` when it
/// is unknown: someone else reaped it — a failure, whatever it printed).
struct ProgramOutcome: Sendable {
    let output: [UInt8]
    let tooLarge: Bool
    let exitCode: Int32?
}

extension IdentitySource {
    /// The token the program prints: a bare JWT, or the JSON document of Google's
    /// executable-sourced credentials (`program(_:arguments:timeout:)`).
    func runTokenProgram(_ path: String, arguments: [String], timeout: Duration, environment: [String: String]) async throws -> FetchedToken {
        let outcome = try await runProgram(path, arguments: arguments, timeout: timeout, environment: environment)
        if outcome.tooLarge {
            throw LoginError(
                .invalidConfiguration,
                "\(displayName): printed more than 64 KiB and was stopped; an identity program prints one token or one JSON document")
        }
        let text = Self.trimmed(String(decoding: outcome.output, as: UTF8.self))
        // An unknown exit status fails: a program that printed a stale token and then failed, or
        // that a signal ended, must not be taken at its word.
        let exitCode = outcome.exitCode
        if text.hasPrefix("{") {
            if exitCode != 0, let document = try? JSONValue.parse(Array(text.utf8)), document["success"]?.boolValue == false {
                _ = try parseDocument(document)  // throws its failure
            }
            guard exitCode == 0 else { throw exitFailure(exitCode) }
            guard let document = try? JSONValue.parse(Array(text.utf8)) else {
                throw LoginError(.invalidConfiguration, "\(displayName): printed something that is neither a JWT nor a JSON document")
            }
            return try parseDocument(document)
        }
        guard exitCode == 0 else { throw exitFailure(exitCode) }
        guard Self.problem(with: text) == nil, Self.isJWT(text) else {
            throw LoginError(
                .invalidConfiguration,
                "\(displayName): printed something that is neither a JWT nor a JSON document (version 1, as Google's executable-sourced credentials)")
        }
        return FetchedToken(token: text, statedExpiry: nil, validator: .unchanging)
    }

    /// The token of an executable-sourced credentials document, or its failure.
    ///
    /// - Throws: `ServerError` `.unavailable` for `"success": false` (its `code` and `message`,
    ///   printable and short); `LoginError` `.invalidConfiguration` for any other shape.
    private func parseDocument(_ document: JSONValue) throws -> FetchedToken {
        func malformed(_ what: String) -> LoginError {
            LoginError(.invalidConfiguration, "\(displayName): printed a JSON document \(what); see IdentitySource.program for its shape")
        }
        guard document.objectValue != nil else { throw malformed("that is no object") }
        guard document["version"]?.int64Value == 1 else { throw malformed("whose \"version\" is not 1") }
        guard let success = document["success"]?.boolValue else { throw malformed("without a Boolean \"success\"") }
        guard success else {
            let code = document["code"]?.stringValue.map { printableExcerpt($0, limit: 64) }
            let message = document["message"]?.stringValue.map { printableExcerpt($0, limit: 200) }
            let said = [code, message].compactMap { $0 }.joined(separator: ": ")
            throw ServerError(.unavailable, "\(displayName): reported a failure\(said.isEmpty ? "" : ": " + said)", providerError: code)
        }
        let type = document["token_type"]?.stringValue
        guard type == TokenExchangeRequest.jwtType || type == TokenExchangeRequest.idTokenType else {
            throw malformed("whose \"token_type\" is not urn:ietf:params:oauth:token-type:jwt or urn:ietf:params:oauth:token-type:id_token")
        }
        guard let token = document["id_token"]?.stringValue.map(Self.trimmed), Self.problem(with: token) == nil else {
            throw malformed("without a usable \"id_token\"")
        }
        var statedExpiry: Date?
        if let expiration = document["expiration_time"], expiration != .null {
            guard let seconds = expiration.int64Value, seconds > 0, seconds < 100_000_000_000 else {
                throw malformed("whose \"expiration_time\" is no time in seconds since 1970")
            }
            statedExpiry = Date(timeIntervalSince1970: Double(seconds))
        }
        return FetchedToken(token: token, statedExpiry: statedExpiry, validator: .unchanging)
    }

    /// The error for a program that exited with `code`, or whose exit status is unknown (`nil`):
    /// someone else reaped it.
    private func exitFailure(_ code: Int32?) -> ServerError {
        guard let code else {
            return ServerError(
                .unavailable,
                "\(displayName): its exit status could not be read (this process ignores SIGCHLD or reaps its children itself, as with waitpid(-1)), so what it printed is not taken; leave SIGCHLD at its default and reap only your own children")
        }
        let how = code > 128 ? "was ended by signal \(code - 128)" : "exited with status \(code)"
        return ServerError(.unavailable, "\(displayName): \(how); its messages, if any, are on standard error")
    }

    /// `duration` as people read it: `30 s`, `1500 ms`.
    static func describe(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        if attoseconds == 0 { return "\(seconds) s" }
        return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000) ms"
    }

    /// Runs the program and collects what it printed (`startProgram`, then `outcome(of:timeout:)`).
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` when it cannot be started (not found, not
    ///   executable); `ServerError` `.unavailable` past the timeout; `CancellationError`.
    private func runProgram(_ path: String, arguments: [String], timeout: Duration, environment: [String: String]) async throws -> ProgramOutcome {
        #if canImport(Glibc)
            try Task.checkCancellation()
            let run = try startProgram(path, arguments: arguments, environment: environment)
            return try await outcome(of: run, timeout: timeout)
        #else
            throw LoginError(.invalidConfiguration, "\(displayName): LoginKit runs identity programs on Linux only")
        #endif
    }
}

#if canImport(Glibc)
    extension IdentitySource {
        /// Starts the program without a shell: its standard output a pipe that a thread of its own
        /// reads until the program exits (`ProgramRun`), its standard input `/dev/null`, its
        /// standard error ours, in a process group of its own. `watchesExitWithProcessDescriptor`
        /// `false` makes the thread check for the exit between bounded waits, as it does where the
        /// kernel refuses a pidfd (for tests).
        ///
        /// - Throws: `LoginError` `.invalidConfiguration` when it cannot be started (not found, not
        ///   executable); `ServerError` `.unavailable` without a pipe or a thread.
        func startProgram(
            _ path: String, arguments: [String], environment: [String: String], watchesExitWithProcessDescriptor: Bool = true
        ) throws -> ProgramRun {
            let output: (read: Int32, write: Int32)
            do {
                output = try ProgramRun.makeOutputPipe()
            } catch {
                throw ServerError(.unavailable, "\(displayName): could not be run: no pipe for its output (\(error.message))")
            }
            let pid: pid_t
            do {
                pid = try ChildProcess.spawn(
                    [path] + arguments, searchPath: true, environment: ChildProcess.childEnvironment(environment),
                    standardInput: .null, standardOutput: .descriptor(output.write), standardError: .inherit, newProcessGroup: true)
            } catch {
                closeDescriptor(output.read)
                closeDescriptor(output.write)
                throw LoginError(.invalidConfiguration, "\(displayName): could not be started: \(error.message)")
            }
            closeDescriptor(output.write)
            let run = ProgramRun(pid: pid, exitDescriptor: watchesExitWithProcessDescriptor ? ProgramRun.openExitDescriptor(for: pid) : nil)
            guard startDetachedThread({ run.watch(output: output.read) }) else {
                // No thread to watch it: kill it and reap it here (a killed process ends at once).
                run.killGroup()
                closeDescriptor(output.read)
                if let exitDescriptor = run.exitDescriptor { closeDescriptor(exitDescriptor) }
                while waitpid(pid, nil, 0) == -1 && errno == EINTR {}
                throw ServerError(.unavailable, "\(displayName): could not be run: no thread to read its output")
            }
            return run
        }

        /// What `run` left behind once it has exited and been reaped. Past `timeout`, or when the
        /// calling task is cancelled, its process group is killed (`SIGKILL`) and the caller gets
        /// the error at once; the watching thread then sees the exit and reaps it.
        ///
        /// - Throws: `ServerError` `.unavailable` past the timeout; `CancellationError`.
        func outcome(of run: ProgramRun, timeout: Duration) async throws -> ProgramOutcome {
            let outcome = await withTaskGroup(of: ProgramOutcome?.self, returning: ProgramOutcome?.self) { group in
                group.addTask { try? await run.finished.wait() }
                group.addTask {
                    try? await Task.sleep(for: timeout)  // the program's time limit, not a wait for an event
                    return nil
                }
                let first = await group.next() ?? nil
                group.cancelAll()
                return first
            }
            guard let outcome else {
                run.killGroup()
                try Task.checkCancellation()
                throw ServerError(
                    .unavailable, "\(displayName): ran past its timeout of \(Self.describe(timeout)) and was killed")
            }
            return outcome
        }
    }
#endif
