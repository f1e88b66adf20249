/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A growable, always NUL-terminated byte buffer with a hard cap: input from outside can never make
 * it grow without bound. Functions return 0 or a negative errno (-ENOBUFS past the cap, -ENOMEM).
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>

#include "base-macro.h"

#define STRBUF_DEFAULT_CAP ((size_t)64 << 20)

struct strbuf {
    char *buf; /* NULL until the first addition; use strbuf_str() to read */
    size_t len;
    size_t alloc;
    size_t cap; /* the most bytes (not counting the NUL) it may ever hold */
};

#define STRBUF_INIT                                                                                \
    {                                                                                              \
        .buf = NULL, .len = 0, .alloc = 0, .cap = STRBUF_DEFAULT_CAP                               \
    }

/* cap 0 means STRBUF_DEFAULT_CAP. */
void strbuf_init(struct strbuf *sb, size_t cap);
void strbuf_release(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);

_wur_ int strbuf_add(struct strbuf *sb, const void *data, size_t len);
_wur_ int strbuf_addstr(struct strbuf *sb, const char *s);
_wur_ int strbuf_addch(struct strbuf *sb, char c);
_wur_ int strbuf_addf(struct strbuf *sb, const char *fmt, ...) _printf_(2, 3);
_wur_ int strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap) _printf_(2, 0);
/* Appends s as a JSON string literal, quotes included. */
_wur_ int strbuf_add_json_string(struct strbuf *sb, const char *s);

/* The contents; "" for an empty buffer. Borrowed: valid until the next change. */
const char *strbuf_str(const struct strbuf *sb);

/* Gives the contents to the caller (free() it) and leaves sb empty. Never NULL: "" is allocated for
 * an empty buffer, so the result is NULL only when that allocation fails. */
char *strbuf_detach(struct strbuf *sb, size_t *ret_len);

static inline void strbuf_releasep(struct strbuf *sb)
{
    strbuf_release(sb);
}
#define _cleanup_strbuf_ _cleanup_(strbuf_releasep)
