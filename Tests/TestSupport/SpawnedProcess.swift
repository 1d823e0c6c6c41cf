public import Foundation
import LoginKit
import LoginKitHTTP

/// A child process started with `posix_spawn`, for tests.
///
/// Why not Foundation's `Process`: on Linux it hands each child a socket it watches for the child's
/// exit, and every descriptor the test process has open without `O_CLOEXEC` leaks into the child
/// too. A daemon the child starts (the tmux server) keeps that socket open for ever, so
/// `waitUntilExit()` and the termination handler never fire: `make test` hung in CI on exactly that.
/// Here the child gets stdin/stdout/stderr and nothing else (every other descriptor is closed in
/// the child), a default signal mask and dispositions, and its exit is collected with `waitpid` on
/// a dedicated thread. Cancelling a task that waits for the exit kills the child, so a test's time
/// limit ends a hung child instead of hanging the run.
public final class SpawnedProcess: Sendable {
    public let pid: pid_t
    private let state = LockedState<State>(State())

    private struct State {
        var status: Int32?
        var waiters: [CheckedContinuation<Int32, Never>] = []
    }

    /// Where a standard stream of the child goes.
    public enum Stream: Sendable {
        /// `/dev/null`.
        case null
        /// The test process's own stream.
        case inherit
        /// This descriptor (the caller keeps and closes its copy).
        case descriptor(Int32)
    }

    /// Starts `executable` with `arguments`; `environment` replaces the test process's own when set.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        stdin: Stream = .null, stdout: Stream = .inherit, stderr: Stream = .inherit
    ) throws {
        let environment = environment ?? ProcessInfo.processInfo.environment
        func stream(_ stream: Stream) -> LoginKit.ChildProcess.Stream {
            switch stream {
            case .null: .null
            case .inherit: .inherit
            case .descriptor(let descriptor): .descriptor(descriptor)
            }
        }
        let pid: pid_t
        do {
            pid = try LoginKit.ChildProcess.spawn(
                [executable] + arguments, environment: environment.map { "\($0.key)=\($0.value)" },
                standardInput: stream(stdin), standardOutput: stream(stdout), standardError: stream(stderr))
        } catch {
            throw NSError(
                domain: NSPOSIXErrorDomain, code: Int(error.code),
                userInfo: [NSLocalizedDescriptionKey: "posix_spawn \(executable): \(error.message)"])
        }
        self.pid = pid
        Thread.detachNewThread { [self] in
            var status: Int32 = 0
            while waitpid(self.pid, &status, 0) == -1 && errno == EINTR {}
            let code = LoginKit.ChildProcess.exitCode(fromWaitStatus: status)
            let waiters = self.state.withLock { state in
                state.status = code
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: code) }
        }
    }

    /// Waits for the child to exit; its exit code, or 128 + the signal that ended it. Cancelling the
    /// waiting task kills the child with SIGKILL.
    public func exitStatus() async -> Int32 {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let done = state.withLock { state -> Int32? in
                    if let status = state.status { return status }
                    state.waiters.append(continuation)
                    return nil
                }
                if let done { continuation.resume(returning: done) }
            }
        } onCancel: {
            kill(.SIGKILL)
        }
    }

    /// Sends `signal` unless the child has already been reaped (its pid may then belong to another).
    public func kill(_ signal: KillSignal) {
        state.withLock { state in
            if state.status == nil { _ = Glibc.kill(pid, signal.rawValue) }
        }
    }

    public struct KillSignal: Sendable {
        public let rawValue: Int32
        public static let SIGKILL = KillSignal(rawValue: Glibc.SIGKILL)
        public static let SIGTERM = KillSignal(rawValue: Glibc.SIGTERM)
    }

}

/// A pipe whose two ends are close-on-exec (a child gets one only through `dup2`).
public struct TestPipe: Sendable {
    public let readEnd: Int32
    public let writeEnd: Int32

    public init() throws {
        var fds: [Int32] = [-1, -1]
        // pipe2 is not exported to Swift; a child spawned between these calls gets no copy anyway
        // (SpawnedProcess closes every descriptor above 2 in its children).
        guard pipe(&fds) == 0 else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(errno), userInfo: [NSLocalizedDescriptionKey: "pipe failed"])
        }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        readEnd = fds[0]
        writeEnd = fds[1]
    }

    /// Reads the read end to EOF on a dedicated thread, then closes it.
    public func readToEnd() async -> Data {
        let fd = readEnd
        return await onDedicatedThread {
            var data = Data()
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(fd, &buffer, buffer.count)
                if count > 0 {
                    data.append(contentsOf: buffer[0..<count])
                } else if count == 0 || errno != EINTR {
                    break
                }
            }
            close(fd)
            return data
        }
    }

    /// Writes `data` to the write end, then closes it (the reader sees EOF).
    public func writeAndClose(_ data: Data) {
        writeAll(data, to: writeEnd)
        close(writeEnd)
    }
}

/// Writes all of `data` to `descriptor` (retrying after signals; stops at the first other error).
public func writeAll(_ data: Data, to descriptor: Int32) {
    data.withUnsafeBytes { raw in
        guard let base = raw.baseAddress else { return }
        var offset = 0
        while offset < raw.count {
            let written = write(descriptor, base + offset, raw.count - offset)
            if written > 0 {
                offset += written
            } else if errno != EINTR {
                break
            }
        }
    }
}

/// Reads `descriptor` on a thread of its own until EOF (every writer gone), handing each line
/// (without its newline; a last unterminated line too) to `line`, then closes it and calls `atEnd`.
public func readLines(
    from descriptor: Int32, _ line: @escaping @Sendable (String) -> Void, atEnd: @escaping @Sendable () -> Void
) {
    Thread.detachNewThread {
        var pending = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            pending.append(contentsOf: buffer[0..<count])
            while let newline = pending.firstIndex(of: 0x0A) {
                line(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                pending.removeSubrange(pending.startIndex...newline)
            }
        }
        if !pending.isEmpty { line(String(decoding: pending, as: UTF8.self)) }
        close(descriptor)
        atEnd()
    }
}

