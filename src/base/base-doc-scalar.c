/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scalars of the YAML 1.2 core schema: what a plain scalar's text means (null, boolean, int64
 * exactly, a finite real, else a string), and how an explicit !!str/!!int/!!float/!!bool/!!null tag
 * must agree with it. Quoted and block scalars and non-core tags are strings. JSON cannot hold
 * .inf and .nan, so they are an error rather than a string that looks like a number.
 */
#include <errno.h>
#include <libfyaml.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base-doc-internal.h"
#include "base-internal.h"

/* The scalar being resolved, for messages. */
struct at {
    const struct doc *doc;
    struct diag *d;
    int line, col;
};

static int fail(const struct at *at, int err, const char *what)
{
    return doc_fail_mark(at->doc, at->d, at->line, at->col, err, what);
}

static bool span_digits(const char **p, const char *end, const char *set)
{
    const char *start = *p;

    while (*p < end && **p && strchr(set, **p))
        (*p)++;
    return *p > start;
}

#define DIGITS "0123456789"

/* [-+]? [0-9]+ | 0o [0-7]+ | 0x [0-9a-fA-F]+ ; returns the base, or 0 when s is no integer. */
static int int_base(const char *s, size_t n)
{
    const char *p = s, *end = s + n;

    if (n > 2 && s[0] == '0' && s[1] == 'o') {
        p += 2;
        return span_digits(&p, end, "01234567") && p == end ? 8 : 0;
    }
    if (n > 2 && s[0] == '0' && s[1] == 'x') {
        p += 2;
        return span_digits(&p, end, DIGITS "abcdefABCDEF") && p == end ? 16 : 0;
    }
    if (p < end && (*p == '-' || *p == '+'))
        p++;
    return span_digits(&p, end, DIGITS) && p == end ? 10 : 0;
}

/* [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )? */
static bool is_float(const char *s, size_t n)
{
    const char *p = s, *end = s + n;

    if (p < end && (*p == '-' || *p == '+'))
        p++;
    if (p < end && *p == '.') {
        p++;
        if (!span_digits(&p, end, DIGITS))
            return false;
    } else {
        if (!span_digits(&p, end, DIGITS))
            return false;
        if (p < end && *p == '.') {
            p++;
            span_digits(&p, end, DIGITS);
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '-' || *p == '+'))
            p++;
        if (!span_digits(&p, end, DIGITS))
            return false;
    }
    return p == end;
}

static bool is_one_of(const char *s, size_t n, const char *const *words)
{
    for (; *words; words++)
        if (strlen(*words) == n && memcmp(*words, s, n) == 0)
            return true;
    return false;
}

static const char *const null_words[] = {"", "~", "null", "Null", "NULL", NULL};
static const char *const true_words[] = {"true", "True", "TRUE", NULL};
static const char *const false_words[] = {"false", "False", "FALSE", NULL};
static const char *const special_float_words[] = {".inf",  ".Inf",  ".INF",  "+.inf", "+.Inf",
                                                  "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
                                                  ".NaN",  ".NAN",  NULL};

static int make_int(const char *s, size_t n, int base, json_t **ret)
{
    _cleanup_free_ char *c = strndup(s, n);
    const char *digits;
    char *end;
    long long v;

    if (!c)
        return -ENOMEM;
    digits = base == 10 ? c : c + 2;
    errno = 0;
    if (base == 10) {
        v = strtoll(digits, &end, 10);
    } else {
        unsigned long long u = strtoull(digits, &end, base);

        if (u > INT64_MAX)
            errno = ERANGE;
        v = (long long)u;
    }
    if (errno == ERANGE || *end)
        return -ERANGE;
    *ret = json_integer(v);
    return *ret ? 0 : -ENOMEM;
}

static int make_real(const char *s, size_t n, json_t **ret)
{
    _cleanup_free_ char *c = strndup(s, n);
    double v;

    if (!c)
        return -ENOMEM;
    errno = 0;
    v = strtod(c, NULL);
    /* Underflow to a tiny or zero value is fine; overflow to infinity is not representable. */
    if (isinf(v))
        return -ERANGE;
    *ret = json_real(v);
    return *ret ? 0 : -ENOMEM;
}

/* Whether a plain scalar may be anything but a string: the words and numbers below start with one
 * of these characters. Most scalars of a manifest are names, told apart here at once. */
static bool may_be_typed(const char *s, size_t n)
{
    return n == 0 || (s[0] != '\0' && strchr("~nNtTfF0123456789+-.", s[0]));
}

/* A plain scalar's value per the core schema. */
static int resolve_plain(const struct at *at, const char *s, size_t n, json_t **ret)
{
    int base, r;

    if (!may_be_typed(s, n)) {
        *ret = json_stringn_nocheck(s, n);
        return *ret ? 0 : -ENOMEM;
    }

    if (is_one_of(s, n, null_words)) {
        *ret = json_null();
        return 0;
    }
    if (is_one_of(s, n, true_words) || is_one_of(s, n, false_words)) {
        *ret = json_boolean(is_one_of(s, n, true_words));
        return 0;
    }
    base = int_base(s, n);
    if (base) {
        r = make_int(s, n, base, ret);
        if (r == -ERANGE)
            return fail(at, -ERANGE, "integer out of the 64-bit range");
        return r;
    }
    if (is_float(s, n)) {
        r = make_real(s, n, ret);
        if (r == -ERANGE)
            return fail(at, -ERANGE, "number out of range");
        return r;
    }
    if (is_one_of(s, n, special_float_words))
        return fail(at, -EINVAL, "infinity and NaN are not supported");
    *ret = json_stringn_nocheck(s, n);
    return *ret ? 0 : -ENOMEM;
}

#define YAML_TAG "tag:yaml.org,2002:"

/* Checks *v (resolved from a plain reading of the text) against an explicit core tag such as
 * "int" (want, wn bytes), and turns an integer into a real for "float". */
static int apply_core_tag(const struct at *at, const char *want, size_t wn, json_t **v)
{
    bool ok = (wn == 3 && memcmp(want, "int", 3) == 0 && json_is_integer(*v)) ||
              (wn == 5 && memcmp(want, "float", 5) == 0 && json_is_number(*v)) ||
              (wn == 4 && memcmp(want, "bool", 4) == 0 && json_is_boolean(*v)) ||
              (wn == 4 && memcmp(want, "null", 4) == 0 && json_is_null(*v));

    if (!ok) {
        char msg[256];

        snprintf(msg, sizeof(msg), "value does not match its tag \"!!%.*s\"", (int)wn, want);
        return fail(at, -EINVAL, msg);
    }
    if (json_is_integer(*v) && want[0] == 'f') {
        json_t *real = json_real((double)json_integer_value(*v));

        if (!real)
            return -ENOMEM;
        json_decref(*v);
        *v = real;
    }
    return 0;
}

int doc_scalar_resolve(const struct doc *doc, struct diag *d, struct fy_event *ev, int line,
                       int col, json_t **ret)
{
    const struct at at = {.doc = doc, .d = d, .line = line, .col = col};
    struct fy_token *t = doc_fy.event_get_token(ev);
    struct fy_token *tag = doc_fy.event_get_tag_token(ev);
    const char *s = "", *tg = NULL;
    size_t n = 0, tn = 0, pre = strlen(YAML_TAG);
    json_t *v = NULL;
    int r;

    if (t) {
        s = doc_fy.token_get_text(t, &n);
        if (!s)
            return -ENOMEM;
        /* Only a double-quoted "\0" makes a NUL (the input has none); libfyaml 0.7.12 sometimes
         * miscounts a malformed block scalar and hands out bytes past its text. */
        if ((doc_fy.token_scalar_style(t) != FYSS_DOUBLE_QUOTED && memchr(s, '\0', n)) ||
            !utf8_valid(s, n))
            return fail(&at, -EINVAL, "malformed scalar");
    }
    if (tag)
        tg = doc_fy.token_get_text(tag, &tn);
    /* "!", local tags and !!str: the text is a string. Quoted or block text without a tag too. */
    if ((tg && !(tn > pre && memcmp(tg, YAML_TAG, pre) == 0)) ||
        (tg && tn == pre + 3 && memcmp(tg + pre, "str", 3) == 0) ||
        (!tg && t && doc_fy.token_scalar_style(t) != FYSS_PLAIN)) {
        /* The input was checked to be UTF-8 and libfyaml's escapes produce UTF-8. */
        *ret = json_stringn_nocheck(s, n);
        return *ret ? 0 : -ENOMEM;
    }
    r = resolve_plain(&at, s, n, &v);
    if (r < 0)
        return r;
    if (tg) {
        r = apply_core_tag(&at, tg + pre, tn - pre, &v);
        if (r < 0) {
            json_decref(v);
            return r;
        }
    }
    *ret = v;
    return 0;
}
