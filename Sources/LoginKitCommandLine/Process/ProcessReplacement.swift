// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import LoginKit
import LoginKitHTTP
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `loginkit exec`'s last step: the command run in this process's place (`execve`), so that its
/// exit status and the signals sent to the process are the command's own, as a shell's `exec` does.
enum ProcessReplacement {
    /// The signals blocked when this process started (``recordStartingSignalMask()``): the mask
    /// `exec`'s command, and `loginkit-fleet` when the run is handed to it, start with. Empty until
    /// recorded.
    private static let startingSignalMask = LockedState<[Int32]>([])

    /// Records the calling thread's signal mask as the one the command starts with. Called first
    /// thing on the main thread (`LoginKitCLI.start(fleet:)`), before any code of this process runs
    /// on the concurrency runtime's threads, which block most signals.
    static func recordStartingSignalMask() {
        var mask = sigset_t()
        guard pthread_sigmask(SIG_SETMASK, nil, &mask) == 0 else { return }
        var blocked: [Int32] = []
        for signal in Int32(1)..<Int32(65) where sigismember(&mask, signal) == 1 {
            blocked.append(signal)
        }
        startingSignalMask.withLock { $0 = blocked }
    }

    /// Gives the calling thread the signal mask this process started with
    /// (``recordStartingSignalMask()``; none blocked when it was not recorded): called right before
    /// `execve`, which hands the program the caller's mask.
    static func restoreStartingSignalMask() {
        var mask = sigset_t()
        sigemptyset(&mask)
        for signal in startingSignalMask.withLock({ $0 }) { sigaddset(&mask, signal) }
        _ = pthread_sigmask(SIG_SETMASK, &mask, nil)
    }

    /// Whether `name` can name an environment variable: ASCII letters, digits and `_`, not starting
    /// with a digit.
    static func isValidVariableName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(0x30...0x39).contains(first) else { return false }
        return name.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        }
    }

    /// The environment the command gets (`NAME=value` entries): `environment` without the variables
    /// that hold LoginKit's secrets (`ChildProcess.secretVariables`) — except `LOGINKIT_STORE` when it
    /// names the store without a password (a path), so that a command running `loginkit` itself
    /// finds the same store — and with `variable` set to `value`.
    static func environment(_ environment: [String: String], setting variable: String, to value: String) -> [String] {
        var kept = environment.filter { name, setting in
            guard ChildProcess.secretVariables.contains(name) else { return true }
            return name == "LOGINKIT_STORE" && !StoreOptions.holdsPassword(setting)
        }
        kept[variable] = value
        return kept.map { "\($0.key)=\($0.value)" }.sorted()
    }

    /// The file `name` runs: `name` itself when it holds a `/`, else the first executable regular
    /// file of that name in the absolute directories of `path` (`PATH`; relative entries are skipped,
    /// as for the browser command), as a shell finds a command.
    ///
    /// - Throws: `CLIFailure` exit 127 when there is no such file, 126 when the file found cannot be
    ///   run (not executable, a directory), as a shell exits.
    static func resolve(_ name: String, path: String?) throws -> String {
        let shown = Terminal.printable(name, limit: 300)
        if name.contains("/") {
            switch check(name) {
            case .runnable: return name
            case .missing: throw CLIFailure(exitCode: 127, "\(shown): no such file or directory")
            case .refused(let why): throw CLIFailure(exitCode: 126, "\(shown): \(why)")
            }
        }
        var refusal: String?
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where directory.hasPrefix("/") {
            let candidate = directory.hasSuffix("/") ? String(directory) + name : String(directory) + "/" + name
            switch check(candidate) {
            case .runnable: return candidate
            case .missing: continue
            case .refused(let why): refusal = refusal ?? why  // a later directory may still have one that runs
            }
        }
        if let refusal { throw CLIFailure(exitCode: 126, "\(shown): \(refusal)") }
        throw CLIFailure(exitCode: 127, "\(shown): command not found")
    }

    private enum Check {
        case runnable
        case missing
        case refused(String)
    }

    private static func check(_ path: String) -> Check {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return errno == ENOENT || errno == ENOTDIR ? .missing : .refused(String(cString: strerror(errno)))
        }
        if info.st_mode & 0o170000 == 0o040000 { return .refused("is a directory") }  // S_IFDIR
        guard access(path, X_OK) == 0 else { return .refused(String(cString: strerror(errno))) }
        return .runnable
    }

    /// The descriptors this process has open (from `/proc/self/fd`); empty when that cannot be read.
    static func openDescriptors() -> Set<Int32> {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        let own = dirfd(directory)
        var found: Set<Int32> = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let descriptor = Int32(name), descriptor != own { found.insert(descriptor) }
        }
        return found
    }

    /// Replaces this process with `executable`, `arguments` (the first is the command's name as
    /// given) and `environment`. Every descriptor above 2 that is not in `inherited` — what this
    /// process opened itself: the store's files, connections — is closed in the command (set
    /// close-on-exec); those this process was started with stay open for it, as a shell passes them
    /// on. The command starts with the signal mask this process started with
    /// (``recordStartingSignalMask()``), not the one of the thread that runs this (the runtime's
    /// threads block most signals), as a shell's `exec` passes its own on. Returns only by throwing.
    ///
    /// - Throws: `CLIFailure` exit 127 when `execve` finds no file (or no interpreter for a script),
    ///   126 for any other refusal.
    static func replaceCurrentProcess(executable: String, arguments: [String], environment: [String], inherited: Set<Int32>) throws -> Never {
        for descriptor in openDescriptors() where descriptor > 2 && !inherited.contains(descriptor) {
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
        restoreStartingSignalMask()
        let failure = withCStringArray(arguments) { argv -> Int32 in
            withCStringArray(environment) { envp -> Int32 in
                _ = execve(executable, argv, envp)
                return errno
            }
        }
        let shown = Terminal.printable(arguments.first ?? executable, limit: 300)
        throw CLIFailure(exitCode: failure == ENOENT ? 127 : 126, "\(shown): \(String(cString: strerror(failure)))")
    }
}
#endif
