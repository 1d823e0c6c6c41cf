#ifndef LOGINKIT_CPROCESSCONTROL_SHIM_H
#define LOGINKIT_CPROCESSCONTROL_SHIM_H

// prctl(2) and syscall(2) are variadic in C, which Swift cannot call: one typed wrapper per use.

#ifdef __linux__
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/// Marks the calling process not dumpable: no core file, and processes of the same user can no
/// longer ptrace it or read its /proc/PID/mem and environ. 0 on success, -1 with errno otherwise.
static inline int loginkit_disable_dumping(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/// 1 when the calling process is dumpable, 0 when not, -1 with errno on failure.
static inline int loginkit_is_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}

/// pidfd_open(2) (Linux 5.3): a descriptor of process `pid`, close-on-exec, readable once the
/// process has exited; it names that process even after its pid is reused. -1 with errno
/// otherwise: ENOSYS where the kernel, or the headers this is built with, have no such call.
static inline int loginkit_pidfd_open(pid_t pid) {
#if defined(SYS_pidfd_open)
    return (int)syscall(SYS_pidfd_open, pid, 0);
#elif defined(__NR_pidfd_open)
    return (int)syscall(__NR_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/// pidfd_send_signal(2) (Linux 5.1): sends `sig` to the process `pidfd` names — never to another
/// that has its pid since. 0 on success, -1 with errno otherwise (ESRCH once it has been reaped;
/// ENOSYS as for loginkit_pidfd_open).
static inline int loginkit_pidfd_send_signal(int pidfd, int sig) {
#if defined(SYS_pidfd_send_signal)
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
#elif defined(__NR_pidfd_send_signal)
    return (int)syscall(__NR_pidfd_send_signal, pidfd, sig, NULL, 0);
#else
    (void)pidfd;
    (void)sig;
    errno = ENOSYS;
    return -1;
#endif
}
/// syncfs(2) (Linux 2.6.39), which glibc declares only under _GNU_SOURCE: flushes the file system
/// holding `fd` in one call. 0 on success, -1 with errno otherwise.
static inline int loginkit_syncfs(int fd) {
#if defined(SYS_syncfs)
    return (int)syscall(SYS_syncfs, fd);
#else
    return fsync(fd);
#endif
}
#endif

#endif
