/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the capped string buffer: growth, the cap (and that a refused addition leaves the buffer
 * as it was), formatting, JSON string escaping and handing the contents out.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base-strbuf.h"

static void test_empty(void **state)
{
    struct strbuf sb = STRBUF_INIT;
    size_t len = 99;
    char *s;

    assert_string_equal(strbuf_str(&sb), "");
    assert_int_equal(sb.len, 0);
    s = strbuf_detach(&sb, &len);
    assert_non_null(s);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    free(s);
    strbuf_release(&sb);
}

static void test_grow(void **state)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

    for (int i = 0; i < 1000; i++)
        assert_int_equal(strbuf_addf(&sb, "%d,", i % 10), 0);
    assert_int_equal(sb.len, 2000);
    assert_int_equal(strlen(strbuf_str(&sb)), 2000);
    assert_int_equal(memcmp(strbuf_str(&sb), "0,1,2,", 6), 0);
    assert_int_equal(strbuf_add(&sb, "ab\0c", 4), 0);
    assert_int_equal(sb.len, 2004);
    assert_int_equal(sb.buf[2003], 'c');
    assert_int_equal(sb.buf[2004], '\0');
    strbuf_reset(&sb);
    assert_int_equal(sb.len, 0);
    assert_string_equal(strbuf_str(&sb), "");
    assert_int_equal(strbuf_addch(&sb, 'x'), 0);
    assert_string_equal(strbuf_str(&sb), "x");
}

static void test_cap(void **state)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    char big[300];

    strbuf_init(&sb, 10);
    assert_int_equal(sb.cap, 10);
    assert_int_equal(strbuf_addstr(&sb, "0123456789"), 0);
    assert_int_equal(strbuf_addch(&sb, 'x'), -ENOBUFS);
    assert_int_equal(strbuf_addf(&sb, "%d", 1), -ENOBUFS);
    assert_string_equal(strbuf_str(&sb), "0123456789");
    assert_true(sb.alloc <= 11);

    strbuf_reset(&sb);
    assert_int_equal(strbuf_addstr(&sb, "abcdefgh"), 0);
    assert_int_equal(strbuf_addf(&sb, "%s", "123"), -ENOBUFS);
    assert_string_equal(strbuf_str(&sb), "abcdefgh");
    assert_int_equal(strbuf_addf(&sb, "%s", "12"), 0);
    assert_string_equal(strbuf_str(&sb), "abcdefgh12");

    /* A half-written JSON literal is rolled back. */
    strbuf_reset(&sb);
    assert_int_equal(strbuf_add_json_string(&sb, "abcdefghij"), -ENOBUFS);
    assert_string_equal(strbuf_str(&sb), "");

    /* Default cap. */
    strbuf_release(&sb);
    strbuf_init(&sb, 0);
    assert_int_equal(sb.cap, STRBUF_DEFAULT_CAP);
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(strbuf_addf(&sb, "%s%s", big, big), 0);
    assert_int_equal(sb.len, 2 * (sizeof(big) - 1));
}

struct json_case {
    const char *in;
    const char *out;
};

static const struct json_case json_cases[] = {
    {"", "\"\""},
    {"plain", "\"plain\""},
    {"q\"b\\s/", "\"q\\\"b\\\\s/\""},
    {"\n\r\t\b\f", "\"\\n\\r\\t\\b\\f\""},
    {"\x01\x1f", "\"\\u0001\\u001f\""},
    {"caf\xc3\xa9 \xe2\x82\xac", "\"caf\xc3\xa9 \xe2\x82\xac\""},
};

static void test_json_string(void **state)
{
    for (size_t i = 0; i < sizeof(json_cases) / sizeof(json_cases[0]); i++) {
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

        assert_int_equal(strbuf_add_json_string(&sb, json_cases[i].in), 0);
        assert_string_equal(strbuf_str(&sb), json_cases[i].out);
    }
}

static void test_detach(void **state)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    _cleanup_free_ char *s = NULL;
    size_t len = 0;

    assert_int_equal(strbuf_addstr(&sb, "hello"), 0);
    s = strbuf_detach(&sb, &len);
    assert_string_equal(s, "hello");
    assert_int_equal(len, 5);
    assert_null(sb.buf);
    assert_int_equal(sb.len, 0);
    assert_string_equal(strbuf_str(&sb), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),  cmocka_unit_test(test_grow),
        cmocka_unit_test(test_cap),    cmocka_unit_test(test_json_string),
        cmocka_unit_test(test_detach),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
