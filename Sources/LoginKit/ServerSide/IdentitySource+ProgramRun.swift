#if canImport(Glibc)
    import Glibc
    import LoginKitHTTP

    /// One run of an identity program, watched by a thread of its own (`watch(output:)`): its pid,
    /// signalled only while it cannot have been reaped, what tells that it exited, and the outcome
    /// the thread reports once it has reaped it.
    ///
    /// The program's exit is told apart from the end of its output: a program that prints its
    /// token and exits while a child it left (in its process group or in a session of its own)
    /// keeps the output open has finished. The thread then takes what the pipe holds without
    /// waiting, closes its end, reaps the program and ends. It never waits for ever: the program
    /// exits by itself, or is killed at its timeout or when its fetch is cancelled (`killGroup()`),
    /// and each of its waits ends at that exit.
    final class ProgramRun: Sendable {
        let pid: pid_t
        /// A pidfd of the program, readable once it has exited; `nil` where the kernel, the C
        /// library or a sandbox refuses one: the thread then checks for the exit every
        /// `exitCheckInterval` while it waits for output.
        let exitDescriptor: Int32?
        /// Finished by `watch(output:)` once the program has exited and been reaped.
        let finished = Flight<ProgramOutcome>()
        /// Whether the program has exited, as seen by `waitid` with `WNOWAIT`: until then it is
        /// not reaped, so its pid and its process group's id are still its own and a signal cannot
        /// reach another process.
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

        /// A pidfd of `pid` (`pidfd_open(2)`, Linux 5.3), closed on exec: readable once the
        /// process has exited. `nil` when it cannot be had (`ENOSYS`, a sandbox's `EPERM`, another
        /// architecture).
        static func openExitDescriptor(for pid: pid_t) -> Int32? {
            #if arch(x86_64) || arch(arm64)
                // SYS_pidfd_open lives in <sys/syscall.h>, which Swift's Glibc module does not
                // include: its number, 434 on both x86_64 and aarch64 (the generic table).
                let pidfdOpen = 434
                // `syscall` is variadic in C, which Swift cannot call. glibc's `syscall` is written
                // in assembly and only moves its integer arguments from register to register, and
                // on these two architectures integer arguments travel in the same registers whether
                // a call is variadic or not, so a call through this non-variadic type reaches it as
                // a variadic call would.
                typealias SystemCall = @convention(c) (Int, Int, Int) -> Int
                guard let symbol = dlsym(nil, "syscall") else { return nil }
                let descriptor = unsafeBitCast(symbol, to: SystemCall.self)(pidfdOpen, Int(pid), 0)
                return descriptor >= 0 ? Int32(truncatingIfNeeded: descriptor) : nil
            #else
                return nil
            #endif
        }

        /// Kills the program's process group (the program and what it started there), and the
        /// program itself should it have left that group, unless the program has exited.
        func killGroup() {
            exited.withLock { exited in
                guard !exited else { return }
                _ = kill(-pid, SIGKILL)
                _ = kill(pid, SIGKILL)
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
            exited.withLock { $0 = true }
            if let exitDescriptor { closeDescriptor(exitDescriptor) }
            var status: Int32 = 0
            var reaped = waitpid(pid, &status, 0)
            while reaped == -1 && errno == EINTR { reaped = waitpid(pid, &status, 0) }
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

        /// Whether the program has exited, asked without waiting and without reaping it
        /// (`WNOHANG`, `WNOWAIT`). A program someone else reaped counts as exited.
        private func hasExitedWithoutReaping() -> Bool {
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == -1 {
                if errno != EINTR { return true }  // ECHILD: reaped by someone else
            }
            return info.si_signo == SIGCHLD  // left 0 by the kernel while it has not exited
        }
    }
#endif
