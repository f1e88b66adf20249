/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The capped string buffer. Growth doubles the allocation but never past the cap, so a hostile
 * input ends in -ENOBUFS instead of exhausting memory; the buffer stays NUL-terminated after every
 * change, including a failed one.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base-strbuf.h"

void strbuf_init(struct strbuf *sb, size_t cap)
{
    sb->buf = NULL;
    sb->len = 0;
    sb->alloc = 0;
    sb->cap = cap ? cap : STRBUF_DEFAULT_CAP;
}

void strbuf_release(struct strbuf *sb)
{
    free(sb->buf);
    sb->buf = NULL;
    sb->len = 0;
    sb->alloc = 0;
}

void strbuf_reset(struct strbuf *sb)
{
    sb->len = 0;
    if (sb->buf)
        sb->buf[0] = '\0';
}

/* Makes room for n more bytes plus the NUL. */
static int strbuf_grow(struct strbuf *sb, size_t n)
{
    size_t need, alloc;
    char *p;

    if (n > sb->cap || sb->len > sb->cap - n)
        return -ENOBUFS;
    need = sb->len + n + 1;
    if (need <= sb->alloc)
        return 0;
    alloc = sb->alloc ? sb->alloc : 64;
    while (alloc < need)
        alloc = alloc > SIZE_MAX / 2 ? need : alloc * 2;
    if (alloc > sb->cap + 1)
        alloc = sb->cap + 1;
    p = realloc(sb->buf, alloc);
    if (!p)
        return -ENOMEM;
    sb->buf = p;
    sb->alloc = alloc;
    return 0;
}

int strbuf_add(struct strbuf *sb, const void *data, size_t len)
{
    int r;

    r = strbuf_grow(sb, len);
    if (r < 0)
        return r;
    if (len)
        memcpy(sb->buf + sb->len, data, len);
    sb->len += len;
    sb->buf[sb->len] = '\0';
    return 0;
}

int strbuf_addstr(struct strbuf *sb, const char *s)
{
    return strbuf_add(sb, s, strlen(s));
}

int strbuf_addch(struct strbuf *sb, char c)
{
    return strbuf_add(sb, &c, 1);
}

int strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
    va_list ap2;
    int n, r;

    /* Try the room we have first; most calls fit and need one vsnprintf. */
    va_copy(ap2, ap);
    n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, sb->buf ? sb->alloc - sb->len : 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        goto fail;
    if (sb->buf && (size_t)n < sb->alloc - sb->len) {
        /* alloc never exceeds cap + 1, so what fitted is within the cap. */
        sb->len += (size_t)n;
        return 0;
    }
    r = strbuf_grow(sb, (size_t)n);
    if (r < 0) {
        if (sb->buf)
            sb->buf[sb->len] = '\0';
        return r;
    }
    n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, ap);
    if (n < 0)
        goto fail;
    sb->len += (size_t)n;
    return 0;

fail:
    if (sb->buf)
        sb->buf[sb->len] = '\0';
    return -EINVAL;
}

int strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = strbuf_vaddf(sb, fmt, ap);
    va_end(ap);
    return r;
}

int strbuf_add_json_string(struct strbuf *sb, const char *s)
{
    const unsigned char *p;
    size_t start = sb->len;
    int r;

    r = strbuf_addch(sb, '"');
    for (p = (const unsigned char *)s; r >= 0 && *p; p++) {
        switch (*p) {
        case '"':
            r = strbuf_add(sb, "\\\"", 2);
            break;
        case '\\':
            r = strbuf_add(sb, "\\\\", 2);
            break;
        case '\n':
            r = strbuf_add(sb, "\\n", 2);
            break;
        case '\r':
            r = strbuf_add(sb, "\\r", 2);
            break;
        case '\t':
            r = strbuf_add(sb, "\\t", 2);
            break;
        case '\b':
            r = strbuf_add(sb, "\\b", 2);
            break;
        case '\f':
            r = strbuf_add(sb, "\\f", 2);
            break;
        default:
            if (*p < 0x20)
                r = strbuf_addf(sb, "\\u%04x", *p);
            else
                r = strbuf_addch(sb, (char)*p);
        }
    }
    if (r >= 0)
        r = strbuf_addch(sb, '"');
    if (r < 0) {
        /* Never leave half a literal behind. */
        sb->len = start;
        if (sb->buf)
            sb->buf[start] = '\0';
    }
    return r;
}

const char *strbuf_str(const struct strbuf *sb)
{
    return sb->buf ? sb->buf : "";
}

char *strbuf_detach(struct strbuf *sb, size_t *ret_len)
{
    size_t len = sb->len;
    char *p;

    p = sb->buf ? sb->buf : strdup("");
    if (!p)
        return NULL;
    sb->buf = NULL;
    sb->len = 0;
    sb->alloc = 0;
    if (ret_len)
        *ret_len = len;
    return p;
}
