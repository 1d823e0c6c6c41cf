#ifndef LOGINKIT_CPROCESSCONTROL_SHIM_H
#define LOGINKIT_CPROCESSCONTROL_SHIM_H

// prctl(2) is variadic in C, which Swift cannot call: one typed wrapper per use.

#ifdef __linux__
#include <sys/prctl.h>

/// Marks the calling process not dumpable: no core file, and processes of the same user can no
/// longer ptrace it or read its /proc/PID/mem and environ. 0 on success, -1 with errno otherwise.
static inline int loginkit_disable_dumping(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/// 1 when the calling process is dumpable, 0 when not, -1 with errno on failure.
static inline int loginkit_is_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}
#endif

#endif
