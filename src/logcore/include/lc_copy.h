/*
 * Small-copy helper for the columnar decoder: keys are typically 8-32 bytes, and a call
 * to the library memcpy for each costs more than the copy itself. Sizes up to 32 bytes
 * are copied inline with two overlapping unaligned moves (they touch only
 * [0, n) of source and destination); larger ones go to memcpy.
 */
#ifndef LOGCORE_LC_COPY_H
#define LOGCORE_LC_COPY_H

#include <stdint.h>
#include <string.h>

static inline void lc_copy(unsigned char *dst, const unsigned char *src, size_t n) {
    if (n <= 16) {
        if (n >= 8) {
            uint64_t a, b;
            memcpy(&a, src, 8);
            memcpy(&b, src + n - 8, 8);
            memcpy(dst, &a, 8);
            memcpy(dst + n - 8, &b, 8);
        } else if (n >= 4) {
            uint32_t a, b;
            memcpy(&a, src, 4);
            memcpy(&b, src + n - 4, 4);
            memcpy(dst, &a, 4);
            memcpy(dst + n - 4, &b, 4);
        } else {
            for (size_t i = 0; i < n; i++) dst[i] = src[i];
        }
    } else if (n <= 32) {
        uint64_t a[2], b[2];
        memcpy(a, src, 16);
        memcpy(b, src + n - 16, 16);
        memcpy(dst, a, 16);
        memcpy(dst + n - 16, b, 16);
    } else {
        memcpy(dst, src, n);
    }
}

#endif /* LOGCORE_LC_COPY_H */
