#define _GNU_SOURCE
#include "cbench.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

int cbench_durable_write(const uint8_t *bytes, size_t count, const char *directory) {
    char temporary[PATH_MAX], final[PATH_MAX];
    snprintf(temporary, sizeof temporary, "%s/c-floor.tmp", directory);
    snprintf(final, sizeof final, "%s/c-floor.json", directory);
    int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    size_t written = 0;
    while (written < count) {
        ssize_t n = write(fd, bytes + written, count - written);
        if (n < 0) { close(fd); return -1; }
        written += (size_t)n;
    }
    if (fsync(fd) != 0) { close(fd); return -1; }
    close(fd);
    if (rename(temporary, final) != 0) return -1;
    int dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return -1;
    int result = fsync(dir);
    close(dir);
    return result;
}

long long cbench_malloc_count(void) {
    long long (*counter)(void) = (long long (*)(void))dlsym(RTLD_DEFAULT, "loginkit_malloc_count");
    return counter ? counter() : -1;
}
