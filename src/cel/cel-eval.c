/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The evaluator: a recursive walk of a compiled program's tree with CEL's semantics. Errors are
 * values that flow up until && / || / ?: absorb them; limits (cost, depth, memory) abort the whole
 * evaluation instead. Identifiers, calls and literals were resolved at compile time into the
 * program's side table, so the walk looks nothing up by name; temporaries go to the evaluator's
 * region, which is reset (not freed) at the start of each evaluation.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cel-internal.h"

static const struct cel_error COST_ERROR = {CEL_ERR_COST_LIMIT,
                                            "operation cancelled: actual cost limit exceeded"};
static const struct cel_error DEPTH_ERROR = {CEL_ERR_DEPTH_LIMIT, "evaluation nested too deeply"};
static const struct cel_error OOM_ERROR = {CEL_ERR_MEMORY, "evaluation ran out of memory"};

/* A flag on an accumulator value: its storage belongs to the running comprehension, so
 * @list_append / @map_insert may grow it in place. */
#define CEL_FLAG_ACCU 1u

/* ---- context helpers (cel-lib.h) ---- */

struct cel_region *cel_ctx_region(struct cel_eval_ctx *ctx)
{
    return &ctx->region;
}

struct cel_value cel_ctx_error(struct cel_eval_ctx *ctx, enum cel_errcode code, const char *fmt,
                               ...)
{
    char buf[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return cel_error_new(&ctx->region, code, "%s", buf);
}

struct cel_value cel_ctx_no_overload(struct cel_eval_ctx *ctx, const char *name,
                                     const struct cel_value *args, size_t n)
{
    char buf[256];
    size_t off = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n && off < sizeof(buf); i++) {
        int w = snprintf(buf + off, sizeof(buf) - off, "%s%s", i ? ", " : "",
                         cel_value_type_name(args[i]));
        if (w < 0)
            break;
        off += (size_t)w;
    }
    return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD,
                         "no matching overload for '%s' applied to (%s)", name, buf);
}

struct cel_value cel_ctx_abort(struct cel_eval_ctx *ctx, struct cel_value err)
{
    if (!ctx->aborted) {
        ctx->aborted = true;
        ctx->abort_error = err;
    }
    return ctx->abort_error;
}

bool cel_ctx_charge(struct cel_eval_ctx *ctx, uint64_t cost)
{
    if (cost > ctx->cost_limit - ctx->cost || ctx->cost + cost > ctx->cost_limit) {
        ctx->cost = ctx->cost_limit;
        cel_ctx_abort(ctx, cel_error_static(&COST_ERROR));
        return false;
    }
    ctx->cost += cost;
    return true;
}

void *cel_ctx_site_get(struct cel_eval_ctx *ctx)
{
    if (!ctx->call || !ctx->prog)
        return NULL;
    return __atomic_load_n(&ctx->prog->sites[ctx->call->id].data, __ATOMIC_ACQUIRE);
}

/*
 * A site is filled once and then only read, so evaluations of one program in several threads can
 * share it: the first data stored wins (compare-and-swap); data that finds the slot taken belongs
 * to this evaluation instead and is freed when its region is reset, so the caller may still use it
 * until the evaluation ends.
 */
int cel_ctx_site_set(struct cel_eval_ctx *ctx, void *data, void (*free_fn)(void *))
{
    struct cel_site *s;
    void *expected = NULL;

    if (ctx->call && ctx->prog) {
        /* the side table is cache state, not part of the program's meaning */
        s = &((struct cel_program *)ctx->prog)->sites[ctx->call->id];
        if (__atomic_compare_exchange_n(&s->data, &expected, data, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&s->free_fn, free_fn, __ATOMIC_RELEASE);
            return 0;
        }
    }
    if (!free_fn)
        return 0;
    return cel_region_defer(&ctx->region, free_fn, data);
}

struct cel_value cel_ctx_string(struct cel_eval_ctx *ctx, const char *s, size_t n)
{
    char *p;

    if (n > CEL_STRING_MAX)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "string too long");
    p = cel_region_strndup(&ctx->region, s, n);
    if (!p)
        return cel_ctx_abort(ctx, cel_error_static(&OOM_ERROR));
    return cel_string(p, n);
}

static struct cel_value oom(struct cel_eval_ctx *ctx)
{
    return cel_ctx_abort(ctx, cel_error_static(&OOM_ERROR));
}

/* ---- arithmetic ---- */

static struct cel_value int_arith(struct cel_eval_ctx *ctx, enum cel_op op, int64_t a, int64_t b)
{
    int64_t r;

    switch (op) {
    case CEL_OP_ADD:
        if (__builtin_add_overflow(a, b, &r))
            break;
        return cel_int(r);
    case CEL_OP_SUB:
        if (__builtin_sub_overflow(a, b, &r))
            break;
        return cel_int(r);
    case CEL_OP_MUL:
        if (__builtin_mul_overflow(a, b, &r))
            break;
        return cel_int(r);
    case CEL_OP_DIV:
        if (b == 0)
            return cel_ctx_error(ctx, CEL_ERR_DIVIDE_BY_ZERO, "division by zero");
        if (a == INT64_MIN && b == -1)
            break;
        return cel_int(a / b);
    case CEL_OP_MOD:
        if (b == 0)
            return cel_ctx_error(ctx, CEL_ERR_MODULUS_BY_ZERO, "modulus by zero");
        if (a == INT64_MIN && b == -1)
            break;
        return cel_int(a % b);
    default:
        return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD, "no such overload");
    }
    return cel_ctx_error(ctx, CEL_ERR_OVERFLOW, "integer overflow");
}

static struct cel_value uint_arith(struct cel_eval_ctx *ctx, enum cel_op op, uint64_t a, uint64_t b)
{
    uint64_t r;

    switch (op) {
    case CEL_OP_ADD:
        if (__builtin_add_overflow(a, b, &r))
            break;
        return cel_uint(r);
    case CEL_OP_SUB:
        if (__builtin_sub_overflow(a, b, &r))
            break;
        return cel_uint(r);
    case CEL_OP_MUL:
        if (__builtin_mul_overflow(a, b, &r))
            break;
        return cel_uint(r);
    case CEL_OP_DIV:
        if (b == 0)
            return cel_ctx_error(ctx, CEL_ERR_DIVIDE_BY_ZERO, "division by zero");
        return cel_uint(a / b);
    case CEL_OP_MOD:
        if (b == 0)
            return cel_ctx_error(ctx, CEL_ERR_MODULUS_BY_ZERO, "modulus by zero");
        return cel_uint(a % b);
    default:
        return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD, "no such overload");
    }
    return cel_ctx_error(ctx, CEL_ERR_OVERFLOW, "unsigned integer overflow");
}

static struct cel_value double_arith(struct cel_eval_ctx *ctx, enum cel_op op, double a, double b)
{
    switch (op) {
    case CEL_OP_ADD:
        return cel_double(a + b);
    case CEL_OP_SUB:
        return cel_double(a - b);
    case CEL_OP_MUL:
        return cel_double(a * b);
    case CEL_OP_DIV:
        return cel_double(a / b);
    default:
        return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD, "no such overload");
    }
}

static struct cel_value concat(struct cel_eval_ctx *ctx, struct cel_value a, struct cel_value b)
{
    size_t n = (size_t)a.n + b.n;
    char *p;

    if (n > CEL_STRING_MAX)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "string too long");
    if (a.n == 0)
        return b;
    if (b.n == 0)
        return a;
    if (!cel_ctx_charge(ctx, cel_cost_tenth(n)))
        return ctx->abort_error;
    p = cel_region_alloc(&ctx->region, n + 1);
    if (!p)
        return oom(ctx);
    memcpy(p, a.s, a.n);
    memcpy(p + a.n, b.s, b.n);
    p[n] = '\0';
    a.s = p;
    a.n = (uint32_t)n;
    return a;
}

static struct cel_value list_concat(struct cel_eval_ctx *ctx, const struct cel_vlist *a,
                                    const struct cel_vlist *b)
{
    struct cel_vlist *l;
    struct cel_value *items;

    if (a->n == 0)
        return cel_list_value(b);
    if (b->n == 0)
        return cel_list_value(a);
    if (!cel_ctx_charge(ctx, cel_cost_tenth(a->n + b->n)))
        return ctx->abort_error;
    l = cel_region_alloc(&ctx->region, sizeof(*l));
    items = cel_region_alloc(&ctx->region, (a->n + b->n) * sizeof(*items));
    if (!l || !items)
        return oom(ctx);
    memcpy(items, a->items, a->n * sizeof(*items));
    memcpy(items + a->n, b->items, b->n * sizeof(*items));
    l->n = a->n + b->n;
    l->items = items;
    return cel_list_value(l);
}

static struct cel_value compare_op(struct cel_eval_ctx *ctx, enum cel_op op, struct cel_value a,
                                   struct cel_value b)
{
    int c;
    int err = cel_value_compare(a, b, &c);

    if (err == -EDOM)
        return cel_bool(false);
    if (err < 0) {
        struct cel_value args[2] = {a, b};

        return cel_ctx_no_overload(ctx, cel_op_name(op), args, 2);
    }
    switch (op) {
    case CEL_OP_LT:
        return cel_bool(c < 0);
    case CEL_OP_LE:
        return cel_bool(c <= 0);
    case CEL_OP_GT:
        return cel_bool(c > 0);
    default:
        return cel_bool(c >= 0);
    }
}

static struct cel_value in_op(struct cel_eval_ctx *ctx, struct cel_value a, struct cel_value b)
{
    struct cel_value v;

    if (b.kind == CEL_LIST) {
        if (!cel_ctx_charge(ctx, cel_cost_tenth(b.list->n)))
            return ctx->abort_error;
        for (size_t i = 0; i < b.list->n; i++)
            if (cel_value_equal(a, b.list->items[i]))
                return cel_bool(true);
        return cel_bool(false);
    }
    if (b.kind == CEL_MAP)
        return cel_bool(cel_vmap_find(b.map, a, &v));
    struct cel_value args[2] = {a, b};
    return cel_ctx_no_overload(ctx, "@in", args, 2);
}

struct cel_value cel_eval_binary(struct cel_eval_ctx *ctx, enum cel_op op, struct cel_value a,
                                 struct cel_value b)
{
    switch (op) {
    case CEL_OP_EQ:
        return cel_bool(cel_value_equal(a, b));
    case CEL_OP_NE:
        return cel_bool(!cel_value_equal(a, b));
    case CEL_OP_LT:
    case CEL_OP_LE:
    case CEL_OP_GT:
    case CEL_OP_GE:
        return compare_op(ctx, op, a, b);
    case CEL_OP_IN:
        return in_op(ctx, a, b);
    default:
        break;
    }
    if (a.kind == b.kind) {
        switch (a.kind) {
        case CEL_INT:
            return int_arith(ctx, op, a.i, b.i);
        case CEL_UINT:
            return uint_arith(ctx, op, a.u, b.u);
        case CEL_DOUBLE:
            if (op != CEL_OP_MOD)
                return double_arith(ctx, op, a.d, b.d);
            break;
        case CEL_STRING:
        case CEL_BYTES:
            if (op == CEL_OP_ADD)
                return concat(ctx, a, b);
            break;
        case CEL_LIST:
            if (op == CEL_OP_ADD)
                return list_concat(ctx, a.list, b.list);
            break;
        default:
            break;
        }
    }
    if ((a.kind == CEL_TIMESTAMP || a.kind == CEL_DURATION) &&
        (b.kind == CEL_TIMESTAMP || b.kind == CEL_DURATION) &&
        (op == CEL_OP_ADD || op == CEL_OP_SUB))
        return cel_time_add(ctx, op, a, b);
    struct cel_value args[2] = {a, b};
    return cel_ctx_no_overload(ctx, cel_op_name(op), args, 2);
}

/* ---- the walk ---- */

static struct cel_value eval(struct cel_eval_ctx *ctx, const struct cel_node *n);

static const struct cel_node_info *info_of(const struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    return &ctx->prog->info[n->id];
}

static struct cel_value eval_var(struct cel_eval_ctx *ctx, int32_t var)
{
    const struct cel_activation *act = ctx->act;

    if (!act || (size_t)var >= act->n || !act->bound[var])
        return cel_ctx_error(ctx, CEL_ERR_GENERIC, "no such attribute: %s",
                             ctx->prog->env->vars[var].name);
    return act->values[var];
}

static struct cel_value eval_ident(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    const struct cel_node_info *info = info_of(ctx, n);

    /* an accumulator keeps its in-place flag so @list_append can grow it; seal() clears it */
    if (info->local >= 0)
        return ctx->locals[info->local];
    if (info->var >= 0)
        return eval_var(ctx, info->var);
    if (info->type)
        return cel_type_value(info->type);
    return cel_ctx_error(ctx, CEL_ERR_GENERIC, "undeclared reference to '%s'", n->u.ident.name);
}

/* Field selection on an operand value (maps only in the DRA environment). */
static struct cel_value select_field(struct cel_eval_ctx *ctx, struct cel_value v, const char *f,
                                     size_t len, bool *ret_found)
{
    struct cel_value r;

    *ret_found = false;
    if (v.kind == CEL_MAP) {
        if (cel_vmap_find_str(v.map, f, len, &r)) {
            *ret_found = true;
            return r;
        }
        if (v.map->absent)
            return *v.map->absent;
        return cel_ctx_error(ctx, CEL_ERR_NO_SUCH_KEY, "no such key: %.*s", (int)len, f);
    }
    return cel_ctx_error(ctx, CEL_ERR_NO_SUCH_FIELD,
                         "no such field '%.*s' (type '%s' does not support field selection)",
                         (int)len, f, cel_value_type_name(v));
}

static struct cel_value eval_select(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    const struct cel_select *s = &n->u.select;
    const struct cel_node_info *info = info_of(ctx, n);
    struct cel_value v, r;
    bool found;

    if (info->var >= 0)
        return eval_var(ctx, info->var);
    if (info->type)
        return cel_type_value(info->type);
    v = eval(ctx, s->operand);
    if (v.kind == CEL_ERROR)
        return v;
    if (s->test_only) {
        if (v.kind == CEL_MAP)
            return cel_bool(cel_vmap_find_str(v.map, s->field, s->len, &r));
        if (v.kind == CEL_OPTIONAL) {
            if (!v.opt)
                return cel_bool(false);
            if (v.opt->kind == CEL_MAP)
                return cel_bool(cel_vmap_find_str(v.opt->map, s->field, s->len, &r));
        }
        return cel_ctx_error(ctx, CEL_ERR_NO_SUCH_FIELD, "invalid type for field selection: %s",
                             cel_value_type_name(v));
    }
    if (s->optional || v.kind == CEL_OPTIONAL) {
        if (v.kind == CEL_OPTIONAL) {
            if (!v.opt)
                return v;
            v = *v.opt;
        }
        if (v.kind == CEL_MAP) {
            if (!cel_vmap_find_str(v.map, s->field, s->len, &r))
                return cel_optional_none();
            return cel_optional_of(&ctx->region, r);
        }
    }
    return select_field(ctx, v, s->field, s->len, &found);
}

static bool index_of(struct cel_value i, size_t n, size_t *ret)
{
    if (i.kind == CEL_INT && i.i >= 0 && (uint64_t)i.i < n) {
        *ret = (size_t)i.i;
        return true;
    }
    if (i.kind == CEL_UINT && i.u < n) {
        *ret = (size_t)i.u;
        return true;
    }
    if (i.kind == CEL_DOUBLE && i.d >= 0 && i.d < (double)n && floor(i.d) == i.d) {
        *ret = (size_t)i.d;
        return true;
    }
    return false;
}

static struct cel_value index_value(struct cel_eval_ctx *ctx, struct cel_value v,
                                    struct cel_value i, bool optional)
{
    struct cel_value r;
    size_t k;

    if (v.kind == CEL_OPTIONAL) {
        if (!v.opt)
            return v;
        v = *v.opt;
        optional = true;
    }
    if (v.kind == CEL_LIST) {
        if (i.kind != CEL_INT && i.kind != CEL_UINT && i.kind != CEL_DOUBLE) {
            struct cel_value args[2] = {v, i};
            return cel_ctx_no_overload(ctx, "_[_]", args, 2);
        }
        if (i.kind == CEL_DOUBLE && floor(i.d) != i.d)
            return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "unsupported index value");
        if (!index_of(i, v.list->n, &k)) {
            if (optional)
                return cel_optional_none();
            return cel_ctx_error(ctx, CEL_ERR_RANGE, "index out of range");
        }
        r = v.list->items[k];
        return optional ? cel_optional_of(&ctx->region, r) : r;
    }
    if (v.kind == CEL_MAP) {
        if (cel_vmap_find(v.map, i, &r))
            return optional ? cel_optional_of(&ctx->region, r) : r;
        if (optional)
            return cel_optional_none();
        if (v.map->absent)
            return *v.map->absent;
        if (i.kind != CEL_STRING && i.kind != CEL_INT && i.kind != CEL_UINT && i.kind != CEL_BOOL &&
            i.kind != CEL_DOUBLE) {
            struct cel_value args[2] = {v, i};
            return cel_ctx_no_overload(ctx, "_[_]", args, 2);
        }
        struct strbuf sb = STRBUF_INIT;
        struct cel_value e;
        if (cel_value_print(&sb, i) < 0) {
            strbuf_release(&sb);
            return oom(ctx);
        }
        /* a string key is shown bare, as Kubernetes' messages do ("no such key: memory") */
        if (i.kind == CEL_STRING)
            e = cel_ctx_error(ctx, CEL_ERR_NO_SUCH_KEY, "no such key: %.*s", (int)i.n, i.s);
        else
            e = cel_ctx_error(ctx, CEL_ERR_NO_SUCH_KEY, "no such key: %s", strbuf_str(&sb));
        strbuf_release(&sb);
        return e;
    }
    struct cel_value args[2] = {v, i};
    return cel_ctx_no_overload(ctx, "_[_]", args, 2);
}

static struct cel_value eval_index(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    struct cel_value v = eval(ctx, n->u.index.operand), i;

    if (v.kind == CEL_ERROR)
        return v;
    i = eval(ctx, n->u.index.index);
    if (i.kind == CEL_ERROR)
        return i;
    return index_value(ctx, v, i, n->u.index.optional);
}

static struct cel_value eval_list(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    const struct cel_list *ln = &n->u.list;
    struct cel_vlist *l;
    struct cel_value *items;
    size_t k = 0;

    l = cel_region_alloc(&ctx->region, sizeof(*l));
    items = cel_region_alloc(&ctx->region, (ln->n ? ln->n : 1) * sizeof(*items));
    if (!l || !items)
        return oom(ctx);
    for (uint32_t i = 0; i < ln->n; i++) {
        struct cel_value v = eval(ctx, ln->elems[i]);

        if (v.kind == CEL_ERROR)
            return v;
        if (ln->optional && ln->optional[i]) {
            if (v.kind != CEL_OPTIONAL)
                return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD,
                                     "optional list element is not an optional: %s",
                                     cel_value_type_name(v));
            if (!v.opt)
                continue;
            v = *v.opt;
        }
        items[k++] = v;
    }
    l->n = k;
    l->items = items;
    return cel_list_value(l);
}

static struct cel_value eval_map(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    const struct cel_map *mn = &n->u.map;
    struct cel_vmap_entry *e;
    const struct cel_vmap *m;
    size_t k = 0;
    int err;

    e = cel_region_alloc(&ctx->region, (mn->n ? mn->n : 1) * sizeof(*e));
    if (!e)
        return oom(ctx);
    for (uint32_t i = 0; i < mn->n; i++) {
        struct cel_value key = eval(ctx, mn->entries[i].key), v;

        if (key.kind == CEL_ERROR)
            return key;
        v = eval(ctx, mn->entries[i].value);
        if (v.kind == CEL_ERROR)
            return v;
        if (key.kind != CEL_BOOL && key.kind != CEL_INT && key.kind != CEL_UINT &&
            key.kind != CEL_STRING)
            return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "unsupported key type: %s",
                                 cel_value_type_name(key));
        if (mn->entries[i].optional) {
            if (v.kind != CEL_OPTIONAL)
                return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD,
                                     "optional map value is not an optional: %s",
                                     cel_value_type_name(v));
            if (!v.opt)
                continue;
            v = *v.opt;
        }
        e[k].key = key;
        e[k].value = v;
        k++;
    }
    err = cel_vmap_build(&ctx->region, e, k, NULL, &m);
    if (err == -EEXIST)
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "repeated key in map literal");
    if (err < 0)
        return oom(ctx);
    return cel_map_value(m);
}

/* && and ||: the first operand that decides wins; otherwise an error beats a non-decision. */
static struct cel_value eval_logic(struct cel_eval_ctx *ctx, const struct cel_node *n, bool is_and)
{
    struct cel_value a = eval(ctx, n->u.call.args[0]), b;

    if (ctx->aborted)
        return ctx->abort_error;
    if (a.kind == CEL_BOOL && a.b != is_and)
        return a;
    b = eval(ctx, n->u.call.args[1]);
    if (ctx->aborted)
        return ctx->abort_error;
    if (b.kind == CEL_BOOL && b.b != is_and)
        return b;
    if (a.kind == CEL_BOOL && b.kind == CEL_BOOL)
        return a;
    if (a.kind == CEL_ERROR)
        return a;
    if (b.kind == CEL_ERROR)
        return b;
    struct cel_value args[2] = {a, b};
    return cel_ctx_no_overload(ctx, is_and ? "_&&_" : "_||_", args, 2);
}

static struct cel_value eval_cond(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    struct cel_value c = eval(ctx, n->u.call.args[0]);

    if (c.kind == CEL_ERROR)
        return c;
    if (c.kind != CEL_BOOL) {
        struct cel_value args[1] = {c};
        return cel_ctx_no_overload(ctx, "_?_:_", args, 1);
    }
    return eval(ctx, n->u.call.args[c.b ? 1 : 2]);
}

static struct cel_value negate(struct cel_eval_ctx *ctx, struct cel_value v)
{
    switch (v.kind) {
    case CEL_INT:
        if (v.i == INT64_MIN)
            return cel_ctx_error(ctx, CEL_ERR_OVERFLOW, "integer overflow");
        return cel_int(-v.i);
    case CEL_DOUBLE:
        return cel_double(-v.d);
    case CEL_DURATION:
        if (v.i == INT64_MIN)
            return cel_ctx_error(ctx, CEL_ERR_OVERFLOW, "integer overflow");
        v.i = -v.i;
        v.n = (uint32_t)(-(int32_t)v.n);
        return v;
    default:
        return cel_ctx_no_overload(ctx, "-_", &v, 1);
    }
}

/* The accumulator list, made growable on first append (a fresh copy owned by the loop). */
struct growlist {
    struct cel_vlist l;
    size_t cap;
};

static struct cel_value list_append(struct cel_eval_ctx *ctx, struct cel_value accu,
                                    struct cel_value elem)
{
    struct growlist *g;

    if (accu.kind != CEL_LIST) {
        struct cel_value args[2] = {accu, elem};
        return cel_ctx_no_overload(ctx, "@list_append", args, 2);
    }
    if (!(accu.flags & CEL_FLAG_ACCU)) {
        g = cel_region_alloc(&ctx->region, sizeof(*g));
        if (!g)
            return oom(ctx);
        g->cap = accu.list->n + 8;
        struct cel_value *items = cel_region_alloc(&ctx->region, g->cap * sizeof(*items));
        if (!items)
            return oom(ctx);
        if (accu.list->n)
            memcpy(items, accu.list->items, accu.list->n * sizeof(*items));
        g->l.items = items;
        g->l.n = accu.list->n;
        accu = cel_list_value(&g->l);
        accu.flags = CEL_FLAG_ACCU;
    }
    g = (struct growlist *)(uintptr_t)accu.list;
    if (g->l.n == g->cap) {
        struct cel_value *items = cel_region_alloc(&ctx->region, g->cap * 2 * sizeof(*items));

        if (!items)
            return oom(ctx);
        memcpy(items, g->l.items, g->l.n * sizeof(*items));
        g->l.items = items;
        g->cap *= 2;
    }
    ((struct cel_value *)(uintptr_t)g->l.items)[g->l.n++] = elem;
    return accu;
}

struct growmap {
    struct cel_vmap m;
    size_t cap;
};

static struct cel_value map_insert(struct cel_eval_ctx *ctx, struct cel_value accu,
                                   struct cel_value key, struct cel_value v)
{
    struct growmap *g;
    struct cel_value old;

    if (accu.kind != CEL_MAP)
        return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD, "no such overload: @map_insert");
    if (key.kind != CEL_BOOL && key.kind != CEL_INT && key.kind != CEL_UINT &&
        key.kind != CEL_STRING)
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "unsupported key type: %s",
                             cel_value_type_name(key));
    if (cel_vmap_find(accu.map, key, &old))
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "insert failed: key already exists");
    if (!(accu.flags & CEL_FLAG_ACCU)) {
        g = cel_region_alloc(&ctx->region, sizeof(*g));
        if (!g)
            return oom(ctx);
        g->cap = accu.map->n + 8;
        struct cel_vmap_entry *e = cel_region_alloc(&ctx->region, g->cap * sizeof(*e));
        if (!e)
            return oom(ctx);
        if (accu.map->n)
            memcpy(e, accu.map->entries, accu.map->n * sizeof(*e));
        g->m = (struct cel_vmap){.n = accu.map->n, .entries = e};
        accu = cel_map_value(&g->m);
        accu.flags = CEL_FLAG_ACCU;
    }
    g = (struct growmap *)(uintptr_t)accu.map;
    if (g->m.n == g->cap) {
        struct cel_vmap_entry *e = cel_region_alloc(&ctx->region, g->cap * 2 * sizeof(*e));

        if (!e)
            return oom(ctx);
        memcpy(e, g->m.entries, g->m.n * sizeof(*e));
        g->m.entries = e;
        g->cap *= 2;
    }
    ((struct cel_vmap_entry *)(uintptr_t)g->m.entries)[g->m.n++] = (struct cel_vmap_entry){key, v};
    return accu;
}

/* A finished accumulator map gets its lookup index. */
static struct cel_value seal(struct cel_eval_ctx *ctx, struct cel_value v)
{
    const struct cel_vmap *m;

    if (!(v.flags & CEL_FLAG_ACCU))
        return v;
    v.flags = 0;
    if (v.kind == CEL_MAP) {
        if (cel_vmap_build(&ctx->region, v.map->entries, v.map->n, NULL, &m) < 0)
            return oom(ctx);
        return cel_map_value(m);
    }
    return v;
}

static struct cel_value eval_args(struct cel_eval_ctx *ctx, const struct cel_call *c,
                                  struct cel_value *args, size_t *ret_n, bool strict);

static struct cel_value eval_op(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    const struct cel_call *c = &n->u.call;
    struct cel_value a, b, r;

    switch (c->op) {
    case CEL_OP_AND:
        return eval_logic(ctx, n, true);
    case CEL_OP_OR:
        return eval_logic(ctx, n, false);
    case CEL_OP_COND:
        return eval_cond(ctx, n);
    case CEL_OP_NOT_STRICTLY_FALSE:
        a = eval(ctx, c->args[0]);
        if (ctx->aborted)
            return ctx->abort_error;
        return cel_bool(!(a.kind == CEL_BOOL && !a.b));
    default:
        break;
    }
    a = eval(ctx, c->args[0]);
    if (a.kind == CEL_ERROR)
        return a;
    if (c->op == CEL_OP_NOT) {
        if (a.kind != CEL_BOOL)
            return cel_ctx_no_overload(ctx, "!_", &a, 1);
        return cel_bool(!a.b);
    }
    if (c->op == CEL_OP_NEG)
        return negate(ctx, a);
    b = eval(ctx, c->args[1]);
    if (b.kind == CEL_ERROR)
        return b;
    switch (c->op) {
    case CEL_OP_LIST_APPEND:
        return list_append(ctx, a, b);
    case CEL_OP_MAP_INSERT:
        if (c->nargs == 3) {
            r = eval(ctx, c->args[2]);
            if (r.kind == CEL_ERROR)
                return r;
            return map_insert(ctx, a, b, r);
        }
        if (b.kind != CEL_MAP)
            return cel_ctx_no_overload(ctx, "@map_insert", &b, 1);
        for (size_t i = 0; i < b.map->n; i++) {
            a = map_insert(ctx, a, b.map->entries[i].key, b.map->entries[i].value);
            if (a.kind == CEL_ERROR)
                return a;
        }
        return a;
    default:
        return cel_eval_binary(ctx, c->op, a, b);
    }
}

/* Evaluates receiver and arguments into args; returns the first error when strict. */
static struct cel_value eval_args(struct cel_eval_ctx *ctx, const struct cel_call *c,
                                  struct cel_value *args, size_t *ret_n, bool strict)
{
    size_t k = 0;

    if (c->target) {
        args[k] = eval(ctx, c->target);
        if (strict && args[k].kind == CEL_ERROR)
            return args[k];
        k++;
    }
    for (uint32_t i = 0; i < c->nargs; i++) {
        args[k] = eval(ctx, c->args[i]);
        if (ctx->aborted)
            return ctx->abort_error;
        if (strict && args[k].kind == CEL_ERROR)
            return args[k];
        k++;
    }
    *ret_n = k;
    return cel_null();
}

static struct cel_value eval_call(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    const struct cel_call *c = &n->u.call;
    const struct cel_node_info *info = info_of(ctx, n);
    const struct cel_func_entry *fe = info->fn;
    struct cel_value args[CEL_OVERLOAD_MAX_ARGS], r;
    const struct cel_ovl_rt *rt;
    const struct cel_node *saved;
    size_t nargs = 0;
    bool nonstrict = fe && fe->nonstrict;

    if (c->op != CEL_OP_NONE)
        return eval_op(ctx, n);
    if (!fe)
        return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD, "unknown function '%s'", c->name);
    if (c->nargs + (info->call_style == CEL_CALL_RECEIVER) > CEL_OVERLOAD_MAX_ARGS)
        return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD, "too many arguments to '%s'",
                             c->name);
    if (info->call_style == CEL_CALL_NAMESPACED) {
        struct cel_call g = *c;

        g.target = NULL;
        r = eval_args(ctx, &g, args, &nargs, !nonstrict);
    } else {
        r = eval_args(ctx, c, args, &nargs, !nonstrict);
    }
    if (r.kind == CEL_ERROR)
        return r;
    rt = cel_registry_dispatch(fe, args, nargs);
    if (!rt) {
        for (size_t i = 0; i < nargs; i++)
            if (args[i].kind == CEL_ERROR)
                return args[i];
        return cel_ctx_no_overload(ctx, fe->f.name, args, nargs);
    }
    if (!(rt->o->flags & CEL_OVL_NONSTRICT))
        for (size_t i = 0; i < nargs; i++)
            if (args[i].kind == CEL_ERROR)
                return args[i];
    saved = ctx->call;
    ctx->call = n;
    r = rt->o->fn(ctx, args, nargs);
    ctx->call = saved;
    if (ctx->aborted)
        return ctx->abort_error;
    if (rt->o->cost || rt->o->cost_fn) {
        uint64_t cost = rt->o->cost + (rt->o->cost_fn ? rt->o->cost_fn(args, nargs, r) : 0);

        if (!cel_ctx_charge(ctx, cost))
            return ctx->abort_error;
    }
    return r;
}

/* Binds the iteration variables for element i of range. */
static void bind_iter(struct cel_eval_ctx *ctx, const struct cel_comprehension *c,
                      struct cel_value range, size_t i)
{
    if (range.kind == CEL_LIST) {
        if (c->iter_var2) {
            ctx->locals[c->iter_slot] = cel_int((int64_t)i);
            ctx->locals[c->iter_slot2] = range.list->items[i];
        } else {
            ctx->locals[c->iter_slot] = range.list->items[i];
        }
    } else {
        ctx->locals[c->iter_slot] = range.map->entries[i].key;
        if (c->iter_var2)
            ctx->locals[c->iter_slot2] = range.map->entries[i].value;
    }
}

static struct cel_value eval_comprehension(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    const struct cel_comprehension *c = &n->u.comp;
    struct cel_value range, accu, cond;
    size_t count;

    if (c->macro == CEL_MACRO_BIND) {
        accu = eval(ctx, c->accu_init);
        if (ctx->aborted)
            return ctx->abort_error;
        ctx->locals[c->accu_slot] = accu;
        return eval(ctx, c->result);
    }
    range = eval(ctx, c->iter_range);
    if (range.kind == CEL_ERROR)
        return range;
    if (range.kind == CEL_LIST)
        count = range.list->n;
    else if (range.kind == CEL_MAP)
        count = range.map->n;
    else
        return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD,
                             "expression of type '%s' cannot be the range of a comprehension "
                             "(must be list, map, or dynamic)",
                             cel_value_type_name(range));
    accu = eval(ctx, c->accu_init);
    if (ctx->aborted)
        return ctx->abort_error;
    for (size_t i = 0; i < count; i++) {
        ctx->locals[c->accu_slot] = accu;
        bind_iter(ctx, c, range, i);
        cond = eval(ctx, c->loop_cond);
        if (ctx->aborted)
            return ctx->abort_error;
        if (cond.kind == CEL_BOOL && !cond.b)
            break;
        if (cond.kind != CEL_BOOL) {
            /* a non-bool loop condition is an error, as a malformed macro would be */
            accu = cond.kind == CEL_ERROR
                       ? cond
                       : cel_ctx_error(ctx, CEL_ERR_GENERIC, "loop condition is not a bool");
            break;
        }
        ctx->locals[c->accu_slot] = accu;
        accu = eval(ctx, c->loop_step);
        if (ctx->aborted)
            return ctx->abort_error;
        /* keep the in-place flag only on the slot value, where @list_append sees it */
        ctx->locals[c->accu_slot] = accu;
    }
    ctx->locals[c->accu_slot] = seal(ctx, accu);
    return eval(ctx, c->result);
}

static struct cel_value eval_node(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    switch (n->kind) {
    case CEL_NODE_CONST:
        return info_of(ctx, n)->constant;
    case CEL_NODE_IDENT:
        return eval_ident(ctx, n);
    case CEL_NODE_SELECT:
        return eval_select(ctx, n);
    case CEL_NODE_INDEX:
        return eval_index(ctx, n);
    case CEL_NODE_CALL:
        return eval_call(ctx, n);
    case CEL_NODE_LIST:
        return eval_list(ctx, n);
    case CEL_NODE_MAP:
        return eval_map(ctx, n);
    case CEL_NODE_COMPREHENSION:
        return eval_comprehension(ctx, n);
    case CEL_NODE_STRUCT:
        break;
    }
    return cel_ctx_error(ctx, CEL_ERR_GENERIC, "unsupported expression");
}

static struct cel_value eval(struct cel_eval_ctx *ctx, const struct cel_node *n)
{
    struct cel_value v;

    if (ctx->aborted)
        return ctx->abort_error;
    /* the common case inline: one unit per node, far below the limit */
    if (n->kind != CEL_NODE_CONST) {
        if (ctx->cost < ctx->cost_limit)
            ctx->cost++;
        else if (!cel_ctx_charge(ctx, 1))
            return ctx->abort_error;
    }
    if (++ctx->depth > CEL_EVAL_MAX_DEPTH) {
        ctx->depth--;
        return cel_ctx_abort(ctx, cel_error_static(&DEPTH_ERROR));
    }
    v = eval_node(ctx, n);
    ctx->depth--;
    return v;
}

/* ---- public entry points ---- */

int cel_evaluator_new(struct cel_evaluator **ret_ev)
{
    struct cel_evaluator *ev = calloc(1, sizeof(*ev));

    if (!ev)
        return -ENOMEM;
    cel_region_init(&ev->ctx.region, 0);
    *ret_ev = ev;
    return 0;
}

struct cel_evaluator *cel_evaluator_free(struct cel_evaluator *ev)
{
    if (!ev)
        return NULL;
    cel_region_release(&ev->ctx.region);
    free(ev->ctx.locals);
    free(ev);
    return NULL;
}

uint64_t cel_evaluator_cost(const struct cel_evaluator *ev)
{
    return ev->ctx.cost;
}

struct cel_value cel_eval(struct cel_evaluator *ev, const struct cel_program *p,
                          const struct cel_activation *act, const struct cel_eval_opts *opts)
{
    struct cel_eval_ctx *ctx = &ev->ctx;
    size_t nl = p->ast->nlocals ? p->ast->nlocals : 1;
    struct cel_value v;

    cel_region_reset(&ctx->region);
    if (ctx->locals_alloc < nl) {
        struct cel_value *l = realloc(ctx->locals, nl * sizeof(*l));

        if (!l)
            return cel_error_static(&OOM_ERROR);
        ctx->locals = l;
        ctx->locals_alloc = nl;
    }
    ctx->prog = p;
    ctx->act = act;
    ctx->cost = 0;
    ctx->cost_limit = opts && opts->cost_limit ? opts->cost_limit : CEL_DEFAULT_COST_LIMIT;
    ctx->depth = 0;
    ctx->aborted = false;
    ctx->call = NULL;
    v = eval(ctx, p->ast->root);
    if (ctx->aborted)
        v = ctx->abort_error;
    v.flags = 0;
    return v;
}
