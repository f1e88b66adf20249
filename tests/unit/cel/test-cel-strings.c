/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the strings extension: the code point helpers, trim's whitespace set, strings.quote,
 * the format() clause parser and number renderings on their own, then the CEL functions end to end
 * (indexes in code points, Go's replace/split limits, range errors, literal format calls rejected
 * at compile time).
 */
#include <errno.h>
#include <math.h>

#include "cel-ext-test.h"
#include "cel-lib-ext.h"

static void test_utf8(void **state)
{
    const char *s = "ta\xc2\xa9o\xc2\xa9\xce\xb1T"; /* ta©o©αT */
    size_t n = strlen(s);
    uint32_t cp;

    assert_int_equal(cel_utf8_count(s, n), 7);
    assert_int_equal(cel_utf8_offset(s, n, 0), 0);
    assert_int_equal(cel_utf8_offset(s, n, 3), 4);
    assert_int_equal(cel_utf8_offset(s, n, 7), n);
    assert_int_equal(cel_utf8_offset(s, n, 8), SIZE_MAX);
    assert_int_equal(cel_utf8_next(s + 2, n - 2, &cp), 2);
    assert_int_equal(cp, 0xa9);
    assert_int_equal(cel_utf8_next("\xf0\x9f\x98\x80", 4, &cp), 4);
    assert_int_equal(cp, 0x1f600);
    /* malformed: a lone continuation byte, a truncated sequence, a surrogate */
    assert_int_equal(cel_utf8_next("\x80", 1, &cp), 1);
    assert_int_equal(cp, 0xfffd);
    assert_int_equal(cel_utf8_next("\xe2\x82", 2, &cp), 1);
    assert_int_equal(cel_utf8_next("\xed\xa0\x80", 3, &cp), 1);
}

static void test_space(void **state)
{
    static const uint32_t yes[] = {' ',    '\t',   '\n',   '\v',   '\f',   '\r',   0x85,   0xa0,
                                   0x1680, 0x2000, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000};
    static const uint32_t no[] = {'a', 0, 0x180e, 0x200b, 0x200c, 0x200d, 0x2060, 0xfeff};

    for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
        assert_true(cel_is_unicode_space(yes[i]));
    for (size_t i = 0; i < ARRAY_SIZE(no); i++)
        assert_false(cel_is_unicode_space(no[i]));
}

static void test_quote(void **state)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"", "\"\""},
        {"first\nsecond", "\"first\\nsecond\""},
        {"\a\b\f\r\t\v", "\"\\a\\b\\f\\r\\t\\v\""},
        {"a \"q\" \\", "\"a \\\"q\\\" \\\\\""},
        {"\x01", "\"\\u0001\""},
        {"\xd0\xb7\xf0\x9f\x98\x80", "\"\xd0\xb7\xf0\x9f\x98\x80\""},
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

        assert_int_equal(cel_quote_string(&sb, cases[i].in, strlen(cases[i].in)), 0);
        assert_string_equal(strbuf_str(&sb), cases[i].out);
    }
}

static void test_index_replace(void **state)
{
    const char *s = "ta\xc2\xa9o\xc2\xa9\xce\xb1T";
    size_t n = strlen(s);
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

    assert_int_equal(cel_str_index_of(s, n, "\xc2\xa9", 2, 0), 2);
    assert_int_equal(cel_str_index_of(s, n, "\xc2\xa9", 2, 3), 4);
    assert_int_equal(cel_str_index_of(s, n, "", 0, 7), 7);
    assert_int_equal(cel_str_index_of(s, n, "T", 1, 7), -1);
    assert_int_equal(cel_str_last_index_of(s, n, "\xc2\xa9", 2, 7), 4);
    assert_int_equal(cel_str_last_index_of(s, n, "\xc2\xa9", 2, 3), 2);
    assert_int_equal(cel_str_last_index_of("bananananana", 12, "nana", 4, 7), 6);
    assert_int_equal(cel_str_last_index_of("", 0, "@@", 2, 0), -1);

    assert_int_equal(cel_str_replace(&sb, "aXbXc", 5, "X", 1, "--", 2, 1), 0);
    assert_string_equal(strbuf_str(&sb), "a--bXc");
    strbuf_reset(&sb);
    assert_int_equal(cel_str_replace(&sb, "a\xc2\xa9", 3, "", 0, "-", 1, -1), 0);
    assert_string_equal(strbuf_str(&sb), "-a-\xc2\xa9-");
    strbuf_reset(&sb);
    assert_int_equal(cel_str_replace(&sb, "abc", 3, "b", 1, "", 0, 0), 0);
    assert_string_equal(strbuf_str(&sb), "abc");
}

static void test_fmt_parse(void **state)
{
    _cleanup_strbuf_ struct strbuf lit = STRBUF_INIT;
    struct cel_fmt_clause c;
    const char *f = "%% a %.3f b %X%%";
    size_t pos = 0;
    struct diag d;

    diag_init(&d);
    assert_int_equal(cel_fmt_next(f, strlen(f), &pos, &lit, &c, &d), 1);
    assert_int_equal(c.verb, CEL_FMT_F);
    assert_int_equal(c.precision, 3);
    assert_int_equal(cel_fmt_next(f, strlen(f), &pos, &lit, &c, &d), 1);
    assert_int_equal(c.verb, CEL_FMT_XU);
    assert_int_equal(c.precision, -1);
    assert_int_equal(cel_fmt_next(f, strlen(f), &pos, &lit, &c, &d), 0);
    assert_string_equal(strbuf_str(&lit), "% a  b %");
    pos = 0;
    assert_int_equal(cel_fmt_next("%a", 2, &pos, NULL, &c, &d), -EINVAL);
    pos = 0;
    assert_int_equal(cel_fmt_next("x%", 2, &pos, NULL, &c, &d), -EINVAL);
    pos = 0;
    assert_int_equal(cel_fmt_next("%.2d", 4, &pos, NULL, &c, &d), -EINVAL);
}

static void test_fmt_numbers(void **state)
{
    static const struct {
        double v;
        int prec;
        const char *fixed;
    } fixed[] = {
        {1.2345, 3, "1.234"},
        {2.71828, -1, "2.718280"},
        {123.0, 0, "123"},
        {2.5, 0, "2"},
        {1.5, 0, "2"},
        {-123.4999, 3, "-123.500"},
        {1234567.5, 1, "1,234,567.5"},
        {-1000, 0, "-1,000"},
    };
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

    for (size_t i = 0; i < ARRAY_SIZE(fixed); i++) {
        strbuf_reset(&sb);
        assert_int_equal(cel_fmt_fixed(&sb, fixed[i].v, fixed[i].prec), 0);
        assert_string_equal(strbuf_str(&sb), fixed[i].fixed);
    }
    strbuf_reset(&sb);
    assert_int_equal(cel_fmt_fixed(&sb, NAN, -1), 0);
    assert_string_equal(strbuf_str(&sb), "NaN");
    strbuf_reset(&sb);
    assert_int_equal(cel_fmt_sci(&sb, 1052.032911275, -1), 0);
    assert_string_equal(strbuf_str(&sb), "1.052033 \u00d7 10\u2070\u00b3");
    strbuf_reset(&sb);
    assert_int_equal(cel_fmt_int(&sb, -5, 2, false), 0);
    assert_int_equal(cel_fmt_uint(&sb, 65535, 8, false), 0);
    assert_int_equal(cel_fmt_int(&sb, 30, 16, true), 0);
    assert_int_equal(cel_fmt_int(&sb, INT64_MIN, 10, false), 0);
    assert_string_equal(strbuf_str(&sb), "-1011777771E-9223372036854775808");
    strbuf_reset(&sb);
    assert_int_equal(cel_fmt_hex_bytes(&sb, "Hi!", 3, false), 0);
    assert_string_equal(strbuf_str(&sb), "486921");
}

static void test_fmt_shortest(void **state)
{
    static const struct {
        double v;
        const char *s;
    } cases[] = {
        {56.8, "56.8"},     {0.1, "0.1"},      {100000.0, "100000"},
        {1e6, "1e+06"},     {1e100, "1e+100"}, {1.5e-5, "1.5e-05"},
        {0.0001, "0.0001"}, {-2.0, "-2"},      {123456789.0, "1.23456789e+08"},
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

        assert_int_equal(cel_fmt_double_shortest(&sb, cases[i].v), 0);
        assert_string_equal(strbuf_str(&sb), cases[i].s);
    }
}

static void test_functions(void **state)
{
    static const struct eval_case cases[] = {
        {"'tacocat'.charAt(3)", "\"o\""},
        {"'tacocat'.charAt(7)", "\"\""},
        {"'tacocat'.charAt(8)", EVAL_ERROR},
        {"'\u00a9\u03b1T'.charAt(1)", "\"\u03b1\""},
        {"'ta\u00a9o\u00a9\u03b1T'.indexOf('\u00a9', 3)", "4"},
        {"'tacocat'.indexOf('', 3)", "3"},
        {"'tacocat'.indexOf('a', -1)", EVAL_ERROR},
        {"'tacocat'.lastIndexOf('')", "7"},
        {"'tacocat'.lastIndexOf('a', -1)", EVAL_ERROR},
        {"'TacoC\u00c6t'.lowerAscii()", "\"tacoc\u00c6t\""},
        {"'tacoC\u03b1t'.upperAscii()", "\"TACOC\u03b1T\""},
        {"'{0} days {0} hours'.replace('{0}', '2', 1)", "\"2 days {0} hours\""},
        {"'hello world events!'.split(' ', 0)", "[]"},
        {"'hello world events!'.split(' ', 2)", "[\"hello\", \"world events!\"]"},
        {"'o\u00a9o\u00a9o'.split('\u00a9', -1)", "[\"o\", \"o\", \"o\"]"},
        {"'abc'.split('')", "[\"a\", \"b\", \"c\"]"},
        {"'ta\u00a9o\u00a9\u03b1T'.substring(2, 6)", "\"\u00a9o\u00a9\u03b1\""},
        {"'tacocat'.substring(4, 3)", EVAL_ERROR},
        {"'tacocat'.substring(40)", EVAL_ERROR},
        {"' \\f\\n\\r\\t\\vtext\\u3000'.trim()", "\"text\""},
        {"['x', 'y'].join('-')", "\"x-y\""},
        {"[].join()", "\"\""},
        {"strings.quote('a\\nb')", "\"\\\"a\\\\nb\\\"\""},
        {"'%s and %d and %.2f'.format(['a', 7, 1.005])", "\"a and 7 and 1.00\""},
        {"'%b %o %x %X'.format([5, 8u, 'Hi', 255])", "\"101 10 4869 FF\""},
        {"'%s %s %s'.format([null, true, b'xyz'])", "\"null true xyz\""},
        {"'%d'.format([dyn(1.5)])", EVAL_ERROR},
        {"'%d %d'.format([1])", COMPILE_ERROR},
        {"'%f'.format([2])", COMPILE_ERROR},
        {"'%a'.format([1])", COMPILE_ERROR},
        {"'%b'.format([null])", COMPILE_ERROR},
        {"'x'.reverse()", COMPILE_ERROR},
        {"42.charAt(1)", COMPILE_ERROR},
    };

    check_eval_cases(cases, ARRAY_SIZE(cases));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),         cmocka_unit_test(test_space),
        cmocka_unit_test(test_quote),        cmocka_unit_test(test_index_replace),
        cmocka_unit_test(test_fmt_parse),    cmocka_unit_test(test_fmt_numbers),
        cmocka_unit_test(test_fmt_shortest), cmocka_unit_test(test_functions),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
