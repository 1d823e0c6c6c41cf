#define _GNU_SOURCE
#include "CKeyring.h"
#include <errno.h>
#include <unistd.h>
#include <sys/syscall.h>

// From <linux/keyctl.h>; spelled out so that the kernel headers' version does not matter.
#define LOGINKIT_KEY_SPEC_PROCESS_KEYRING (-2)
#define LOGINKIT_KEYCTL_UNLINK 9
#define LOGINKIT_KEYCTL_SEARCH 10
#define LOGINKIT_KEYCTL_READ 11
#define LOGINKIT_KEYCTL_INVALIDATE 21
#define LOGINKIT_KEYCTL_GET_PERSISTENT 22

static long loginkit_result(long result) {
    return result < 0 ? -errno : result;
}

long loginkit_keyctl_persistent_keyring(void) {
#ifdef SYS_keyctl
    // uid -1: the caller's own; linked into the process keyring (created on demand), which makes
    // the persistent keyring and its keys "possessed", so readable under their default permissions.
    return loginkit_result(syscall(SYS_keyctl, LOGINKIT_KEYCTL_GET_PERSISTENT, -1L, (long)LOGINKIT_KEY_SPEC_PROCESS_KEYRING));
#else
    return -ENOSYS;
#endif
}

long loginkit_keyctl_search(long keyring, const char *description) {
#ifdef SYS_keyctl
    return loginkit_result(syscall(SYS_keyctl, LOGINKIT_KEYCTL_SEARCH, keyring, "user", description, 0L));
#else
    return -ENOSYS;
#endif
}

long loginkit_keyctl_read(long key, void *buffer, size_t length) {
#ifdef SYS_keyctl
    return loginkit_result(syscall(SYS_keyctl, LOGINKIT_KEYCTL_READ, key, buffer, length));
#else
    return -ENOSYS;
#endif
}

long loginkit_keyctl_add(const char *description, const void *payload, size_t length, long keyring) {
#ifdef SYS_add_key
    return loginkit_result(syscall(SYS_add_key, "user", description, payload, length, keyring));
#else
    return -ENOSYS;
#endif
}

long loginkit_keyctl_invalidate(long key) {
#ifdef SYS_keyctl
    return loginkit_result(syscall(SYS_keyctl, LOGINKIT_KEYCTL_INVALIDATE, key));
#else
    return -ENOSYS;
#endif
}
