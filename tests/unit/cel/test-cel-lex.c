/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the CEL lexer: number forms (decimal, hex, uint suffix, doubles with fraction or
 * exponent, leading-dot doubles), every string and bytes quoting (single, double, triple, raw,
 * bytes, both prefixes in either order) with every escape, UTF-8 validation, comments, positions
 * across lines, reserved words, and the errors for malformed literals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cel-parse-internal.h"

/* Lexes src fully into at most 16 tokens; returns the count or the error. */
static int lex_all(struct cel_ast *ast, const char *src, struct cel_token *toks, size_t max,
                   struct diag *d)
{
    struct cel_lexer lx;
    size_t n = 0;
    cel_lex_init(&lx, src, strlen(src), ast);
    for (;;) {
        struct cel_token t;
        int r = cel_lex_next(&lx, &t, d);
        if (r < 0)
            return r;
        if (t.kind == CEL_TOK_EOF)
            return (int)n;
        assert_true(n < max);
        toks[n++] = t;
    }
}

struct num_case {
    const char *src;
    enum cel_tok kind;
    uint64_t u;
    double d;
};

static void test_numbers(void **state)
{
    static const struct num_case cases[] = {
        {"0", CEL_TOK_INT, 0, 0},
        {"42", CEL_TOK_INT, 42, 0},
        {"0x1F", CEL_TOK_INT, 31, 0},
        {"0XfF", CEL_TOK_INT, 255, 0},
        {"9223372036854775807", CEL_TOK_INT, 9223372036854775807ull, 0},
        /* one past INT64_MAX lexes: the parser decides whether a minus makes it fit */
        {"9223372036854775808", CEL_TOK_INT, 9223372036854775808ull, 0},
        {"42u", CEL_TOK_UINT, 42, 0},
        {"42U", CEL_TOK_UINT, 42, 0},
        {"0x10u", CEL_TOK_UINT, 16, 0},
        {"18446744073709551615u", CEL_TOK_UINT, UINT64_MAX, 0},
        {"1.5", CEL_TOK_DOUBLE, 0, 1.5},
        {"1e3", CEL_TOK_DOUBLE, 0, 1000.0},
        {"2.5E-1", CEL_TOK_DOUBLE, 0, 0.25},
        {"1e+2", CEL_TOK_DOUBLE, 0, 100.0},
        {".5", CEL_TOK_DOUBLE, 0, 0.5},
        {".5e1", CEL_TOK_DOUBLE, 0, 5.0},
        {"017", CEL_TOK_INT, 15, 0}, /* a leading 0 means octal, as the reference does */
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_(cel_ast_freep) struct cel_ast *ast = cel_ast_new();
        struct cel_token t[4];
        struct diag d;
        diag_init(&d);
        int n = lex_all(ast, cases[i].src, t, 4, &d);
        if (n != 1)
            fail_msg("%s: %d tokens (%s)", cases[i].src, n, d.msg);
        assert_int_equal(t[0].kind, cases[i].kind);
        if (cases[i].kind == CEL_TOK_DOUBLE)
            assert_true(t[0].v.d == cases[i].d);
        else
            assert_true(t[0].v.u == cases[i].u);
    }
}

struct str_case {
    const char *src;
    enum cel_tok kind;
    const char *want;
    size_t want_len;
};

#define S(src, want)                                                                               \
    {                                                                                              \
        src, CEL_TOK_STRING, want, sizeof(want) - 1                                                \
    }
#define B(src, want)                                                                               \
    {                                                                                              \
        src, CEL_TOK_BYTES, want, sizeof(want) - 1                                                 \
    }

static void test_strings(void **state)
{
    static const struct str_case cases[] = {
        S("'hello'", "hello"),
        S("\"hello\"", "hello"),
        S("'''hello'''", "hello"),
        S("\"\"\"hello\"\"\"", "hello"),
        S("''", ""),
        S("''''''", ""),
        S("'\\\\ \\? \\\" \\' \\`'", "\\ ? \" ' `"),
        S("'\\a\\b\\f\\n\\r\\t\\v'", "\a\b\f\n\r\t\v"),
        S("'\\000\\012\\177'", "\0\n\x7f"),
        S("'\\377'", "\xc3\xbf"), /* a code point in strings: U+00FF as UTF-8 */
        S("'\\xff'", "\xc3\xbf"),
        S("'\\X4a\\x4B'", "JK"),
        S("'\\u0100\\uFFFB'", "\xc4\x80\xef\xbf\xbb"),
        S("'\\U0001F62C'", "\xf0\x9f\x98\xac"),
        S("'''a\nb'''", "a\nb"),
        S("'''it's'''", "it's"),
        S("\"\"\"say \"hi\" \"\"\"", "say \"hi\" "),
        S("r'\\n\\x00'", "\\n\\x00"),
        S("R\"\\\\\"", "\\\\"),
        S("r'''\\'''", "\\"),
        S("'\xc3\xa9'", "\xc3\xa9"),
        B("b'abc'", "abc"),
        B("B\"abc\"", "abc"),
        B("b'\\377\\xff\\000'", "\xff\xff\0"),
        B("b'\xc3\xbf'", "\xc3\xbf"),
        B("br'\\x00'", "\\x00"),
        B("Rb'\\n'", "\\n"),
        B("bR'''\\a'''", "\\a"),
        B("b''", ""),
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_(cel_ast_freep) struct cel_ast *ast = cel_ast_new();
        struct cel_token t[4];
        struct diag d;
        diag_init(&d);
        int n = lex_all(ast, cases[i].src, t, 4, &d);
        if (n != 1)
            fail_msg("%s: %d tokens (%s)", cases[i].src, n, d.msg);
        assert_int_equal(t[0].kind, cases[i].kind);
        assert_int_equal(t[0].v.s.len, cases[i].want_len);
        assert_memory_equal(t[0].v.s.ptr, cases[i].want, cases[i].want_len);
        assert_int_equal(t[0].v.s.ptr[t[0].v.s.len], '\0');
    }
}

struct err_case {
    const char *src;
    const char *msg; /* a substring of the diagnostic */
};

static void test_errors(void **state)
{
    static const struct err_case cases[] = {
        {"'abc", "1:1: Syntax error: unterminated string literal"},
        {"'a\nb'", "newline in string literal"},
        {"'''abc''", "unterminated"},
        {"'\\q'", "invalid escape sequence"},
        {"'\\x4'", "invalid hex escape"},
        {"'\\400'", "invalid escape"},
        {"'\\18'", "invalid octal escape"},
        {"'\\uD800'", "invalid unicode code point"},
        {"'\\U00110000'", "invalid unicode code point"},
        {"b'\\u0041'", "unicode escape not allowed in bytes"},
        {"'\xff'", "invalid UTF-8"},
        {"'\xc0\x80'", "invalid UTF-8"},
        {"18446744073709551616u", "uint literal out of range"},
        {"18446744073709551616", "int literal out of range"},
        {"9223372036854775809", "int literal out of range"},
        {"12abc", "malformed number"},
        {"09", "invalid int literal"},
        {"1 # 2", "1:3: Syntax error: token recognition error at: '#'"},
        {"a\n  $", "2:3: Syntax error"},
        {"x = 1", "token recognition error at: '='"},
        {"a & b", "token recognition error at: '&'"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_(cel_ast_freep) struct cel_ast *ast = cel_ast_new();
        struct cel_token t[8];
        struct diag d;
        diag_init(&d);
        int r = lex_all(ast, cases[i].src, t, 8, &d);
        if (r != -EINVAL || !strstr(d.msg, cases[i].msg))
            fail_msg("%s: got %d '%s', want '%s'", cases[i].src, r, d.msg, cases[i].msg);
        assert_true(d.line >= 1 && d.col >= 1);
    }
}

static void test_tokens_and_positions(void **state)
{
    _cleanup_(cel_ast_freep) struct cel_ast *ast = cel_ast_new();
    struct cel_token t[20];
    const char *src = "a.b // comment\n  && !c[?1] in\n'''x\ny''' ?. <= != ||";
    static const enum cel_tok want[] = {
        CEL_TOK_IDENT, CEL_TOK_DOT,      CEL_TOK_IDENT,    CEL_TOK_AND, CEL_TOK_BANG,
        CEL_TOK_IDENT, CEL_TOK_LBRACKET, CEL_TOK_QUESTION, CEL_TOK_INT, CEL_TOK_RBRACKET,
        CEL_TOK_IN,    CEL_TOK_STRING,   CEL_TOK_QUESTION, CEL_TOK_DOT, CEL_TOK_LE,
        CEL_TOK_NE,    CEL_TOK_OR,
    };
    int n = lex_all(ast, src, t, 20, NULL);
    assert_int_equal(n, 17);
    for (size_t i = 0; i < ARRAY_SIZE(want); i++)
        assert_int_equal(t[i].kind, want[i]);
    assert_int_equal(t[3].line, 2); /* && */
    assert_int_equal(t[3].col, 3);
    assert_int_equal(t[11].line, 3); /* the triple-quoted string */
    assert_int_equal(t[11].col, 1);
    assert_int_equal(t[12].line, 4); /* after its newline */
    assert_int_equal(t[12].col, 6);
}

static void test_keywords(void **state)
{
    _cleanup_(cel_ast_freep) struct cel_ast *ast = cel_ast_new();
    struct cel_token t[8];
    int n = lex_all(ast, "true false null in inx while _x9", t, 8, NULL);
    assert_int_equal(n, 7);
    assert_int_equal(t[0].kind, CEL_TOK_TRUE);
    assert_int_equal(t[1].kind, CEL_TOK_FALSE);
    assert_int_equal(t[2].kind, CEL_TOK_NULL);
    assert_int_equal(t[3].kind, CEL_TOK_IN);
    assert_int_equal(t[4].kind, CEL_TOK_IDENT);
    assert_false(t[4].reserved);
    assert_int_equal(t[5].kind, CEL_TOK_IDENT);
    assert_true(t[5].reserved);
    assert_int_equal(t[6].kind, CEL_TOK_IDENT);
    assert_true(cel_is_reserved("namespace", 9));
    assert_false(cel_is_reserved("names", 5));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers),  cmocka_unit_test(test_strings),
        cmocka_unit_test(test_errors),   cmocka_unit_test(test_tokens_and_positions),
        cmocka_unit_test(test_keywords),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
