/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the capped array: elements are copied by value, growth keeps them, the cap refuses
 * further pushes, and detach hands the array over.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base-vec.h"

struct pair {
    int a;
    long b;
};

static void test_push(void **state)
{
    struct vec v;

    vec_init(&v, sizeof(struct pair), 0);
    assert_int_equal(v.cap, VEC_DEFAULT_CAP);
    for (int i = 0; i < 1000; i++) {
        struct pair p = {.a = i, .b = -i};

        assert_int_equal(vec_push(&v, &p), 0);
    }
    assert_int_equal(v.len, 1000);
    for (size_t i = 0; i < v.len; i++) {
        assert_int_equal(VEC_AT(&v, struct pair, i)->a, (int)i);
        assert_int_equal(VEC_AT(&v, struct pair, i)->b, -(long)i);
    }
    vec_release(&v);
    assert_null(v.items);
    assert_int_equal(v.len, 0);
}

static void test_cap(void **state)
{
    struct vec v;
    int x = 7;

    vec_init(&v, sizeof(int), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(vec_push(&v, &i), 0);
    assert_int_equal(vec_push(&v, &x), -ENOBUFS);
    assert_int_equal(v.len, 3);
    assert_int_equal(*VEC_AT(&v, int, 2), 2);
    assert_int_equal(vec_reserve(&v, 1), -ENOBUFS);
    assert_int_equal(vec_reserve(&v, SIZE_MAX), -ENOBUFS);
    vec_release(&v);
}

static void test_reserve_detach(void **state)
{
    struct vec v;
    size_t len = 0;
    int *items;

    vec_init(&v, sizeof(int), 100);
    assert_int_equal(vec_reserve(&v, 50), 0);
    assert_true(v.alloc >= 50);
    assert_int_equal(v.len, 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(vec_push(&v, &i), 0);
    items = vec_detach(&v, &len);
    assert_non_null(items);
    assert_int_equal(len, 5);
    assert_int_equal(items[4], 4);
    assert_null(v.items);
    assert_int_equal(v.len, 0);
    free(items);
    /* Still usable after detach. */
    assert_int_equal(vec_push(&v, &(int){9}), 0);
    assert_int_equal(v.len, 1);
    vec_release(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_reserve_detach),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
