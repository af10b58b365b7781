/*
 * Big-endian loads and stores for Kafka's wire format (every fixed-width field of a
 * RecordBatch header is big-endian, DefaultRecordBatch.java).
 *
 * memcpy + __builtin_bswap compiles to a single unaligned load and a bswap (or movbe):
 * batch headers sit at arbitrary offsets in a fetch response or a segment, so the
 * fields are not aligned and a cast-and-dereference would be undefined behaviour.
 * Callers check bounds first; these helpers do not.
 */
#ifndef LOGCORE_LC_ENDIAN_H
#define LOGCORE_LC_ENDIAN_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#  define LC_BE16(x) (x)
#  define LC_BE32(x) (x)
#  define LC_BE64(x) (x)
#else
#  define LC_BE16(x) __builtin_bswap16(x)
#  define LC_BE32(x) __builtin_bswap32(x)
#  define LC_BE64(x) __builtin_bswap64(x)
#endif

static inline uint16_t lc_load_be16(const unsigned char *p) {
    uint16_t v; memcpy(&v, p, 2); return LC_BE16(v);
}
static inline uint32_t lc_load_be32(const unsigned char *p) {
    uint32_t v; memcpy(&v, p, 4); return LC_BE32(v);
}
static inline uint64_t lc_load_be64(const unsigned char *p) {
    uint64_t v; memcpy(&v, p, 8); return LC_BE64(v);
}
static inline void lc_store_be16(unsigned char *p, uint16_t v) {
    v = LC_BE16(v); memcpy(p, &v, 2);
}
static inline void lc_store_be32(unsigned char *p, uint32_t v) {
    v = LC_BE32(v); memcpy(p, &v, 4);
}
static inline void lc_store_be64(unsigned char *p, uint64_t v) {
    v = LC_BE64(v); memcpy(p, &v, 8);
}

#endif /* LOGCORE_LC_ENDIAN_H */
