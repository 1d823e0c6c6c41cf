#ifndef CBENCH_H
#define CBENCH_H
#include <stddef.h>
#include <stdint.h>

/// The C floor of a durable save: write `bytes` to `<directory>/c-floor.tmp`, fsync, rename to
/// `<directory>/c-floor.json`, fsync the directory. Returns 0, or -1 with errno set.
int cbench_durable_write(const uint8_t *bytes, size_t count, const char *directory);

/// Allocations counted by Benchmarks/C/malloc_count.c when it is preloaded; -1 when it is not.
long long cbench_malloc_count(void);

#endif
