// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

/// When this process started, on the wall clock: the kernel's start time (`/proc/self/stat`'s
/// `starttime`, clock ticks since boot on `CLOCK_BOOTTIME`) moved onto the wall clock through the
/// current difference between the two. It is fixed when the process is created, before any of its
/// code runs — what `token --force-refresh` compares a replacement's issue time with: an
/// invocation started before the replacement was issued takes it instead of refreshing again.
enum ProcessStart {
    /// The start time, to the clock tick (10 ms on most kernels); `nil` when `/proc` cannot tell.
    static func wallClock() -> Date? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm)": field 3 (state) is the first; starttime is field 22.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return nil }
        let hertz = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard hertz > 0 else { return nil }
        var boot = timespec()
        guard clock_gettime(CLOCK_BOOTTIME, &boot) == 0 else { return nil }
        let sinceBoot = Double(boot.tv_sec) + Double(boot.tv_nsec) / 1e9
        return Date().addingTimeInterval(ticks / hertz - sinceBoot)
    }
}
#endif
