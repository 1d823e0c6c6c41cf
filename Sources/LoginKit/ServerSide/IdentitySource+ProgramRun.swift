#if canImport(Glibc)
    import CProcessControl
    import Glibc
    import LoginKitHTTP

    /// One run of an identity program, watched by a thread of its own (`watch(output:)`): its pid,
    /// signalled only while it is running (through its pidfd when it has one), what tells that it
    /// exited, and the outcome the thread reports once it has reaped it.
    ///
    /// The program's exit is told apart from the end of its output: a program that prints its
    /// token and exits while a child it left (in its process group or in a session of its own)
    /// keeps the output open has finished. The thread then takes what the pipe holds without
    /// waiting, closes its end, reaps the program and ends. It never waits for ever: the program
    /// exits by itself, or is killed at its timeout or when its fetch is cancelled (`killGroup()`),
    /// and each of its waits ends at that exit.
    final class ProgramRun: Sendable {
        let pid: pid_t
        /// A pidfd of the program, readable once it has exited, and what `killGroup()` signals it
        /// through; `nil` where the kernel or a sandbox refuses one: the thread then checks for the
        /// exit every `exitCheckInterval` while it waits for output. Open until `exited` is set,
        /// and closed under its lock.
        let exitDescriptor: Int32?
        /// Finished by `watch(output:)` once the program has exited and been reaped.
        let finished = Flight<ProgramOutcome>()
        /// Whether the thread has seen the program exit (`waitid` with `WNOWAIT`) and is about to
        /// reap it. Until then this process has not reaped it, and `killGroup()` signals it, under
        /// this lock, only while `waitid` finds it running: then its pid and its process group's id
        /// are still its own, whoever else reaps children.
        private let exited = LockedState(false)

        /// How long, in milliseconds, the thread waits for output before it checks for the exit
        /// again, when it has no pidfd.
        static let exitCheckInterval: Int32 = 50
        private static let readable = Int16(POLLIN)

        init(pid: pid_t, exitDescriptor: Int32?) {
            self.pid = pid
            self.exitDescriptor = exitDescriptor
        }

        /// The pipe for a program's output: both ends closed on exec, made so in one call (`pipe2`
        /// with `O_CLOEXEC`) so that a child another thread starts meanwhile inherits neither; the
        /// read end non-blocking. Where the C library has no `pipe2`: `pipe`, then `FD_CLOEXEC`.
        static func makeOutputPipe() throws(ChildProcess.SpawnError) -> (read: Int32, write: Int32) {
            var ends: [Int32] = [-1, -1]
            // `pipe2` is declared only with `_GNU_SOURCE`, which Swift's Glibc module is built
            // without: looked up at run time (glibc has it since 2.9).
            typealias MakePipe = @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
            if let symbol = dlsym(nil, "pipe2") {
                guard unsafeBitCast(symbol, to: MakePipe.self)(&ends, O_CLOEXEC) == 0 else { throw ChildProcess.SpawnError(code: errno) }
            } else {
                guard pipe(&ends) == 0 else { throw ChildProcess.SpawnError(code: errno) }
                for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            }
            let flags = fcntl(ends[0], F_GETFL)
            guard flags >= 0, fcntl(ends[0], F_SETFL, flags | O_NONBLOCK) == 0 else {
                let code = errno
                closeDescriptor(ends[0])
                closeDescriptor(ends[1])
                throw ChildProcess.SpawnError(code: code)
            }
            return (ends[0], ends[1])
        }

        /// A pidfd of the child `pid` (`pidfd_open(2)`, Linux 5.3, through the CProcessControl
        /// shim: `syscall` is variadic in C), closed on exec: readable once the process has exited,
        /// and a target for `pidfd_send_signal(2)` that no other process can take over. `nil` when
        /// it cannot be had (`ENOSYS`, a sandbox's `EPERM`), and when `pid` is no longer this
        /// process's child once it is open — reaped by someone else (a host that ignores `SIGCHLD`),
        /// so the pid may name another process by then.
        static func openExitDescriptor(for pid: pid_t) -> Int32? {
            let descriptor = loginkit_pidfd_open(pid)
            guard descriptor >= 0 else { return nil }
            // Still this process's child, running or not yet reaped: its pid was its own when the
            // pidfd was opened, since an unreaped child's pid is never given to another process.
            guard state(of: pid) != .reapedElsewhere else {
                closeDescriptor(descriptor)
                return nil
            }
            return descriptor
        }

        /// Kills the program's process group (the program and what it started there), and the
        /// program itself should it have left that group — through its pidfd when it has one —
        /// while the program runs; once it has exited, nothing. `waitid` is asked under the lock
        /// the thread sets `exited` under, so this process cannot reap the program meanwhile.
        func killGroup() {
            exited.withLock { exited in
                guard !exited, Self.state(of: pid) == .running else { return }
                _ = kill(-pid, SIGKILL)
                if let exitDescriptor {
                    _ = loginkit_pidfd_send_signal(exitDescriptor, SIGKILL)
                } else {
                    _ = kill(pid, SIGKILL)
                }
            }
        }

        /// Reads the program's output from `descriptor` until the output ends or the program
        /// exits — then what the pipe still holds, without waiting for its end, which a child the
        /// program left may keep open — and closes it; waits for the exit, reaps the program and
        /// finishes `finished`. One byte past the limit kills the program. Blocks: runs on a thread
        /// of its own.
        func watch(output descriptor: Int32) {
            var output: [UInt8] = []
            var tooLarge = false
            while true {
                var descriptors = [pollfd(fd: descriptor, events: Self.readable, revents: 0)]
                if let exitDescriptor {
                    descriptors.append(pollfd(fd: exitDescriptor, events: Self.readable, revents: 0))
                }
                let ready = poll(&descriptors, nfds_t(descriptors.count), exitDescriptor == nil ? Self.exitCheckInterval : -1)
                if ready < 0 {
                    if errno == EINTR { continue }
                    break  // no way to wait for output: read no more, and wait for the exit below
                }
                if descriptors[0].revents != 0, !readAvailable(from: descriptor, into: &output, tooLarge: &tooLarge) { break }
                let hasExited = descriptors.count > 1 ? descriptors[1].revents != 0 : hasExitedWithoutReaping()
                if hasExited {
                    // Everything it wrote before it exited is in the pipe by now.
                    _ = readAvailable(from: descriptor, into: &output, tooLarge: &tooLarge)
                    break
                }
            }
            closeDescriptor(descriptor)
            // Returns at once when the loop saw the exit; otherwise (the output ended first) when
            // the program ends by itself or is killed at its timeout.
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
            exited.withLock { exited in
                exited = true
                // Closed under the lock `killGroup()` signals through it under.
                if let exitDescriptor { closeDescriptor(exitDescriptor) }
            }
            var status: Int32 = 0
            var reaped = waitpid(pid, &status, 0)
            while reaped == -1 && errno == EINTR { reaped = waitpid(pid, &status, 0) }
            // `nil`: someone else reaped it (ECHILD), and its exit status is lost.
            let exitCode = reaped == pid ? ChildProcess.exitCode(fromWaitStatus: status) : nil
            finished.finish(with: .success(ProgramOutcome(output: output, tooLarge: tooLarge, exitCode: exitCode)))
        }

        /// Reads what the non-blocking `descriptor` holds now into `output`. `false` once the
        /// output is over: its end, a read error, or more than the limit (which kills the program
        /// and sets `tooLarge`).
        private func readAvailable(from descriptor: Int32, into output: inout [UInt8], tooLarge: inout Bool) -> Bool {
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    return code == EAGAIN
                }
                if count == 0 { return false }
                output.append(contentsOf: buffer[..<count])
                if output.count > IdentitySource.maximumTokenLength {
                    tooLarge = true
                    killGroup()
                    return false
                }
            }
        }

        /// Whether the program has exited (`state(of:)`). A program someone else reaped counts as
        /// exited.
        private func hasExitedWithoutReaping() -> Bool {
            Self.state(of: pid) != .running
        }

        /// Where this process's child `pid` stands.
        enum ChildState {
            /// It has not exited.
            case running
            /// It has exited, and waits to be reaped.
            case exited
            /// It is no child of this process (any more): someone else reaped it (`ECHILD`).
            case reapedElsewhere
        }

        /// Where child `pid` stands, asked without waiting and without reaping it (`waitid` with
        /// `WNOHANG` and `WNOWAIT`).
        static func state(of pid: pid_t) -> ChildState {
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == -1 {
                if errno != EINTR { return .reapedElsewhere }  // ECHILD
            }
            return info.si_signo == SIGCHLD ? .exited : .running  // si_signo left 0 while it has not exited
        }
    }
#endif
