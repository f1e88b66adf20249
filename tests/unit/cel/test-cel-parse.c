/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the CEL parser and macro expander through the tree's S-expression dump: precedence and
 * associativity of every operator, negative literal folding, member/index/optional syntax, list,
 * map and message literals, qualified names, every macro in its 1- and 2-variable forms and
 * cel.bind; then syntax errors with their positions, reserved words, and the nesting limits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cel-parse-internal.h"

struct dump_case {
    const char *expr;
    const char *want;
};

static void check_dumps(const struct dump_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        _cleanup_(cel_ast_freep) struct cel_ast *ast = NULL;
        char buf[2048];
        struct diag d;
        diag_init(&d);
        int r = cel_parse(cases[i].expr, strlen(cases[i].expr), &ast, &d);
        if (r < 0)
            fail_msg("%s: %s", cases[i].expr, d.msg);
        assert_true(cel_ast_dump(ast->root, buf, sizeof(buf)) >= 0);
        if (strcmp(buf, cases[i].want) != 0)
            fail_msg("%s:\n got  %s\n want %s", cases[i].expr, buf, cases[i].want);
    }
}

static void test_operators(void **state)
{
    static const struct dump_case cases[] = {
        {"1 + 2 * 3", "(_+_ 1 (_*_ 2 3))"},
        {"(1 + 2) * 3", "(_*_ (_+_ 1 2) 3)"},
        {"1 - 2 - 3", "(_-_ (_-_ 1 2) 3)"},
        {"6 / 3 % 2", "(_%_ (_/_ 6 3) 2)"},
        {"a < b == c", "(_==_ (_<_ a b) c)"},
        {"a <= b != c >= d > e", "(_>_ (_>=_ (_!=_ (_<=_ a b) c) d) e)"},
        {"x in [1, 2]", "(@in x [1 2])"},
        {"a && b || c && d", "(_||_ (_&&_ a b) (_&&_ c d))"},
        {"a || b || c || d", "(_||_ (_||_ a b) (_||_ c d))"},
        {"a && b && c", "(_&&_ a (_&&_ b c))"},
        {"a ? b : c ? d : e", "(_?_:_ a b (_?_:_ c d e))"},
        {"a || b ? c + 1 : d", "(_?_:_ (_||_ a b) (_+_ c 1) d)"},
        {"!a", "(!_ a)"},
        {"!!a", "(!_ (!_ a))"},
        {"-a", "(-_ a)"},
        {"--a", "(-_ (-_ a))"},
        {"!a && b", "(_&&_ (!_ a) b)"},
        {"-a.b", "(-_ (. a b))"},
        {"1 + -2", "(_+_ 1 -2)"},
        {"1 - 2", "(_-_ 1 2)"},
        {"1-2", "(_-_ 1 2)"},
    };
    check_dumps(cases, ARRAY_SIZE(cases));
}

static void test_literals(void **state)
{
    static const struct dump_case cases[] = {
        {"-9223372036854775808", "-9223372036854775808"},
        {"9223372036854775807", "9223372036854775807"},
        {"--19", "(-_ -19)"},
        {"-(5)", "(-_ 5)"},
        {"-5u", "(-_ 5u)"},
        {"-2.5e1", "-25d"},
        {"-0.0", "-0d"},
        {"0x10", "16"},
        {"-0x55555555", "-1431655765"},
        {"18446744073709551615u", "18446744073709551615u"},
        {"true", "true"},
        {"false", "false"},
        {"null", "null"},
        {"'a\\tb'", "\"a\\x09b\""},
        {"b'\\xff'", "b\"\\xff\""},
        {"-1.abs()", "(abs .-1)"},
        {"[]", "[]"},
        {"[1, 2,]", "[1 2]"},
        {"[?a, b]", "[?a b]"},
        {"{}", "{}"},
        {"{'a': 1, 2: x,}", "{\"a\":1 2:x}"},
        {"{?'a': x}", "{?\"a\":x}"},
        {"Msg{}", "Msg{}"},
        {"a.b.Msg{f: 1, ?g: x}", "a.b.Msg{f:1 ?g:x}"},
        {".a.Msg{f: 1,}", ".a.Msg{f:1}"},
    };
    check_dumps(cases, ARRAY_SIZE(cases));
}

static void test_members(void **state)
{
    static const struct dump_case cases[] = {
        {"a.b.c", "(. (. a b) c)"},
        {".a.b", "(. .a b)"},
        {"a.?b", "(?. a b)"},
        {"a.?b.c", "(. (?. a b) c)"},
        {"a[1]", "([] a 1)"},
        {"a[?'k']", "([?] a \"k\")"},
        {"a[b][c]", "([] ([] a b) c)"},
        {"f()", "(f)"},
        {"f(1, 2)", "(f 1 2)"},
        {".f(1)", "(f 1)"},
        {"a.f(1)", "(f .a 1)"},
        {"a.b.f()", "(f .(. a b))"},
        {"sets.contains([1], [1])", "(contains .sets [1] [1])"},
        {"x.size() > 0", "(_>_ (size .x) 0)"},
        {"{'as': 1}.as", "(. {\"as\":1} as)"},
        {"a.while", "(. a while)"},
        {"[1][0]", "([] [1] 0)"},
        {"(a).b", "(. a b)"},
        {"'s'.size()", "(size .\"s\")"},
    };
    check_dumps(cases, ARRAY_SIZE(cases));
}

static void test_macros(void **state)
{
    static const struct dump_case cases[] = {
        {"has(a.b)", "(has a b)"},
        {"has(a.b.c)", "(has (. a b) c)"},
        {"l.all(x, x > 0)",
         "(comp x l @result true (@not_strictly_false @result) (_&&_ @result (_>_ x 0)) "
         "@result)"},
        {"l.exists(x, x > 0)",
         "(comp x l @result false (@not_strictly_false (!_ @result)) (_||_ @result (_>_ x 0)) "
         "@result)"},
        {"l.exists_one(x, x)",
         "(comp x l @result 0 true (_?_:_ x (_+_ @result 1) @result) (_==_ @result 1))"},
        {"l.existsOne(x, x)",
         "(comp x l @result 0 true (_?_:_ x (_+_ @result 1) @result) (_==_ @result 1))"},
        {"l.map(x, x * 2)", "(comp x l @result [] true (@list_append @result (_*_ x 2)) @result)"},
        {"l.map(x, x > 1, x)",
         "(comp x l @result [] true (_?_:_ (_>_ x 1) (@list_append @result x) @result) "
         "@result)"},
        {"l.filter(x, x > 1)",
         "(comp x l @result [] true (_?_:_ (_>_ x 1) (@list_append @result x) @result) "
         "@result)"},
        {"m.all(k, v, k == v)",
         "(comp k,v m @result true (@not_strictly_false @result) (_&&_ @result (_==_ k v)) "
         "@result)"},
        {"m.exists(k, v, v)",
         "(comp k,v m @result false (@not_strictly_false (!_ @result)) (_||_ @result v) "
         "@result)"},
        {"m.existsOne(k, v, v)",
         "(comp k,v m @result 0 true (_?_:_ v (_+_ @result 1) @result) (_==_ @result 1))"},
        {"l.transformList(i, v, i + v)",
         "(comp i,v l @result [] true (@list_append @result (_+_ i v)) @result)"},
        {"l.transformList(i, v, i > 0, v)",
         "(comp i,v l @result [] true (_?_:_ (_>_ i 0) (@list_append @result v) @result) "
         "@result)"},
        {"m.transformMap(k, v, v + 1)",
         "(comp k,v m @result {} true (@map_insert @result k (_+_ v 1)) @result)"},
        {"m.transformMap(k, v, v > 0, v)",
         "(comp k,v m @result {} true (_?_:_ (_>_ v 0) (@map_insert @result k v) @result) "
         "@result)"},
        {"m.transformMapEntry(k, v, {v: k})",
         "(comp k,v m @result {} true (@map_insert @result {v:k}) @result)"},
        {"m.transformMapEntry(k, v, true, {v: k})",
         "(comp k,v m @result {} true (_?_:_ true (@map_insert @result {v:k}) @result) "
         "@result)"},
        {"cel.bind(x, 1, x + x)", "(comp #unused [] x 1 false x (_+_ x x))"},
        {"[1].exists(y, [0].exists(y, y == 0))",
         "(comp y [1] @result false (@not_strictly_false (!_ @result)) (_||_ @result (comp y [0] "
         "@result false (@not_strictly_false (!_ @result)) (_||_ @result (_==_ y 0)) @result)) "
         "@result)"},
        {"l.sortBy(e, -e)",
         "(comp #unused [] @__sortBy_input__ l false @__sortBy_input__ (@sortByAssociatedKeys "
         ".@__sortBy_input__ (comp e @__sortBy_input__ @result [] true (@list_append @result "
         "(-_ e)) @result)))"},
        {"o.optMap(v, v + 1)",
         "(comp #unused [] @__optMap_target__ o false @__optMap_target__ (_?_:_ (hasValue "
         ".@__optMap_target__) (of .optional (comp #unused [] v (value .@__optMap_target__) "
         "false v (_+_ v 1))) (none .optional)))"},
        {"o.optFlatMap(v, v.?f)",
         "(comp #unused [] @__optMap_target__ o false @__optMap_target__ (_?_:_ (hasValue "
         ".@__optMap_target__) (comp #unused [] v (value .@__optMap_target__) false v (?. v f)) "
         "(none .optional)))"},
        /* Not macros: wrong arity, no receiver, a leading dot. */
        {"l.all(x)", "(all .l x)"},
        {"all(l, x, p)", "(all l x p)"},
        {"l.map(x, y, z, w)", "(map .l x y z w)"},
        {"x.has(a.b)", "(has .x (. a b))"},
        {"bind(x, 1, x)", "(bind x 1 x)"},
        {"foo.bind(x, 1, x)", "(bind .foo x 1 x)"},
    };
    check_dumps(cases, ARRAY_SIZE(cases));
}

static void test_comprehension_slots(void **state)
{
    _cleanup_(cel_ast_freep) struct cel_ast *ast = NULL;
    const char *e = "m.all(k, v, [k].exists(x, x == v))";
    assert_int_equal(cel_parse(e, strlen(e), &ast, NULL), 0);
    assert_int_equal(ast->nlocals, 5);
    const struct cel_comprehension *outer = &ast->root->u.comp;
    assert_int_equal(ast->root->kind, CEL_NODE_COMPREHENSION);
    assert_int_equal(outer->macro, CEL_MACRO_ALL);
    assert_string_equal(outer->iter_var2, "v");
    /* slots are distinct, the inner comprehension's allocated first (it was built first) */
    const struct cel_node *step = outer->loop_step;
    const struct cel_comprehension *inner = &step->u.call.args[1]->u.comp;
    assert_int_equal(inner->macro, CEL_MACRO_EXISTS);
    assert_true(inner->iter_slot != outer->iter_slot && inner->accu_slot != outer->accu_slot);
    assert_true(outer->iter_slot2 < 5 && outer->accu_slot < 5 && inner->accu_slot < 5);
    /* node ids are unique and run 1..nnodes */
    assert_true(ast->root->id >= 1 && ast->root->id <= ast->nnodes);
    assert_true(ast->max_depth > 3);
}

static void test_positions(void **state)
{
    _cleanup_(cel_ast_freep) struct cel_ast *ast = NULL;
    const char *e = "a +\n  b.c";
    assert_int_equal(cel_parse(e, strlen(e), &ast, NULL), 0);
    const struct cel_node *n = ast->root;
    assert_int_equal(n->line, 1); /* the operator */
    assert_int_equal(n->col, 3);
    assert_int_equal(n->offset, 2);
    const struct cel_node *sel = n->u.call.args[1];
    assert_int_equal(sel->kind, CEL_NODE_SELECT);
    assert_int_equal(sel->line, 2);
    assert_int_equal(sel->col, 4);
    assert_int_equal(sel->u.select.operand->col, 3);
}

struct err_case {
    const char *expr;
    int err;
    const char *msg; /* a substring of the diagnostic */
};

static void test_errors(void **state)
{
    static const struct err_case cases[] = {
        {"", -EINVAL, "1:1: Syntax error: mismatched input '<EOF>'"},
        {"1 +", -EINVAL, "1:4: Syntax error: mismatched input '<EOF>'"},
        {"(1", -EINVAL, "1:3: Syntax error"},
        {"1 2", -EINVAL, "1:3: Syntax error: mismatched input '2' expecting <EOF>"},
        {"a.", -EINVAL, "1:3: Syntax error"},
        {"a.1", -EINVAL, "Syntax error"},
        {"[1, 2", -EINVAL, "1:6: Syntax error"},
        {"{1 2}", -EINVAL, "1:4: Syntax error: mismatched input '2' expecting ':'"},
        {"a ? b", -EINVAL, "1:6: Syntax error"},
        {"as", -EINVAL, "1:1: Syntax error: reserved identifier 'as'"},
        {"while(1)", -EINVAL, "reserved identifier 'while'"},
        {"1 + if", -EINVAL, "1:5: Syntax error: reserved identifier 'if'"},
        {"9223372036854775808", -EINVAL, "1:1: invalid int literal"},
        {"-(9223372036854775808)", -EINVAL, "invalid int literal"},
        {"a.?b()", -EINVAL, "unsupported syntax '.?'"},
        {"has(a)", -EINVAL, "1:5: invalid argument to has() macro"},
        {"has(a.?b)", -EINVAL, "invalid argument to has() macro"},
        {"l.all(x.y, true)", -EINVAL, "argument must be a simple name"},
        {"l.all(1, true)", -EINVAL, "argument must be a simple name"},
        {"m.all(k, k, true)", -EINVAL, "duplicate variable name"},
        {"cel.bind(a.b, 1, 2)", -EINVAL, "argument must be a simple name"},
        {"o.optMap(1, 2)", -EINVAL, "argument must be a simple name"},
        {"(a + b){}", -EINVAL, "Syntax error"},
        {"f(){}", -EINVAL, "Syntax error"},
        {"a = b", -EINVAL, "token recognition error"},
        {"'unterminated", -EINVAL, "1:1: Syntax error: unterminated string"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct cel_ast *ast = NULL;
        struct diag d;
        diag_init(&d);
        int r = cel_parse(cases[i].expr, strlen(cases[i].expr), &ast, &d);
        if (r != cases[i].err || !strstr(d.msg, cases[i].msg))
            fail_msg("%s: got %d '%s', want %d '%s'", cases[i].expr, r, d.msg, cases[i].err,
                     cases[i].msg);
        assert_null(ast);
        assert_true(d.line >= 1 && d.col >= 1);
    }
}

/* Builds prefix^n core suffix^n. */
static char *nest(const char *prefix, const char *core, const char *suffix, size_t n)
{
    size_t lp = strlen(prefix), lc = strlen(core), ls = strlen(suffix);
    char *s = malloc(n * (lp + ls) + lc + 1), *p = s;
    assert_non_null(s);
    for (size_t i = 0; i < n; i++, p += lp)
        memcpy(p, prefix, lp);
    memcpy(p, core, lc);
    p += lc;
    for (size_t i = 0; i < n; i++, p += ls)
        memcpy(p, suffix, ls);
    *p = '\0';
    return s;
}

static int parse_str(const char *s, struct diag *d)
{
    _cleanup_(cel_ast_freep) struct cel_ast *ast = NULL;
    return cel_parse(s, strlen(s), &ast, d);
}

static void test_limits(void **state)
{
    struct diag d;
    /* the conformance cases nest 32 deep; the limits are far above */
    _cleanup_free_ char *parens = nest("(", "7", ")", 200);
    assert_int_equal(parse_str(parens, NULL), 0);
    _cleanup_free_ char *deep = nest("(", "7", ")", CEL_PARSE_MAX_DEPTH + 1);
    diag_init(&d);
    assert_int_equal(parse_str(deep, &d), -E2BIG);
    assert_non_null(strstr(d.msg, "nested too deeply"));
    _cleanup_free_ char *lists = nest("[", "0", "]", CEL_PARSE_MAX_DEPTH + 1);
    assert_int_equal(parse_str(lists, NULL), -E2BIG);
    _cleanup_free_ char *calls = nest("f(", "0", ")", CEL_PARSE_MAX_DEPTH + 1);
    assert_int_equal(parse_str(calls, NULL), -E2BIG);
    /* chains do not nest the grammar, but the tree they build is bounded too */
    _cleanup_free_ char *chain = nest("", "1", " + 1", CEL_AST_MAX_DEPTH + 1);
    diag_init(&d);
    assert_int_equal(parse_str(chain, &d), -E2BIG);
    assert_non_null(strstr(d.msg, "nested too deeply"));
    _cleanup_free_ char *shortchain = nest("", "1", " + 1", 100);
    assert_int_equal(parse_str(shortchain, NULL), 0);
    _cleanup_free_ char *nots = nest("!", "true", "", CEL_AST_MAX_DEPTH + 1);
    assert_int_equal(parse_str(nots, NULL), -E2BIG);
    _cleanup_free_ char *index = nest("", "a", "[0]", CEL_AST_MAX_DEPTH + 1);
    assert_int_equal(parse_str(index, NULL), -E2BIG);
    /* long && chains are balanced, so they stay shallow */
    _cleanup_free_ char *ands = nest("", "a", " && a", 5000);
    assert_int_equal(parse_str(ands, NULL), 0);
    /* the length cap */
    size_t big = CEL_EXPR_MAX_LEN + 1;
    _cleanup_free_ char *huge = malloc(big + 1);
    assert_non_null(huge);
    memset(huge, ' ', big);
    huge[0] = '1';
    huge[big] = '\0';
    diag_init(&d);
    assert_int_equal(parse_str(huge, &d), -E2BIG);
    assert_non_null(strstr(d.msg, "too long"));
}

static void test_dump_truncates(void **state)
{
    _cleanup_(cel_ast_freep) struct cel_ast *ast = NULL;
    char buf[8];
    assert_int_equal(cel_parse("[1, 2, 3, 4, 5]", 15, &ast, NULL), 0);
    assert_int_equal(cel_ast_dump(ast->root, buf, sizeof(buf)), -ENOBUFS);
    assert_int_equal(strlen(buf), 7);
    assert_string_equal(cel_op_name(CEL_OP_IN), "@in");
    assert_string_equal(cel_op_name(CEL_OP_COND), "_?_:_");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_operators),
        cmocka_unit_test(test_literals),
        cmocka_unit_test(test_members),
        cmocka_unit_test(test_macros),
        cmocka_unit_test(test_comprehension_slots),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_dump_truncates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
