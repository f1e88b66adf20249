/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the value layer (cel-value.c, cel-print.c): regions reuse their memory and run deferred
 * cleanups, maps unify int/uint keys and find them from doubles, equality and ordering follow CEL
 * (heterogeneous numbers, NaN), and printing gives the literal forms the CLI promises.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cel.h"

static void test_region_reuse(void **state)
{
    struct cel_region r;
    void *first;

    cel_region_init(&r, 0);
    first = cel_region_alloc(&r, 100);
    assert_non_null(first);
    assert_non_null(cel_region_alloc(&r, 100000)); /* a second, larger block */
    cel_region_reset(&r);
    /* the kept block serves the next evaluation without malloc */
    size_t kept = r.total;
    assert_int_equal(r.used, 0);
    assert_true(kept >= 100000);
    assert_non_null(cel_region_alloc(&r, 100));
    assert_non_null(cel_region_alloc(&r, 50000));
    assert_int_equal(r.total, kept);
    cel_region_release(&r);
    assert_null(r.head);
}

static void test_region_cap(void **state)
{
    struct cel_region r;

    cel_region_init(&r, 4096);
    assert_non_null(cel_region_alloc(&r, 4000));
    assert_null(cel_region_alloc(&r, 200));
    assert_null(cel_region_alloc(&r, SIZE_MAX - 8));
    cel_region_release(&r);
}

static int deferred;

static void count_defer(void *data)
{
    deferred += *(int *)data;
}

static void test_region_defer(void **state)
{
    struct cel_region r;
    int one = 1, ten = 10;

    deferred = 0;
    cel_region_init(&r, 0);
    assert_int_equal(cel_region_defer(&r, count_defer, &one), 0);
    assert_int_equal(cel_region_defer(&r, count_defer, &ten), 0);
    cel_region_reset(&r);
    assert_int_equal(deferred, 11);
    assert_int_equal(cel_region_defer(&r, count_defer, &one), 0);
    cel_region_release(&r);
    assert_int_equal(deferred, 12);
}

static const struct cel_vmap *build(struct cel_region *r, const struct cel_vmap_entry *e, size_t n)
{
    const struct cel_vmap *m = NULL;

    assert_int_equal(cel_vmap_build(r, e, n, NULL, &m), 0);
    return m;
}

static void test_map_keys(void **state)
{
    struct cel_region r;
    struct cel_vmap_entry e[] = {
        {cel_int(1), cel_string("a", 1)},     {cel_uint(2), cel_string("b", 1)},
        {cel_bool(true), cel_string("c", 1)}, {cel_string("k", 1), cel_string("d", 1)},
        {cel_int(-5), cel_string("e", 1)},
    };
    const struct cel_vmap *m;
    struct cel_value v;

    cel_region_init(&r, 0);
    m = build(&r, e, ARRAY_SIZE(e));
    assert_true(cel_vmap_find(m, cel_uint(1), &v));
    assert_memory_equal(v.s, "a", 1);
    assert_true(cel_vmap_find(m, cel_int(2), &v));
    assert_true(cel_vmap_find(m, cel_double(2.0), &v));
    assert_false(cel_vmap_find(m, cel_double(2.5), &v));
    assert_false(cel_vmap_find(m, cel_double(NAN), &v));
    assert_false(cel_vmap_find(m, cel_int(0), &v));
    assert_false(cel_vmap_find(m, cel_null(), &v));
    assert_true(cel_vmap_find_str(m, "k", 1, &v));
    assert_false(cel_vmap_find_str(m, "kk", 2, &v));
    assert_true(cel_vmap_find(m, cel_bool(true), &v));
    assert_false(cel_vmap_find(m, cel_bool(false), &v));
    cel_region_release(&r);
}

static void test_map_errors(void **state)
{
    struct cel_region r;
    const struct cel_vmap *m = NULL;
    struct cel_vmap_entry dup[] = {{cel_int(1), cel_null()}, {cel_uint(1), cel_null()}};
    struct cel_vmap_entry bad[] = {{cel_double(1.0), cel_null()}};

    cel_region_init(&r, 0);
    assert_int_equal(cel_vmap_build(&r, dup, 2, NULL, &m), -EEXIST);
    assert_int_equal(cel_vmap_build(&r, bad, 1, NULL, &m), -EINVAL);
    assert_null(m);
    cel_region_release(&r);
}

/* Past the scan threshold the sorted index answers; every key must still be found. */
static void test_map_large(void **state)
{
    struct cel_region r;
    struct cel_vmap_entry e[200];
    const struct cel_vmap *m;
    struct cel_value v;

    cel_region_init(&r, 0);
    for (size_t i = 0; i < ARRAY_SIZE(e); i++) {
        /* interleave int and uint keys, in descending order */
        int64_t k = (int64_t)(ARRAY_SIZE(e) - i) * 3;
        e[i].key = i % 2 ? cel_uint((uint64_t)k) : cel_int(k);
        e[i].value = cel_int((int64_t)i);
    }
    m = build(&r, e, ARRAY_SIZE(e));
    assert_non_null(m->index);
    for (size_t i = 0; i < ARRAY_SIZE(e); i++) {
        int64_t k = (int64_t)(ARRAY_SIZE(e) - i) * 3;

        assert_true(cel_vmap_find(m, cel_int(k), &v));
        assert_int_equal(v.i, (int64_t)i);
        assert_true(cel_vmap_find(m, cel_uint((uint64_t)k), &v));
        assert_false(cel_vmap_find(m, cel_int(k + 1), &v));
    }
    /* insertion order is kept for iteration */
    assert_int_equal(m->entries[0].key.i, 600);
    cel_region_release(&r);
}

static void test_equality(void **state)
{
    assert_true(cel_value_equal(cel_int(1), cel_uint(1)));
    assert_true(cel_value_equal(cel_int(1), cel_double(1.0)));
    assert_true(cel_value_equal(cel_uint(3), cel_double(3.0)));
    assert_false(cel_value_equal(cel_int(-1), cel_uint(UINT64_MAX)));
    assert_false(cel_value_equal(cel_double(NAN), cel_double(NAN)));
    assert_true(cel_value_equal(cel_double(-0.0), cel_double(0.0)));
    assert_false(cel_value_equal(cel_int(1), cel_string("1", 1)));
    assert_false(cel_value_equal(cel_string("a", 1), cel_bytes("a", 1)));
    assert_true(cel_value_equal(cel_null(), cel_null()));
    assert_true(cel_value_equal(cel_type_value(&cel_type_int), cel_type_value(&cel_type_int)));
    assert_false(cel_value_equal(cel_type_value(&cel_type_int), cel_type_value(&cel_type_uint)));
    assert_true(cel_value_equal(cel_optional_none(), cel_optional_none()));
}

static void test_compare(void **state)
{
    int c = 0;

    assert_int_equal(cel_value_compare(cel_int(-1), cel_uint(0), &c), 0);
    assert_int_equal(c, -1);
    assert_int_equal(cel_value_compare(cel_uint(UINT64_MAX), cel_int(INT64_MAX), &c), 0);
    assert_int_equal(c, 1);
    assert_int_equal(cel_value_compare(cel_double(2.5), cel_int(2), &c), 0);
    assert_int_equal(c, 1);
    assert_int_equal(cel_value_compare(cel_string("abc", 3), cel_string("abd", 3), &c), 0);
    assert_int_equal(c, -1);
    assert_int_equal(cel_value_compare(cel_string("ab", 2), cel_string("abc", 3), &c), 0);
    assert_int_equal(c, -1);
    assert_int_equal(cel_value_compare(cel_bool(false), cel_bool(true), &c), 0);
    assert_int_equal(c, -1);
    assert_int_equal(cel_value_compare(cel_double(NAN), cel_int(1), &c), -EDOM);
    assert_int_equal(cel_value_compare(cel_string("a", 1), cel_int(1), &c), -EINVAL);
    assert_int_equal(cel_value_compare(cel_null(), cel_null(), &c), -EINVAL);
}

static void expect_print(struct cel_value v, const char *want)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

    assert_int_equal(cel_value_print(&sb, v), 0);
    assert_string_equal(strbuf_str(&sb), want);
}

static void test_print_scalars(void **state)
{
    expect_print(cel_int(-12), "-12");
    expect_print(cel_uint(12), "12u");
    expect_print(cel_double(1), "1.0");
    expect_print(cel_double(-0.0), "-0.0");
    expect_print(cel_double(0.1), "0.1");
    expect_print(cel_double(1e100), "1e+100");
    expect_print(cel_double(123456789012345680.0), "123456789012345680.0");
    expect_print(cel_double(1e21), "1e+21");
    expect_print(cel_double(1.5e-7), "1.5e-07");
    expect_print(cel_double(0.0001), "0.0001");
    expect_print(cel_double(1000), "1000.0");
    expect_print(cel_double(NAN), "double(\"NaN\")");
    expect_print(cel_double(INFINITY), "double(\"Infinity\")");
    expect_print(cel_double(-INFINITY), "double(\"-Infinity\")");
    expect_print(cel_string("a\"b\\\n\x01", 6), "\"a\\\"b\\\\\\n\\x01\"");
    expect_print(cel_string("\xc3\xbf", 2), "\"\xc3\xbf\"");
    expect_print(cel_bytes("\x00\xff"
                           "a",
                           3),
                 "b\"\\x00\\xffa\"");
    expect_print(cel_bool(true), "true");
    expect_print(cel_null(), "null");
    expect_print(cel_type_value(&cel_type_timestamp), "google.protobuf.Timestamp");
    expect_print(cel_optional_none(), "optional.none()");
}

static void test_print_aggregates(void **state)
{
    struct cel_region r;
    struct cel_value items[] = {cel_int(1), cel_string("x", 1)};
    struct cel_vmap_entry e[] = {
        {cel_string("b", 1), cel_int(2)},
        {cel_string("a", 1), cel_null()},
        {cel_int(3), cel_null()},
        {cel_bool(false), cel_uint(1)},
    };

    cel_region_init(&r, 0);
    e[1].value = cel_list_value(cel_vlist_new(&r, items, 2));
    expect_print(cel_map_value(build(&r, e, ARRAY_SIZE(e))),
                 "{false: 1u, 3: null, \"a\": [1, \"x\"], \"b\": 2}");
    expect_print(cel_list_value(cel_vlist_new(&r, NULL, 0)), "[]");
    expect_print(cel_optional_of(&r, cel_int(1)), "optional.of(1)");
    expect_print(cel_error_new(&r, CEL_ERR_NO_SUCH_KEY, "no such key: %s", "x"), "no such key: x");
    cel_region_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_region_reuse),  cmocka_unit_test(test_region_cap),
        cmocka_unit_test(test_region_defer),  cmocka_unit_test(test_map_keys),
        cmocka_unit_test(test_map_errors),    cmocka_unit_test(test_map_large),
        cmocka_unit_test(test_equality),      cmocka_unit_test(test_compare),
        cmocka_unit_test(test_print_scalars), cmocka_unit_test(test_print_aggregates),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
