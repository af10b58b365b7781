/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as Kafka uses for the
 * RecordBatch v2 checksum (java.util.zip.CRC32C; DefaultRecordBatch.java, KIP-98).
 *
 * Three implementations behind one entry point, chosen once at run time:
 *   - x86_64: the SSE4.2 `crc32` instruction (detected with __builtin_cpu_supports,
 *     compiled with __attribute__((target("sse4.2"))) so the module still loads on
 *     CPUs without it);
 *   - aarch64: the ARMv8 CRC32C instructions when the kernel reports HWCAP_CRC32;
 *   - everywhere: a portable slice-by-8 table walk.
 *
 * Why the hardware loop is 3-way interleaved: the crc32 instruction has a latency of
 * 3 cycles but a throughput of 1 per cycle (Intel since Nehalem, AMD since Zen), so a
 * single dependency chain runs at 8 bytes / 3 cycles. Three independent streams over
 * three adjacent blocks keep the unit busy (8 bytes / cycle); the three partial CRCs are
 * then merged with the linearity of CRCs:
 *     crc(A || B) = shift(crc(A), |B|) XOR crc_from_zero(B)
 * where shift(c, n) feeds n zero bytes through the register. shift() is linear in c,
 * so it is a table lookup per byte of c (4 lookups), with tables built once for the two
 * block sizes used (LC_CRC_LONG and LC_CRC_SHORT). The idea is Mark Adler's (crc32c.c,
 * zlib's crc32_combine); the code here is written from that description.
 *
 * Every function is pure arithmetic on memory the caller owns: safe without the GIL.
 */
#ifndef LOGCORE_CRC32C_H
#define LOGCORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#  define LC_CRC_X86 1
#  include <nmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#  define LC_CRC_ARM 1
#  include <arm_acle.h>
#  if defined(__linux__)
#    include <sys/auxv.h>
#    include <asm/hwcap.h>
#  endif
#endif

#define LC_CRC_POLY 0x82F63B78u
/* Block sizes of the interleaved loop: 3 * LONG bytes per round for big buffers,
 * 3 * SHORT for the tail; below 3 * SHORT a single chain is as fast. */
#define LC_CRC_LONG 8192
#define LC_CRC_SHORT 256

/* slice-by-8 tables: lc_crc_table[k][b] = CRC register after byte b followed by k zeros */
static uint32_t lc_crc_table[8][256];
/* shift tables: lc_crc_long[k][b] = shift(b << 8k, LONG), same for SHORT */
static uint32_t lc_crc_long[4][256];
static uint32_t lc_crc_short[4][256];
/* 0 = not initialised, 1 = software, 2 = hardware */
static int lc_crc_mode = 0;

static inline uint64_t lc_load_le64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Portable slice-by-8 on a raw (non-inverted) register. */
static inline uint32_t lc_crc32c_sw(uint32_t crc, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        crc = lc_crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w = lc_load_le64(p) ^ crc;
        crc = lc_crc_table[7][w & 0xff] ^ lc_crc_table[6][(w >> 8) & 0xff] ^
              lc_crc_table[5][(w >> 16) & 0xff] ^ lc_crc_table[4][(w >> 24) & 0xff] ^
              lc_crc_table[3][(w >> 32) & 0xff] ^ lc_crc_table[2][(w >> 40) & 0xff] ^
              lc_crc_table[1][(w >> 48) & 0xff] ^ lc_crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = lc_crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

/* Feed n zero bytes through register crc (software, used only to build tables). */
static inline uint32_t lc_crc_zeros_slow(uint32_t crc, size_t n) {
    while (n--) crc = lc_crc_table[0][crc & 0xff] ^ (crc >> 8);
    return crc;
}

static inline void lc_crc_build_shift(uint32_t table[4][256], size_t nzeros) {
    uint32_t basis[32];
    for (int i = 0; i < 32; i++) basis[i] = lc_crc_zeros_slow(1u << i, nzeros);
    for (int k = 0; k < 4; k++) {
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int bit = 0; bit < 8; bit++)
                if (b & (1 << bit)) v ^= basis[8 * k + bit];
            table[k][b] = v;
        }
    }
}

static inline uint32_t lc_crc_shift(uint32_t table[4][256], uint32_t crc) {
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^
           table[2][(crc >> 16) & 0xff] ^ table[3][crc >> 24];
}

/* The 3-way interleaved hardware loop, written once and instantiated per ISA with the
 * ISA's 8-byte and 1-byte step (raw register in and out). */
#define LC_CRC_HW_BODY(STEP64, STEP8)                                                   \
    while (n && ((uintptr_t)p & 7)) { crc = STEP8(crc, *p++); n--; }                    \
    while (n >= 3 * LC_CRC_LONG) {                                                      \
        uint64_t c0 = crc, c1 = 0, c2 = 0;                                              \
        const unsigned char *stop = p + LC_CRC_LONG;                                    \
        do {                                                                            \
            c0 = STEP64(c0, lc_load_le64(p));                                           \
            c1 = STEP64(c1, lc_load_le64(p + LC_CRC_LONG));                             \
            c2 = STEP64(c2, lc_load_le64(p + 2 * LC_CRC_LONG));                         \
            p += 8;                                                                     \
        } while (p < stop);                                                             \
        crc = lc_crc_shift(lc_crc_long, (uint32_t)c0) ^ (uint32_t)c1;                   \
        crc = lc_crc_shift(lc_crc_long, crc) ^ (uint32_t)c2;                            \
        p += 2 * LC_CRC_LONG;                                                           \
        n -= 3 * LC_CRC_LONG;                                                           \
    }                                                                                   \
    while (n >= 3 * LC_CRC_SHORT) {                                                     \
        uint64_t c0 = crc, c1 = 0, c2 = 0;                                              \
        const unsigned char *stop = p + LC_CRC_SHORT;                                   \
        do {                                                                            \
            c0 = STEP64(c0, lc_load_le64(p));                                           \
            c1 = STEP64(c1, lc_load_le64(p + LC_CRC_SHORT));                            \
            c2 = STEP64(c2, lc_load_le64(p + 2 * LC_CRC_SHORT));                        \
            p += 8;                                                                     \
        } while (p < stop);                                                             \
        crc = lc_crc_shift(lc_crc_short, (uint32_t)c0) ^ (uint32_t)c1;                  \
        crc = lc_crc_shift(lc_crc_short, crc) ^ (uint32_t)c2;                           \
        p += 2 * LC_CRC_SHORT;                                                          \
        n -= 3 * LC_CRC_SHORT;                                                          \
    }                                                                                   \
    {                                                                                   \
        uint64_t c = crc;                                                               \
        while (n >= 8) { c = STEP64(c, lc_load_le64(p)); p += 8; n -= 8; }              \
        crc = (uint32_t)c;                                                              \
    }                                                                                   \
    while (n) { crc = STEP8(crc, *p++); n--; }                                          \
    return crc;

#if defined(LC_CRC_X86)
#  define LC_X86_STEP64(c, v) _mm_crc32_u64((c), (v))
#  define LC_X86_STEP8(c, b) _mm_crc32_u8((c), (b))
__attribute__((target("sse4.2")))
static inline uint32_t lc_crc32c_hw(uint32_t crc, const unsigned char *p, size_t n) {
    LC_CRC_HW_BODY(LC_X86_STEP64, LC_X86_STEP8)
}
static inline int lc_crc_have_hw(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}
#elif defined(LC_CRC_ARM)
#  define LC_ARM_STEP64(c, v) __crc32cd((uint32_t)(c), (v))
#  define LC_ARM_STEP8(c, b) __crc32cb((c), (b))
static inline uint32_t lc_crc32c_hw(uint32_t crc, const unsigned char *p, size_t n) {
    LC_CRC_HW_BODY(LC_ARM_STEP64, LC_ARM_STEP8)
}
static inline int lc_crc_have_hw(void) {
#  if defined(__linux__) && defined(HWCAP_CRC32)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
#  else
    return 1; /* compiled for +crc: the build promised the instructions exist */
#  endif
}
#else
static inline uint32_t lc_crc32c_hw(uint32_t crc, const unsigned char *p, size_t n) {
    return lc_crc32c_sw(crc, p, n);
}
static inline int lc_crc_have_hw(void) { return 0; }
#endif

/* Build the tables and pick the implementation; idempotent. Called at module import
 * (under the GIL), so the lazily built tables are never raced. */
static inline void lc_crc32c_init(void) {
    if (lc_crc_mode) return;
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int i = 0; i < 8; i++) c = (c >> 1) ^ ((c & 1) ? LC_CRC_POLY : 0);
        lc_crc_table[0][b] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int b = 0; b < 256; b++)
            lc_crc_table[k][b] = lc_crc_table[0][lc_crc_table[k - 1][b] & 0xff] ^
                                 (lc_crc_table[k - 1][b] >> 8);
    lc_crc_build_shift(lc_crc_long, LC_CRC_LONG);
    lc_crc_build_shift(lc_crc_short, LC_CRC_SHORT);
    lc_crc_mode = lc_crc_have_hw() ? 2 : 1;
}

/* Continue a CRC-32C: `crc` is a finished CRC (0 to start), as java.util.zip.CRC32C
 * and the `crc32c` package's crc32c(data, value) take it. */
static inline uint32_t lc_crc32c(uint32_t crc, const unsigned char *p, size_t n) {
    uint32_t r = ~crc;
    r = (lc_crc_mode == 2) ? lc_crc32c_hw(r, p, n) : lc_crc32c_sw(r, p, n);
    return ~r;
}

/* Same, forced through the software tables (tests and benchmarks compare the two). */
static inline uint32_t lc_crc32c_portable(uint32_t crc, const unsigned char *p, size_t n) {
    return ~lc_crc32c_sw(~crc, p, n);
}

static inline const char *lc_crc32c_impl_name(void) {
#if defined(LC_CRC_X86)
    return lc_crc_mode == 2 ? "sse4.2" : "slice-by-8";
#elif defined(LC_CRC_ARM)
    return lc_crc_mode == 2 ? "armv8-crc" : "slice-by-8";
#else
    return "slice-by-8";
#endif
}

#endif /* LOGCORE_CRC32C_H */
