/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the evaluator and the API around it (cel-eval.c, cel-env.c, cel-cache.c): CEL semantics
 * as a table of expressions and printed results (error absorption by && and ||, overflow, maps
 * with mixed numeric keys, comprehensions, optionals), activations, the cost and depth limits,
 * reuse of one evaluator without allocation, and the program cache.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cel-internal.h"
#include "cel.h"

#define EVAL_ERROR "<eval error>"
#define COMPILE_ERROR "<compile error>"

struct row {
    const char *expr;
    const char *want; /* the printed value, EVAL_ERROR or COMPILE_ERROR */
};

static void check_row(struct cel_env *env, struct cel_evaluator *ev, struct cel_activation *act,
                      const struct row *c)
{
    _cleanup_(cel_program_unrefp) struct cel_program *p = NULL;
    _cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
    struct cel_value v;
    struct diag d;
    int r;

    diag_init(&d);
    r = cel_compile(env, c->expr, strlen(c->expr), &p, &d);
    if (strcmp(c->want, COMPILE_ERROR) == 0) {
        if (r >= 0)
            fail_msg("%s: compiled, expected a compile error", c->expr);
        return;
    }
    if (r < 0)
        fail_msg("%s: compile error: %s", c->expr, d.msg);
    v = cel_eval(ev, p, act, NULL);
    assert_int_equal(cel_value_print(&out, v), 0);
    if (strcmp(c->want, EVAL_ERROR) == 0) {
        if (!cel_is_error(v))
            fail_msg("%s: got %s, expected an evaluation error", c->expr, strbuf_str(&out));
        return;
    }
    if (cel_is_error(v) || strcmp(strbuf_str(&out), c->want) != 0)
        fail_msg("%s: got %s%s, expected %s", c->expr, cel_is_error(v) ? "error " : "",
                 strbuf_str(&out), c->want);
}

static void run_rows(const struct row *rows, size_t n)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_evaluator_freep) struct cel_evaluator *ev = NULL;

    assert_int_equal(cel_env_new(CEL_LIBS_DRA, &env), 0);
    assert_int_equal(cel_evaluator_new(&ev), 0);
    for (size_t i = 0; i < n; i++)
        check_row(env, ev, NULL, &rows[i]);
}

static void test_logic(void **state)
{
    static const struct row rows[] = {
        {"false && 1 / 0 == 1", "false"},
        {"1 / 0 == 1 && false", "false"},
        {"true || 1 / 0 == 1", "true"},
        {"1 / 0 == 1 || true", "true"},
        {"true && 1 / 0 == 1", EVAL_ERROR},
        {"1 / 0 == 1 || false", EVAL_ERROR},
        {"!(1 / 0 == 1) || !true", EVAL_ERROR},
        {"true ? 1 : 1 / 0", "1"},
        {"false ? 1 / 0 : 2", "2"},
        {"(1 / 0 == 1) ? 1 : 2", EVAL_ERROR},
        {"!false", "true"},
        {"'a' && true", COMPILE_ERROR},
    };

    run_rows(rows, ARRAY_SIZE(rows));
}

static void test_arithmetic(void **state)
{
    static const struct row rows[] = {
        {"9223372036854775807 + 1", EVAL_ERROR},
        {" -9223372036854775808 - 1", EVAL_ERROR},
        {" -9223372036854775808 / -1", EVAL_ERROR},
        {"5 % 0", EVAL_ERROR},
        {"5 / 0", EVAL_ERROR},
        {"7 % -3", "1"},
        {" -7 / 2", "-3"},
        {"0u - 1u", EVAL_ERROR},
        {"18446744073709551615u + 1u", EVAL_ERROR},
        {"3u * 4u", "12u"},
        {"1.0 / 0.0", "double(\"Infinity\")"},
        {"0.0 / 0.0 == 0.0 / 0.0", "false"},
        {"2.5 * 2.0", "5.0"},
        {"'ab' + 'cd'", "\"abcd\""},
        {"b'a' + b'\\xff'", "b\"a\\xff\""},
        {"[1] + [2, 3]", "[1, 2, 3]"},
        {"1 + 1u", COMPILE_ERROR},
        {"dyn(1) + 1u", EVAL_ERROR},
    };

    run_rows(rows, ARRAY_SIZE(rows));
}

static void test_equality_and_order(void **state)
{
    static const struct row rows[] = {
        {"dyn(1) == 1u", "true"},
        {"dyn(1) == 1.0", "true"},
        {"1 < 1.5", "true"},
        {"2u > -1", "true"},
        {"dyn('a') == 1", "false"},
        {"[1, 2] == [1, 2]", "true"},
        {"{'a': 1} == {'a': 1u}", COMPILE_ERROR},
        {"{'a': dyn(1)} == {'a': dyn(1u)}", "true"},
        {"'abc' < 'abd'", "true"},
        {"b'a' < b'b'", "true"},
        {"false < true", "true"},
        {"1 == 1.0", COMPILE_ERROR},
        {"type(1) == int", "true"},
        {"type(type(1))", "type"},
        {"type([]) == list && type({}) == map", "true"},
        {"type(null)", "null_type"},
    };

    run_rows(rows, ARRAY_SIZE(rows));
}

static void test_maps_and_lists(void **state)
{
    static const struct row rows[] = {
        {"{1: 'a'}[dyn(1u)]", "\"a\""},
        {"{1u: 'a'}[dyn(1)]", "\"a\""},
        {"{1: 'a'}[dyn(1.0)]", "\"a\""},
        {"{1: 'a'}[1u]", COMPILE_ERROR},
        {"{'a': 1}['b']", EVAL_ERROR},
        {"{'a': 1}.a", "1"},
        {"has({'a': 1}.a)", "true"},
        {"has({'a': 1}.b)", "false"},
        {"2 in {1: 'a', 2: 'b'}", "true"},
        {"2u in [1, 2]", COMPILE_ERROR},
        {"dyn(2u) in [1, 2]", "true"},
        {"[1, 2, 3][3]", EVAL_ERROR},
        {"[1, 2, 3][1]", "2"},
        {"size([1, 2]) + size({'a': 1}) + size('héllo') + size(b'ab')", "10"},
        {"{'b': 1, 'a': 2}", "{\"a\": 2, \"b\": 1}"},
        {"{true: 1, 1: 2}", COMPILE_ERROR},
        {"{'a': 1, 'a': 2}", "<any>"},
    };

    /* the last row's outcome is not asserted (cel-go and the spec differ) */
    run_rows(rows, ARRAY_SIZE(rows) - 1);
}

static void test_comprehensions(void **state)
{
    static const struct row rows[] = {
        {"[1, 2, 3].map(x, x * 2)", "[2, 4, 6]"},
        {"[1, 2, 3].filter(x, x > 1)", "[2, 3]"},
        {"[1, 2, 3].all(x, x > 0)", "true"},
        {"[1, 2, 3].exists(x, x > 2)", "true"},
        {"[1, 2, 3].exists_one(x, x > 1)", "false"},
        {"[0, 1].exists(x, 1 / x == 1)", "true"},
        {"[0, 1].all(x, 1 / x == 1)", EVAL_ERROR},
        {"[1, 0].exists(x, 1 / x == 5)", EVAL_ERROR},
        {"{'a': 1, 'b': 2}.map(k, k)", "[\"a\", \"b\"]"},
        {"{'a': 1, 'b': 2}.all(k, v, v > 0)", "true"},
        {"[10, 20].transformList(i, v, i + v)", "[10, 21]"},
        {"{'a': 1}.transformMap(k, v, v * 2)", "{\"a\": 2}"},
        {"[1, 2, 3].map(x, [x].map(y, y * 10))", "[[10], [20], [30]]"},
        {"cel.bind(x, 2, x * x)", "4"},
        {"[1, 2].map(x, [3, 4].map(y, x * y))", "[[3, 4], [6, 8]]"},
    };

    run_rows(rows, ARRAY_SIZE(rows));
}

static void test_optionals(void **state)
{
    static const struct row rows[] = {
        {"{'a': 1}.?a", "optional.of(1)"},
        {"{'a': 1}.?b", "optional.none()"},
        {"{'a': 1}[?'b'].orValue(5)", "5"},
        {"[1, 2][?5].hasValue()", "false"},
        {"[?optional.none(), ?optional.of(1)]", "[1]"},
        {"{?'a': optional.none(), 'b': 2}", "{\"b\": 2}"},
        {"optional.of({'a': {'b': 1}}).a.b", "optional.of(1)"},
        {"optional.none().a.b", "optional.none()"},
    };

    run_rows(rows, ARRAY_SIZE(rows));
}

static void test_variables(void **state)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_evaluator_freep) struct cel_evaluator *ev = NULL;
    _cleanup_(cel_activation_freep) struct cel_activation *act = NULL;
    static const struct row rows[] = {
        {"x + 1", "42"},
        {"s.startsWith('gp') && s.endsWith('u')", "true"},
        {"[x].map(x, x * 2)[0]", "82"},
        {"y", COMPILE_ERROR},
        {"unbound", EVAL_ERROR},
    };

    assert_int_equal(cel_env_new(CEL_LIBS_DRA, &env), 0);
    assert_int_equal(cel_env_declare(env, "x", "int"), 0);
    assert_int_equal(cel_env_declare(env, "s", "dyn"), 0);
    assert_int_equal(cel_env_declare(env, "unbound", "dyn"), 0);
    assert_int_equal(cel_env_declare(env, "x", "int"), -EEXIST);
    assert_int_equal(cel_env_declare(env, "bad", "list("), -EINVAL);
    assert_int_equal(cel_evaluator_new(&ev), 0);
    assert_int_equal(cel_activation_new(env, &act), 0);
    assert_int_equal(cel_activation_bind(act, "x", cel_int(41)), 0);
    assert_int_equal(cel_activation_bind(act, "s", cel_string("gpu", 3)), 0);
    assert_int_equal(cel_activation_bind(act, "nope", cel_int(1)), -ENOENT);
    assert_int_equal(cel_env_var_index(env, "s"), 1);
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
        check_row(env, ev, act, &rows[i]);
}

static struct cel_value eval_expr(struct cel_env *env, struct cel_evaluator *ev, const char *expr,
                                  uint64_t limit)
{
    _cleanup_(cel_program_unrefp) struct cel_program *p = NULL;
    struct cel_eval_opts opts = {.cost_limit = limit};
    struct diag d;

    diag_init(&d);
    if (cel_compile(env, expr, strlen(expr), &p, &d) < 0)
        fail_msg("%s: %s", expr, d.msg);
    return cel_eval(ev, p, NULL, &opts);
}

static void test_cost_limit(void **state)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_evaluator_freep) struct cel_evaluator *ev = NULL;
    struct cel_value v;
    const char *big = "lists.range(2000).map(x, lists.range(2000).map(y, x * y)).size()";

    assert_int_equal(cel_env_new(CEL_LIBS_DRA, &env), 0);
    assert_int_equal(cel_evaluator_new(&ev), 0);
    v = eval_expr(env, ev, big, 0);
    assert_int_equal(v.kind, CEL_ERROR);
    assert_int_equal(v.err->code, CEL_ERR_COST_LIMIT);
    assert_string_equal(v.err->msg, "operation cancelled: actual cost limit exceeded");
    assert_int_equal(cel_evaluator_cost(ev), CEL_DEFAULT_COST_LIMIT);
    /* an error absorbed by || does not hide the limit: the whole evaluation stops */
    v = eval_expr(env, ev, "true || lists.range(100).map(x, x).size() > 0", 5);
    assert_int_equal(v.kind, CEL_BOOL);
    v = eval_expr(env, ev, "lists.range(100).map(x, x).size() > 0 || true", 5);
    assert_int_equal(v.kind, CEL_ERROR);
    assert_int_equal(v.err->code, CEL_ERR_COST_LIMIT);
    /* small selectors stay far below the limit */
    v = eval_expr(env, ev, "'gpu'.startsWith('g') && 1 < 2", 0);
    assert_true(v.kind == CEL_BOOL && v.b);
    assert_true(cel_evaluator_cost(ev) < 20);
}

static void test_depth_limit(void **state)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_program_unrefp) struct cel_program *p = NULL;
    char expr[4096];
    size_t n = 0;
    struct diag d;

    /* the parser's nesting limit refuses what the evaluator could not recurse through */
    assert_int_equal(cel_env_new(CEL_LIBS_DRA, &env), 0);
    for (int i = 0; i < 1000; i++)
        expr[n++] = '[';
    expr[n++] = '1';
    for (int i = 0; i < 1000; i++)
        expr[n++] = ']';
    diag_init(&d);
    assert_true(cel_compile(env, expr, n, &p, &d) < 0);
    assert_non_null(strstr(d.msg, ":"));
}

/* After the first run, evaluating the same selector again allocates nothing: the region keeps
 * its block, so its size never changes (the evaluator's internals are visible to this test). */
static void test_reuse_without_growth(void **state)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_evaluator_freep) struct cel_evaluator *ev = NULL;
    _cleanup_(cel_program_unrefp) struct cel_program *p = NULL;
    const char *expr = "[1, 2, 3].filter(x, x > 1).size() == 2 && 'a' + 'b' == 'ab'";
    struct diag d;
    struct cel_value v;
    size_t total = 0;

    assert_int_equal(cel_env_new(CEL_LIBS_DRA, &env), 0);
    assert_int_equal(cel_evaluator_new(&ev), 0);
    diag_init(&d);
    assert_int_equal(cel_compile(env, expr, strlen(expr), &p, &d), 0);
    for (int i = 0; i < 100; i++) {
        v = cel_eval(ev, p, NULL, NULL);
        assert_true(v.kind == CEL_BOOL && v.b);
        if (i == 0)
            total = ev->ctx.region.total;
        assert_int_equal(ev->ctx.region.total, total);
    }
}

static void test_compile_errors(void **state)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_program_unrefp) struct cel_program *p = NULL;
    struct diag d;

    assert_int_equal(cel_env_new(CEL_LIBS_DRA, &env), 0);
    diag_init(&d);
    assert_int_equal(cel_compile(env, "1 +", 3, &p, &d), -EINVAL);
    assert_int_equal(d.line, 1);
    assert_non_null(strstr(d.msg, "1:"));
    diag_init(&d);
    assert_true(cel_compile(env, "nope(1)", 7, &p, &d) < 0);
    assert_non_null(strstr(d.msg, "nope"));
    diag_init(&d);
    assert_true(cel_compile(env, "'a'.matches('(?=x)')", 20, &p, &d) < 0);
    cel_env_require_bool(env, true);
    diag_init(&d);
    assert_true(cel_compile(env, "1 + 1", 5, &p, &d) < 0);
    assert_int_equal(cel_compile(env, "1 == 1", 6, &p, &d), 0);
    assert_string_equal(cel_program_expr(p), "1 == 1");
}

static void test_cache(void **state)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_cache_freep) struct cel_cache *c = NULL;
    struct cel_program *a = NULL, *b = NULL, *x = NULL;
    struct diag d;
    char expr[32];

    assert_int_equal(cel_env_new(CEL_LIBS_DRA, &env), 0);
    assert_int_equal(cel_cache_new(env, 4, &c), 0);
    assert_int_equal(cel_cache_get(c, "1 + 1", 5, &a, &d), 0);
    assert_int_equal(cel_cache_get(c, "1 + 1", 5, &b, &d), 0);
    assert_ptr_equal(a, b);
    /* a failed compile is cached with its message */
    diag_init(&d);
    assert_int_equal(cel_cache_get(c, "1 +", 3, &x, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "1:"));
    diag_init(&d);
    assert_int_equal(cel_cache_get(c, "1 +", 3, &x, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "1:"));
    assert_null(x);
    /* evicting "1 + 1" leaves the references handed out valid */
    for (int i = 0; i < 10; i++) {
        struct cel_program *p = NULL;
        int n = snprintf(expr, sizeof(expr), "%d", i);

        assert_int_equal(cel_cache_get(c, expr, (size_t)n, &p, &d), 0);
        cel_program_unref(p);
    }
    assert_string_equal(cel_program_expr(a), "1 + 1");
    cel_program_unref(a);
    cel_program_unref(b);
    assert_int_equal(cel_cache_new(env, 0, &c), -EINVAL);
}

static int site_frees;

static void site_free(void *p)
{
    site_frees++;
    free(p);
}

/* Caches its argument at the call site; returns whether the cached value matched. */
static struct cel_value fn_sitecache(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    int64_t *cached = cel_ctx_site_get(ctx), *fresh;

    if (cached && *cached == a[0].i)
        return cel_bool(true);
    fresh = malloc(sizeof(*fresh));
    if (!fresh)
        return cel_ctx_error(ctx, CEL_ERR_MEMORY, "oom");
    *fresh = a[0].i;
    if (cel_ctx_site_set(ctx, fresh, site_free) < 0)
        return cel_ctx_error(ctx, CEL_ERR_MEMORY, "oom");
    return cel_bool(*fresh == a[0].i && false);
}

/* The first data stored at a site stays; later data is the evaluation's and is freed with it. */
static void test_site_cache(void **state)
{
    static const struct cel_overload ovl[] = {
        {.name = "sitecache", .sig = "(int) -> bool", .fn = fn_sitecache},
    };
    static const struct cel_library lib = {"sitecache", ovl, ARRAY_SIZE(ovl)};
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_evaluator_freep) struct cel_evaluator *ev = NULL;
    _cleanup_(cel_activation_freep) struct cel_activation *act = NULL;
    struct cel_program *p = NULL;
    struct cel_value v;
    struct diag d;

    site_frees = 0;
    assert_int_equal(cel_env_new(0, &env), 0);
    assert_int_equal(cel_env_add_library(env, &lib), 0);
    assert_int_equal(cel_env_declare(env, "x", "int"), 0);
    assert_int_equal(cel_evaluator_new(&ev), 0);
    assert_int_equal(cel_activation_new(env, &act), 0);
    diag_init(&d);
    assert_int_equal(cel_compile(env, "sitecache(x)", 12, &p, &d), 0);
    cel_activation_set(act, 0, cel_int(1));
    v = cel_eval(ev, p, act, NULL);
    assert_false(v.b); /* first call: stored */
    v = cel_eval(ev, p, act, NULL);
    assert_true(v.b); /* second call: found */
    cel_activation_set(act, 0, cel_int(2));
    v = cel_eval(ev, p, act, NULL);
    assert_false(v.b); /* a different argument does not replace the site's data */
    assert_int_equal(site_frees, 0);
    cel_activation_set(act, 0, cel_int(1));
    v = cel_eval(ev, p, act, NULL); /* resets the region: the evaluation's copy is freed */
    assert_true(v.b);
    assert_int_equal(site_frees, 1);
    cel_program_unref(p);
    assert_int_equal(site_frees, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logic),
        cmocka_unit_test(test_arithmetic),
        cmocka_unit_test(test_equality_and_order),
        cmocka_unit_test(test_maps_and_lists),
        cmocka_unit_test(test_comprehensions),
        cmocka_unit_test(test_optionals),
        cmocka_unit_test(test_variables),
        cmocka_unit_test(test_cost_limit),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_reuse_without_growth),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_site_cache),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
