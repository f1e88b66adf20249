/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of semantic versions (cel-semver.c): strict and normalizing parsing with Kubernetes' error
 * messages, printing, and SemVer precedence (pre-release ordering, build metadata ignored).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base-strbuf.h"
#include "cel-semver.h"

static struct cel_semver parse_ok(const char *s, bool normalize)
{
    struct cel_semver v;
    struct diag d;

    diag_init(&d);
    if (cel_semver_parse(s, strlen(s), normalize, &d, &v) < 0)
        fail_msg("parse %s: %s", s, d.msg);
    return v;
}

static void test_parse(void **state)
{
    static const struct {
        const char *in;
        bool normalize;
        const char *out; /* NULL: rejected, msg is the message */
        const char *msg;
    } cases[] = {
        {"1.2.3", false, "1.2.3", NULL},
        {"0.0.0", false, "0.0.0", NULL},
        {"1.2.3-beta.1+build.1", false, "1.2.3-beta.1+build.1", NULL},
        {"1.0.0-alpha-1.x-y", false, "1.0.0-alpha-1.x-y", NULL},
        {"1.0.0+001", false, "1.0.0+001", NULL},
        {"18446744073709551615.0.0", false, "18446744073709551615.0.0", NULL},
        {"", false, NULL, "Version string empty"},
        {"v1.0", false, NULL, "No Major.Minor.Patch elements found"},
        {"1", false, NULL, "No Major.Minor.Patch elements found"},
        {"1.1", false, NULL, "No Major.Minor.Patch elements found"},
        {"v1.0.0", false, NULL, "Invalid character(s) found in major number \"v1\""},
        {" 1.0.0", false, NULL, "Invalid character(s) found in major number \" 1\""},
        {"1. 0.0", false, NULL, "Invalid character(s) found in minor number \" 0\""},
        {"1.0.0 ", false, NULL, "Invalid character(s) found in patch number \"0 \""},
        {"01.01.01", false, NULL, "Major number must not contain leading zeroes \"01\""},
        {"1.01.1", false, NULL, "Minor number must not contain leading zeroes \"01\""},
        {"1.1.01", false, NULL, "Patch number must not contain leading zeroes \"01\""},
        {".1.1", false, NULL, "strconv.ParseUint: parsing \"\": invalid syntax"},
        {"18446744073709551616.0.0", false, NULL,
         "strconv.ParseUint: parsing \"18446744073709551616\": value out of range"},
        {"1.0.0-", false, NULL, "Prerelease is empty"},
        {"1.0.0-a..b", false, NULL, "Prerelease is empty"},
        {"1.0.0-01", false, NULL,
         "Numeric PreRelease version must not contain leading zeroes \"01\""},
        {"1.0.0-a_b", false, NULL, "Invalid character(s) found in prerelease \"a_b\""},
        {"1.0.0+", false, NULL, "Build meta data is empty"},
        {"1.0.0+a+b", false, NULL, "Invalid character(s) found in build meta data \"a+b\""},
        {"1.2.3.4", false, NULL, "Invalid character(s) found in patch number \"3.4\""},
        /* normalization */
        {"v1.0.0", true, "1.0.0", NULL},
        {"01.01.01", true, "1.1.1", NULL},
        {"1", true, "1.0.0", NULL},
        {"1.1", true, "1.1.0", NULL},
        {"v1.0", true, "1.0.0", NULL},
        {"v01.01", true, "1.1.0", NULL},
        {"00.000.0", true, "0.0.0", NULL},
        {"1.2.03-rc.1+b5", true, "1.2.3-rc.1+b5", NULL},
        {"1.2.0-rc", true, "1.2.0-rc", NULL},
        {"", true, NULL, "strconv.ParseUint: parsing \"\": invalid syntax"},
        {" 1.0.0", true, NULL, "Invalid character(s) found in major number \"0 1\""},
        {"1.0.0 ", true, NULL, "Invalid character(s) found in patch number \"0 \""},
        {"1.0.00 ", true, NULL, "Invalid character(s) found in patch number \"0 \""},
        {"1-rc", true, NULL, "short version cannot contain PreRelease/Build meta data"},
        {"1.1+b", true, NULL, "short version cannot contain PreRelease/Build meta data"},
        {"vv1.0.0", true, NULL, "Invalid character(s) found in major number \"0v1\""},
    };
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    struct cel_semver v;
    struct diag d;

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const char *in = cases[i].in;
        diag_init(&d);
        int r = cel_semver_parse(in, strlen(in), cases[i].normalize, &d, &v);
        if (!cases[i].out) {
            if (r != -EINVAL || strcmp(d.msg, cases[i].msg) != 0)
                fail_msg("%s: got %d '%s'", in, r, d.msg);
            continue;
        }
        if (r < 0)
            fail_msg("%s: %s", in, d.msg);
        strbuf_reset(&sb);
        assert_int_equal(cel_semver_format(&v, &sb), 0);
        if (strcmp(strbuf_str(&sb), cases[i].out) != 0)
            fail_msg("%s: got %s, want %s", in, strbuf_str(&sb), cases[i].out);
    }
    v = parse_ok("1.2.3", false);
    assert_true(v.major == 1 && v.minor == 2 && v.patch == 3);
}

static void test_precedence(void **state)
{
    /* Ascending, as the SemVer specification lists them; equal neighbours marked. */
    static const struct {
        const char *v;
        bool equal_to_previous;
    } order[] = {
        {"0.9.99", false},
        {"1.0.0-0", false},
        {"1.0.0-2", false},
        {"1.0.0-10", false},
        {"1.0.0-alpha", false},
        {"1.0.0-alpha+build", true},
        {"1.0.0-alpha.1", false},
        {"1.0.0-alpha.beta", false},
        {"1.0.0-beta", false},
        {"1.0.0-beta.2", false},
        {"1.0.0-beta.11", false},
        {"1.0.0-rc.1", false},
        {"1.0.0", false},
        {"1.0.0+other", true},
        {"1.0.1", false},
        {"1.2.3", false},
        {"1.10.0", false},
        {"2.0.0", false},
        {"18446744073709551615.0.0", false},
    };

    for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
        for (size_t j = 0; j < ARRAY_SIZE(order); j++) {
            struct cel_semver a = parse_ok(order[i].v, false), b = parse_ok(order[j].v, false);
            size_t ri = i, rj = j;
            while (order[ri].equal_to_previous)
                ri--;
            while (order[rj].equal_to_previous)
                rj--;
            int want = (ri > rj) - (ri < rj);
            if (cel_semver_cmp(&a, &b) != want)
                fail_msg("%s <=> %s: got %d", order[i].v, order[j].v, cel_semver_cmp(&a, &b));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_precedence),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
