/* SPDX-License-Identifier: Apache-2.0 */
/* What the pieces of the base module share among themselves and nobody else. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Length (1-4) of the well-formed UTF-8 sequence at p, which has avail bytes, or 0 when the bytes
 * there are not one (overlong forms, surrogates and code points past U+10FFFF included). */
size_t utf8_seq_len(const unsigned char *p, size_t avail);

/* Whether s[0..n) is all well-formed UTF-8 (NUL bytes allowed). */
bool utf8_valid(const char *s, size_t n);
