/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes' CEL Quantity library (kubernetes.Quantity): quantity(s), isQuantity(s), and on a
 * quantity sign(), isInteger(), asInteger(), asApproximateFloat(), add/sub (a quantity or an int),
 * compareTo() (-1, 0, 1), isGreaterThan(), isLessThan(); == compares values exactly. There are no
 * ordering operators, as in Kubernetes. The arithmetic itself is cel-quantity.c.
 *
 * quantity() with a constant argument (the usual `quantity("40Gi")` in a selector) parses once per
 * call site: the first result is kept in the site cache and returned while the argument stays the
 * same, so the hot path allocates nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base-strbuf.h"
#include "cel-k8s.h"
#include "cel-lib.h"

const struct cel_type cel_type_quantity = {"kubernetes.Quantity"};

static const struct cel_quantity *qarg(const struct cel_value *v)
{
    return &((const struct cel_quantity_obj *)(const void *)v->obj)->q;
}

static bool q_equal(const struct cel_object *a, const struct cel_object *b)
{
    return cel_quantity_cmp(&((const struct cel_quantity_obj *)(const void *)a)->q,
                            &((const struct cel_quantity_obj *)(const void *)b)->q) == 0;
}

static int q_print(const struct cel_object *o, struct strbuf *out)
{
    char buf[CEL_QUANTITY_STR_MAX];

    cel_quantity_format(&((const struct cel_quantity_obj *)(const void *)o)->q, buf);
    /* The text holds only digits, signs, '.' and suffix letters: nothing to escape. */
    return strbuf_addf(out, "quantity(\"%s\")", buf);
}

static const struct cel_object_class quantity_class = {
    .type = &cel_type_quantity,
    .equal = q_equal,
    .print = q_print,
};

void cel_quantity_obj_init(struct cel_quantity_obj *o, const struct cel_quantity *q)
{
    o->base.cls = &quantity_class;
    o->q = *q;
}

const struct cel_quantity *cel_value_quantity(struct cel_value v)
{
    if (v.kind != CEL_OBJECT || v.obj->cls != &quantity_class)
        return NULL;
    return qarg(&v);
}

/* A quantity object in the evaluation's arena. */
static struct cel_value new_quantity(struct cel_eval_ctx *ctx, const struct cel_quantity *q)
{
    struct cel_quantity_obj *o = cel_region_alloc(cel_ctx_region(ctx), sizeof(*o));

    if (!o)
        return cel_ctx_error(ctx, CEL_ERR_MEMORY, "out of memory");
    cel_quantity_obj_init(o, q);
    return cel_quantity_value(o);
}

/* What a quantity() call site keeps: the first argument it parsed and the result. */
struct quantity_site {
    struct cel_quantity_obj obj;
    size_t len;
    char text[]; /* obj.q.text points here */
};

static struct cel_value fn_quantity(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                    size_t n)
{
    struct quantity_site *site = cel_ctx_site_get(ctx), *fresh;
    struct cel_quantity q;
    struct diag d;

    if (site && site->len == args[0].n && memcmp(site->text, args[0].s, site->len) == 0)
        return cel_quantity_value(&site->obj);
    diag_init(&d);
    if (cel_quantity_parse(args[0].s, args[0].n, &d, &q) < 0)
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "%s", d.msg);
    if (site || args[0].n > CEL_QUANTITY_TEXT_MAX)
        return new_quantity(ctx, &q);
    /* First call at this site: keep the result (a failure to keep it only costs speed). */
    fresh = malloc(sizeof(*fresh) + args[0].n + 1);
    if (!fresh)
        return new_quantity(ctx, &q);
    fresh->len = args[0].n;
    memcpy(fresh->text, args[0].s, args[0].n);
    fresh->text[args[0].n] = '\0';
    cel_quantity_obj_init(&fresh->obj, &q);
    if (q.text)
        fresh->obj.q.text = fresh->text;
    if (cel_ctx_site_set(ctx, fresh, free) < 0) /* fresh is freed then */
        return new_quantity(ctx, &q);
    return cel_quantity_value(&fresh->obj);
}

static struct cel_value fn_is_quantity(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                       size_t n)
{
    struct cel_quantity q;

    return cel_bool(cel_quantity_parse(args[0].s, args[0].n, NULL, &q) == 0);
}

static struct cel_value fn_sign(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return cel_int(cel_quantity_sign(qarg(&args[0])));
}

static struct cel_value fn_is_integer(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                      size_t n)
{
    int64_t v;

    return cel_bool(cel_quantity_as_int64(qarg(&args[0]), &v));
}

static struct cel_value fn_as_integer(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                      size_t n)
{
    int64_t v;

    if (!cel_quantity_as_int64(qarg(&args[0]), &v))
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "cannot convert value to integer");
    return cel_int(v);
}

static struct cel_value fn_as_float(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                    size_t n)
{
    return cel_double(cel_quantity_approx_double(qarg(&args[0])));
}

/* The second operand: a quantity, or an int taken as a decimal SI quantity. */
static struct cel_quantity operand(const struct cel_value *v)
{
    return v->kind == CEL_INT ? cel_quantity_from_int(v->i) : *qarg(v);
}

static struct cel_value arith(struct cel_eval_ctx *ctx, const struct cel_value *args, bool sub)
{
    struct cel_quantity b = operand(&args[1]), r;
    struct diag d;
    int err;

    diag_init(&d);
    err = sub ? cel_quantity_sub(qarg(&args[0]), &b, &d, &r)
              : cel_quantity_add(qarg(&args[0]), &b, &d, &r);
    if (err < 0)
        return cel_ctx_error(ctx, CEL_ERR_OVERFLOW, "%s", d.msg);
    return new_quantity(ctx, &r);
}

static struct cel_value fn_add(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return arith(ctx, args, false);
}

static struct cel_value fn_sub(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return arith(ctx, args, true);
}

static struct cel_value fn_compare_to(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                      size_t n)
{
    return cel_int(cel_quantity_cmp(qarg(&args[0]), qarg(&args[1])));
}

static struct cel_value fn_greater(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return cel_bool(cel_quantity_cmp(qarg(&args[0]), qarg(&args[1])) > 0);
}

static struct cel_value fn_less(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return cel_bool(cel_quantity_cmp(qarg(&args[0]), qarg(&args[1])) < 0);
}

/* Kubernetes charges parsing as a string traversal: ceil(0.1 * length). */
static uint64_t cost_parse(const struct cel_value *args, size_t n, struct cel_value result)
{
    return ((uint64_t)args[0].n + 9) / 10;
}

#define Q "kubernetes.Quantity"

static const struct cel_overload OVERLOADS[] = {
    {.name = "quantity", .sig = "(string) -> " Q, .fn = fn_quantity, .cost_fn = cost_parse},
    {.name = "isQuantity", .sig = "(string) -> bool", .fn = fn_is_quantity, .cost_fn = cost_parse},
    {.name = "sign", .receiver = true, .sig = "(" Q ") -> int", .fn = fn_sign},
    {.name = "isInteger", .receiver = true, .sig = "(" Q ") -> bool", .fn = fn_is_integer},
    {.name = "asInteger", .receiver = true, .sig = "(" Q ") -> int", .fn = fn_as_integer},
    {.name = "asApproximateFloat", .receiver = true, .sig = "(" Q ") -> double", .fn = fn_as_float},
    {.name = "add", .receiver = true, .sig = "(" Q ", " Q ") -> " Q, .fn = fn_add},
    {.name = "add", .receiver = true, .sig = "(" Q ", int) -> " Q, .fn = fn_add},
    {.name = "sub", .receiver = true, .sig = "(" Q ", " Q ") -> " Q, .fn = fn_sub},
    {.name = "sub", .receiver = true, .sig = "(" Q ", int) -> " Q, .fn = fn_sub},
    {.name = "compareTo", .receiver = true, .sig = "(" Q ", " Q ") -> int", .fn = fn_compare_to},
    {.name = "isGreaterThan", .receiver = true, .sig = "(" Q ", " Q ") -> bool", .fn = fn_greater},
    {.name = "isLessThan", .receiver = true, .sig = "(" Q ", " Q ") -> bool", .fn = fn_less},
};

const struct cel_library cel_lib_quantity = {"quantity", OVERLOADS, ARRAY_SIZE(OVERLOADS)};
