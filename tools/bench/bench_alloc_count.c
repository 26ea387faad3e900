/* Process-wide allocation counter for the benchmark (LD_PRELOAD'ed by scripts/bench.sh).
 *
 * Counts every byte requested from the C heap by any code in the process: Rust's allocator,
 * ONNX Runtime's C++ `new` and its aligned CPU allocator. A copy of the 16 MiB embedding made by
 * ONNX Runtime or the ort binding on a predict would show up here, where a Rust-side
 * #[global_allocator] cannot see it. The bench reads the counters through dlsym(RTLD_DEFAULT).
 *
 * Build: cc -O2 -shared -fPIC -o libbench_alloc_count.so tools/bench/bench_alloc_count.c
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static uint64_t bytes_total;
static uint64_t calls_total;

static inline void count(size_t n) {
    __atomic_fetch_add(&bytes_total, (uint64_t)n, __ATOMIC_RELAXED);
    __atomic_fetch_add(&calls_total, 1, __ATOMIC_RELAXED);
}

uint64_t bench_alloc_bytes(void) { return __atomic_load_n(&bytes_total, __ATOMIC_RELAXED); }
uint64_t bench_alloc_calls(void) { return __atomic_load_n(&calls_total, __ATOMIC_RELAXED); }

void *malloc(size_t n) {
    count(n);
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b) {
    count(a * b);
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n) {
    count(n);
    return __libc_realloc(p, n);
}

void free(void *p) { __libc_free(p); }

void *memalign(size_t align, size_t n) {
    count(n);
    return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n) {
    count(n);
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n) {
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    count(n);
    void *p = __libc_memalign(align, n);
    if (!p && n)
        return ENOMEM;
    *out = p;
    return 0;
}

void *valloc(size_t n) {
    count(n);
    return __libc_memalign(4096, n);
}
