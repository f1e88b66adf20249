/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Values as CEL literals, the form `gpuplane cel eval` prints and the conformance runner parses:
 * a printed value evaluates back to itself. Doubles use the fewest digits that round-trip and
 * always show a '.' or an exponent; NaN and the infinities, which have no literal, print as
 * double("NaN") etc.; map keys are sorted so the output is stable.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cel-internal.h"

#define PRINT_MAX_DEPTH 128

/*
 * The shortest digits that read back as d, in plain decimal notation for decimal exponents -4..20
 * and scientific notation outside (1e+21, 1e-05), as JavaScript and Go's JSON print doubles.
 */
int cel_format_double(struct strbuf *out, double d)
{
    char buf[64];
    int prec;
    long exp;

    if (isnan(d))
        return strbuf_addstr(out, "NaN");
    if (isinf(d))
        return strbuf_addstr(out, d > 0 ? "+Inf" : "-Inf");
    for (prec = 0; prec < 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    exp = strtol(strchr(buf, 'e') + 1, NULL, 10);
    if (exp >= -4 && exp < 21)
        snprintf(buf, sizeof(buf), "%.*f", prec - exp > 0 ? (int)(prec - exp) : 0, d);
    return strbuf_addstr(out, buf);
}

static int print_double(struct strbuf *out, double d)
{
    size_t start = out->len;
    int err;

    if (isnan(d))
        return strbuf_addstr(out, "double(\"NaN\")");
    if (isinf(d))
        return strbuf_addstr(out, d > 0 ? "double(\"Infinity\")" : "double(\"-Infinity\")");
    err = cel_format_double(out, d);
    if (err < 0)
        return err;
    if (!strpbrk(strbuf_str(out) + start, ".e"))
        return strbuf_addstr(out, ".0");
    return 0;
}

static int print_quoted(struct strbuf *out, const char *s, size_t n, bool bytes)
{
    int err = strbuf_addstr(out, bytes ? "b\"" : "\"");

    for (size_t i = 0; i < n && err >= 0; i++) {
        unsigned char c = (unsigned char)s[i];

        switch (c) {
        case '"':
            err = strbuf_addstr(out, "\\\"");
            break;
        case '\\':
            err = strbuf_addstr(out, "\\\\");
            break;
        case '\n':
            err = strbuf_addstr(out, "\\n");
            break;
        case '\r':
            err = strbuf_addstr(out, "\\r");
            break;
        case '\t':
            err = strbuf_addstr(out, "\\t");
            break;
        default:
            /* strings keep UTF-8 verbatim; bytes escape everything outside printable ASCII */
            if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80))
                err = strbuf_addf(out, "\\x%02x", c);
            else
                err = strbuf_addch(out, (char)c);
        }
    }
    return err < 0 ? err : strbuf_addch(out, '"');
}

static int print_value(struct strbuf *out, struct cel_value v, int depth);

static int print_list(struct strbuf *out, const struct cel_vlist *l, int depth)
{
    int err = strbuf_addch(out, '[');

    for (size_t i = 0; i < l->n && err >= 0; i++) {
        if (i)
            err = strbuf_addstr(out, ", ");
        if (err >= 0)
            err = print_value(out, l->items[i], depth + 1);
    }
    return err < 0 ? err : strbuf_addch(out, ']');
}

static int key_rank(struct cel_value k)
{
    return k.kind == CEL_BOOL ? 0 : k.kind == CEL_STRING ? 2 : 1;
}

static int key_order(const void *x, const void *y)
{
    const struct cel_vmap_entry *a = *(const struct cel_vmap_entry *const *)x;
    const struct cel_vmap_entry *b = *(const struct cel_vmap_entry *const *)y;
    int ra = key_rank(a->key), rb = key_rank(b->key), c = 0;

    if (ra != rb)
        return ra - rb;
    if (cel_value_compare(a->key, b->key, &c) < 0)
        return 0;
    return c;
}

static int print_map(struct strbuf *out, const struct cel_vmap *m, int depth)
{
    _cleanup_free_ const struct cel_vmap_entry **sorted = NULL;
    int err;

    if (m->n) {
        sorted = malloc(m->n * sizeof(*sorted));
        if (!sorted)
            return -ENOMEM;
        for (size_t i = 0; i < m->n; i++)
            sorted[i] = &m->entries[i];
        qsort(sorted, m->n, sizeof(*sorted), key_order);
    }
    err = strbuf_addch(out, '{');
    for (size_t i = 0; i < m->n && err >= 0; i++) {
        if (i)
            err = strbuf_addstr(out, ", ");
        if (err >= 0)
            err = print_value(out, sorted[i]->key, depth + 1);
        if (err >= 0)
            err = strbuf_addstr(out, ": ");
        if (err >= 0)
            err = print_value(out, sorted[i]->value, depth + 1);
    }
    return err < 0 ? err : strbuf_addch(out, '}');
}

static int print_time(struct strbuf *out, struct cel_value v)
{
    bool ts = v.kind == CEL_TIMESTAMP;
    int err = strbuf_addstr(out, ts ? "timestamp(\"" : "duration(\"");

    if (err >= 0)
        err = ts ? cel_timestamp_format(out, v.i, (int32_t)v.n)
                 : cel_duration_format(out, v.i, (int32_t)v.n);
    return err < 0 ? err : strbuf_addstr(out, "\")");
}

static int print_value(struct strbuf *out, struct cel_value v, int depth)
{
    int err;

    if (depth > PRINT_MAX_DEPTH)
        return -E2BIG;
    switch ((enum cel_kind)v.kind) {
    case CEL_NULL:
        return strbuf_addstr(out, "null");
    case CEL_BOOL:
        return strbuf_addstr(out, v.b ? "true" : "false");
    case CEL_INT:
        return strbuf_addf(out, "%" PRId64, v.i);
    case CEL_UINT:
        return strbuf_addf(out, "%" PRIu64 "u", v.u);
    case CEL_DOUBLE:
        return print_double(out, v.d);
    case CEL_STRING:
        return print_quoted(out, v.s, v.n, false);
    case CEL_BYTES:
        return print_quoted(out, v.s, v.n, true);
    case CEL_LIST:
        return print_list(out, v.list, depth);
    case CEL_MAP:
        return print_map(out, v.map, depth);
    case CEL_TYPE:
        return strbuf_addstr(out, v.type->name);
    case CEL_OPTIONAL:
        if (!v.opt)
            return strbuf_addstr(out, "optional.none()");
        err = strbuf_addstr(out, "optional.of(");
        if (err >= 0)
            err = print_value(out, *v.opt, depth + 1);
        return err < 0 ? err : strbuf_addch(out, ')');
    case CEL_TIMESTAMP:
    case CEL_DURATION:
        return print_time(out, v);
    case CEL_OBJECT:
        if (v.obj->cls->print)
            return v.obj->cls->print(v.obj, out);
        return strbuf_addstr(out, v.obj->cls->type->name);
    case CEL_ERROR:
        return strbuf_addstr(out, v.err->msg);
    case CEL_KIND_COUNT:
        break;
    }
    return -EINVAL;
}

int cel_value_print(struct strbuf *out, struct cel_value v)
{
    return print_value(out, v, 0);
}
