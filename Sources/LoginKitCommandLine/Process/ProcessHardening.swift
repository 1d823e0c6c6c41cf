// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(Glibc)
import CProcessControl
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the CLI does to its own process before it touches a secret.
enum ProcessHardening {
    /// No core dump and no same-user inspection: a crash while the process holds a password, a
    /// client secret or tokens must not write them to disk (or hand them to a core-dump collector),
    /// and another process of the same user must not read them from `/proc/PID/mem` or attach with
    /// ptrace. Soft and hard `RLIMIT_CORE` go to 0, so that nothing the process runs can raise it
    /// again, and `prctl(PR_SET_DUMPABLE, 0)` (through the CProcessControl shim: `prctl` is variadic
    /// in C) makes the process's `/proc` entries root's. Programs it executes (a `$BROWSER`) start
    /// dumpable again, as `execve` resets the flag.
    static func disableCoreDumps() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        #if canImport(Glibc)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        _ = loginkit_disable_dumping()
        #else
        _ = setrlimit(RLIMIT_CORE, &none)
        #endif
    }
}
#endif
