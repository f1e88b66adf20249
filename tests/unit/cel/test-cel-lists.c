/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the list functions: Kubernetes' isSorted/sum/min/max/indexOf/lastIndexOf and cel-go's
 * ext lists v3 (slice, flatten with depth, lists.range, distinct, reverse, sort, sortBy), including
 * CEL equality across numeric types, stable sorting, overflow and range errors.
 */
#include "cel-ext-test.h"

static void test_k8s_lists(void **state)
{
    static const struct eval_case cases[] = {
        {"[1, 2, 3].isSorted()", "true"},
        {"['a', 'b', 'b', 'c'].isSorted()", "true"},
        {"[2.0, 1.0].isSorted()", "false"},
        {"[].isSorted()", "true"},
        {"[1, 3].sum()", "4"},
        {"[1.0, 3.0].sum()", "4.0"},
        {"[1u, 3u].sum()", "4u"},
        {"[].sum()", "0"},
        {"[9223372036854775807, 1].sum()", EVAL_ERROR},
        {"[duration('1s'), duration('500ms')].sum()", "duration(\"1.5s\")"},
        {"[1, 3].min()", "1"},
        {"['b', 'c', 'a'].max()", "\"c\""},
        {"[].min()", EVAL_ERROR},
        {"[1, 2, 2, 3].indexOf(2)", "1"},
        {"['a', 'b', 'b', 'c'].lastIndexOf('b')", "2"},
        {"[1.0].indexOf(1.1)", "-1"},
        {"[[1], [2]].indexOf([2])", "1"},
    };

    check_eval_cases(cases, ARRAY_SIZE(cases));
}

static void test_ext_lists(void **state)
{
    static const struct eval_case cases[] = {
        {"[1, 2, 3, 4].slice(1, 3)", "[2, 3]"},
        {"[1, 2, 3, 4].slice(4, 4)", "[]"},
        {"[1, 2, 3, 4].slice(3, 0)", EVAL_ERROR},
        {"[1, 2, 3, 4].slice(0, 10)", EVAL_ERROR},
        {"[1, 2, 3, 4].slice(-1, 2)", EVAL_ERROR},
        {"[[1, 2], [3], []].flatten()", "[1, 2, 3]"},
        {"[[[1]], [[2, 3]]].flatten()", "[[1], [2, 3]]"},
        {"[[[1]], [[2, 3]]].flatten(2)", "[1, 2, 3]"},
        {"[[[1]], [[2, 3]]].flatten(0)", "[[[1]], [[2, 3]]]"},
        {"[[1], [2]].flatten(-1)", EVAL_ERROR},
        {"lists.range(4)", "[0, 1, 2, 3]"},
        {"lists.range(0)", "[]"},
        {"[-2, 5, -2, 1, 1, 5, -2, 1].distinct()", "[-2, 5, 1]"},
        {"[[1], [1], [2]].distinct()", "[[1], [2]]"},
        {"[5, 1, 2, 3].reverse()", "[3, 2, 1, 5]"},
        {"[4, 3, 2, 1].sort()", "[1, 2, 3, 4]"},
        {"['d', 'a', 'b', 'c'].sort()", "[\"a\", \"b\", \"c\", \"d\"]"},
        {"[].sort()", "[]"},
        {"[dyn(1), dyn('a')].sort()", EVAL_ERROR},
        {"[-3, 1, -5, -2, 4].sortBy(e, -(e * e))", "[-5, 4, -3, -2, 1]"},
        {"lists.range(3).sortBy(e, -e)", "[2, 1, 0]"},
        /* stable: equal keys keep their order */
        {"['bb', 'a', 'cc', 'd'].sortBy(s, size(s))", "[\"a\", \"d\", \"bb\", \"cc\"]"},
        {"[{'x': 4}, {'x': 3}].sortBy(m, m['x'])", "[{\"x\": 3}, {\"x\": 4}]"},
        {"[1, [2, [3, 4]]].flatten()", COMPILE_ERROR},
    };

    check_eval_cases(cases, ARRAY_SIZE(cases));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_k8s_lists),
        cmocka_unit_test(test_ext_lists),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
