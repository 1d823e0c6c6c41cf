public import Foundation
import LoginKit

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
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (stream, target) in [(stdin, Int32(0)), (stdout, 1), (stderr, 2)] {
            switch stream {
            case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .inherit: break
            case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, target)
            }
        }
        Self.closeEverythingElse(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD, SIGHUP, SIGQUIT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = [executable] + arguments
        let environment = environment ?? ProcessInfo.processInfo.environment
        let envp = environment.map { "\($0.key)=\($0.value)" }
        var pid: pid_t = 0
        let result = withCStrings(argv) { argvPointers in
            withCStrings(envp) { envPointers in
                posix_spawn(&pid, executable, &actions, &attributes, argvPointers, envPointers)
            }
        }
        guard result == 0 else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(result), userInfo: [NSLocalizedDescriptionKey: "posix_spawn \(executable): \(String(cString: strerror(result)))"])
        }
        self.pid = pid
        Thread.detachNewThread { [self] in
            var status: Int32 = 0
            while waitpid(self.pid, &status, 0) == -1 && errno == EINTR {}
            // The exit code, or 128 + the signal that ended it, as a shell reports it.
            let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
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

    /// Closes every descriptor above 2 in the child: glibc's `posix_spawn_file_actions_addclosefrom_np`
    /// (2.34+, not exported to Swift, so looked up at run time), else each descriptor open now.
    private static func closeEverythingElse(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
            return
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap({ Int32($0) }) where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
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
        data.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count {
                let written = write(writeEnd, base + offset, raw.count - offset)
                if written > 0 {
                    offset += written
                } else if errno != EINTR {
                    break
                }
            }
        }
        close(writeEnd)
    }
}

private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var pointers = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for pointer in pointers { free(pointer) } }
    return body(pointers)
}
