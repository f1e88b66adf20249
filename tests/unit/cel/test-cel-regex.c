/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of RE2 syntax on PCRE2: which patterns the translator rejects (everything RE2 rejects:
 * lookarounds, backreferences, atomic/possessive, recursion, unknown escapes, stacked or oversized
 * repeats), how the constructs whose meaning differs are rewritten (\s, \v, octal, literal '{'),
 * that matching follows RE2 ($ only at the very end, ASCII \d \w, code points), that a
 * catastrophic backtracking pattern hits the match limit instead of hanging, and find/findAll
 * end to end with Go's empty-match rule.
 */
#include <errno.h>

#include "cel-ext-test.h"
#include "cel-lib-ext.h"

static void test_rejected(void **state)
{
    static const char *const bad[] = {
        "(?=a)",  "(?!a)",   "(?<=a)b",     "(?<!a)b",   "(a)\\1",  "(?P<n>a)(?P=n)",
        "\\k<n>", "(?>a)",   "a++",         "a*+",       "a**",     "a{2}{3}",
        "a*??",   "(?R)",    "(?1)",        "(?(1)a|b)", "(*UTF)a", "\\C",
        "\\K",    "\\G",     "\\Z",         "\\h",       "\\R",     "\\X",
        "\\e",    "a{1001}", "a{3,2}",      "(?x)a",     "(?#c)",   "[\\b]",
        "\\8",    "(a",      "a)",          "[a",        "\\",      "*a",
        "(?i-)a", "\\xZ",    "\\x{110000}", "\\pé",      "(?P<>a)",
    };
    struct diag d;

    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        _cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
        struct cel_regex *re = NULL;

        diag_init(&d);
        if (cel_re2_translate(bad[i], strlen(bad[i]), &out, &d) >= 0) {
            /* a few are left to PCRE2 to refuse; it must, then */
            assert_int_not_equal(cel_regex_compile(bad[i], strlen(bad[i]), &re, &d), 0);
            cel_regex_free(re);
        }
        assert_true(d.msg[0] != '\0');
    }
}

static void test_translated(void **state)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"a\\sb", "a[\\t\\n\\f\\r ]b"},
        {"[\\s]", "[\\t\\n\\f\\r ]"},
        {"\\v\\012\\0\\x41\\x{263a}", "\\x{b}\\x{a}\\x{0}\\x{41}\\x{263a}"},
        {"a{,2}", "a\\{,2}"},
        {"a{2,}?", "a{2,}?"},
        {"(?P<x>a)(?<y>b)(?i:c)(?s)", "(?<x>a)(?<y>b)(?i:c)(?s)"},
        {"[[:alpha:][a]", "[[:alpha:]\\[a]"},
        {"[]a]", "[\\]a]"},
        {"\\Qa.b\\E*", "a\\.b*"},
        {"\\pL\\p{Greek}\\P{^Lu}", "\\pL\\p{Greek}\\P{^Lu}"},
        {"", ""},
    };
    struct diag d;

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_strbuf_ struct strbuf out = STRBUF_INIT;

        diag_init(&d);
        assert_int_equal(cel_re2_translate(cases[i].in, strlen(cases[i].in), &out, &d), 0);
        assert_string_equal(strbuf_str(&out), cases[i].out);
    }
}

/* 1 when pat matches somewhere in s. */
static int search(const char *pat, const char *s)
{
    _cleanup_(cel_regex_freep) struct cel_regex *re = NULL;
    size_t b, e;
    struct diag d;

    diag_init(&d);
    assert_int_equal(cel_regex_compile(pat, strlen(pat), &re, &d), 0);
    return cel_regex_search(re, s, strlen(s), 0, &b, &e);
}

static void test_semantics(void **state)
{
    assert_int_equal(search("a$", "a\n"), 0); /* RE2: $ is the end of text only */
    assert_int_equal(search("(?m)a$", "a\nb"), 1);
    assert_int_equal(search("\\d", "\xd9\xa3"), 0); /* Arabic-Indic three: not ASCII */
    assert_int_equal(search("\\w", "\xc3\xa9"), 0);
    assert_int_equal(search("\\s", "\v"), 0); /* RE2's \s has no vertical tab */
    assert_int_equal(search("[[:space:]]", "\v"), 1);
    assert_int_equal(search("^.$", "\xf0\x9f\x98\x80"), 1); /* one code point */
    assert_int_equal(search("(?i)\xc3\xa9", "\xc3\x89"), 1);
    assert_int_equal(search("\\pL", "\xc3\xa9"), 1);
    assert_int_equal(search("a{,2}", "a{,2}"), 1);
    assert_int_equal(search("\\btaco\\b", "a taco!"), 1);
}

static void test_match_limit(void **state)
{
    _cleanup_(cel_regex_freep) struct cel_regex *re = NULL;
    char subject[64];
    size_t b, e;
    struct diag d;

    memset(subject, 'a', sizeof(subject) - 2);
    subject[sizeof(subject) - 2] = '!';
    subject[sizeof(subject) - 1] = '\0';
    diag_init(&d);
    assert_int_equal(cel_regex_compile("(a+)+$", 6, &re, &d), 0);
    assert_true(cel_regex_search(re, subject, strlen(subject), 0, &b, &e) < 0);
}

static void test_functions(void **state)
{
    static const struct eval_case cases[] = {
        {"'hubba'.matches('ubb')", "true"},
        {"'abc 123'.find('[0-9]+')", "\"123\""},
        {"'abc 123'.find('xyz')", "\"\""},
        {"'123 abc 456'.findAll('[0-9]+')", "[\"123\", \"456\"]"},
        {"'123 abc 456'.findAll('[0-9]+', 1)", "[\"123\"]"},
        {"'123 abc 456'.findAll('[0-9]+', 0)", "[]"},
        {"'abc'.findAll('x*')", "[\"\", \"\", \"\", \"\"]"},
        {"'ab'.findAll('a*')", "[\"a\", \"\"]"},
        {"'\u00e9\u00e9'.findAll('')", "[\"\", \"\", \"\"]"},
        {"'abc'.find(dyn('['))", EVAL_ERROR},
        {"'abc'.find('(?=a)')", COMPILE_ERROR},
        {"'abc'.matches('(a)\\\\1')", COMPILE_ERROR},
        {"'abc'.matches(dyn('a++'))", EVAL_ERROR},
    };

    check_eval_cases(cases, ARRAY_SIZE(cases));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejected),  cmocka_unit_test(test_translated),
        cmocka_unit_test(test_semantics), cmocka_unit_test(test_match_limit),
        cmocka_unit_test(test_functions),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
