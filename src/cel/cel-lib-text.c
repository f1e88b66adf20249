/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Text algorithms of the strings extension, independent of CEL values: CEL string functions count
 * in code points, not bytes, so every index is translated through the UTF-8 helpers here; trim()
 * removes Unicode White_Space; strings.quote() and the number renderings of format() follow what
 * Kubernetes prints (cel-go's strings extension v2, whose formatter renders numbers in the en_US
 * locale: grouped digits for %f, "∞" for infinities, a superscript exponent for %e).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cel-lib-ext.h"

size_t cel_utf8_next(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len, i;
    uint32_t v;

    if (n == 0)
        return 0;
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        len = 2;
        v = p[0] & 0x1fu;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3;
        v = p[0] & 0x0fu;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4;
        v = p[0] & 0x07u;
    } else {
        goto bad;
    }
    if (n < len)
        goto bad;
    for (i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            goto bad;
        v = (v << 6) | (p[i] & 0x3fu);
    }
    if ((len == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))) || (len == 4 && v < 0x10000) ||
        v > 0x10ffff)
        goto bad;
    *cp = v;
    return len;
bad:
    *cp = 0xfffd;
    return 1;
}

size_t cel_utf8_count(const char *s, size_t n)
{
    size_t count = 0;

    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            count++;
    return count;
}

size_t cel_utf8_offset(const char *s, size_t n, size_t cpi)
{
    size_t off = 0;
    uint32_t cp;

    while (cpi > 0) {
        if (off >= n)
            return SIZE_MAX;
        off += cel_utf8_next(s + off, n - off, &cp);
        cpi--;
    }
    return off;
}

int cel_utf8_put(struct strbuf *sb, uint32_t cp)
{
    char b[4];
    size_t n;

    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return strbuf_add(sb, b, n);
}

bool cel_is_unicode_space(uint32_t cp)
{
    switch (cp) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x85:
    case 0xa0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202f:
    case 0x205f:
    case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200a;
    }
}

/* The escape strings.quote() writes for a character, or NULL to copy it. */
static const char *quote_escape(uint32_t cp)
{
    switch (cp) {
    case '\a':
        return "\\a";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    case '\v':
        return "\\v";
    case '\\':
        return "\\\\";
    case '"':
        return "\\\"";
    default:
        return NULL;
    }
}

int cel_quote_string(struct strbuf *sb, const char *s, size_t n)
{
    int r = strbuf_addch(sb, '"');

    for (size_t i = 0; r >= 0 && i < n;) {
        uint32_t cp;
        size_t k = cel_utf8_next(s + i, n - i, &cp);
        const char *esc = quote_escape(cp);

        if (esc)
            r = strbuf_addstr(sb, esc);
        else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
            r = strbuf_addf(sb, "\\u%04x", (unsigned)cp);
        else if (cp == 0xfffd)
            r = cel_utf8_put(sb, cp); /* a malformed byte reads as U+FFFD */
        else
            r = strbuf_add(sb, s + i, k);
        i += k;
    }
    return r < 0 ? r : strbuf_addch(sb, '"');
}

int64_t cel_str_index_of(const char *s, size_t n, const char *needle, size_t nn, size_t from)
{
    size_t off = cel_utf8_offset(s, n, from);
    uint32_t cp;

    if (off == SIZE_MAX)
        return -1;
    for (size_t cpi = from;; cpi++) {
        if (n - off < nn)
            return -1;
        if (memcmp(s + off, needle, nn) == 0)
            return (int64_t)cpi;
        if (off >= n)
            return -1;
        off += cel_utf8_next(s + off, n - off, &cp);
    }
}

int64_t cel_str_last_index_of(const char *s, size_t n, const char *needle, size_t nn, size_t from)
{
    int64_t best = -1;
    size_t off = 0;
    uint32_t cp;

    for (size_t cpi = 0; cpi <= from; cpi++) {
        if (n - off < nn)
            break;
        if (memcmp(s + off, needle, nn) == 0)
            best = (int64_t)cpi;
        if (off >= n)
            break;
        off += cel_utf8_next(s + off, n - off, &cp);
    }
    return best;
}

/* Go's rule for an empty old string: new goes before each code point and at the end. */
static int replace_empty(struct strbuf *sb, const char *s, size_t n, const char *rep, size_t rn,
                         int64_t limit)
{
    size_t off = 0;
    int64_t done = 0;
    uint32_t cp;
    int r = 0;

    for (;;) {
        if (limit < 0 || done < limit) {
            if ((r = strbuf_add(sb, rep, rn)) < 0)
                return r;
            done++;
        }
        if (off >= n)
            return 0;
        size_t k = cel_utf8_next(s + off, n - off, &cp);

        if ((r = strbuf_add(sb, s + off, k)) < 0)
            return r;
        off += k;
    }
}

int cel_str_replace(struct strbuf *sb, const char *s, size_t n, const char *old, size_t on,
                    const char *rep, size_t rn, int64_t limit)
{
    size_t off = 0;
    int64_t done = 0;
    int r;

    if (on == 0)
        return replace_empty(sb, s, n, rep, rn, limit);
    while (off < n && (limit < 0 || done < limit)) {
        const char *hit = memmem(s + off, n - off, old, on);

        if (!hit)
            break;
        if ((r = strbuf_add(sb, s + off, (size_t)(hit - (s + off)))) < 0 ||
            (r = strbuf_add(sb, rep, rn)) < 0)
            return r;
        off = (size_t)(hit - s) + on;
        done++;
    }
    return strbuf_add(sb, s + off, n - off);
}

/* ---- format() ---- */

static int fmt_bad(struct diag *d, const char *msg, char verb)
{
    if (verb)
        return diag_fail(d, -EINVAL, "%s: %%%c", msg, verb);
    return diag_fail(d, -EINVAL, "%s", msg);
}

/* After '%': an optional ".digits" precision and the verb letter. */
static int parse_clause(const char *fmt, size_t n, size_t *pos, struct cel_fmt_clause *clause,
                        struct diag *d)
{
    size_t i = *pos;
    int prec = -1;

    if (i < n && fmt[i] == '.') {
        prec = 0;
        i++;
        if (i >= n || fmt[i] < '0' || fmt[i] > '9')
            return fmt_bad(d, "could not parse formatting clause: missing precision", 0);
        while (i < n && fmt[i] >= '0' && fmt[i] <= '9') {
            prec = prec * 10 + (fmt[i++] - '0');
            if (prec > 1000)
                return fmt_bad(d, "could not parse formatting clause: precision too large", 0);
        }
    }
    if (i >= n)
        return fmt_bad(d, "could not parse formatting clause: unexpected end of string", 0);
    switch (fmt[i]) {
    case 's':
    case 'd':
    case 'f':
    case 'e':
    case 'b':
    case 'o':
    case 'x':
    case 'X':
        break;
    default:
        return fmt_bad(d, "could not parse formatting clause: unrecognized formatting clause",
                       fmt[i]);
    }
    if (prec >= 0 && fmt[i] != 'f' && fmt[i] != 'e')
        return fmt_bad(d, "precision is only allowed with a floating point clause", fmt[i]);
    clause->verb = (enum cel_fmt_verb)fmt[i];
    clause->precision = prec;
    *pos = i + 1;
    return 1;
}

int cel_fmt_next(const char *fmt, size_t n, size_t *pos, struct strbuf *lit,
                 struct cel_fmt_clause *clause, struct diag *d)
{
    size_t i = *pos;
    int r;

    while (i < n) {
        const char *pct = memchr(fmt + i, '%', n - i);
        size_t upto = pct ? (size_t)(pct - fmt) : n;

        if (lit && upto > i && (r = strbuf_add(lit, fmt + i, upto - i)) < 0)
            return r;
        if (!pct) {
            i = n;
            break;
        }
        i = upto + 1;
        if (i < n && fmt[i] == '%') {
            if (lit && (r = strbuf_addch(lit, '%')) < 0)
                return r;
            i++;
            continue;
        }
        *pos = i;
        return parse_clause(fmt, n, pos, clause, d);
    }
    *pos = i;
    return 0;
}

int cel_fmt_uint(struct strbuf *sb, uint64_t v, int base, bool upper)
{
    const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    char buf[65];
    size_t i = sizeof(buf);

    do {
        buf[--i] = digits[v % (unsigned)base];
        v /= (unsigned)base;
    } while (v > 0);
    return strbuf_add(sb, buf + i, sizeof(buf) - i);
}

int cel_fmt_int(struct strbuf *sb, int64_t v, int base, bool upper)
{
    int r;

    if (v >= 0)
        return cel_fmt_uint(sb, (uint64_t)v, base, upper);
    if ((r = strbuf_addch(sb, '-')) < 0)
        return r;
    return cel_fmt_uint(sb, (uint64_t)0 - (uint64_t)v, base, upper);
}

int cel_fmt_hex_bytes(struct strbuf *sb, const void *p, size_t n, bool upper)
{
    const unsigned char *b = p;
    const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    int r = 0;

    for (size_t i = 0; r >= 0 && i < n; i++) {
        char two[2] = {digits[b[i] >> 4], digits[b[i] & 15]};

        r = strbuf_add(sb, two, 2);
    }
    return r;
}

/* NaN and the infinities as the en_US number formatter prints them; 1 when v was one of them. */
static int fmt_special(struct strbuf *sb, double v)
{
    int r;

    if (isnan(v))
        r = strbuf_addstr(sb, "NaN");
    else if (isinf(v))
        r = strbuf_addstr(sb, v < 0 ? "-\u221e" : "\u221e");
    else
        return 0;
    return r < 0 ? r : 1;
}

int cel_fmt_fixed(struct strbuf *sb, double v, int precision)
{
    _cleanup_strbuf_ struct strbuf raw = STRBUF_INIT;
    const char *p, *dot;
    size_t intlen;
    int r;

    if ((r = fmt_special(sb, v)) != 0)
        return r < 0 ? r : 0;
    if (precision < 0)
        precision = 6;
    if ((r = strbuf_addf(&raw, "%.*f", precision, v)) < 0)
        return r;
    p = strbuf_str(&raw);
    if (*p == '-') {
        if ((r = strbuf_addch(sb, '-')) < 0)
            return r;
        p++;
    }
    dot = strchr(p, '.');
    intlen = dot ? (size_t)(dot - p) : strlen(p);
    /* Group the integer digits by three, as en_US does. */
    for (size_t i = 0; i < intlen; i++) {
        if (i > 0 && (intlen - i) % 3 == 0 && (r = strbuf_addch(sb, ',')) < 0)
            return r;
        if ((r = strbuf_addch(sb, p[i])) < 0)
            return r;
    }
    return strbuf_addstr(sb, p + intlen);
}

/* Superscript digits and minus sign for the exponent of %e. */
static int add_superscript(struct strbuf *sb, char c)
{
    static const char *const digits[10] = {"\u2070", "\u00b9", "\u00b2", "\u00b3", "\u2074",
                                           "\u2075", "\u2076", "\u2077", "\u2078", "\u2079"};

    if (c == '-')
        return strbuf_addstr(sb, "\u207b");
    if (c == '+')
        return 0;
    return strbuf_addstr(sb, digits[c - '0']);
}

int cel_fmt_sci(struct strbuf *sb, double v, int precision)
{
    char buf[400];
    const char *e;
    int r, k;

    if ((r = fmt_special(sb, v)) != 0)
        return r < 0 ? r : 0;
    if (precision < 0)
        precision = 6;
    if (precision > 300)
        precision = 300;
    k = snprintf(buf, sizeof(buf), "%.*e", precision, v);
    if (k < 0 || (size_t)k >= sizeof(buf))
        return -EOVERFLOW;
    e = strchr(buf, 'e');
    if ((r = strbuf_add(sb, buf, (size_t)(e - buf))) < 0 ||
        (r = strbuf_addstr(sb, " \u00d7 10")) < 0)
        return r;
    for (e++; *e; e++)
        if ((r = add_superscript(sb, *e)) < 0)
            return r;
    return 0;
}

/* The fewest significant digits (1..17) that read back as v, in %e form into buf. */
static void shortest_digits(double v, char *buf, size_t size)
{
    for (int prec = 0; prec < 17; prec++) {
        snprintf(buf, size, "%.*e", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
    snprintf(buf, size, "%.16e", v);
}

/* Go's 'g' with shortest precision: %e form (two-digit exponent at least) when the decimal exponent
 * is below -4 or 6 and above, so 100000.0 prints "100000" and 1e6 "1e+06". */
int cel_fmt_double_shortest(struct strbuf *sb, double v)
{
    char buf[64], digits[24];
    size_t nd = 0;
    int exp;
    int r;

    if (isnan(v))
        return strbuf_addstr(sb, "NaN");
    if (isinf(v))
        return strbuf_addstr(sb, v < 0 ? "-Inf" : "+Inf");
    shortest_digits(v, buf, sizeof(buf));
    const char *p = buf;

    if (*p == '-') {
        if ((r = strbuf_addch(sb, '-')) < 0)
            return r;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    exp = (int)strtol(p + 1, NULL, 10);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    if (exp < -4 || exp >= 6) {
        if ((r = strbuf_addch(sb, digits[0])) < 0)
            return r;
        if (nd > 1 &&
            ((r = strbuf_addch(sb, '.')) < 0 || (r = strbuf_add(sb, digits + 1, nd - 1)) < 0))
            return r;
        return strbuf_addf(sb, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    }
    if (exp < 0) {
        if ((r = strbuf_addstr(sb, "0.")) < 0)
            return r;
        for (int i = -1; i > exp; i--)
            if ((r = strbuf_addch(sb, '0')) < 0)
                return r;
        return strbuf_add(sb, digits, nd);
    }
    for (int i = 0; i <= exp || (size_t)i < nd; i++) {
        if (i == exp + 1 && (r = strbuf_addch(sb, '.')) < 0)
            return r;
        if ((r = strbuf_addch(sb, (size_t)i < nd ? digits[i] : '0')) < 0)
            return r;
    }
    return 0;
}
