#if canImport(Glibc)
package import Glibc


/// `posix_spawn` as every child of the package is started — the browser command, the dev server
/// that `loginkit dev-server` and `demo` run, the tests' children: the standard streams as asked,
/// every other descriptor closed in the child, an empty signal mask and default dispositions for
/// the signals a parent may have changed. Never Foundation's `Process`, which waits on a socket
/// that a daemonising child can hold open for ever.
package enum ChildProcess {
    /// Where a standard stream of the child goes.
    package enum Stream: Sendable {
        /// The parent's own stream.
        case inherit
        /// `/dev/null`.
        case null
        /// This descriptor (the caller keeps and closes its copy).
        case descriptor(Int32)
    }

    /// Why a child could not be started: `posix_spawn`'s error number and its message.
    package struct SpawnError: Error, Sendable {
        package let code: Int32
        package var message: String { systemErrorMessage(code) }
    }

    /// The variables that hold LoginKit's secrets (`LOGINKIT_CLIENT_SECRET`, `LOGINKIT_STORE_KEY`,
    /// and a fleet store's password: `PGPASSWORD`, a `LOGINKIT_STORE` URL): never handed to a child, whose `/proc/PID/environ` other processes of the user may read long
    /// after the login (a browser keeps running).
    package static let secretVariables: Set<String> = ["LOGINKIT_CLIENT_SECRET", "LOGINKIT_STORE_KEY", "PGPASSWORD", "LOGINKIT_STORE"]

    /// `environment` as a child gets it: `NAME=value` entries, without ``secretVariables``.
    package static func childEnvironment(_ environment: [String: String]) -> [String] {
        environment.filter { !secretVariables.contains($0.key) }.map { "\($0.key)=\($0.value)" }
    }

    /// Starts `arguments` (the first is the executable: a path, or with `searchPath` a bare name
    /// looked up in the absolute directories of `environment`'s `PATH`, as `execvp` would but never
    /// in the current directory) with `environment` (`NAME=value` entries); in a process group of its
    /// own when `newProcessGroup`. Every signal starts with its default disposition and none is
    /// blocked. Returns the child's pid; the caller reaps it.
    ///
    /// - Throws: ``SpawnError``; `ENOENT` when the name is on no `PATH` directory.
    package static func spawn(
        _ arguments: [String], searchPath: Bool = false, environment: [String],
        standardInput: Stream, standardOutput: Stream, standardError: Stream, newProcessGroup: Bool = false
    ) throws(SpawnError) -> pid_t {
        guard let name = arguments.first, !name.isEmpty else { throw SpawnError(code: ENOENT) }
        let executable = searchPath && !name.contains("/") ? try lookUp(name, environment: environment) : name
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (stream, target) in [(standardInput, Int32(0)), (standardOutput, 1), (standardError, 2)] {
            switch stream {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let descriptor): posix_spawn_file_actions_adddup2(&actions, descriptor, target)
            }
        }
        closeDescriptorsAbove2(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaults = sigset_t()
        sigfillset(&defaults)  // what the parent ignores (SIGPIPE, SIGTTOU, …) is not ignored in the child
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if newProcessGroup {
            flags |= POSIX_SPAWN_SETPGROUP
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        var pid: pid_t = 0
        let result = withCStringArray(arguments) { argv in
            withCStringArray(environment) { envp in
                posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
            }
        }
        guard result == 0 else { throw SpawnError(code: result) }
        return pid
    }

    /// The first absolute directory of `environment`'s `PATH` (the system default without one) that
    /// has an executable `name`.
    private static func lookUp(_ name: String, environment: [String]) throws(SpawnError) -> String {
        let path = environment.last { $0.hasPrefix("PATH=") }.map { String($0.dropFirst(5)) } ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") where directory.hasPrefix("/") {
            let candidate = String(directory.hasSuffix("/") ? directory + name : directory + "/" + name)
            var info = stat()
            if access(candidate, X_OK) == 0, stat(candidate, &info) == 0, info.st_mode & 0o170000 == 0o100000 {  // S_IFREG
                return candidate
            }
        }
        throw SpawnError(code: ENOENT)
    }

    /// The exit code in a `waitpid` status, or 128 + the signal that ended the child, as a shell
    /// reports it.
    package static func exitCode(fromWaitStatus status: Int32) -> Int32 {
        (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Closes every descriptor above 2 in the child: glibc's `posix_spawn_file_actions_addclosefrom_np`
    /// (2.34+, not exported to Swift, so looked up at run time), else each descriptor open now.
    private static func closeDescriptorsAbove2(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
            return
        }
        guard let directory = opendir("/proc/self/fd") else { return }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let descriptor = Int32(name), descriptor > 2, descriptor != own {
                posix_spawn_file_actions_addclose(&actions, descriptor)
            }
        }
    }
}

/// Runs `body` with `strings` as a NULL-terminated C array (`argv`, `envp`).
package func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var pointers = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for pointer in pointers { free(pointer) } }
    return body(pointers)
}
#endif
