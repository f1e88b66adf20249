/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of value sharing (base-jdedup.h): equal values come back as one, unequal ones never do
 * (key order, integer against real, -0.0 against 0.0, string bytes), what is passed in is never
 * modified, and the table's references keep shared values alive only while it lives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base-doc.h"
#include "base-jdedup.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);

    assert_non_null(v);
    return v;
}

/* The canonical value of text, and whether it is the one `same` gave. */
static json_t *canon(struct jdedup *t, const char *text)
{
    _cleanup_json_ json_t *v = parse(text);
    _cleanup_free_ char *before = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *c = jdedup_value(t, v);
    _cleanup_free_ char *after = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    _cleanup_free_ char *got = json_dumps(c, JSON_COMPACT | JSON_ENCODE_ANY);

    assert_non_null(c);
    /* neither the value passed in nor the one given back differ from the text */
    assert_string_equal(before, after);
    assert_string_equal(before, got);
    return c;
}

static void test_equal_values_shared(void **state)
{
    struct jdedup t;
    _cleanup_json_ json_t *a = NULL, *b = NULL, *c = NULL, *d = NULL;

    (void)state;
    jdedup_init(&t);
    a = canon(&t, "{\"name\": \"gpu-0\", \"attributes\": {\"type\": {\"string\": \"gpu\"}}}");
    b = canon(&t, "{\"name\": \"gpu-1\", \"attributes\": {\"type\": {\"string\": \"gpu\"}}}");
    assert_ptr_not_equal(a, b);
    assert_ptr_equal(json_object_get(a, "attributes"), json_object_get(b, "attributes"));
    c = canon(&t, "[{\"string\": \"gpu\"}, \"gpu-0\", 1, 1.5, true, null]");
    assert_ptr_equal(json_array_get(c, 0),
                     json_object_get(json_object_get(a, "attributes"), "type"));
    assert_ptr_equal(json_array_get(c, 1), json_object_get(a, "name"));
    d = canon(&t, "[{\"string\": \"gpu\"}, \"gpu-0\", 1, 1.5, true, null]");
    assert_ptr_equal(c, d);
    jdedup_release(&t);
    /* the values outlive the table */
    assert_string_equal(json_string_value(json_object_get(a, "name")), "gpu-0");
}

static void test_unequal_values_apart(void **state)
{
    static const char *const PAIRS[][2] = {
        {"{\"a\": 1, \"b\": 2}", "{\"b\": 2, \"a\": 1}"}, /* key order is printed */
        {"[1]", "[1.0]"},
        {"[0.0]", "[-0.0]"},
        {"[\"a\"]", "[\"a \"]"},
        {"[\"a\\u0000b\"]", "[\"a\\u0000c\"]"},
        {"{\"a\": [1]}", "{\"a\": [[1]]}"},
        {"[]", "{}"},
        {"[null]", "[false]"},
    };
    struct jdedup t;

    (void)state;
    jdedup_init(&t);
    for (size_t i = 0; i < sizeof(PAIRS) / sizeof(PAIRS[0]); i++) {
        json_error_t e;
        _cleanup_json_ json_t *x = json_loads(PAIRS[i][0], JSON_ALLOW_NUL, &e);
        _cleanup_json_ json_t *y = json_loads(PAIRS[i][1], JSON_ALLOW_NUL, &e);
        _cleanup_json_ json_t *cx = jdedup_value(&t, x);
        _cleanup_json_ json_t *cy = jdedup_value(&t, y);

        assert_non_null(cx);
        assert_non_null(cy);
        assert_ptr_not_equal(cx, cy);
        assert_true(json_equal(cx, x));
        assert_true(json_equal(cy, y));
    }
    jdedup_release(&t);
}

/* Many values: the table grows, and every one still finds its twin. */
static void test_many(void **state)
{
    struct jdedup t;
    json_t *first[3000];

    (void)state;
    jdedup_init(&t);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 3000; i++) {
            _cleanup_json_ json_t *v = json_pack("{s:i, s:[s, i]}", "n", i % 1000, "l", "x", i);
            json_t *c = jdedup_value(&t, v);

            assert_non_null(c);
            if (round == 0)
                first[i] = c;
            else {
                assert_ptr_equal(c, first[i]);
                json_decref(c);
            }
        }
    assert_int_equal(jdedup_size(&t) >= 3000, 1);
    for (int i = 0; i < 3000; i++)
        json_decref(first[i]);
    jdedup_release(&t);
}

/* Deeper than the cap: given back as it is, still equal. */
static void test_deep(void **state)
{
    struct jdedup t;
    _cleanup_json_ json_t *v = json_array();
    _cleanup_json_ json_t *c = NULL;
    json_t *cur = v;

    (void)state;
    jdedup_init(&t);
    for (int i = 0; i < JDEDUP_MAX_DEPTH + 10; i++) {
        json_t *next = json_array();
        assert_int_equal(json_array_append_new(cur, next), 0);
        cur = next;
    }
    c = jdedup_value(&t, v);
    assert_true(json_equal(c, v));
    jdedup_release(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_values_shared),
        cmocka_unit_test(test_unequal_values_apart),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_deep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
