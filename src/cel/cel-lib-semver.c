/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes' CEL Semver library, version 1 (kubernetes.Semver): semver(s[, normalize]),
 * isSemver(s[, normalize]), and on a version compareTo() (-1, 0, 1 by SemVer precedence),
 * isGreaterThan(), isLessThan(), major(), minor(), patch(); == is precedence equality, so build
 * metadata does not count. No ordering operators, as in Kubernetes. Parsing is cel-semver.c.
 *
 * semver() with a constant argument parses once per call site (the site cache keeps the first
 * result), so `x.isGreaterThan(semver("550.0.0"))` allocates nothing per evaluation.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base-strbuf.h"
#include "cel-k8s.h"
#include "cel-lib.h"

const struct cel_type cel_type_semver = {"kubernetes.Semver"};

static const struct cel_semver *varg(const struct cel_value *v)
{
    return &((const struct cel_semver_obj *)(const void *)v->obj)->v;
}

static const struct cel_semver *obj_semver(const struct cel_object *o)
{
    return &((const struct cel_semver_obj *)(const void *)o)->v;
}

static bool v_equal(const struct cel_object *a, const struct cel_object *b)
{
    return cel_semver_cmp(obj_semver(a), obj_semver(b)) == 0;
}

static int v_print(const struct cel_object *o, struct strbuf *out)
{
    int r = strbuf_addstr(out, "semver(\"");

    /* Versions hold only digits, letters, '-', '.' and '+': nothing to escape. */
    if (r >= 0)
        r = cel_semver_format(obj_semver(o), out);
    if (r >= 0)
        r = strbuf_addstr(out, "\")");
    return r;
}

static const struct cel_object_class semver_class = {
    .type = &cel_type_semver,
    .equal = v_equal,
    .print = v_print,
};

void cel_semver_obj_init(struct cel_semver_obj *o, const struct cel_semver *v)
{
    o->base.cls = &semver_class;
    o->v = *v;
}

const struct cel_semver *cel_value_semver(struct cel_value v)
{
    if (v.kind != CEL_OBJECT || v.obj->cls != &semver_class)
        return NULL;
    return varg(&v);
}

/* What a semver() call site keeps: the first argument it parsed (and the flag) and the result. */
struct semver_site {
    struct cel_semver_obj obj;
    bool normalize;
    size_t len;
    char text[]; /* obj.v's pre-release and build point here */
};

/* Re-points v's pre-release and build from text `from` to the same offsets in `to`. */
static void move_text(struct cel_semver *v, const char *from, const char *to)
{
    if (v->pre_len)
        v->pre = to + (v->pre - from);
    if (v->build_len)
        v->build = to + (v->build - from);
}

static struct cel_value new_semver(struct cel_eval_ctx *ctx, const struct cel_semver *v)
{
    struct cel_semver_obj *o = cel_region_alloc(cel_ctx_region(ctx), sizeof(*o));

    if (!o)
        return cel_ctx_error(ctx, CEL_ERR_MEMORY, "out of memory");
    cel_semver_obj_init(o, v);
    return cel_semver_value(o);
}

static struct cel_value fn_semver(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    struct semver_site *site = cel_ctx_site_get(ctx), *fresh;
    bool normalize = n > 1 && args[1].b;
    struct cel_semver v;
    struct diag d;
    int err;

    if (site && site->normalize == normalize && site->len == args[0].n &&
        memcmp(site->text, args[0].s, site->len) == 0)
        return cel_semver_value(&site->obj);
    diag_init(&d);
    err = cel_semver_parse(args[0].s, args[0].n, normalize, &d, &v);
    if (err < 0)
        return cel_ctx_error(ctx, err == -ENOMEM ? CEL_ERR_MEMORY : CEL_ERR_INVALID_ARGUMENT, "%s",
                             d.msg);
    if (site)
        return new_semver(ctx, &v);
    fresh = malloc(sizeof(*fresh) + args[0].n + 1);
    if (!fresh)
        return new_semver(ctx, &v);
    fresh->normalize = normalize;
    fresh->len = args[0].n;
    memcpy(fresh->text, args[0].s, args[0].n);
    fresh->text[args[0].n] = '\0';
    cel_semver_obj_init(&fresh->obj, &v);
    move_text(&fresh->obj.v, args[0].s, fresh->text);
    if (cel_ctx_site_set(ctx, fresh, free) < 0) /* fresh is freed then */
        return new_semver(ctx, &v);
    return cel_semver_value(&fresh->obj);
}

static struct cel_value fn_is_semver(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                     size_t n)
{
    struct cel_semver v;

    return cel_bool(cel_semver_parse(args[0].s, args[0].n, n > 1 && args[1].b, NULL, &v) == 0);
}

/* Kubernetes returns the uint64 numbers as CEL ints (so above 2^63 - 1 they wrap). */
static struct cel_value fn_major(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return cel_int((int64_t)varg(&args[0])->major);
}

static struct cel_value fn_minor(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return cel_int((int64_t)varg(&args[0])->minor);
}

static struct cel_value fn_patch(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return cel_int((int64_t)varg(&args[0])->patch);
}

static struct cel_value fn_compare_to(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                      size_t n)
{
    return cel_int(cel_semver_cmp(varg(&args[0]), varg(&args[1])));
}

static struct cel_value fn_greater(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return cel_bool(cel_semver_cmp(varg(&args[0]), varg(&args[1])) > 0);
}

static struct cel_value fn_less(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    return cel_bool(cel_semver_cmp(varg(&args[0]), varg(&args[1])) < 0);
}

/* Kubernetes charges parsing as a string traversal: ceil(0.1 * length). */
static uint64_t cost_parse(const struct cel_value *args, size_t n, struct cel_value result)
{
    return ((uint64_t)args[0].n + 9) / 10;
}

#define V "kubernetes.Semver"

static const struct cel_overload OVERLOADS[] = {
    {.name = "semver", .sig = "(string) -> " V, .fn = fn_semver, .cost_fn = cost_parse},
    {.name = "semver", .sig = "(string, bool) -> " V, .fn = fn_semver, .cost_fn = cost_parse},
    {.name = "isSemver", .sig = "(string) -> bool", .fn = fn_is_semver, .cost_fn = cost_parse},
    {.name = "isSemver",
     .sig = "(string, bool) -> bool",
     .fn = fn_is_semver,
     .cost_fn = cost_parse},
    {.name = "major", .receiver = true, .sig = "(" V ") -> int", .fn = fn_major},
    {.name = "minor", .receiver = true, .sig = "(" V ") -> int", .fn = fn_minor},
    {.name = "patch", .receiver = true, .sig = "(" V ") -> int", .fn = fn_patch},
    {.name = "compareTo", .receiver = true, .sig = "(" V ", " V ") -> int", .fn = fn_compare_to},
    {.name = "isGreaterThan", .receiver = true, .sig = "(" V ", " V ") -> bool", .fn = fn_greater},
    {.name = "isLessThan", .receiver = true, .sig = "(" V ", " V ") -> bool", .fn = fn_less},
};

const struct cel_library cel_lib_semver = {"semver", OVERLOADS, ARRAY_SIZE(OVERLOADS)};
