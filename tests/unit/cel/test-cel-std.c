/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the standard and time libraries (cel-lib-std.c, cel-lib-time.c): conversions with
 * their range and format rules, string predicates, size(), type(), timestamps and durations
 * (parsing, printing, arithmetic ranges, getters with offsets), and the registry's dispatch.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cel-internal.h"
#include "cel.h"

#define EVAL_ERROR "<eval error>"
#define ANY_ERROR "<error>"

struct row {
    const char *expr;
    const char *want;
};

static void run_rows(const struct row *rows, size_t n)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_evaluator_freep) struct cel_evaluator *ev = NULL;

    assert_int_equal(cel_env_new(CEL_LIBS_DRA, &env), 0);
    assert_int_equal(cel_evaluator_new(&ev), 0);
    for (size_t i = 0; i < n; i++) {
        _cleanup_(cel_program_unrefp) struct cel_program *p = NULL;
        _cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
        const struct row *c = &rows[i];
        struct cel_value v;
        struct diag d;
        int r;

        diag_init(&d);
        r = cel_compile(env, c->expr, strlen(c->expr), &p, &d);
        if (r < 0) {
            if (strcmp(c->want, ANY_ERROR) != 0)
                fail_msg("%s: compile error: %s", c->expr, d.msg);
            continue;
        }
        v = cel_eval(ev, p, NULL, NULL);
        assert_int_equal(cel_value_print(&out, v), 0);
        if (strcmp(c->want, EVAL_ERROR) == 0 || strcmp(c->want, ANY_ERROR) == 0) {
            if (!cel_is_error(v))
                fail_msg("%s: got %s, expected an error", c->expr, strbuf_str(&out));
            continue;
        }
        if (cel_is_error(v) || strcmp(strbuf_str(&out), c->want) != 0)
            fail_msg("%s: got %s%s, expected %s", c->expr, cel_is_error(v) ? "error " : "",
                     strbuf_str(&out), c->want);
    }
}

static void test_int_uint_double(void **state)
{
    static const struct row rows[] = {
        {"int(1.9)", "1"},
        {"int(-1.9)", "-1"},
        {"int(9.3e18)", ANY_ERROR},
        {"int(dyn(-9.3e18))", EVAL_ERROR},
        {"int(18446744073709551615u)", ANY_ERROR},
        {"int('-42')", "-42"},
        {"int('0x10')", ANY_ERROR},
        {"int(' 1')", ANY_ERROR},
        {"int('9223372036854775808')", ANY_ERROR},
        {"uint(-1)", ANY_ERROR},
        {"uint(dyn(1.5))", "1u"},
        {"uint('18446744073709551615')", "18446744073709551615u"},
        {"uint('-1')", ANY_ERROR},
        {"double(1)", "1.0"},
        {"double('1e3')", "1000.0"},
        {"double('NaN')", "double(\"NaN\")"},
        {"double('-Infinity')", "double(\"-Infinity\")"},
        {"double('x')", ANY_ERROR},
        {"double(18446744073709551615u)", "18446744073709551616.0"},
    };

    run_rows(rows, ARRAY_SIZE(rows));
}

static void test_string_bytes_bool(void **state)
{
    static const struct row rows[] = {
        {"string(123.456)", "\"123.456\""},
        {"string(-4.5e-3)", "\"-0.0045\""},
        {"string(1e6)", "\"1e+06\""},
        {"string(123456.0)", "\"123456\""},
        {"string(1.0)", "\"1\""},
        {"string(1e-5)", "\"1e-05\""},
        {"string(dyn(0.0 / 0.0))", "\"NaN\""},
        {"string(18446744073709551615u)", "\"18446744073709551615\""},
        {"string(true)", "\"true\""},
        {"string(b'\\xc3\\xbf')", "\"\xc3\xbf\""},
        {"string(dyn(b'\\xff'))", EVAL_ERROR},
        {"string(dyn(b'\\xed\\xa0\\x80'))", EVAL_ERROR},
        {"bytes('ÿ')", "b\"\\xc3\\xbf\""},
        {"bool('TRUE')", "true"},
        {"bool('f')", "false"},
        {"bool(dyn('yes'))", EVAL_ERROR},
        {"dyn([1])", "[1]"},
        {"type(dyn(1u))", "uint"},
        {"type(timestamp('2000-01-01T00:00:00Z'))", "google.protobuf.Timestamp"},
    };

    run_rows(rows, ARRAY_SIZE(rows));
}

static void test_string_functions(void **state)
{
    static const struct row rows[] = {
        {"'hello'.contains('ell')", "true"},
        {"'hello'.contains('')", "true"},
        {"''.contains('a')", "false"},
        {"'hello'.startsWith('he')", "true"},
        {"'hello'.endsWith('lo')", "true"},
        {"'hello'.endsWith('hello!')", "false"},
        {"'H100 80GB'.matches('^H1[0-9]+')", "true"},
        {"matches('abc', 'c$')", "true"},
        {"size('日本')", "2"},
        {"'日本'.size()", "2"},
    };

    run_rows(rows, ARRAY_SIZE(rows));
}

static void test_time(void **state)
{
    static const struct row rows[] = {
        {"timestamp('2009-02-13T23:31:30Z')", "timestamp(\"2009-02-13T23:31:30Z\")"},
        {"string(timestamp('2009-02-13T23:31:30.120Z'))", "\"2009-02-13T23:31:30.12Z\""},
        {"timestamp('2009-02-14T01:31:30+02:00') == timestamp('2009-02-13T23:31:30Z')", "true"},
        {"int(timestamp('2009-02-13T23:31:30Z'))", "1234567890"},
        {"timestamp(1234567890) == timestamp('2009-02-13T23:31:30Z')", "true"},
        {"timestamp('2009-02-30T00:00:00Z')", ANY_ERROR},
        {"timestamp('2009-02-13 23:31:30Z')", ANY_ERROR},
        {"duration('1h30m')", "duration(\"5400s\")"},
        {"duration('-1.5s')", "duration(\"-1.5s\")"},
        {"duration('1ms') + duration('2us')", "duration(\"0.001002s\")"},
        {"duration('1x')", ANY_ERROR},
        {"duration('')", ANY_ERROR},
        {"timestamp('2009-02-13T23:31:30Z') - timestamp('2009-02-13T23:30:00Z')",
         "duration(\"90s\")"},
        {"timestamp('9999-12-31T23:59:59Z') + duration('1s')", EVAL_ERROR},
        {"timestamp('2009-02-13T23:31:30Z').getDayOfWeek()", "5"},
        {"timestamp('2009-02-13T23:31:30Z').getDayOfYear()", "43"},
        {"timestamp('2009-02-13T23:31:30Z').getMonth()", "1"},
        {"timestamp('2009-02-13T23:31:30Z').getDate()", "13"},
        {"timestamp('2009-02-13T23:31:30Z').getHours('+01:30')", "1"},
        {"timestamp('2009-02-13T23:31:30Z').getDayOfMonth('-23:00')", "12"},
        {"timestamp('2009-02-13T23:31:30Z').getHours('Mars/Olympus')", EVAL_ERROR},
        {"timestamp('2009-02-13T23:31:20.123456789Z').getMilliseconds()", "123"},
        {"duration('3730s').getMinutes()", "62"},
        {"duration('1.5s').getMilliseconds()", "500"},
        {"duration('10s') < duration('1m')", "true"},
        {"timestamp('1970-01-01T00:00:00Z') < timestamp('1969-12-31T23:59:59Z')", "false"},
    };

    run_rows(rows, ARRAY_SIZE(rows));
}

static struct cel_value ovl_a(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    return cel_string("a", 1);
}

static struct cel_value ovl_b(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    return cel_string("b", 1);
}

/* Dispatch picks the first overload whose argument kinds match; arities are distinguished. */
static void test_registry(void **state)
{
    static const struct cel_overload ovl[] = {
        {.name = "pick", .sig = "(int, string) -> string", .fn = ovl_a},
        {.name = "pick", .sig = "(dyn, dyn) -> string", .fn = ovl_b},
        {.name = "pick", .sig = "(list(A)) -> string", .fn = ovl_a},
    };
    static const struct cel_library lib = {"test", ovl, ARRAY_SIZE(ovl)};
    struct cel_registry r = {0};
    const struct cel_func_entry *fe;
    struct cel_value args[2] = {cel_int(1), cel_string("x", 1)};
    const struct cel_ovl_rt *rt;

    assert_int_equal(cel_registry_add(&r, &lib), 0);
    fe = (const struct cel_func_entry *)cel_registry_find(&r, "pick", 4, false);
    assert_non_null(fe);
    assert_null(cel_registry_find(&r, "pick", 4, true));
    assert_null(cel_registry_find(&r, "pic", 3, false));
    assert_int_equal(fe->f.n, 3);
    assert_int_equal(cel_overload_arity(&ovl[2]), 1);
    rt = cel_registry_dispatch(fe, args, 2);
    assert_ptr_equal(rt->o, &ovl[0]);
    args[0] = cel_uint(1);
    rt = cel_registry_dispatch(fe, args, 2);
    assert_ptr_equal(rt->o, &ovl[1]);
    assert_null(cel_registry_dispatch(fe, args, 1));
    cel_registry_release(&r);
}

static void test_bad_signature(void **state)
{
    static const struct cel_overload ovl[] = {
        {.name = "bad", .sig = "int -> int", .fn = ovl_a},
    };
    static const struct cel_library lib = {"bad", ovl, ARRAY_SIZE(ovl)};
    struct cel_registry r = {0};

    assert_int_equal(cel_registry_add(&r, &lib), -EINVAL);
    cel_registry_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int_uint_double),  cmocka_unit_test(test_string_bytes_bool),
        cmocka_unit_test(test_string_functions), cmocka_unit_test(test_time),
        cmocka_unit_test(test_registry),         cmocka_unit_test(test_bad_signature),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
