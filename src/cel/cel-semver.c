/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Semantic versions: strict and normalizing parsers, SemVer precedence and printing, written from
 * the rules cel-semver.h states. The normalizing form rewrites the text (drop "v", trim leading
 * zeros, fill in ".0") and then parses strictly, as Kubernetes does, so both accept and reject
 * exactly the same way apart from what normalization changes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base-strbuf.h"
#include "cel-semver.h"

/* A piece of text. */
struct span {
    const char *s;
    size_t n;
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum_dash(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

static bool all_digits(struct span t)
{
    for (size_t i = 0; i < t.n; i++) {
        if (!is_digit(t.s[i]))
            return false;
    }
    return true;
}

static bool all_alnum_dash(struct span t)
{
    for (size_t i = 0; i < t.n; i++) {
        if (!is_alnum_dash(t.s[i]))
            return false;
    }
    return true;
}

static bool leading_zero(struct span t)
{
    return t.n > 1 && t.s[0] == '0';
}

/* Go's %q for the short strings these messages quote: printable ASCII as is, the rest escaped. */
static void quote(struct span t, char *buf, size_t size)
{
    size_t n = 0;

    buf[n++] = '"';
    for (size_t i = 0; i < t.n && n + 6 < size; i++) {
        unsigned char c = (unsigned char)t.s[i];
        if (c == '"' || c == '\\') {
            buf[n++] = '\\';
            buf[n++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            buf[n++] = (char)c;
        } else {
            static const char hex[] = "0123456789abcdef";
            buf[n++] = '\\';
            buf[n++] = 'x';
            buf[n++] = hex[c >> 4];
            buf[n++] = hex[c & 15];
        }
    }
    buf[n++] = '"';
    buf[n] = '\0';
}

/* Go's strconv.ParseUint(t, 10, 64) with its error messages. */
static int parse_u64(struct span t, struct diag *d, uint64_t *ret)
{
    char q[128];
    uint64_t v = 0;

    quote(t, q, sizeof(q));
    if (t.n == 0)
        return diag_fail(d, -EINVAL, "strconv.ParseUint: parsing %s: invalid syntax", q);
    for (size_t i = 0; i < t.n; i++) {
        uint64_t digit = (uint64_t)(t.s[i] - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return diag_fail(d, -EINVAL, "strconv.ParseUint: parsing %s: value out of range", q);
        v = v * 10 + digit;
    }
    *ret = v;
    return 0;
}

/* major / minor / patch: digits only, no leading zero, fits in 64 bits. */
static int parse_number(struct span t, const char *what, const char *What, struct diag *d,
                        uint64_t *ret)
{
    char q[128];

    quote(t, q, sizeof(q));
    if (!all_digits(t))
        return diag_fail(d, -EINVAL, "Invalid character(s) found in %s number %s", what, q);
    if (leading_zero(t))
        return diag_fail(d, -EINVAL, "%s number must not contain leading zeroes %s", What, q);
    return parse_u64(t, d, ret);
}

/* Splits t at the first c: *head before it, *tail after it; false when c does not occur. */
static bool split_at(struct span t, char c, struct span *head, struct span *tail)
{
    const char *p = t.n ? memchr(t.s, c, t.n) : NULL;

    if (!p)
        return false;
    *head = (struct span){t.s, (size_t)(p - t.s)};
    *tail = (struct span){p + 1, t.n - (size_t)(p - t.s) - 1};
    return true;
}

/* The next dot-separated identifier of *rest (which may be the last one); false at the end. */
static bool next_ident(struct span *rest, bool *more, struct span *ret)
{
    struct span head, tail;

    if (!*more)
        return false;
    if (split_at(*rest, '.', &head, &tail)) {
        *ret = head;
        *rest = tail;
    } else {
        *ret = *rest;
        *more = false;
    }
    return true;
}

static int check_prerelease(struct span pre, struct diag *d)
{
    struct span id;
    bool more = true;
    uint64_t ignored;
    char q[128];
    int r;

    while (next_ident(&pre, &more, &id)) {
        quote(id, q, sizeof(q));
        if (id.n == 0)
            return diag_fail(d, -EINVAL, "Prerelease is empty");
        if (all_digits(id)) {
            if (leading_zero(id))
                return diag_fail(
                    d, -EINVAL, "Numeric PreRelease version must not contain leading zeroes %s", q);
            r = parse_u64(id, d, &ignored);
            if (r < 0)
                return r;
        } else if (!all_alnum_dash(id)) {
            return diag_fail(d, -EINVAL, "Invalid character(s) found in prerelease %s", q);
        }
    }
    return 0;
}

static int check_build(struct span build, struct diag *d)
{
    struct span id;
    bool more = true;
    char q[128];

    while (next_ident(&build, &more, &id)) {
        quote(id, q, sizeof(q));
        if (id.n == 0)
            return diag_fail(d, -EINVAL, "Build meta data is empty");
        if (!all_alnum_dash(id))
            return diag_fail(d, -EINVAL, "Invalid character(s) found in build meta data %s", q);
    }
    return 0;
}

/* version ::= major "." minor "." patch ["-" pre] ["+" build] */
static int parse_strict(struct span t, struct diag *d, struct cel_semver *ret)
{
    struct span major, minor, rest, patch, pre = {NULL, 0}, build = {NULL, 0}, head;
    bool has_pre = false, has_build = false;
    struct cel_semver v = {0};
    int r;

    if (t.n == 0)
        return diag_fail(d, -EINVAL, "Version string empty");
    if (!split_at(t, '.', &major, &rest) || !split_at(rest, '.', &minor, &patch))
        return diag_fail(d, -EINVAL, "No Major.Minor.Patch elements found");
    r = parse_number(major, "major", "Major", d, &v.major);
    if (r < 0)
        return r;
    r = parse_number(minor, "minor", "Minor", d, &v.minor);
    if (r < 0)
        return r;
    if (split_at(patch, '+', &head, &build)) {
        has_build = true;
        patch = head;
    }
    if (split_at(patch, '-', &head, &pre)) {
        has_pre = true;
        patch = head;
    }
    r = parse_number(patch, "patch", "Patch", d, &v.patch);
    if (r < 0)
        return r;
    if (has_pre && (r = check_prerelease(pre, d)) < 0)
        return r;
    if (has_build && (r = check_build(build, d)) < 0)
        return r;
    if (pre.n > UINT32_MAX || build.n > UINT32_MAX)
        return diag_fail(d, -EINVAL, "version too long");
    v.pre = pre.s;
    v.pre_len = (uint32_t)pre.n;
    v.build = build.s;
    v.build_len = (uint32_t)build.n;
    *ret = v;
    return 0;
}

/* Appends one of the first three parts with its leading zeros trimmed (one "0" kept when nothing
 * or no digit would follow). */
static int add_trimmed_part(struct strbuf *sb, struct span p)
{
    size_t i = 0;

    if (p.n > 1) {
        while (i < p.n && p.s[i] == '0')
            i++;
        if (i == p.n || !is_digit(p.s[i])) {
            if (strbuf_addch(sb, '0') < 0)
                return -ENOMEM;
        }
    }
    return strbuf_add(sb, p.s + i, p.n - i);
}

/* The normalized spelling of t (see cel-semver.h) in sb. */
static int normalize(struct span t, struct strbuf *sb, struct diag *d)
{
    struct span parts[3], rest;
    size_t n = 0;
    int r;

    if (t.n > 0 && t.s[0] == 'v') {
        t.s++;
        t.n--;
    }
    rest = t;
    while (n < 2 && split_at(rest, '.', &parts[n], &rest))
        n++;
    parts[n++] = rest;
    if (n < 3 && rest.n && (memchr(rest.s, '+', rest.n) || memchr(rest.s, '-', rest.n)))
        return diag_fail(d, -EINVAL, "short version cannot contain PreRelease/Build meta data");
    for (size_t i = 0; i < 3; i++) {
        if (i > 0 && strbuf_addch(sb, '.') < 0)
            return diag_fail(d, -ENOMEM, "out of memory");
        r = i < n ? add_trimmed_part(sb, parts[i]) : strbuf_addch(sb, '0');
        if (r < 0)
            return diag_fail(d, -ENOMEM, "out of memory");
    }
    return 0;
}

int cel_semver_parse(const char *s, size_t len, bool normalize_text, struct diag *d,
                     struct cel_semver *ret)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    struct cel_semver v;
    const char *end = s + len, *nend;
    int r;

    if (!normalize_text)
        return parse_strict((struct span){s, len}, d, ret);
    r = normalize((struct span){s, len}, &sb, d);
    if (r < 0)
        return r;
    r = parse_strict((struct span){strbuf_str(&sb), sb.len}, d, &v);
    if (r < 0)
        return r;
    /* Pre-release and build data sit at the end of both spellings: point into the caller's. */
    nend = strbuf_str(&sb) + sb.len;
    if (v.pre_len)
        v.pre = end - (nend - v.pre);
    if (v.build_len)
        v.build = end - (nend - v.build);
    *ret = v;
    return 0;
}

/* Compares two pre-release identifiers. */
static int cmp_ident(struct span a, struct span b)
{
    bool na = all_digits(a), nb = all_digits(b);
    int c;

    if (na && nb) {
        /* Validated: no leading zeros, so the longer number is the larger. */
        if (a.n != b.n)
            return a.n < b.n ? -1 : 1;
        c = memcmp(a.s, b.s, a.n);
        return (c > 0) - (c < 0);
    }
    if (na != nb)
        return na ? -1 : 1;
    c = memcmp(a.s, b.s, a.n < b.n ? a.n : b.n);
    if (c != 0)
        return c < 0 ? -1 : 1;
    return (a.n > b.n) - (a.n < b.n);
}

static int cmp_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

int cel_semver_cmp(const struct cel_semver *a, const struct cel_semver *b)
{
    struct span pa = {a->pre, a->pre_len}, pb = {b->pre, b->pre_len}, ia, ib;
    bool ma = true, mb = true, ha, hb;
    int c;

    if ((c = cmp_u64(a->major, b->major)) || (c = cmp_u64(a->minor, b->minor)) ||
        (c = cmp_u64(a->patch, b->patch)))
        return c;
    if (!a->pre_len || !b->pre_len)
        return (a->pre_len == 0) - (b->pre_len == 0);
    for (;;) {
        ha = next_ident(&pa, &ma, &ia);
        hb = next_ident(&pb, &mb, &ib);
        if (!ha || !hb)
            return ha - hb;
        if ((c = cmp_ident(ia, ib)))
            return c;
    }
}

int cel_semver_format(const struct cel_semver *v, struct strbuf *out)
{
    int r = strbuf_addf(out, "%llu.%llu.%llu", (unsigned long long)v->major,
                        (unsigned long long)v->minor, (unsigned long long)v->patch);

    if (r >= 0 && v->pre_len) {
        r = strbuf_addch(out, '-');
        if (r >= 0)
            r = strbuf_add(out, v->pre, v->pre_len);
    }
    if (r >= 0 && v->build_len) {
        r = strbuf_addch(out, '+');
        if (r >= 0)
            r = strbuf_add(out, v->build, v->build_len);
    }
    return r;
}
