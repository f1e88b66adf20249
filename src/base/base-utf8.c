/* SPDX-License-Identifier: Apache-2.0 */
/*
 * UTF-8 validation, shared by the log (which escapes bytes that are not text) and the document
 * loader (which checks its input first: libfyaml drops some malformed bytes without a word).
 */
#include "base-internal.h"

size_t utf8_seq_len(const unsigned char *p, size_t avail)
{
    size_t n, i;

    if (avail == 0)
        return 0;
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (avail < n)
        return 0;
    for (i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

bool utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;

    while (n > 0) {
        size_t k = utf8_seq_len(p, n);

        if (k == 0)
            return false;
        p += k;
        n -= k;
    }
    return true;
}
