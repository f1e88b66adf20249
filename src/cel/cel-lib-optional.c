/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Optional values (cel-go's OptionalTypes, as Kubernetes enables them): optional.of,
 * optional.none, optional.ofNonZeroValue and the receiver functions hasValue, value, or, orValue.
 * The optional syntax itself (x.?f, x[?k], [?e], {?k: v}) is the evaluator's; optMap and optFlatMap
 * are macros the front end expands into hasValue/value/optional.of/optional.none calls.
 *
 * or() and orValue() are non-strict: cel-go evaluates their argument only when the receiver is
 * empty, so an error in the argument is not seen when the receiver has a value.
 */
#include "cel-lib-ext.h"

static struct cel_value opt_of(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return cel_optional_of(cel_ctx_region(ctx), args[0]);
}

static struct cel_value opt_none(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return cel_optional_none();
}

/* The zero value of each type: null, false, 0, 0u, 0.0, "", b"", [], {}, a zero duration or the
 * epoch timestamp. */
static bool is_zero(struct cel_value v)
{
    switch (v.kind) {
    case CEL_NULL:
        return true;
    case CEL_BOOL:
        return !v.b;
    case CEL_INT:
        return v.i == 0;
    case CEL_UINT:
        return v.u == 0;
    case CEL_DOUBLE:
        return v.d == 0;
    case CEL_STRING:
    case CEL_BYTES:
        return v.n == 0;
    case CEL_LIST:
        return v.list->n == 0;
    case CEL_MAP:
        return v.map->n == 0;
    case CEL_DURATION:
    case CEL_TIMESTAMP:
        return v.i == 0 && v.n == 0;
    case CEL_OPTIONAL:
        return v.opt == NULL;
    default:
        return false;
    }
}

static struct cel_value opt_of_non_zero(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                        size_t n)
{
    return is_zero(args[0]) ? cel_optional_none() : cel_optional_of(cel_ctx_region(ctx), args[0]);
}

static struct cel_value opt_has_value(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                      size_t n)
{
    return cel_bool(args[0].opt != NULL);
}

static struct cel_value opt_value(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    if (!args[0].opt)
        return cel_ctx_error(ctx, CEL_ERR_GENERIC, "optional.none() dereference");
    return *args[0].opt;
}

/* Non-strict: the receiver's error wins, a present value ignores the argument. */
static struct cel_value opt_or(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    if (cel_is_error(args[0]))
        return args[0];
    if (args[0].kind != CEL_OPTIONAL)
        return cel_ctx_no_overload(ctx, "or", args, n);
    if (args[0].opt)
        return args[0];
    if (!cel_is_error(args[1]) && args[1].kind != CEL_OPTIONAL)
        return cel_ctx_no_overload(ctx, "or", args, n);
    return args[1];
}

static struct cel_value opt_or_value(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                     size_t n)
{
    if (cel_is_error(args[0]))
        return args[0];
    if (args[0].kind != CEL_OPTIONAL)
        return cel_ctx_no_overload(ctx, "orValue", args, n);
    return args[0].opt ? *args[0].opt : args[1];
}

static const struct cel_overload OVERLOADS[] = {
    {.name = "optional.of", .sig = "(A) -> optional_type(A)", .fn = opt_of},
    {.name = "optional.none", .sig = "() -> optional_type(A)", .fn = opt_none},
    {.name = "optional.ofNonZeroValue", .sig = "(A) -> optional_type(A)", .fn = opt_of_non_zero},
    {.name = "hasValue",
     .receiver = true,
     .sig = "(optional_type(A)) -> bool",
     .fn = opt_has_value},
    {.name = "value", .receiver = true, .sig = "(optional_type(A)) -> A", .fn = opt_value},
    {.name = "or",
     .receiver = true,
     .sig = "(optional_type(A), optional_type(A)) -> optional_type(A)",
     .fn = opt_or,
     .flags = CEL_OVL_NONSTRICT},
    {.name = "orValue",
     .receiver = true,
     .sig = "(optional_type(A), A) -> A",
     .fn = opt_or_value,
     .flags = CEL_OVL_NONSTRICT},
};

const struct cel_library cel_lib_optional = {"optional", OVERLOADS, ARRAY_SIZE(OVERLOADS)};
