/* SPDX-License-Identifier: Apache-2.0 */
/*
 * List functions as Kubernetes enables them: its own lists library (isSorted, sum, min, max,
 * indexOf, lastIndexOf) and cel-go's ext.Lists version 3 (slice, flatten, lists.range, distinct,
 * reverse, sort and the @sortByAssociatedKeys function the sortBy macro expands to). Elements are
 * compared with CEL's own equality and ordering (cel_value_equal, cel_value_compare), so 1, 1u and
 * 1.0 are one value for indexOf/distinct and mixed-type lists fail to sort with an error, as in
 * cel-go. Every loop over input charges the evaluation's cost budget per element.
 */
#include <errno.h>
#include <string.h>

#include "cel-lib-ext.h"

/* lists.range(n) and flatten() build at most this many elements. */
#define CEL_LIST_MAX ((size_t)1 << 20)
/* flatten(depth) recursion bound (the input nests no deeper than the parser allows anyway). */
#define CEL_FLATTEN_MAX_DEPTH 100

static struct cel_value oom(struct cel_eval_ctx *ctx)
{
    return cel_ctx_error(ctx, CEL_ERR_MEMORY, "out of memory");
}

static struct cel_value cost_exceeded(struct cel_eval_ctx *ctx)
{
    return cel_ctx_error(ctx, CEL_ERR_COST_LIMIT,
                         "operation cancelled: actual cost limit exceeded");
}

static struct cel_value make_list(struct cel_eval_ctx *ctx, const struct cel_value *items, size_t n)
{
    const struct cel_vlist *l = cel_vlist_new(cel_ctx_region(ctx), items, n);

    return l ? cel_list_value(l) : oom(ctx);
}

/* A list over items that already live in the arena (or in an argument): no copy. */
static struct cel_value wrap_list(struct cel_eval_ctx *ctx, const struct cel_value *items, size_t n)
{
    struct cel_vlist *l = cel_region_alloc(cel_ctx_region(ctx), sizeof(*l));

    if (!l)
        return oom(ctx);
    l->n = n;
    l->items = items;
    return cel_list_value(l);
}

static uint64_t cost_per_elem(const struct cel_value *args, size_t n, struct cel_value result)
{
    return args[0].kind == CEL_LIST ? args[0].list->n : 0;
}

/* ---- Kubernetes lists ---- */

static struct cel_value compare_error(struct cel_eval_ctx *ctx, const char *fn, struct cel_value a,
                                      struct cel_value b)
{
    return cel_ctx_error(ctx, CEL_ERR_NO_MATCHING_OVERLOAD,
                         "no such overload: %s applied to (%s, %s)", fn, cel_value_type_name(a),
                         cel_value_type_name(b));
}

static struct cel_value list_is_sorted(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                       size_t n)
{
    const struct cel_vlist *l = args[0].list;
    int cmp;

    for (size_t i = 1; i < l->n; i++) {
        int r = cel_value_compare(l->items[i - 1], l->items[i], &cmp);

        if (r == -EDOM)
            return cel_bool(false);
        if (r < 0)
            return compare_error(ctx, "isSorted", l->items[i - 1], l->items[i]);
        if (cmp > 0)
            return cel_bool(false);
    }
    return cel_bool(true);
}

/* sum(): int and uint overflow is an error; an empty list sums to int 0. */
static struct cel_value add_checked(struct cel_eval_ctx *ctx, struct cel_value acc,
                                    struct cel_value v)
{
    if (acc.kind == CEL_INT && v.kind == CEL_INT) {
        int64_t r;

        if (__builtin_add_overflow(acc.i, v.i, &r))
            return cel_ctx_error(ctx, CEL_ERR_OVERFLOW, "integer overflow");
        return cel_int(r);
    }
    if (acc.kind == CEL_UINT && v.kind == CEL_UINT) {
        uint64_t r;

        if (__builtin_add_overflow(acc.u, v.u, &r))
            return cel_ctx_error(ctx, CEL_ERR_OVERFLOW, "unsigned integer overflow");
        return cel_uint(r);
    }
    if (acc.kind == CEL_DOUBLE && v.kind == CEL_DOUBLE)
        return cel_double(acc.d + v.d);
    if (acc.kind == CEL_DURATION && v.kind == CEL_DURATION) {
        int64_t ns = (int64_t)(int32_t)acc.n + (int64_t)(int32_t)v.n, sec;

        if (__builtin_add_overflow(acc.i, v.i, &sec))
            return cel_ctx_error(ctx, CEL_ERR_OVERFLOW, "integer overflow");
        sec += ns / 1000000000;
        ns %= 1000000000;
        if (sec > 0 && ns < 0) {
            sec--;
            ns += 1000000000;
        } else if (sec < 0 && ns > 0) {
            sec++;
            ns -= 1000000000;
        }
        return (struct cel_value){.kind = CEL_DURATION, .n = (uint32_t)(int32_t)ns, .i = sec};
    }
    return compare_error(ctx, "sum", acc, v);
}

static struct cel_value list_sum(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    const struct cel_vlist *l = args[0].list;
    struct cel_value acc;

    if (l->n == 0)
        return cel_int(0);
    acc = l->items[0];
    if (acc.kind != CEL_INT && acc.kind != CEL_UINT && acc.kind != CEL_DOUBLE &&
        acc.kind != CEL_DURATION)
        return cel_ctx_no_overload(ctx, "sum", args, n);
    for (size_t i = 1; i < l->n && !cel_is_error(acc); i++)
        acc = add_checked(ctx, acc, l->items[i]);
    return acc;
}

static struct cel_value list_extreme(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                     bool want_max, const char *fn)
{
    const struct cel_vlist *l = args[0].list;
    struct cel_value best;
    int cmp;

    if (l->n == 0)
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "%s called on an empty list", fn);
    best = l->items[0];
    for (size_t i = 1; i < l->n; i++) {
        int r = cel_value_compare(l->items[i], best, &cmp);

        if (r == -EDOM)
            continue;
        if (r < 0)
            return compare_error(ctx, fn, best, l->items[i]);
        if (want_max ? cmp > 0 : cmp < 0)
            best = l->items[i];
    }
    return best;
}

static struct cel_value list_min(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return list_extreme(ctx, args, false, "min");
}

static struct cel_value list_max(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return list_extreme(ctx, args, true, "max");
}

static struct cel_value list_index_of(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                      size_t n)
{
    const struct cel_vlist *l = args[0].list;

    for (size_t i = 0; i < l->n; i++)
        if (cel_value_equal(l->items[i], args[1]))
            return cel_int((int64_t)i);
    return cel_int(-1);
}

static struct cel_value list_last_index_of(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                           size_t n)
{
    const struct cel_vlist *l = args[0].list;

    for (size_t i = l->n; i > 0; i--)
        if (cel_value_equal(l->items[i - 1], args[1]))
            return cel_int((int64_t)(i - 1));
    return cel_int(-1);
}

/* ---- ext lists v3 ---- */

static struct cel_value list_slice(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    const struct cel_vlist *l = args[0].list;
    int64_t start = args[1].i, end = args[2].i;

    if (start < 0 || end < 0)
        return cel_ctx_error(ctx, CEL_ERR_RANGE,
                             "cannot slice(%lld, %lld), negative indexes not supported",
                             (long long)start, (long long)end);
    if (start > end)
        return cel_ctx_error(ctx, CEL_ERR_RANGE,
                             "cannot slice(%lld, %lld), start index must be less than or equal "
                             "to end index",
                             (long long)start, (long long)end);
    if ((uint64_t)end > l->n)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "cannot slice(%lld, %lld), list is length %zu",
                             (long long)start, (long long)end, l->n);
    return wrap_list(ctx, l->items + start, (size_t)(end - start));
}

struct flat {
    struct cel_value *items;
    size_t n, alloc;
};

static int flat_push(struct cel_eval_ctx *ctx, struct flat *f, struct cel_value v)
{
    if (f->n == f->alloc) {
        size_t want = f->alloc ? f->alloc * 2 : 16;
        struct cel_value *grown;

        if (want > CEL_LIST_MAX)
            return -ENOBUFS;
        grown = cel_region_alloc(cel_ctx_region(ctx), want * sizeof(*grown));
        if (!grown)
            return -ENOMEM;
        if (f->n)
            memcpy(grown, f->items, f->n * sizeof(*grown));
        f->items = grown;
        f->alloc = want;
    }
    f->items[f->n++] = v;
    return 0;
}

/* Appends the elements of l, descending into nested lists while depth > 0. */
static int flatten_into(struct cel_eval_ctx *ctx, struct flat *f, const struct cel_vlist *l,
                        int64_t depth)
{
    for (size_t i = 0; i < l->n; i++) {
        int r;

        if (!cel_ctx_charge(ctx, 1))
            return -ECANCELED;
        if (l->items[i].kind == CEL_LIST && depth > 0)
            r = flatten_into(ctx, f, l->items[i].list, depth - 1);
        else
            r = flat_push(ctx, f, l->items[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

static struct cel_value list_flatten(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                     size_t n)
{
    int64_t depth = n > 1 ? args[1].i : 1;
    struct flat f = {0};
    int r;

    if (depth < 0)
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "level must be non-negative");
    if (depth > CEL_FLATTEN_MAX_DEPTH)
        depth = CEL_FLATTEN_MAX_DEPTH;
    /* depth counts the levels removed: flatten() turns [[1]] into [1], so the top list's own
     * elements are unwrapped depth times. */
    r = flatten_into(ctx, &f, args[0].list, depth);
    if (r == -ECANCELED)
        return cost_exceeded(ctx);
    if (r == -ENOBUFS)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "flatten: result too large");
    if (r < 0)
        return oom(ctx);
    return wrap_list(ctx, f.items, f.n);
}

static struct cel_value list_range(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    int64_t count = args[0].i;
    struct cel_value *items;

    if (count <= 0)
        return make_list(ctx, NULL, 0);
    if ((uint64_t)count > CEL_LIST_MAX)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "lists.range: %lld elements is too many",
                             (long long)count);
    if (!cel_ctx_charge(ctx, (uint64_t)count))
        return cost_exceeded(ctx);
    items = cel_region_alloc(cel_ctx_region(ctx), (size_t)count * sizeof(*items));
    if (!items)
        return oom(ctx);
    for (int64_t i = 0; i < count; i++)
        items[i] = cel_int(i);
    return wrap_list(ctx, items, (size_t)count);
}

/* distinct(): the first occurrence of each value by CEL equality, in order. Quadratic, charged per
 * comparison; lists in selectors are short. */
static struct cel_value list_distinct(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                      size_t n)
{
    const struct cel_vlist *l = args[0].list;
    struct cel_value *out;
    size_t k = 0;

    out = cel_region_alloc(cel_ctx_region(ctx), (l->n ? l->n : 1) * sizeof(*out));
    if (!out)
        return oom(ctx);
    for (size_t i = 0; i < l->n; i++) {
        size_t j = 0;

        if (!cel_ctx_charge(ctx, k + 1))
            return cost_exceeded(ctx);
        while (j < k && !cel_value_equal(out[j], l->items[i]))
            j++;
        if (j == k)
            out[k++] = l->items[i];
    }
    return wrap_list(ctx, out, k);
}

static struct cel_value list_reverse(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                     size_t n)
{
    const struct cel_vlist *l = args[0].list;
    struct cel_value *out = cel_region_alloc(cel_ctx_region(ctx), (l->n ? l->n : 1) * sizeof(*out));

    if (!out)
        return oom(ctx);
    for (size_t i = 0; i < l->n; i++)
        out[i] = l->items[l->n - 1 - i];
    return wrap_list(ctx, out, l->n);
}

/* ---- sorting ---- */

/* A stable merge sort of idx[] by keys[idx[i]], so sort() and sortBy() keep equal elements in
 * their input order. The first incomparable pair (mixed types) aborts with -EINVAL. */
struct sorter {
    struct cel_eval_ctx *ctx;
    const struct cel_value *keys;
    size_t *tmp;
    int err;
    struct cel_value bad_a, bad_b;
};

static bool key_le(struct sorter *s, size_t a, size_t b)
{
    int cmp = 0, r = cel_value_compare(s->keys[a], s->keys[b], &cmp);

    if (r == -EDOM)
        return true; /* NaN: every comparison false; keep input order */
    if (r < 0 && s->err == 0) {
        s->err = r;
        s->bad_a = s->keys[a];
        s->bad_b = s->keys[b];
    }
    return cmp <= 0;
}

static void merge_sort(struct sorter *s, size_t *idx, size_t n)
{
    size_t half = n / 2, i = 0, j = half, k = 0;

    if (n < 2 || s->err)
        return;
    merge_sort(s, idx, half);
    merge_sort(s, idx + half, n - half);
    while (i < half && j < n)
        s->tmp[k++] = key_le(s, idx[i], idx[j]) ? idx[i++] : idx[j++];
    while (i < half)
        s->tmp[k++] = idx[i++];
    while (j < n)
        s->tmp[k++] = idx[j++];
    memcpy(idx, s->tmp, n * sizeof(*idx));
}

/* items sorted by keys (keys == items for sort()). */
static struct cel_value sort_by_keys(struct cel_eval_ctx *ctx, const struct cel_vlist *items,
                                     const struct cel_value *keys, const char *fn)
{
    struct cel_region *a = cel_ctx_region(ctx);
    size_t n = items->n, alloc = n ? n : 1;
    struct sorter s = {.ctx = ctx, .keys = keys};
    size_t *idx = cel_region_alloc(a, alloc * sizeof(*idx));
    struct cel_value *out = cel_region_alloc(a, alloc * sizeof(*out));

    s.tmp = cel_region_alloc(a, alloc * sizeof(*s.tmp));
    if (!idx || !out || !s.tmp)
        return oom(ctx);
    /* n log n comparisons */
    if (!cel_ctx_charge(ctx, (uint64_t)n * (uint64_t)(64 - __builtin_clzll((uint64_t)n | 1))))
        return cost_exceeded(ctx);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    merge_sort(&s, idx, n);
    if (s.err)
        return compare_error(ctx, fn, s.bad_a, s.bad_b);
    for (size_t i = 0; i < n; i++)
        out[i] = items->items[idx[i]];
    return wrap_list(ctx, out, n);
}

static struct cel_value list_sort(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return sort_by_keys(ctx, args[0].list, args[0].list->items, "sort");
}

/* The sortBy macro's target: list.@sortByAssociatedKeys(keys), keys computed by a map(). */
static struct cel_value list_sort_by_keys(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                          size_t n)
{
    if (args[0].list->n != args[1].list->n)
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT,
                             "@sortByAssociatedKeys: %zu elements and %zu keys", args[0].list->n,
                             args[1].list->n);
    return sort_by_keys(ctx, args[0].list, args[1].list->items, "sortBy");
}

static const struct cel_overload OVERLOADS[] = {
    /* Kubernetes lists */
    {.name = "isSorted",
     .receiver = true,
     .sig = "(list(A)) -> bool",
     .fn = list_is_sorted,
     .cost_fn = cost_per_elem},
    {.name = "sum",
     .receiver = true,
     .sig = "(list(A)) -> A",
     .fn = list_sum,
     .cost_fn = cost_per_elem},
    {.name = "min",
     .receiver = true,
     .sig = "(list(A)) -> A",
     .fn = list_min,
     .cost_fn = cost_per_elem},
    {.name = "max",
     .receiver = true,
     .sig = "(list(A)) -> A",
     .fn = list_max,
     .cost_fn = cost_per_elem},
    {.name = "indexOf",
     .receiver = true,
     .sig = "(list(A), A) -> int",
     .fn = list_index_of,
     .cost_fn = cost_per_elem},
    {.name = "lastIndexOf",
     .receiver = true,
     .sig = "(list(A), A) -> int",
     .fn = list_last_index_of,
     .cost_fn = cost_per_elem},
    /* ext lists v3 */
    {.name = "slice", .receiver = true, .sig = "(list(A), int, int) -> list(A)", .fn = list_slice},
    {.name = "flatten", .receiver = true, .sig = "(list(list(A))) -> list(A)", .fn = list_flatten},
    {.name = "flatten",
     .receiver = true,
     .sig = "(list(dyn), int) -> list(dyn)",
     .fn = list_flatten},
    {.name = "lists.range", .receiver = false, .sig = "(int) -> list(int)", .fn = list_range},
    {.name = "distinct", .receiver = true, .sig = "(list(A)) -> list(A)", .fn = list_distinct},
    {.name = "reverse",
     .receiver = true,
     .sig = "(list(A)) -> list(A)",
     .fn = list_reverse,
     .cost_fn = cost_per_elem},
    {.name = "sort", .receiver = true, .sig = "(list(A)) -> list(A)", .fn = list_sort},
    {.name = "@sortByAssociatedKeys",
     .receiver = true,
     .sig = "(list(A), list(B)) -> list(A)",
     .fn = list_sort_by_keys},
};

const struct cel_library cel_lib_lists = {"lists", OVERLOADS, ARRAY_SIZE(OVERLOADS)};
