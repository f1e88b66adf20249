/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sets extension (cel-go ext.Sets): lists read as sets. sets.contains(a, b) is true when every
 * element of b is in a, sets.equivalent when each contains the other (duplicates and order do not
 * matter), sets.intersects when one element is in both. Membership is CEL equality
 * (cel_value_equal), so [1] contains 1.0 when such a list reaches the function at run time. The
 * checks are quadratic, charged to the evaluation's cost budget per comparison.
 */
#include "cel-lib-ext.h"

/* Whether v is an element of l: 1 yes, 0 no, -1 when the cost limit stopped the scan. */
static int member(struct cel_eval_ctx *ctx, const struct cel_vlist *l, struct cel_value v)
{
    if (!cel_ctx_charge(ctx, l->n))
        return -1;
    for (size_t i = 0; i < l->n; i++)
        if (cel_value_equal(l->items[i], v))
            return 1;
    return 0;
}

/* 1 when every element of sub is in super, 0 when not, -1 on the cost limit. */
static int contains_all(struct cel_eval_ctx *ctx, const struct cel_vlist *super,
                        const struct cel_vlist *sub)
{
    for (size_t i = 0; i < sub->n; i++) {
        int r = member(ctx, super, sub->items[i]);

        if (r <= 0)
            return r;
    }
    return 1;
}

static struct cel_value cost_exceeded(struct cel_eval_ctx *ctx)
{
    return cel_ctx_error(ctx, CEL_ERR_COST_LIMIT,
                         "operation cancelled: actual cost limit exceeded");
}

static struct cel_value sets_contains(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                      size_t n)
{
    int r = contains_all(ctx, args[0].list, args[1].list);

    return r < 0 ? cost_exceeded(ctx) : cel_bool(r == 1);
}

static struct cel_value sets_equivalent(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                        size_t n)
{
    int r = contains_all(ctx, args[0].list, args[1].list);

    if (r == 1)
        r = contains_all(ctx, args[1].list, args[0].list);
    return r < 0 ? cost_exceeded(ctx) : cel_bool(r == 1);
}

static struct cel_value sets_intersects(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                        size_t n)
{
    const struct cel_vlist *a = args[0].list, *b = args[1].list;

    for (size_t i = 0; i < b->n; i++) {
        int r = member(ctx, a, b->items[i]);

        if (r < 0)
            return cost_exceeded(ctx);
        if (r == 1)
            return cel_bool(true);
    }
    return cel_bool(false);
}

static const struct cel_overload OVERLOADS[] = {
    {.name = "sets.contains", .sig = "(list(A), list(A)) -> bool", .fn = sets_contains},
    {.name = "sets.equivalent", .sig = "(list(A), list(A)) -> bool", .fn = sets_equivalent},
    {.name = "sets.intersects", .sig = "(list(A), list(A)) -> bool", .fn = sets_intersects},
};

const struct cel_library cel_lib_sets = {"sets", OVERLOADS, ARRAY_SIZE(OVERLOADS)};
