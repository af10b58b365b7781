/*
 * Strict UTF-8 validation, the same acceptance as Python's bytes.decode("utf-8"):
 * no overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
 * Kafka's Python clients decode record header keys strictly, so RecordBatch.validate()
 * checks them without creating str objects (and without the GIL).
 */
#ifndef LOGCORE_LC_UTF8_H
#define LOGCORE_LC_UTF8_H

#include <stddef.h>

static inline int lc_utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c < 0xC2) return 0;                       /* continuation or overlong lead */
        if (c < 0xE0) {
            if (n - i < 2 || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
            continue;
        }
        if (c < 0xF0) {
            if (n - i < 3) return 0;
            unsigned char c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0;     /* overlong */
            if (c == 0xED && c1 >= 0xA0) return 0;    /* surrogate */
            i += 3;
            continue;
        }
        if (c < 0xF5) {
            if (n - i < 4) return 0;
            unsigned char c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;     /* overlong */
            if (c == 0xF4 && c1 >= 0x90) return 0;    /* above U+10FFFF */
            i += 4;
            continue;
        }
        return 0;
    }
    return 1;
}

#endif /* LOGCORE_LC_UTF8_H */
