/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The strings extension as Kubernetes enables it (cel-go ext.Strings version 2): charAt, indexOf,
 * lastIndexOf, lowerAscii, upperAscii, replace, split, substring, trim, join, format and
 * strings.quote. Indexes and lengths count code points, never bytes; the code point arithmetic and
 * the renderings live in cel-lib-text.c, this file adapts them to CEL values. Results that are a
 * piece of the receiver (substring, charAt, trim, split) point into it without a copy, as the
 * value ownership rule allows; new text is built in a strbuf and copied into the evaluation arena.
 * string reverse() is version 3 and deliberately absent.
 */
#include <errno.h>
#include <string.h>

#include "cel-ast.h"
#include "cel-internal.h" /* cel_std_to_string: %s prints what string() prints */
#include "cel-lib-ext.h"

/* Text a function builds is capped like every buffer fed by input. */
#define CEL_STR_RESULT_MAX ((size_t)16 << 20)

static struct cel_value oom(struct cel_eval_ctx *ctx)
{
    return cel_ctx_error(ctx, CEL_ERR_MEMORY, "out of memory");
}

/* Moves a built string into the evaluation arena. */
static struct cel_value take_string(struct cel_eval_ctx *ctx, struct strbuf *sb, int r)
{
    if (r == -ENOBUFS)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "string result too long");
    if (r < 0)
        return oom(ctx);
    return cel_ctx_string(ctx, strbuf_str(sb), sb->len);
}

static uint64_t cost_scan(const struct cel_value *args, size_t n, struct cel_value result)
{
    return ((uint64_t)args[0].n + 9) / 10;
}

static struct cel_value str_char_at(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                    size_t n)
{
    const char *s = args[0].s;
    size_t off, len = args[0].n;
    uint32_t cp;

    if (args[1].i < 0 || (off = cel_utf8_offset(s, len, (size_t)args[1].i)) == SIZE_MAX)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "index out of range: %lld", (long long)args[1].i);
    return cel_string(s + off, cel_utf8_next(s + off, len - off, &cp));
}

/* The code point offset argument of indexOf/lastIndexOf: negative is an error; past the end the
 * search finds nothing (cel-go >= 0.23 returns -1 there rather than failing). */
static bool offset_arg(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n,
                       size_t count, size_t dflt, size_t *ret, struct cel_value *ret_err)
{
    if (n < 3) {
        *ret = dflt;
        return true;
    }
    if (args[2].i < 0) {
        *ret_err =
            cel_ctx_error(ctx, CEL_ERR_RANGE, "index out of range: %lld", (long long)args[2].i);
        return false;
    }
    *ret = (uint64_t)args[2].i > count ? SIZE_MAX : (size_t)args[2].i;
    return true;
}

static struct cel_value str_index_of(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                     size_t n)
{
    size_t count = cel_utf8_count(args[0].s, args[0].n), from;
    struct cel_value err;

    if (!offset_arg(ctx, args, n, count, 0, &from, &err))
        return err;
    if (from == SIZE_MAX)
        return cel_int(-1);
    return cel_int(cel_str_index_of(args[0].s, args[0].n, args[1].s, args[1].n, from));
}

static struct cel_value str_last_index_of(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                          size_t n)
{
    size_t count = cel_utf8_count(args[0].s, args[0].n), from;
    struct cel_value err;

    if (!offset_arg(ctx, args, n, count, count, &from, &err))
        return err;
    if (from == SIZE_MAX)
        return cel_int(-1);
    return cel_int(cel_str_last_index_of(args[0].s, args[0].n, args[1].s, args[1].n, from));
}

static struct cel_value ascii_case(struct cel_eval_ctx *ctx, struct cel_value s, bool upper)
{
    char *out = cel_region_alloc(cel_ctx_region(ctx), s.n + 1);

    if (!out)
        return oom(ctx);
    for (size_t i = 0; i < s.n; i++) {
        char c = s.s[i];

        if (upper && c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        else if (!upper && c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        out[i] = c;
    }
    out[s.n] = '\0';
    return cel_string(out, s.n);
}

static struct cel_value str_lower(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return ascii_case(ctx, args[0], false);
}

static struct cel_value str_upper(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return ascii_case(ctx, args[0], true);
}

static struct cel_value str_replace(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                    size_t n)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    int r;

    strbuf_init(&sb, CEL_STR_RESULT_MAX);
    r = cel_str_replace(&sb, args[0].s, args[0].n, args[1].s, args[1].n, args[2].s, args[2].n,
                        n > 3 ? args[3].i : -1);
    return take_string(ctx, &sb, r);
}

/* Appends one piece to a split result being built in the arena (doubling, capped). */
static int push_piece(struct cel_eval_ctx *ctx, struct cel_value **items, size_t *count,
                      size_t *alloc, struct cel_value v)
{
    if (*count == *alloc) {
        size_t want = *alloc ? *alloc * 2 : 8;
        struct cel_value *grown;

        if (want > CEL_STR_RESULT_MAX / sizeof(*grown))
            return -ENOBUFS;
        grown = cel_region_alloc(cel_ctx_region(ctx), want * sizeof(*grown));
        if (!grown)
            return -ENOMEM;
        if (*count)
            memcpy(grown, *items, *count * sizeof(*grown));
        *items = grown;
        *alloc = want;
    }
    (*items)[(*count)++] = v;
    return 0;
}

/* Go's strings.SplitN: limit 0 gives no pieces, < 0 all of them, > 0 at most limit (the last one
 * holds the rest). An empty separator splits between code points. */
static struct cel_value str_split(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    const char *s = args[0].s, *sep = args[1].s;
    size_t len = args[0].n, seplen = args[1].n, off = 0, count = 0, alloc = 0;
    int64_t limit = n > 2 ? args[2].i : -1;
    struct cel_value *items = NULL;
    int r = 0;

    while (limit != 0 && r >= 0) {
        size_t end;
        uint32_t cp;

        if (limit > 0 && (int64_t)count == limit - 1) {
            end = len; /* the last piece takes the rest */
        } else if (seplen == 0) {
            if (off >= len)
                break;
            end = off + cel_utf8_next(s + off, len - off, &cp);
        } else {
            const char *hit = memmem(s + off, len - off, sep, seplen);

            end = hit ? (size_t)(hit - s) : len;
        }
        r = push_piece(ctx, &items, &count, &alloc, cel_string(s + off, end - off));
        if (end >= len)
            break;
        off = end + seplen;
    }
    if (r < 0)
        return r == -ENOMEM ? oom(ctx) : cel_ctx_error(ctx, CEL_ERR_RANGE, "split: too many parts");
    const struct cel_vlist *l = cel_vlist_new(cel_ctx_region(ctx), items, count);

    return l ? cel_list_value(l) : oom(ctx);
}

static struct cel_value str_substring(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                      size_t n)
{
    const char *s = args[0].s;
    size_t len = args[0].n, count = cel_utf8_count(s, len), b, e;
    int64_t start = args[1].i, end = n > 2 ? args[2].i : (int64_t)count;

    if (start < 0 || (uint64_t)start > count)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "index out of range: %lld", (long long)start);
    if (end < 0 || (uint64_t)end > count)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "index out of range: %lld", (long long)end);
    if (end < start)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "invalid substring range. start: %lld, end: %lld",
                             (long long)start, (long long)end);
    b = cel_utf8_offset(s, len, (size_t)start);
    e = b + cel_utf8_offset(s + b, len - b, (size_t)(end - start));
    return cel_string(s + b, e - b);
}

static struct cel_value str_trim(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    const char *s = args[0].s;
    size_t b = 0, e = args[0].n;
    uint32_t cp;

    while (b < e) {
        size_t k = cel_utf8_next(s + b, e - b, &cp);

        if (!cel_is_unicode_space(cp))
            break;
        b += k;
    }
    while (e > b) {
        size_t start = e - 1;

        while (start > b && ((unsigned char)s[start] & 0xc0) == 0x80)
            start--;
        cel_utf8_next(s + start, e - start, &cp);
        if (!cel_is_unicode_space(cp))
            break;
        e = start;
    }
    return cel_string(s + b, e - b);
}

static struct cel_value str_join(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    const struct cel_vlist *l = args[0].list;
    int r = 0;

    strbuf_init(&sb, CEL_STR_RESULT_MAX);
    for (size_t i = 0; r >= 0 && i < l->n; i++) {
        if (l->items[i].kind != CEL_STRING)
            return cel_ctx_no_overload(ctx, "join", args, n);
        if (i > 0 && n > 1)
            r = strbuf_add(&sb, args[1].s, args[1].n);
        if (r >= 0)
            r = strbuf_add(&sb, l->items[i].s, l->items[i].n);
    }
    return take_string(ctx, &sb, r);
}

static struct cel_value str_quote(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

    strbuf_init(&sb, CEL_STR_RESULT_MAX);
    return take_string(ctx, &sb, cel_quote_string(&sb, args[0].s, args[0].n));
}

/* ---- format() ---- */

/* %s: what string() gives for scalars; lists and maps as CEL literals (strings quoted inside). */
static int fmt_string(struct cel_eval_ctx *ctx, struct strbuf *sb, struct cel_value v)
{
    struct cel_value s;

    switch (v.kind) {
    case CEL_NULL:
        return strbuf_addstr(sb, "null");
    case CEL_DOUBLE:
        return cel_fmt_double_shortest(sb, v.d);
    case CEL_BYTES:
        return strbuf_add(sb, v.s, v.n);
    case CEL_TYPE:
        return strbuf_addstr(sb, v.type->name);
    case CEL_LIST:
    case CEL_MAP:
    case CEL_OBJECT:
    case CEL_OPTIONAL:
        return cel_value_print(sb, v);
    default:
        s = cel_std_to_string(ctx, v);
        if (s.kind != CEL_STRING)
            return -EINVAL;
        return strbuf_add(sb, s.s, s.n);
    }
}

/* One clause applied to one argument; -EINVAL when the argument's kind does not fit the verb. */
static int fmt_clause(struct cel_eval_ctx *ctx, struct strbuf *sb, struct cel_fmt_clause c,
                      struct cel_value v)
{
    bool up = c.verb == CEL_FMT_XU;
    int base = c.verb == CEL_FMT_B ? 2 : c.verb == CEL_FMT_O ? 8 : c.verb == CEL_FMT_D ? 10 : 16;

    switch (c.verb) {
    case CEL_FMT_S:
        return fmt_string(ctx, sb, v);
    case CEL_FMT_F:
    case CEL_FMT_E:
        if (v.kind != CEL_DOUBLE)
            return -EINVAL;
        return c.verb == CEL_FMT_F ? cel_fmt_fixed(sb, v.d, c.precision)
                                   : cel_fmt_sci(sb, v.d, c.precision);
    default:
        break;
    }
    if (v.kind == CEL_INT)
        return cel_fmt_int(sb, v.i, base, up);
    if (v.kind == CEL_UINT)
        return cel_fmt_uint(sb, v.u, base, up);
    if (v.kind == CEL_BOOL && c.verb == CEL_FMT_B)
        return cel_fmt_uint(sb, v.b ? 1 : 0, 2, false);
    if ((v.kind == CEL_STRING || v.kind == CEL_BYTES) && base == 16)
        return cel_fmt_hex_bytes(sb, v.s, v.n, up);
    return -EINVAL;
}

static struct cel_value str_format(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    const struct cel_vlist *l = args[1].list;
    struct cel_fmt_clause c;
    size_t pos = 0, argi = 0;
    struct diag d;
    int r;

    diag_init(&d);
    strbuf_init(&sb, CEL_STR_RESULT_MAX);
    while ((r = cel_fmt_next(args[0].s, args[0].n, &pos, &sb, &c, &d)) > 0) {
        if (argi >= l->n)
            return cel_ctx_error(ctx, CEL_ERR_RANGE, "index %zu out of range", argi);
        r = fmt_clause(ctx, &sb, c, l->items[argi]);
        if (r == -EINVAL)
            return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT,
                                 "error during formatting: %%%c does not accept %s", (char)c.verb,
                                 cel_value_type_name(l->items[argi]));
        if (r < 0)
            break;
        argi++;
    }
    if (r == -EINVAL)
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "%s", d.msg);
    return take_string(ctx, &sb, r);
}

/* ---- compile-time validation of literal format() calls ---- */

/* The static kind of a format() argument when the tree alone decides it: literals, conversion
 * calls and aggregates; CEL_KIND_COUNT when it is only known at run time (variables, dyn()). */
static enum cel_kind static_kind(const struct cel_node *e)
{
    static const struct {
        const char *name;
        enum cel_kind kind;
    } convs[] = {
        {"int", CEL_INT},       {"uint", CEL_UINT},         {"double", CEL_DOUBLE},
        {"string", CEL_STRING}, {"bytes", CEL_BYTES},       {"bool", CEL_BOOL},
        {"type", CEL_TYPE},     {"duration", CEL_DURATION}, {"timestamp", CEL_TIMESTAMP},
    };
    static const enum cel_kind consts[] = {
        [CEL_CONST_NULL] = CEL_NULL,     [CEL_CONST_BOOL] = CEL_BOOL,
        [CEL_CONST_INT] = CEL_INT,       [CEL_CONST_UINT] = CEL_UINT,
        [CEL_CONST_DOUBLE] = CEL_DOUBLE, [CEL_CONST_STRING] = CEL_STRING,
        [CEL_CONST_BYTES] = CEL_BYTES,
    };

    switch (e->kind) {
    case CEL_NODE_CONST:
        return consts[e->u.lit.kind];
    case CEL_NODE_LIST:
        return CEL_LIST;
    case CEL_NODE_MAP:
        return CEL_MAP;
    case CEL_NODE_CALL:
        if (e->u.call.op == CEL_OP_NEG && e->u.call.nargs == 1)
            return static_kind(e->u.call.args[0]);
        if (e->u.call.op != CEL_OP_NONE || e->u.call.target || e->u.call.nargs != 1)
            return CEL_KIND_COUNT;
        for (size_t i = 0; i < ARRAY_SIZE(convs); i++)
            if (strcmp(e->u.call.name, convs[i].name) == 0)
                return convs[i].kind;
        return CEL_KIND_COUNT;
    default:
        return CEL_KIND_COUNT;
    }
}

/* Whether a verb accepts an argument of static kind k (the run-time rules of fmt_clause). */
static bool verb_accepts(enum cel_fmt_verb v, enum cel_kind k)
{
    switch (v) {
    case CEL_FMT_S:
        return true;
    case CEL_FMT_F:
    case CEL_FMT_E:
        return k == CEL_DOUBLE;
    case CEL_FMT_D:
    case CEL_FMT_O:
        return k == CEL_INT || k == CEL_UINT;
    case CEL_FMT_B:
        return k == CEL_INT || k == CEL_UINT || k == CEL_BOOL;
    default: /* x, X */
        return k == CEL_INT || k == CEL_UINT || k == CEL_STRING || k == CEL_BYTES;
    }
}

int cel_format_check(const struct cel_node *call, struct diag *d)
{
    const struct cel_node *fmt = call->u.call.target, *list;
    struct cel_fmt_clause c;
    size_t pos = 0, argi = 0;
    int r;

    if (call->kind != CEL_NODE_CALL || !fmt || fmt->kind != CEL_NODE_CONST ||
        fmt->u.lit.kind != CEL_CONST_STRING || call->u.call.nargs != 1)
        return 0;
    list = call->u.call.args[0];
    while ((r = cel_fmt_next(fmt->u.lit.v.s.ptr, fmt->u.lit.v.s.len, &pos, NULL, &c, d)) > 0) {
        if (list->kind != CEL_NODE_LIST)
            continue; /* the clauses are still checked */
        if (argi >= list->u.list.n)
            return diag_fail(d, -EINVAL, "index %zu out of range", argi);
        enum cel_kind k = static_kind(list->u.list.elems[argi]);

        if (k != CEL_KIND_COUNT && !verb_accepts(c.verb, k))
            return diag_fail(d, -EINVAL, "error during formatting: %%%c does not accept %s",
                             (char)c.verb, k == CEL_NULL ? "null" : "this argument type");
        argi++;
    }
    return r;
}

static const struct cel_overload OVERLOADS[] = {
    {.name = "charAt",
     .receiver = true,
     .sig = "(string, int) -> string",
     .fn = str_char_at,
     .cost_fn = cost_scan},
    {.name = "indexOf",
     .receiver = true,
     .sig = "(string, string) -> int",
     .fn = str_index_of,
     .cost_fn = cost_scan},
    {.name = "indexOf",
     .receiver = true,
     .sig = "(string, string, int) -> int",
     .fn = str_index_of,
     .cost_fn = cost_scan},
    {.name = "lastIndexOf",
     .receiver = true,
     .sig = "(string, string) -> int",
     .fn = str_last_index_of,
     .cost_fn = cost_scan},
    {.name = "lastIndexOf",
     .receiver = true,
     .sig = "(string, string, int) -> int",
     .fn = str_last_index_of,
     .cost_fn = cost_scan},
    {.name = "lowerAscii",
     .receiver = true,
     .sig = "(string) -> string",
     .fn = str_lower,
     .cost_fn = cost_scan},
    {.name = "upperAscii",
     .receiver = true,
     .sig = "(string) -> string",
     .fn = str_upper,
     .cost_fn = cost_scan},
    {.name = "replace",
     .receiver = true,
     .sig = "(string, string, string) -> string",
     .fn = str_replace,
     .cost_fn = cost_scan},
    {.name = "replace",
     .receiver = true,
     .sig = "(string, string, string, int) -> string",
     .fn = str_replace,
     .cost_fn = cost_scan},
    {.name = "split",
     .receiver = true,
     .sig = "(string, string) -> list(string)",
     .fn = str_split,
     .cost_fn = cost_scan},
    {.name = "split",
     .receiver = true,
     .sig = "(string, string, int) -> list(string)",
     .fn = str_split,
     .cost_fn = cost_scan},
    {.name = "substring",
     .receiver = true,
     .sig = "(string, int) -> string",
     .fn = str_substring,
     .cost_fn = cost_scan},
    {.name = "substring",
     .receiver = true,
     .sig = "(string, int, int) -> string",
     .fn = str_substring,
     .cost_fn = cost_scan},
    {.name = "trim",
     .receiver = true,
     .sig = "(string) -> string",
     .fn = str_trim,
     .cost_fn = cost_scan},
    {.name = "join", .receiver = true, .sig = "(list(string)) -> string", .fn = str_join},
    {.name = "join", .receiver = true, .sig = "(list(string), string) -> string", .fn = str_join},
    {.name = "format",
     .receiver = true,
     .sig = "(string, list(dyn)) -> string",
     .fn = str_format,
     .cost_fn = cost_scan},
    {.name = "strings.quote",
     .receiver = false,
     .sig = "(string) -> string",
     .fn = str_quote,
     .cost_fn = cost_scan},
};

const struct cel_library cel_lib_strings = {"strings", OVERLOADS, ARRAY_SIZE(OVERLOADS)};
