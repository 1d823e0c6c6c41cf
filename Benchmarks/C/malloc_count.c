/* Counts malloc/calloc/realloc/posix_memalign/aligned_alloc calls of the process it is preloaded
 * into (LD_PRELOAD), for `make bench`'s allocations-per-verify. Built by Benchmarks/run.py:
 *   gcc -O2 -shared -fPIC -o malloc_count.so malloc_count.c -ldl
 * The count is read through `loginkit_malloc_count()` (looked up with dlsym). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdatomic.h>

static atomic_llong count;
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

long long loginkit_malloc_count(void) { return atomic_load(&count); }

void *malloc(size_t size) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_realloc(p, size); }
int posix_memalign(void **out, size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    void *p = __libc_memalign(alignment, size);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
void *aligned_alloc(size_t alignment, size_t size) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_memalign(alignment, size); }
