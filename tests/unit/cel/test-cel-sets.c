/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the sets extension: contains/equivalent/intersects ignore order and duplicates, use CEL
 * equality (numbers across types when they reach the function as dyn values), and mismatched
 * element types in literals are compile errors.
 */
#include "cel-ext-test.h"

static void test_sets(void **state)
{
    static const struct eval_case cases[] = {
        {"sets.contains([], [])", "true"},
        {"sets.contains([1], [])", "true"},
        {"sets.contains([1, 2, 3, 4], [2, 3])", "true"},
        {"sets.contains([1], [1, 2])", "false"},
        {"sets.contains([[1], [2, 3]], [[2, 3]])", "true"},
        {"sets.contains([dyn(1)], [dyn(1.0)])", "true"},
        {"sets.contains([1], [1u])", COMPILE_ERROR},
        {"sets.equivalent([1, 1], [1])", "true"},
        {"sets.equivalent(['a', 'b', 'a'], ['b', 'a'])", "true"},
        {"sets.equivalent([2, 1], [1])", "false"},
        {"sets.intersects([1], [1, 2])", "true"},
        {"sets.intersects([], [])", "false"},
        {"sets.intersects(['gpu', 'mig'], ['vfio'])", "false"},
        {"sets.intersects([1], [1.0, 2])", COMPILE_ERROR},
    };

    check_eval_cases(cases, ARRAY_SIZE(cases));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sets),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
