/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CEL's standard library: the operators' type signatures (for the checker; the evaluator runs them
 * directly), size(), the string predicates contains/startsWith/endsWith, and the conversions
 * int() uint() double() string() bytes() bool() dyn() type() with the spec's range and format
 * rules: int(double) truncates and fails out of range, int("…") parses base 10 only, string(double)
 * prints the shortest round-trip form, string(bytes) requires valid UTF-8.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cel-internal.h"
#include "cel-lib-ext.h"

/* ---- size and string predicates ---- */

size_t cel_str_len(const char *s, size_t n)
{
    size_t count = 0;

    /* count the bytes that start a code point (all but 10xxxxxx continuation bytes) */
    for (size_t i = 0; i < n; i++)
        count += ((unsigned char)s[i] & 0xc0) != 0x80;
    return count;
}

static struct cel_value fn_size(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)n;
    switch (a[0].kind) {
    case CEL_STRING:
        return cel_int((int64_t)cel_str_len(a[0].s, a[0].n));
    case CEL_BYTES:
        return cel_int((int64_t)a[0].n);
    case CEL_LIST:
        return cel_int((int64_t)a[0].list->n);
    case CEL_MAP:
        return cel_int((int64_t)a[0].map->n);
    default:
        return cel_ctx_no_overload(ctx, "size", a, 1);
    }
}

static struct cel_value fn_contains(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)ctx, (void)n;
    if (a[1].n == 0)
        return cel_bool(true);
    if (a[1].n > a[0].n)
        return cel_bool(false);
    return cel_bool(memmem(a[0].s, a[0].n, a[1].s, a[1].n) != NULL);
}

static struct cel_value fn_starts(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)ctx, (void)n;
    return cel_bool(a[1].n == 0 || (a[1].n <= a[0].n && memcmp(a[0].s, a[1].s, a[1].n) == 0));
}

static struct cel_value fn_ends(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)ctx, (void)n;
    return cel_bool(a[1].n == 0 ||
                    (a[1].n <= a[0].n && memcmp(a[0].s + a[0].n - a[1].n, a[1].s, a[1].n) == 0));
}

static uint64_t cost_scan(const struct cel_value *a, size_t n, struct cel_value r)
{
    (void)n, (void)r;
    return cel_cost_tenth(a[0].n) + cel_cost_tenth(a[1].n);
}

/* ---- conversions ---- */

static struct cel_value range_error(struct cel_eval_ctx *ctx, const char *what)
{
    return cel_ctx_error(ctx, CEL_ERR_RANGE, "range error converting to %s", what);
}

/* Copies a string value into a NUL-terminated buffer for strto*; false when too long. */
static bool cstr(struct cel_value v, char *buf, size_t size)
{
    if (v.n >= size || memchr(v.s, '\0', v.n))
        return false;
    if (v.n)
        memcpy(buf, v.s, v.n);
    buf[v.n] = '\0';
    return true;
}

static struct cel_value int_from_string(struct cel_eval_ctx *ctx, struct cel_value v)
{
    char buf[64], *end;
    long long r;

    if (!cstr(v, buf, sizeof(buf)) || v.n == 0 ||
        !(buf[0] == '-' || buf[0] == '+' || (buf[0] >= '0' && buf[0] <= '9')))
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "invalid int literal");
    errno = 0;
    r = strtoll(buf, &end, 10);
    if (*end != '\0')
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "invalid int literal");
    if (errno == ERANGE)
        return range_error(ctx, "int");
    return cel_int(r);
}

static struct cel_value uint_from_string(struct cel_eval_ctx *ctx, struct cel_value v)
{
    char buf[64], *end;
    unsigned long long r;

    if (!cstr(v, buf, sizeof(buf)) || v.n == 0 ||
        !(buf[0] == '+' || (buf[0] >= '0' && buf[0] <= '9')))
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "invalid uint literal");
    errno = 0;
    r = strtoull(buf, &end, 10);
    if (*end != '\0')
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "invalid uint literal");
    if (errno == ERANGE)
        return range_error(ctx, "uint");
    return cel_uint(r);
}

static struct cel_value double_from_string(struct cel_eval_ctx *ctx, struct cel_value v)
{
    char buf[512], *end;
    double r;

    if (!cstr(v, buf, sizeof(buf)) || v.n == 0 || buf[0] == ' ' || buf[0] == '\t' || buf[0] == '\n')
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "invalid double literal");
    errno = 0;
    r = strtod(buf, &end);
    if (*end != '\0')
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "invalid double literal");
    /* Go's ParseFloat returns ±Inf with a range error; cel-go keeps the infinity */
    return cel_double(r);
}

static struct cel_value fn_int(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)n;
    switch (a[0].kind) {
    case CEL_INT:
        return a[0];
    case CEL_UINT:
        if (a[0].u > INT64_MAX)
            return range_error(ctx, "int");
        return cel_int((int64_t)a[0].u);
    case CEL_DOUBLE:
        /* the open interval: both ends round to values outside int64 */
        if (!(a[0].d > -9223372036854775808.0 && a[0].d < 9223372036854775808.0))
            return range_error(ctx, "int");
        return cel_int((int64_t)a[0].d);
    case CEL_STRING:
        return int_from_string(ctx, a[0]);
    case CEL_TIMESTAMP:
        return cel_int(a[0].i);
    default:
        return cel_ctx_no_overload(ctx, "int", a, 1);
    }
}

static struct cel_value fn_uint(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)n;
    switch (a[0].kind) {
    case CEL_UINT:
        return a[0];
    case CEL_INT:
        if (a[0].i < 0)
            return range_error(ctx, "uint");
        return cel_uint((uint64_t)a[0].i);
    case CEL_DOUBLE:
        if (!(a[0].d > -1.0 && a[0].d < 18446744073709551616.0))
            return range_error(ctx, "uint");
        return cel_uint((uint64_t)a[0].d);
    case CEL_STRING:
        return uint_from_string(ctx, a[0]);
    default:
        return cel_ctx_no_overload(ctx, "uint", a, 1);
    }
}

static struct cel_value fn_double(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)n;
    switch (a[0].kind) {
    case CEL_DOUBLE:
        return a[0];
    case CEL_INT:
        return cel_double((double)a[0].i);
    case CEL_UINT:
        return cel_double((double)a[0].u);
    case CEL_STRING:
        return double_from_string(ctx, a[0]);
    default:
        return cel_ctx_no_overload(ctx, "double", a, 1);
    }
}

/* Whether s[0..n) is valid UTF-8 (no surrogates, no overlongs). */
static bool utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        uint32_t cp;

        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xe0) == 0xc0)
            len = 2, cp = c & 0x1f;
        else if ((c & 0xf0) == 0xe0)
            len = 3, cp = c & 0x0f;
        else if ((c & 0xf8) == 0xf0)
            len = 4, cp = c & 0x07;
        else
            return false;
        if (i + len > n)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

/*
 * Go's %g (what cel-go's string(double) uses): the shortest digits that round-trip, in exponent
 * form when the decimal exponent is < -4 or >= 6 (strconv's rule for shortest output), else plain.
 */
static int format_go_double(struct strbuf *out, double d)
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
    if (exp < -4 || exp >= 6)
        return strbuf_addstr(out, buf); /* both write at least two exponent digits */
    snprintf(buf, sizeof(buf), "%.*f", prec - exp > 0 ? (int)(prec - exp) : 0, d);
    return strbuf_addstr(out, buf);
}

static struct cel_value sb_value(struct cel_eval_ctx *ctx, struct strbuf *sb, int err)
{
    struct cel_value v;

    if (err < 0) {
        strbuf_release(sb);
        return cel_ctx_error(ctx, CEL_ERR_MEMORY, "out of memory");
    }
    v = cel_ctx_string(ctx, strbuf_str(sb), sb->len);
    strbuf_release(sb);
    return v;
}

struct cel_value cel_std_to_string(struct cel_eval_ctx *ctx, struct cel_value v)
{
    struct strbuf sb = STRBUF_INIT;

    switch (v.kind) {
    case CEL_STRING:
        return v;
    case CEL_INT:
        return sb_value(ctx, &sb, strbuf_addf(&sb, "%" PRId64, v.i));
    case CEL_UINT:
        return sb_value(ctx, &sb, strbuf_addf(&sb, "%" PRIu64, v.u));
    case CEL_DOUBLE:
        return sb_value(ctx, &sb, format_go_double(&sb, v.d));
    case CEL_BOOL:
        return cel_string(v.b ? "true" : "false", v.b ? 4 : 5);
    case CEL_BYTES:
        if (!utf8_valid((const unsigned char *)v.s, v.n))
            return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "invalid UTF-8 in bytes");
        return cel_string(v.s, v.n);
    case CEL_TIMESTAMP:
        return sb_value(ctx, &sb, cel_timestamp_format(&sb, v.i, (int32_t)v.n));
    case CEL_DURATION:
        return sb_value(ctx, &sb, cel_duration_format(&sb, v.i, (int32_t)v.n));
    default:
        return cel_ctx_no_overload(ctx, "string", &v, 1);
    }
}

static struct cel_value fn_string(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)n;
    return cel_std_to_string(ctx, a[0]);
}

static struct cel_value fn_bytes(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)n;
    if (a[0].kind == CEL_BYTES)
        return a[0];
    if (a[0].kind == CEL_STRING)
        return cel_bytes(a[0].s, a[0].n);
    return cel_ctx_no_overload(ctx, "bytes", a, 1);
}

static bool str_in(struct cel_value v, const char *const *set)
{
    for (; *set; set++)
        if (strlen(*set) == v.n && memcmp(*set, v.s, v.n) == 0)
            return true;
    return false;
}

static struct cel_value fn_bool(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    /* Go's strconv.ParseBool */
    static const char *const TRUE_S[] = {"1", "t", "T", "TRUE", "true", "True", NULL};
    static const char *const FALSE_S[] = {"0", "f", "F", "FALSE", "false", "False", NULL};

    (void)n;
    if (a[0].kind == CEL_BOOL)
        return a[0];
    if (a[0].kind != CEL_STRING)
        return cel_ctx_no_overload(ctx, "bool", a, 1);
    if (str_in(a[0], TRUE_S))
        return cel_bool(true);
    if (str_in(a[0], FALSE_S))
        return cel_bool(false);
    return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT,
                         "type conversion error from 'string' to "
                         "'bool'");
}

static struct cel_value fn_dyn(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)ctx, (void)n;
    return a[0];
}

static struct cel_value fn_type(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    (void)ctx, (void)n;
    return cel_type_value(cel_value_type(a[0]));
}

/* Operators: the evaluator runs them itself; these entries carry their types for the checker. */
static struct cel_value fn_operator(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    return cel_ctx_no_overload(ctx, "operator", a, n);
}

#define OP(name_, sig_)                                                                            \
    {                                                                                              \
        .name = name_, .sig = sig_, .fn = fn_operator                                              \
    }
#define ARITH(name_)                                                                               \
    OP(name_, "(int, int) -> int"), OP(name_, "(uint, uint) -> uint"),                             \
        OP(name_, "(double, double) -> double")
#define ORDER(name_)                                                                               \
    OP(name_, "(int, int) -> bool"), OP(name_, "(uint, uint) -> bool"),                            \
        OP(name_, "(double, double) -> bool"), OP(name_, "(string, string) -> bool"),              \
        OP(name_, "(bytes, bytes) -> bool"), OP(name_, "(bool, bool) -> bool"),                    \
        OP(name_, "(google.protobuf.Timestamp, google.protobuf.Timestamp) -> bool"),               \
        OP(name_, "(google.protobuf.Duration, google.protobuf.Duration) -> bool"),                 \
        OP(name_, "(int, uint) -> bool"), OP(name_, "(int, double) -> bool"),                      \
        OP(name_, "(uint, int) -> bool"), OP(name_, "(uint, double) -> bool"),                     \
        OP(name_, "(double, int) -> bool"), OP(name_, "(double, uint) -> bool")
#define TS "google.protobuf.Timestamp"
#define DUR "google.protobuf.Duration"

static const struct cel_overload OVERLOADS[] = {
    ARITH("_+_"),
    OP("_+_", "(string, string) -> string"),
    OP("_+_", "(bytes, bytes) -> bytes"),
    OP("_+_", "(list(A), list(A)) -> list(A)"),
    OP("_+_", "(" TS ", " DUR ") -> " TS),
    OP("_+_", "(" DUR ", " TS ") -> " TS),
    OP("_+_", "(" DUR ", " DUR ") -> " DUR),
    ARITH("_-_"),
    OP("_-_", "(" TS ", " TS ") -> " DUR),
    OP("_-_", "(" TS ", " DUR ") -> " TS),
    OP("_-_", "(" DUR ", " DUR ") -> " DUR),
    ARITH("_*_"),
    ARITH("_/_"),
    OP("_%_", "(int, int) -> int"),
    OP("_%_", "(uint, uint) -> uint"),
    OP("-_", "(int) -> int"),
    OP("-_", "(double) -> double"),
    OP("!_", "(bool) -> bool"),
    OP("_&&_", "(bool, bool) -> bool"),
    OP("_||_", "(bool, bool) -> bool"),
    OP("_?_:_", "(bool, A, A) -> A"),
    OP("_==_", "(A, A) -> bool"),
    OP("_!=_", "(A, A) -> bool"),
    ORDER("_<_"),
    ORDER("_<=_"),
    ORDER("_>_"),
    ORDER("_>=_"),
    OP("@in", "(A, list(A)) -> bool"),
    OP("@in", "(A, map(A, B)) -> bool"),
    OP("_[_]", "(list(A), int) -> A"),
    OP("_[_]", "(map(A, B), A) -> B"),
    OP("@not_strictly_false", "(bool) -> bool"),

    {.name = "size", .sig = "(string) -> int", .fn = fn_size},
    {.name = "size", .sig = "(bytes) -> int", .fn = fn_size},
    {.name = "size", .sig = "(list(A)) -> int", .fn = fn_size},
    {.name = "size", .sig = "(map(A, B)) -> int", .fn = fn_size},
    {.name = "size", .receiver = true, .sig = "(string) -> int", .fn = fn_size},
    {.name = "size", .receiver = true, .sig = "(bytes) -> int", .fn = fn_size},
    {.name = "size", .receiver = true, .sig = "(list(A)) -> int", .fn = fn_size},
    {.name = "size", .receiver = true, .sig = "(map(A, B)) -> int", .fn = fn_size},
    {.name = "contains",
     .receiver = true,
     .sig = "(string, string) -> bool",
     .fn = fn_contains,
     .cost_fn = cost_scan},
    {.name = "startsWith",
     .receiver = true,
     .sig = "(string, string) -> bool",
     .fn = fn_starts,
     .cost_fn = cost_scan},
    {.name = "endsWith",
     .receiver = true,
     .sig = "(string, string) -> bool",
     .fn = fn_ends,
     .cost_fn = cost_scan},

    {.name = "matches",
     .receiver = true,
     .sig = "(string, string) -> bool",
     .fn = cel_regex_matches,
     .cost_fn = cost_scan},
    {.name = "matches",
     .sig = "(string, string) -> bool",
     .fn = cel_regex_matches,
     .cost_fn = cost_scan},

    {.name = "int", .sig = "(int) -> int", .fn = fn_int},
    {.name = "int", .sig = "(uint) -> int", .fn = fn_int},
    {.name = "int", .sig = "(double) -> int", .fn = fn_int},
    {.name = "int", .sig = "(string) -> int", .fn = fn_int},
    {.name = "int", .sig = "(" TS ") -> int", .fn = fn_int},
    {.name = "uint", .sig = "(uint) -> uint", .fn = fn_uint},
    {.name = "uint", .sig = "(int) -> uint", .fn = fn_uint},
    {.name = "uint", .sig = "(double) -> uint", .fn = fn_uint},
    {.name = "uint", .sig = "(string) -> uint", .fn = fn_uint},
    {.name = "double", .sig = "(double) -> double", .fn = fn_double},
    {.name = "double", .sig = "(int) -> double", .fn = fn_double},
    {.name = "double", .sig = "(uint) -> double", .fn = fn_double},
    {.name = "double", .sig = "(string) -> double", .fn = fn_double},
    {.name = "string", .sig = "(string) -> string", .fn = fn_string},
    {.name = "string", .sig = "(int) -> string", .fn = fn_string},
    {.name = "string", .sig = "(uint) -> string", .fn = fn_string},
    {.name = "string", .sig = "(double) -> string", .fn = fn_string},
    {.name = "string", .sig = "(bool) -> string", .fn = fn_string},
    {.name = "string", .sig = "(bytes) -> string", .fn = fn_string},
    {.name = "string", .sig = "(" TS ") -> string", .fn = fn_string},
    {.name = "string", .sig = "(" DUR ") -> string", .fn = fn_string},
    {.name = "bytes", .sig = "(bytes) -> bytes", .fn = fn_bytes},
    {.name = "bytes", .sig = "(string) -> bytes", .fn = fn_bytes},
    {.name = "bool", .sig = "(bool) -> bool", .fn = fn_bool},
    {.name = "bool", .sig = "(string) -> bool", .fn = fn_bool},
    {.name = "dyn", .sig = "(A) -> dyn", .fn = fn_dyn},
    {.name = "type", .sig = "(A) -> type(A)", .fn = fn_type},
};

const struct cel_library cel_lib_std = {"std", OVERLOADS, ARRAY_SIZE(OVERLOADS)};
