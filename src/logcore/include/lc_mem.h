/* Memory helpers of the log cleaner's offset map (logcore/_offset_map.pyx).
 *
 * lc_prefetch: a hint that a table slot is about to be probed (the map is far larger
 * than the caches; each probe would otherwise stall on a DRAM miss, one at a time).
 * lc_table_alloc / lc_table_free: the table as an anonymous mapping with transparent
 * huge pages asked for (Linux MADV_HUGEPAGE), so random probes do not also miss the
 * TLB; plain malloc elsewhere. */
#ifndef LC_MEM_H
#define LC_MEM_H

#include <stddef.h>
#include <stdlib.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#endif

static inline void lc_prefetch(const void *p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 1, 1);
#else
    (void)p;
#endif
}

static inline void *lc_table_alloc(size_t n) {
#if (defined(__unix__) || defined(__APPLE__)) && defined(MAP_ANONYMOUS)
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
#else
    return malloc(n);
#endif
}

static inline void lc_table_free(void *p, size_t n) {
    if (p == NULL)
        return;
#if (defined(__unix__) || defined(__APPLE__)) && defined(MAP_ANONYMOUS)
    munmap(p, n);
#else
    (void)n;
    free(p);
#endif
}

#endif
