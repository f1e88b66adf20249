/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the CEL checker against the DRA environment's libraries: the type inferred for
 * well-typed expressions (literals, operators, macros, optionals, namespaced functions, declared
 * variables), and each kind of compile-time rejection with its position and message: undeclared
 * names and functions, no matching overload, non-bool logic operands, mismatched ?: branches,
 * field selection on scalars, bad comprehension ranges, heterogeneous list/map literals (and the
 * format() exemption), literal format() clauses, the bool-result rule of selectors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cel-check.h"
#include "cel.h"

struct check_case {
    const char *expr;
    const char *want; /* the result type, or "!" followed by a substring of the error */
};

static struct cel_env *test_env(void)
{
    struct cel_env *env = NULL;
    assert_int_equal(cel_env_new(CEL_LIBS_DRA, &env), 0);
    assert_int_equal(cel_env_declare(env, "i", "int"), 0);
    assert_int_equal(cel_env_declare(env, "s", "string"), 0);
    assert_int_equal(cel_env_declare(env, "l", "list(int)"), 0);
    assert_int_equal(cel_env_declare(env, "m", "map(string, int)"), 0);
    assert_int_equal(cel_env_declare(env, "d", "dyn"), 0);
    assert_int_equal(cel_env_declare(env, "o", "optional_type(string)"), 0);
    assert_int_equal(cel_env_declare(env, "a.b.c", "bool"), 0);
    return env;
}

static void run_cases(const struct check_case *cases, size_t n, const struct cel_check_opts *opts)
{
    _cleanup_(cel_env_freep) struct cel_env *env = test_env();
    for (size_t i = 0; i < n; i++) {
        _cleanup_(cel_ast_freep) struct cel_ast *ast = NULL;
        const char *e = cases[i].expr, *want = cases[i].want;
        char type[128] = "";
        struct diag d;
        diag_init(&d);
        if (cel_parse(e, strlen(e), &ast, &d) < 0)
            fail_msg("%s: parse: %s", e, d.msg);
        int r = cel_check(ast, env, opts, type, sizeof(type), &d);
        if (want[0] == '!') {
            if (r != -EINVAL || !strstr(d.msg, want + 1))
                fail_msg("%s: got %d '%s' (type %s), want error '%s'", e, r, d.msg, type, want + 1);
            assert_true(d.line >= 1 && d.col >= 1);
        } else if (r < 0 || strcmp(type, want) != 0) {
            fail_msg("%s: got %d '%s' type '%s', want '%s'", e, r, d.msg, type, want);
        }
    }
}

static void test_types(void **state)
{
    static const struct check_case cases[] = {
        {"1", "int"},
        {"1u", "uint"},
        {"1.5", "double"},
        {"'a' + s", "string"},
        {"b'a'", "bytes"},
        {"null", "null_type"},
        {"i + 1 > 2 && !false", "bool"},
        {"[1, 2]", "list(int)"},
        {"[]", "list(dyn)"},
        {"[[1], []]", "list(list(int))"},
        {"{'a': 1}", "map(string, int)"},
        {"{}", "map(dyn, dyn)"},
        {"l[0]", "int"},
        {"m['k']", "int"},
        {"m.k", "int"},
        {"d.x.y[3]", "dyn"},
        {"d + 1", "int"},
        {"size(l) + l.size()", "int"},
        {"i in l", "bool"},
        {"l.map(x, x * 2.0 > 1.0)", "!no matching overload for '_*_' applied to '(int, double)'"},
        {"l.map(x, double(x) * 2.0)", "list(double)"},
        {"l.filter(x, x > 0)", "list(int)"},
        {"l.all(x, x > 0)", "bool"},
        {"m.exists(k, v, k == s && v == i)", "bool"},
        {"l.exists_one(x, x == 1)", "bool"},
        {"l.transformList(i, v, v + i)", "list(int)"},
        {"m.transformMap(k, v, v > 0, double(v))", "map(string, double)"},
        {"m.transformMapEntry(k, v, {v: k})", "map(int, string)"},
        {"cel.bind(x, 'a', x + x)", "string"},
        {"cel.bind(i, 'shadow', i)", "string"},
        {"[1].exists(y, ['a'].exists(y, y == 'a'))", "bool"},
        {"a.b.c", "bool"},
        {"type(1) == int", "bool"},
        {"type(s) == string", "bool"},
        {"o.orValue('x')", "string"},
        {"o.?x", "!does not support field selection"},
        {"m.?k", "optional_type(int)"},
        {"m[?'k']", "optional_type(int)"},
        {"optional.of(1)", "optional_type(int)"},
        {"optional.none().orValue(1)", "int"},
        {"o.optMap(v, size(v))", "optional_type(int)"},
        {"[?optional.of(1), 2]", "list(int)"},
        {"{?'a': optional.of(1)}", "map(string, int)"},
        {"sets.contains(l, [1])", "bool"},
        {"l.sortBy(x, -x)", "list(int)"},
        {"has(m.k)", "bool"},
        {"true ? 1 : 2", "int"},
        {"true ? [] : [1]", "list(int)"},
        {"dyn(1) == 1u", "bool"},
        {"1 < 2u", "bool"},
        {"\"%d and %s\".format([1, 'a'])", "string"},
        {"'%s %d'.format([d, d])", "string"},
        {"s.format([1, 'a'])", "string"},
        {"quantity('1Gi').isGreaterThan(quantity('1M'))", "bool"},
    };
    run_cases(cases, ARRAY_SIZE(cases), NULL);
}

static void test_errors(void **state)
{
    static const struct check_case cases[] = {
        {"x", "!1:1: undeclared reference to 'x'"},
        {"1 + y", "!1:5: undeclared reference to 'y'"},
        {"f_unknown(17)", "!1:1: undeclared reference to 'f_unknown'"},
        {"l.nosuch()", "!undeclared reference to 'nosuch'"},
        {"dyn", "!undeclared reference to 'dyn'"},
        {".x", "!undeclared reference to 'x'"},
        {"Msg{}", "!undeclared reference to 'Msg'"},
        {"1.0 == 1", "!1:5: found no matching overload for '_==_' applied to '(double, int)'"},
        {"'a' < 1", "!no matching overload for '_<_'"},
        {"!0", "!no matching overload for '!_'"},
        {"-(1u)", "!no matching overload for '-_'"},
        {"size(1)", "!no matching overload for 'size'"},
        {"size(l, l)", "!no matching overload for 'size'"},
        {"'a' && true", "!no matching overload for '_&&_' applied to '(string, bool)'"},
        {"true || 1", "!no matching overload for '_||_'"},
        {"1 ? 2 : 3", "!no matching overload for '_?_:_'"},
        {"true ? 'a' : 1", "!no matching overload for '_?_:_' applied to '(bool, string, int)'"},
        {"i.f", "!1:2: type 'int' does not support field selection"},
        {"has(s.f)", "!type 'string' does not support field selection"},
        {"1.all(x, x)", "!1:1: expression of type 'int' cannot be the range"},
        {"l.all(x, x)", "!no matching overload for '_&&_' applied to '(bool, int)'"},
        {"l.all(x, y)", "!undeclared reference to 'y'"},
        {"cel.bind(x, 1, x) + x", "!1:21: undeclared reference to 'x'"},
        {"[1, 'a']", "!1:5: expected type 'int' but found 'string'"},
        {"[1, 2.0]", "!expected type 'int' but found 'double'"},
        {"['1', null]", "!expected type 'string' but found 'null_type'"},
        {"[1, dyn(2)]", "!expected type 'int' but found 'dyn'"},
        {"dyn([1, 'a'])", "!expected type 'int' but found 'string'"},
        {"{1: 1, 2u: 2}", "!expected type 'int' but found 'uint'"},
        {"{'a': 1, 'b': 'x'}", "!expected type 'int' but found 'string'"},
        {"{?'a': 1}", "!expected type 'optional_type' but found 'int'"},
        {"[?1]", "!expected type 'optional_type' but found 'int'"},
        {"[[1], ['a']]", "!expected type 'list(int)' but found 'list(string)'"},
        {"'%f'.format([2])", "!unsupported type for formatting clause 'f': int"},
        {"'%d'.format([null])", "!unsupported type for formatting clause 'd': null_type"},
        {"'%x'.format([0.5])", "!formatting clause 'x'"},
        {"'%a'.format([1])", "!unrecognized formatting clause"},
        {"'%E'.format([1.0])", "!unrecognized formatting clause"},
        {"'%d %d'.format([1])", "!index 1 out of range"},
        {"sets.contains([1], [1u])", "!no matching overload for 'sets.contains'"},
        {"isQuantity([1])", "!no matching overload for 'isQuantity'"},
        {"quantity('1') < quantity('2')", "!no matching overload for '_<_'"},
        {"o.value() + 1", "!no matching overload for '_+_' applied to '(string, int)'"},
        {"m[1]", "!no matching overload for '_[_]'"},
        {"l['a']", "!no matching overload for '_[_]'"},
    };
    run_cases(cases, ARRAY_SIZE(cases), NULL);
}

static void test_format_exemption(void **state)
{
    /* mixed list literals are fine as format() arguments, not elsewhere */
    static const struct check_case cases[] = {
        {"'%d %s'.format([1, 'a'])", "string"},
        {"s.format([1, 'a', 2.0])", "string"},
        {"size([1, 'a'])", "!expected type 'int' but found 'string'"},
    };
    run_cases(cases, ARRAY_SIZE(cases), NULL);
}

static void test_want_bool(void **state)
{
    static const struct cel_check_opts opts = {.want_bool = true};
    static const struct check_case cases[] = {
        {"i > 1", "bool"},
        {"d", "dyn"},
        {"d.x", "dyn"},
        {"i", "!1:1: must evaluate to bool, got 'int'"},
        {"[true]", "!must evaluate to bool, got 'list(bool)'"},
    };
    run_cases(cases, ARRAY_SIZE(cases), &opts);
}

static const char *device_fields(const char *type, size_t type_len, const char *field, size_t len)
{
    if (type_len != 4 || memcmp(type, "Test", 4) != 0)
        return NULL;
    if (len == 6 && memcmp(field, "driver", 6) == 0)
        return "string";
    if (len == 10 && memcmp(field, "attributes", 10) == 0)
        return "map(string, map(string, dyn))";
    return NULL;
}

static void test_object_fields(void **state)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    static const struct cel_check_opts opts = {.field_type = device_fields};
    static const struct check_case cases[] = {
        {"t.driver", "string"},
        {"t.attributes['x'].y", "dyn"},
        {"t.nosuch", "!1:2: undefined field 'nosuch'"},
        {"t.driver + 1", "!no matching overload for '_+_'"},
    };
    assert_int_equal(cel_env_new(CEL_LIBS_DRA, &env), 0);
    assert_int_equal(cel_env_declare(env, "t", "Test"), 0);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_(cel_ast_freep) struct cel_ast *ast = NULL;
        char type[64] = "";
        struct diag d;
        diag_init(&d);
        assert_int_equal(cel_parse(cases[i].expr, strlen(cases[i].expr), &ast, &d), 0);
        int r = cel_check(ast, env, &opts, type, sizeof(type), &d);
        if (cases[i].want[0] == '!')
            assert_true(r == -EINVAL && strstr(d.msg, cases[i].want + 1));
        else if (r < 0 || strcmp(type, cases[i].want) != 0)
            fail_msg("%s: %d %s %s", cases[i].expr, r, d.msg, type);
    }
}

static void test_no_env(void **state)
{
    /* without an environment nothing is declared, but literals still check */
    _cleanup_(cel_ast_freep) struct cel_ast *ast = NULL;
    char type[64];
    struct diag d;
    diag_init(&d);
    assert_int_equal(cel_parse("[[1], []]", 9, &ast, NULL), 0);
    assert_int_equal(cel_check(ast, NULL, NULL, type, sizeof(type), &d), 0);
    assert_string_equal(type, "list(list(int))");
    ast = cel_ast_free(ast);
    assert_int_equal(cel_parse("x", 1, &ast, NULL), 0);
    assert_int_equal(cel_check(ast, NULL, NULL, NULL, 0, &d), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_format_exemption),
        cmocka_unit_test(test_want_bool),
        cmocka_unit_test(test_object_fields),
        cmocka_unit_test(test_no_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
