/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of Kubernetes quantities (cel-quantity.c): parsing and the canonical string (including the
 * inputs Kubernetes prints as written), rejected inputs, comparison, the int64 and decimal forms as
 * isInteger/asInteger see them, arithmetic and its format rules, the approximate float, and the
 * precision limits.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cel-quantity.h"

static struct cel_quantity parse_ok(const char *s)
{
    struct cel_quantity q;
    struct diag d;

    diag_init(&d);
    if (cel_quantity_parse(s, strlen(s), &d, &q) < 0)
        fail_msg("parse %s: %s", s, d.msg);
    return q;
}

static const char *str(const struct cel_quantity *q, char buf[static CEL_QUANTITY_STR_MAX])
{
    size_t n = cel_quantity_format(q, buf);

    assert_int_equal(n, strlen(buf));
    return buf;
}

static void test_canonical(void **state)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        /* binary: the largest power of 1024 that divides the integer */
        {"12Mi", "12Mi"},
        {"1.5Gi", "1536Mi"},
        {"1024Mi", "1Gi"},
        {"1Gi", "1Gi"},
        {"8Gi", "8Gi"},
        {"1536Ki", "1536Ki"},
        {"0.5Mi", "512Ki"},
        {"-1.5Gi", "-1536Mi"},
        {"1Ei", "1Ei"},
        {"3072Ki", "3Mi"},
        /* binary below 1024 or not an integer: decimal SI */
        {"0.5Ki", "512"},
        {"1.1Mi", "1153433600m"},
        {"0.5Ti", "512Gi"},
        /* binary above 2^63 - 1: capped */
        {"8Ei", "9223372036854775807"},
        {"-8Ei", "-9223372036854775807"},
        /* decimal: trailing zeros out, exponent down to a multiple of three */
        {"0.5", "500m"},
        {"1000m", "1"},
        {"10000", "10k"},
        {"100", "100"},
        {"1.3G", "1300M"},
        {"0.1", "100m"},
        {"1.5", "1500m"},
        {"1.08", "1080m"},
        {"1000000", "1M"},
        {"1000E", "1e21"},
        {"123456789012345678901234567890", "123456789012345678901234567890"},
        {"9999999999999999999999999999999999999G", "9999999999999999999999999999999999999G"},
        /* nano rounding, away from zero */
        {"0.1n", "1n"},
        {"1.5n", "2n"},
        {"-0.1n", "-1n"},
        {"0.0000000001", "1n"},
        {"1.0000000000000000000000000000000000000000001", "1000000001n"},
        /* decimal exponent */
        {"1e3", "1e3"},
        {"1E3", "1E3"},
        {"1.5e3", "1500"},
        {"120e5", "12e6"},
        {"1e-10", "1e-9"},
        {"5e-3", "5e-3"},
        {"1e+3", "1e+3"},
        /* zero, and what Kubernetes' scanner lets through as zero */
        {"0", "0"},
        {"-0", "0"},
        {"0.0", "0"},
        {"000", "0"},
        {"0Mi", "0"},
        {"+", "0"},
        {"-", "0"},
        {".", "0"},
        {"1.", "1."},
        {".5", "500m"},
        /* already canonical in shape: printed as written */
        {"+1Ki", "+1Ki"},
        {"0100", "0100"},
        {"1.500", "1.500"},
        {"+5k", "+5k"},
        {"50M", "50M"},
        {"-1Ki", "-1Ki"},
        {"1n", "1n"},
    };
    char buf[CEL_QUANTITY_STR_MAX];

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct cel_quantity q = parse_ok(cases[i].in);
        if (strcmp(str(&q, buf), cases[i].out) != 0)
            fail_msg("%s: got %s, want %s", cases[i].in, buf, cases[i].out);
    }
}

static void test_rejected(void **state)
{
    static const struct {
        const char *in;
        int err;
        const char *msg;
    } cases[] = {
        {"", -EINVAL, "quantities must match the regular expression"},
        {"10Mo", -EINVAL, "quantities must match"},
        {"10Mm", -EINVAL, "unable to parse quantity's suffix"},
        {"200K", -EINVAL, "unable to parse quantity's suffix"},
        {"Three", -EINVAL, "quantities must match"},
        {"1,3G", -EINVAL, "quantities must match"},
        {" 1", -EINVAL, "quantities must match"},
        {"1 ", -EINVAL, "quantities must match"},
        {"1e", -EINVAL, "unable to parse quantity's suffix"},
        {"1e+", -EINVAL, "unable to parse quantity's suffix"},
        {"1ee3", -EINVAL, "unable to parse quantity's suffix"},
        {"1Ki5", -EINVAL, "unable to parse quantity's suffix"},
        {"1.2.3", -EINVAL, "quantities must match"},
        {"--1", -EINVAL, "unable to parse quantity's suffix"},
        {".e-10", -EINVAL, "unable to parse numeric part of quantity"},
        {"1e99999999999999999999", -EINVAL, "unable to parse quantity's suffix"},
        {"1e2000000000", -ERANGE, "quantity out of range"},
        {"123456789012345678901234567890123456789012", -ERANGE, "quantity out of range"},
        {"1.0000000000000000000000000000000000000001Ki", -ERANGE, "quantity out of range"},
    };
    struct cel_quantity q;
    struct diag d;

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        diag_init(&d);
        int r = cel_quantity_parse(cases[i].in, strlen(cases[i].in), &d, &q);
        if (r != cases[i].err || !strstr(d.msg, cases[i].msg))
            fail_msg("%s: got %d '%s'", cases[i].in, r, d.msg);
    }
    /* Not NUL-terminated input, and a NUL inside. */
    assert_int_equal(cel_quantity_parse("12Kx", 3, NULL, &q), -EINVAL);
    assert_int_equal(cel_quantity_parse("12Kx", 2, NULL, &q), 0);
    assert_int_equal(cel_quantity_sign(&q), 1);
    assert_int_equal(cel_quantity_parse("1\0", 2, NULL, &q), -EINVAL);
}

static void test_compare(void **state)
{
    static const struct {
        const char *a, *b;
        int cmp;
    } cases[] = {
        {"200M", "0.2G", 0},    {"2M", "0.002G", 0},
        {"2000k", "2M", 0},     {"200M", "0.3G", -1},
        {"50M", "50Mi", -1},    {"50M", "100M", -1},
        {"150Mi", "100Mi", 1},  {"1Gi", "1024Mi", 0},
        {"-1", "1", -1},        {"-2", "-1", -1},
        {"0", "-0", 0},         {"0", "1n", -1},
        {"1e21", "1000E", 0},   {"1e30", "999999999999999999999999999999", 1},
        {"1e-9", "1n", 0},      {"9999999999999999999999999999999999999G", "1e46", -1},
        {"1e1000", "1e999", 1}, {"-1e1000", "1", -1},
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct cel_quantity a = parse_ok(cases[i].a), b = parse_ok(cases[i].b);
        if (cel_quantity_cmp(&a, &b) != cases[i].cmp || cel_quantity_cmp(&b, &a) != -cases[i].cmp)
            fail_msg("%s <=> %s: got %d", cases[i].a, cases[i].b, cel_quantity_cmp(&a, &b));
    }
}

static void test_integer(void **state)
{
    static const struct {
        const char *in;
        bool ok;
        int64_t v;
    } cases[] = {
        {"50", true, 50},
        {"50k", true, 50000},
        {"50000000G", true, 50000000000000000},
        {"-3M", true, -3000000},
        {"1Ti", true, 1099511627776},
        {"0", true, 0},
        /* the decimal form is never an integer for Kubernetes, even when integral */
        {"1.5Gi", false, 0},
        {"9223372036854775807", false, 0},
        {"9999999999999999999999999999999999999G", false, 0},
        /* a negative scale is not either */
        {"1.0", false, 0},
        {"1500m", false, 0},
        {"0.0", false, 0},
        /* the int64 form with a scale too large for an int64 */
        {"10e18", false, 0},
        {"9e18", true, 9000000000000000000},
    };
    int64_t v;

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct cel_quantity q = parse_ok(cases[i].in);
        v = -12345;
        bool ok = cel_quantity_as_int64(&q, &v);
        if (ok != cases[i].ok || (ok && v != cases[i].v))
            fail_msg("%s: got %d %lld", cases[i].in, ok, (long long)v);
    }
}

static void check_sum(const char *a, const char *b, bool sub, const char *want, bool integer)
{
    struct cel_quantity qa = parse_ok(a), qb = parse_ok(b), r;
    char buf[CEL_QUANTITY_STR_MAX];
    int64_t v;

    assert_int_equal((sub ? cel_quantity_sub : cel_quantity_add)(&qa, &qb, NULL, &r), 0);
    if (strcmp(str(&r, buf), want) != 0 || cel_quantity_as_int64(&r, &v) != integer)
        fail_msg("%s %c %s: got %s (integer %d)", a, sub ? '-' : '+', b, buf,
                 cel_quantity_as_int64(&r, &v));
}

static void test_arith(void **state)
{
    struct cel_quantity q = parse_ok("50k"), t, u, want;
    int64_t v;

    /* the conformance chain: 50k + 20 - 100k - (-50000) */
    t = cel_quantity_from_int(20);
    assert_int_equal(cel_quantity_add(&q, &t, NULL, &u), 0);
    want = parse_ok("50.02k");
    assert_int_equal(cel_quantity_cmp(&u, &want), 0);
    t = parse_ok("100k");
    assert_int_equal(cel_quantity_sub(&u, &t, NULL, &u), 0);
    assert_true(cel_quantity_as_int64(&u, &v));
    assert_int_equal(v, -49980);
    t = cel_quantity_from_int(-50000);
    assert_int_equal(cel_quantity_sub(&u, &t, NULL, &u), 0);
    assert_true(cel_quantity_as_int64(&u, &v));
    assert_int_equal(v, 20);

    check_sum("50k", "20", true, "49980", true);
    /* the receiver's format is kept ... */
    check_sum("1Ki", "1024", false, "2Ki", true);
    check_sum("1k", "1Ki", false, "2024", true);
    check_sum("1Ki", "0.5", false, "1024500m", false);
    /* ... unless it is zero */
    check_sum("0", "1Ki", false, "1Ki", true);
    check_sum("0", "1Ki", true, "-1Ki", true);
    /* the decimal form is contagious */
    check_sum("1.5Gi", "0.5Gi", false, "2Gi", false);
    check_sum("1.5Gi", "1.5Gi", true, "0", false);
    /* int64 overflow moves to the decimal form */
    check_sum("10e18", "1", false, "10000000000000000001", false);
    check_sum("9223372036854775807", "1", false, "9223372036854775808", false);
    check_sum("5e18", "5e18", false, "10e18", false);
    check_sum("-5e18", "5e18", true, "-10e18", false);
    check_sum("4e18", "5e18", false, "9e18", true);
    /* the printed input spelling does not survive arithmetic */
    check_sum("+1Ki", "0", false, "1Ki", true);
    check_sum("1e1000", "1e1000", false, "20e999", false);
    /* past the precision limit */
    q = parse_ok("1e1000");
    t = parse_ok("1.5Gi");
    assert_int_equal(cel_quantity_add(&q, &t, NULL, &u), -ERANGE);
}

static void test_sign_and_float(void **state)
{
    struct cel_quantity q;

    q = parse_ok("-1n");
    assert_int_equal(cel_quantity_sign(&q), -1);
    q = parse_ok("0.0");
    assert_int_equal(cel_quantity_sign(&q), 0);
    q = parse_ok("1Ei");
    assert_int_equal(cel_quantity_sign(&q), 1);

    q = parse_ok("50.703k");
    assert_true(cel_quantity_approx_double(&q) == 50703.0);
    q = parse_ok("1Mi");
    assert_true(cel_quantity_approx_double(&q) == 1048576.0);
    q = parse_ok("-1500m");
    assert_true(cel_quantity_approx_double(&q) == -1.5);
    q = parse_ok("1.5Gi");
    assert_true(fabs(cel_quantity_approx_double(&q) - 1610612736.0) < 1e-6);
    q = parse_ok("9999999999999999999999999999999999999G");
    assert_true(fabs(cel_quantity_approx_double(&q) / 1e46 - 1.0) < 1e-15);
    q = parse_ok("1e400");
    assert_true(isinf(cel_quantity_approx_double(&q)));
    /* Go's 0 * Pow10(400) is 0 * Inf */
    q = parse_ok("0e400");
    assert_true(isnan(cel_quantity_approx_double(&q)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical), cmocka_unit_test(test_rejected),
        cmocka_unit_test(test_compare),   cmocka_unit_test(test_integer),
        cmocka_unit_test(test_arith),     cmocka_unit_test(test_sign_and_float),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
