#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the CLI does to its own process before it touches a secret.
enum ProcessHardening {
    /// No core dump: a crash while the process holds a password, a client secret or tokens must not
    /// write them to disk (or hand them to a core-dump collector). Soft and hard `RLIMIT_CORE` go to
    /// 0, so that nothing the process runs can raise it again.
    ///
    /// `prctl(PR_SET_DUMPABLE, 0)` would in addition keep same-user processes from attaching with
    /// ptrace or reading `/proc/PID/mem`, but `prctl` is variadic in C and Swift cannot call it; the
    /// kernel's Yama `ptrace_scope` (1 on most distributions) is what limits ptrace here.
    static func disableCoreDumps() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        #if canImport(Glibc)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        #else
        _ = setrlimit(RLIMIT_CORE, &none)
        #endif
    }
}
